"""Kernel updates in the sandbox for Debian 12 hosts (sandbox/README.md, "Kernel updates"): a
small signed flat apt repository of newer kernels after the ABI the mirror's hosts run, one
of which the simulated NVIDIA module build fails for (sandbox/kernels.py does the same for
Oracle Linux with rpms).

    /var/cache/gpuhost/nvidia/kernels/debian12/   served as <mirror>/nvidia/kernels/debian12
        linux-image-<abi>-amd64, linux-headers-<abi>-amd64   for ABI+1 (good) and ABI+2 (broken)
        linux-headers-amd64                                  the meta, depending on ABI+2
        Packages, InRelease                                  signed with the sandbox's key

The running ABI is the mirror's (sandbox/debian_kernel.py chooses it from the archive), so
the repository is rebuilt when the mirror's kernel changes. A host sees it once
``enable_command()`` ran on it (the monthly kernel update arriving).

The packages behave as Debian's do where gpuhost can tell (Debian Kernel Handbook, "Kernel
hooks" /etc/kernel/postinst.d; the bookworm linux image's maintainer scripts):
- ``linux-image-<abi>-amd64`` installs ``/boot/vmlinuz-<abi>-amd64`` and ``/lib/modules/<abi>``
  and its postinst runs ``run-parts --arg=<abi> --arg=/boot/vmlinuz-<abi> /etc/kernel/postinst.d``
  (grub's ``zz-update-grub`` there regenerates grub.cfg; with ``GRUB_DEFAULT=0`` the newest kernel
  becomes the default), its postrm ``/etc/kernel/postrm.d``. ``INITRD=No`` is exported, as for a
  kernel without initrd support: gpusim boots a kernel by name, there is no initramfs to make.
- ``linux-headers-<abi>-amd64`` is ``/usr/src/linux-headers-<abi>-amd64`` (Makefile, .config
  recording bookworm's gcc 12 as the real one does, ``.kernelvariables`` naming ``CC =
  gcc-12`` as the real one does (Debian's dkms 3.0.10 takes CC from it, else unsets CC),
  utsrelease.h, scripts/sign-file's stand-in) with ``/lib/modules/<abi>/build`` pointing at it; its postinst runs
  ``/etc/kernel/header_postinst.d`` (dkms's hook builds the modules for it there). The broken
  kernel's headers list, in ``include/generated/gpusim-api-removed``, a function the kernel no
  longer exports (the OL one's case: Frogging-Family/nvidia-all#34).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from . import mirror, paths
from .util import read_json

OUT = paths.NVIDIA_CACHE / "kernels"
OS_NAME = "debian12"
REPO_NAME = "gpuhost_sandbox_kernels"
GCC = "gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0"  # bookworm's, as the real headers record
REMOVED = [("sys_close", "595.71.05", "nvidia/nv-caps.c")]


def releases(running: str | None = None) -> tuple[str, str]:
    """(good, broken): the two ABIs after the running one (``6.1.0-56-amd64`` ->
    ``6.1.0-57-amd64``, ``6.1.0-58-amd64``)."""
    head, abi, flavour = (running or mirror.kernel_release()).rsplit("-", 2)
    return f"{head}-{int(abi) + 1}-{flavour}", f"{head}-{int(abi) + 2}-{flavour}"


def _meta_version() -> str:
    state = read_json(mirror.bookworm().state_file) or {}
    meta = state.get("kernel_meta", "linux-headers-amd64=6.1.0-1").partition("=")[2]
    return f"{meta}+gpuhost1"  # after the mirror's meta: apt's candidate


def enable_command(os_name: str = OS_NAME) -> str:
    """The shell command that gives a host the kernel repository of ``os_name`` (root): Debian
    12's, or Ubuntu 24.04's (sandbox/kernels_ubuntu.py)."""
    from .nvidia.pkg.signing import SigningKey

    key = SigningKey().ensure()
    armored = key.gpg("--armor", "--export", key.fingerprint)
    signed_by = "\n".join(" " + (line or ".") for line in armored.strip().splitlines())
    sources = (f"Types: deb\nURIs: {paths.MIRROR_URL}/nvidia/kernels/{os_name}\nSuites: ./\n"
               f"Signed-By:\n{signed_by}\n")
    return (f"printf '%s' '{sources}' > /etc/apt/sources.list.d/{REPO_NAME}.sources && "
            "apt-get update -qq")


def _image(rel: str, version: str):
    from .nvidia.pkg.deb import DebPackage

    hooks = ('export INITRD=No DEB_MAINT_PARAMS="$*"\n'
             'test -d /etc/kernel/{d} && run-parts --report --exit-on-error '
             f'--arg={rel} --arg=/boot/vmlinuz-{rel} /etc/kernel/{{d}}\nexit 0\n')
    return DebPackage(
        name=f"linux-image-{rel}", version=version, section="kernel",
        description=f"Linux {rel} for 64-bit PCs (simulated: an image gpusim boots by name)",
        files={f"/boot/vmlinuz-{rel}": (f"simulated kernel image {rel}\n", 0o644),
               f"/boot/config-{rel}": ("CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n", 0o644),
               f"/lib/modules/{rel}/modules.dep": ("", 0o644)},
        scripts={"postinst": '#!/bin/sh\nset -e\n[ "$1" = configure ] || exit 0\n'
                             + hooks.format(d="postinst.d"),
                 "postrm": '#!/bin/sh\nset -e\n[ "$1" = remove ] || exit 0\n'
                           + hooks.format(d="postrm.d")})


def _headers(rel: str, version: str, removed: bool):
    from .nvidia.pkg.deb import DebPackage
    from .nvidia.pkg.elrpms import SIGN_FILE

    src = f"/usr/src/linux-headers-{rel}"
    config = ("# Simulated kernel configuration (gpuhost sandbox)\nCONFIG_MODULES=y\n"
              f'CONFIG_CC_VERSION_TEXT="{GCC}"\nCONFIG_CC_IS_GCC=y\nCONFIG_GCC_VERSION=120200\n'
              'CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH="sha256"\n')
    files = {f"{src}/Makefile": (f"# kernel {rel} (simulated headers)\nKERNELRELEASE = {rel}\n",
                                 0o644),
             f"{src}/.config": (config, 0o644),
             f"{src}/include/generated/utsrelease.h": (f'#define UTS_RELEASE "{rel}"\n', 0o644),
             f"{src}/scripts/sign-file": (SIGN_FILE, 0o755),
             # Debian's dkms takes CC from here (unset without it: plain `gcc`, which a host
             # with only gcc-12 lacks); the real headers name gcc-12 the same way
             f"{src}/.kernelvariables": (f"override ARCH = x86\noverride KERNELRELEASE = {rel}\n"
                                         "CC = gcc-12\n", 0o644)}
    if removed:
        files[f"{src}/include/generated/gpusim-api-removed"] = (
            "".join(f"{fn} {first} {where}\n" for fn, first, where in REMOVED), 0o644)
    # the real package ships the build link; DebPackage has files only, so postinst makes it
    return DebPackage(
        name=f"linux-headers-{rel}", version=version, section="kernel",
        description=f"Header files for Linux {rel} (simulated)", files=files,
        scripts={"postinst": '#!/bin/sh\nset -e\n[ "$1" = configure ] || exit 0\n'
                             f"ln -sfn {src} /lib/modules/{rel}/build\n"
                             "test -d /etc/kernel/header_postinst.d && run-parts --report "
                             f"--exit-on-error --arg={rel} /etc/kernel/header_postinst.d\nexit 0\n",
                 "postrm": '#!/bin/sh\nset -e\n[ "$1" = remove ] || exit 0\n'
                           f"rm -f /lib/modules/{rel}/build\nexit 0\n"})


def packages(running: str | None = None):
    """The DebPackages of the repository."""
    from .nvidia.pkg.deb import DebPackage

    good, broken = releases(running)
    out = []
    for rel in (good, broken):
        version = re.sub(r"-(\d+)-amd64$", r"+gpuhost.\1", rel)  # 6.1.0+gpuhost.57
        out += [_image(rel, version), _headers(rel, version, rel == broken)]
    out.append(DebPackage(
        name="linux-headers-amd64", version=_meta_version(), section="kernel",
        depends=[f"linux-headers-{broken}"],
        description="Header files for Linux amd64 configuration (meta-package, simulated)"))
    return out


def _recipe() -> str:
    text = Path(__file__).read_text() + mirror.kernel_release() + _meta_version()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ensure() -> Path:
    """Build the repository when missing or made from another recipe (a few seconds)."""
    return build_repo(OUT / OS_NAME, _recipe(), packages, "Newer Debian kernels (simulated)")


def build_repo(repo: Path, recipe: str, packages, description: str) -> Path:
    """A signed flat apt repository of ``packages()`` in ``repo``, built again only when
    ``recipe`` (its stamp) changed (the Debian and Ubuntu kernel repositories)."""
    from .nvidia.pkg.deb import build_deb, build_flat_repo
    from .nvidia.pkg.signing import SigningKey

    stamp = repo / "recipe"
    if stamp.is_file() and stamp.read_text().strip() == recipe and \
            (repo / "InRelease").is_file():
        return repo
    repo.mkdir(parents=True, exist_ok=True)
    for old in repo.glob("*.deb"):
        old.unlink()
    for pkg in packages():
        build_deb(pkg, repo)
    build_flat_repo(repo, SigningKey().ensure(), origin="gpuhost sandbox",
                    label="Kernel updates", description=description)
    stamp.write_text(recipe + "\n")
    return repo
