"""Kernel updates in the sandbox for Ubuntu 24.04 hosts (sandbox/README.md, "Kernel updates"):
a small signed flat apt repository of two newer noble kernels, the newest of which the
simulated NVIDIA module build fails for (sandbox/kernels_debian.py does the same for Debian 12).

    /var/cache/gpuhost/nvidia/kernels/ubuntu2404/   served as <mirror>/nvidia/kernels/ubuntu2404
        linux-image-<abi>-generic, linux-modules-<abi>-generic,
        linux-headers-<abi>-generic, linux-headers-<abi>        for GOOD and BROKEN
        linux-image-generic, linux-headers-generic              the metas, depending on BROKEN
        Packages, InRelease                                     signed with the sandbox's key

The kernels carry the names and versions of two real noble-updates kernels (packages.ubuntu.com,
read 2026-11-29: linux-image-6.8.0-60-generic 6.8.0-60.63 and linux-image-6.8.0-71-generic
6.8.0-71.71, source linux-signed; linux-modules-* and linux-headers-* from source linux), after
the 6.8.0-51 the sandbox's Ubuntu 24.04 hosts run and the 6.8.0-53 headers of its archive's
-updates pocket (sandbox/ubuntu.py). A host sees the repository once ``enable_command()`` ran
on it (the monthly kernel update arriving).

The packages behave as Ubuntu's do where gpuhost can tell:
- ``linux-image-<abi>-generic`` is ``/boot/vmlinuz-<abi>-generic`` and depends on
  ``linux-modules-<abi>-generic`` (``/lib/modules/<abi>-generic``, ``/boot/config-*``), as on
  noble; its postinst runs ``/etc/kernel/postinst.d`` with the release and the image path, its
  postrm ``/etc/kernel/postrm.d`` (grub's ``zz-update-grub`` there: the ``grub`` trait).
  ``INITRD=No`` is exported as by the Debian ones (kernels_debian.py): gpusim boots a kernel by
  name, there is no initramfs to make (the hosts' initramfs-tools would fail for a kernel
  without one).
- ``linux-headers-<abi>-generic`` (depending on ``linux-headers-<abi>``) has the same files as the
  Ubuntu archive's headers (sandbox/ubuntu_archive.py), ``/lib/modules/<abi>-generic/build``
  pointing at them (the real package ships the link; here its postinst makes it) and a postinst
  that runs ``/etc/kernel/header_postinst.d`` (dkms's hook). The broken kernel's headers list the
  removed function as the Debian and OL ones do (Frogging-Family/nvidia-all#34's case).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import kernels_debian

OUT = kernels_debian.OUT
OS_NAME = "ubuntu2404"
GOOD = ("6.8.0-60-generic", "6.8.0-60.63")
BROKEN = ("6.8.0-71-generic", "6.8.0-71.71")


def enable_command() -> str:
    """The shell command that gives an Ubuntu 24.04 host the kernel repository (root)."""
    return kernels_debian.enable_command(OS_NAME)


def _image(rel: str, version: str) -> list:
    from .nvidia.pkg.deb import DebPackage

    hooks = ('export INITRD=No DEB_MAINT_PARAMS="$*"\n'
             'test -d /etc/kernel/{d} && run-parts --report --exit-on-error '
             f'--arg={rel} --arg=/boot/vmlinuz-{rel} /etc/kernel/{{d}}\nexit 0\n')
    modules = DebPackage(
        name=f"linux-modules-{rel}", version=version, section="kernel",
        description=f"Linux kernel extra modules for version {rel} (simulated)",
        files={f"/boot/config-{rel}": ("CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n", 0o644),
               f"/lib/modules/{rel}/modules.dep": ("", 0o644)})
    image = DebPackage(
        name=f"linux-image-{rel}", version=version, section="kernel",
        depends=[f"linux-modules-{rel}"],
        description=f"Signed kernel image generic {rel} (simulated: gpusim boots it by name)",
        files={f"/boot/vmlinuz-{rel}": (f"simulated kernel image {rel}\n", 0o644)},
        scripts={"postinst": '#!/bin/sh\nset -e\n[ "$1" = configure ] || exit 0\n'
                             + hooks.format(d="postinst.d"),
                 "postrm": '#!/bin/sh\nset -e\n[ "$1" = remove ] || exit 0\n'
                           + hooks.format(d="postrm.d")})
    return [modules, image]


def _headers(rel: str, version: str, removed: bool) -> list:
    from .nvidia.pkg.deb import DebPackage
    from .ubuntu_archive import header_packages

    (_, _, common_files, _), (_, _, files, _) = header_packages(rel, version)
    abi = rel.rsplit("-", 1)[0]
    src = f"/usr/src/linux-headers-{rel}"
    flavour_files = {path: (text, 0o644) for path, text in files.items()}
    if removed:
        flavour_files[f"{src}/include/generated/gpusim-api-removed"] = (
            "".join(f"{fn} {first} {where}\n" for fn, first, where in kernels_debian.REMOVED),
            0o644)
    return [
        DebPackage(name=f"linux-headers-{abi}", version=version, arch="all", section="devel",
                   description=f"Header files related to Linux kernel version {abi} (simulated)",
                   files={path: (text, 0o644) for path, text in common_files.items()}),
        DebPackage(
            name=f"linux-headers-{rel}", version=version, section="devel",
            depends=[f"linux-headers-{abi}"], files=flavour_files,
            description=f"Linux kernel headers for version {rel} (simulated)",
            scripts={"postinst": '#!/bin/sh\nset -e\n[ "$1" = configure ] || exit 0\n'
                                 f"ln -sfn {src} /lib/modules/{rel}/build\n"
                                 "test -d /etc/kernel/header_postinst.d && run-parts --report "
                                 f"--exit-on-error --arg={rel} /etc/kernel/header_postinst.d\n"
                                 "exit 0\n",
                     "postrm": '#!/bin/sh\nset -e\n[ "$1" = remove ] || exit 0\n'
                               f"rm -f /lib/modules/{rel}/build\nexit 0\n"})]


def packages() -> list:
    """The DebPackages of the repository."""
    from .nvidia.pkg.deb import DebPackage

    out = []
    for rel, version in (GOOD, BROKEN):
        out += _image(rel, version) + _headers(rel, version, (rel, version) == BROKEN)
    rel, version = BROKEN
    meta = f"{rel.rsplit('-', 1)[0].replace('-', '.')}.{version.rsplit('.', 1)[1]}"  # 6.8.0.71.71
    for kind in ("image", "headers"):
        out.append(DebPackage(
            name=f"linux-{kind}-generic", version=meta, section="kernel",
            depends=[f"linux-{kind}-{rel}"],
            description=f"Generic Linux kernel {kind} (meta-package, simulated)"))
    return out


def _recipe() -> str:
    from . import ubuntu_archive

    text = (Path(__file__).read_text() + Path(ubuntu_archive.__file__).read_text()
            + "".join(kernels_debian.REMOVED[0]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ensure() -> Path:
    """Build the repository when missing or made from another recipe (a few seconds)."""
    return kernels_debian.build_repo(OUT / OS_NAME, _recipe(), packages,
                                     "Newer Ubuntu 24.04 kernels (simulated)")
