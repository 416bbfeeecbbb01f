"""Kernel updates in the sandbox (sandbox/README.md, "Kernel updates"): a repository of newer
kernels for Oracle Linux 8 hosts running RHCK, one of which the simulated NVIDIA module
build fails for as a kernel API change makes a real one fail.

    /var/cache/gpuhost/nvidia/kernels/ol8/     served as $gpuhost_sandbox_url/kernels/ol8
        kernel-<rel>.rpm, kernel-devel-<rel>.rpm   for each kernel of KERNELS["ol8"]
        repodata/                                  signed with the sandbox's key

``python -m sandbox.kernels`` builds it when missing or stale (after ``python -m sandbox.nvidia.build``, whose key
signs it). A host sees it once ``enable_command(os)`` ran on it (the monthly kernel update
arriving), as the integration test does after converging its hosts.

The packages behave as EL's do where gpuhost can tell:
- ``kernel-<rel>`` installs ``/boot/vmlinuz-<rel>`` and ``/lib/modules/<rel>/`` and, in its
  ``%posttrans``, adds the BLS entry ``/boot/loader/entries/<machine-id>-<rel>.conf`` and makes
  it the default (``grubby --set-default``): what ``kernel-install`` does with
  ``UPDATEDEFAULT=yes`` in ``/etc/sysconfig/kernel`` (RHEL 8 "Managing, monitoring and updating
  the kernel", 'Changing the default kernel'). At the next boot gpusim boots the default
  entry (sandbox/traits/boot.py).
- ``kernel-devel-<rel>`` is the fake OL repos' (sandbox/nvidia/pkg/elrpms.py); the broken
  kernel's also lists, in ``include/generated/gpusim-api-removed``, a function the kernel no
  longer exports and the first driver that stopped calling it: the simulated build
  (templates/gpusim-build.sh) of an older driver fails with the compiler's "implicit
  declaration of function" error, as 465.19.01 did on kernel 5.12 (nv-caps.c, ``sys_close``:
  Frogging-Family/nvidia-all#34) and as an EL minor release's kernel broke the 575 DKMS
  build (Rocky 9.8, kernel 5.14.0-687: GoogleCloudPlatform/ops-agent PR #2357).
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import paths

OUT = paths.NVIDIA_CACHE / "kernels"
SOURCE = ("RHEL 8 kernel-install/grubby (UPDATEDEFAULT=yes makes a new kernel the default); "
          "Frogging-Family/nvidia-all#34 (implicit declaration of sys_close, 465.19.01 on "
          "5.12); GoogleCloudPlatform/ops-agent PR #2357 (Rocky 9.8 kernel broke 575 DKMS)")
# OL8 RHCK after the sandbox's running 4.18.0-553.el8_10: a good update and, newest, one
# whose API change the sandbox's drivers before 595 do not build for.
KERNELS = {
    "ol8": [{"release": "4.18.0-553.40.1.el8_10.x86_64"},
            {"release": "4.18.0-553.44.1.el8_10.x86_64",
             "removed": [("sys_close", "595.71.05", "nvidia/nv-caps.c")]}],
}
GOOD = {os_name: kernels[0]["release"] for os_name, kernels in KERNELS.items()}
BROKEN = {os_name: kernels[-1]["release"] for os_name, kernels in KERNELS.items()}
REPO_ID = "gpuhost_sandbox_kernels"


def enable_command(os_name: str) -> str:
    """The shell command that gives an ``os_name`` host the kernel repository (root)."""
    repo = (f"[{REPO_ID}]\nname=Kernel updates (gpuhost sandbox)\n"
            f"baseurl=$gpuhost_sandbox_url/kernels/{os_name}\n"
            "gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-oracle\ngpgcheck=1\nenabled=1\n")
    return f"printf '%s' '{repo}' > /etc/yum.repos.d/{REPO_ID}.repo && dnf -q makecache"


# one line each: rpm runs them through Lua's rpm.execute (a string without newlines)
_POSTTRANS = (
    'set -e; rel="$1"; mid=$(cat /etc/machine-id); mkdir -p /boot/loader/entries; '
    "printf 'title Oracle Linux Server (%s)\\nversion %s\\nlinux /vmlinuz-%s\\n"
    "initrd /initramfs-%s.img\\noptions $kernelopts\\ngrub_class kernel\\n' "
    '"$rel" "$rel" "$rel" "$rel" > "/boot/loader/entries/$mid-$rel.conf"; '
    "if grep -qs '^UPDATEDEFAULT=no' /etc/sysconfig/kernel; then exit 0; fi; "
    'grubby --set-default "/boot/vmlinuz-$rel" >/dev/null')
_POSTUN = 'rm -f "/boot/loader/entries/$(cat /etc/machine-id)-$1.conf"'


def packages(os_name: str):
    """The RpmPackages of ``os_name``'s kernel repository."""
    from .nvidia.pkg import elrpms
    from .nvidia.pkg.oracle import SYSTEM_GCC
    from .nvidia.pkg.rpm import RpmPackage

    out = []
    for kernel in KERNELS[os_name]:
        rel = kernel["release"]
        version, release = elrpms.split_release(rel)
        out.append(RpmPackage(
            name="kernel", version=version, release=release.removesuffix(".x86_64"),
            summary="The Linux kernel (simulated: an image gpusim boots by its name)",
            provides=["installonlypkg(kernel)", f"kernel-uname-r = {rel}"],
            files={f"/boot/vmlinuz-{rel}": (f"simulated kernel image {rel}\n", 0o755),
                   f"/boot/config-{rel}": ("CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n", 0o644),
                   f"/lib/modules/{rel}/modules.dep": ("", 0o644)},
            scriptlets={"posttrans": ["/bin/sh", "-c", _POSTTRANS, "sh", rel],
                        "postun": ["/bin/sh", "-c", _POSTUN, "sh", rel]}))
        devel = elrpms.kernel_devel(rel, "rhck", SYSTEM_GCC[os_name], SYSTEM_GCC[os_name])
        if kernel.get("removed"):
            text = "".join(f"{fn} {first} {src}\n" for fn, first, src in kernel["removed"])
            devel.files[f"/usr/src/kernels/{rel}/include/generated/gpusim-api-removed"] = (
                text, 0o644)
        out.append(devel)
    return out


def build() -> list[Path]:
    """Build and sign every kernel repository; returns the repository directories."""
    from .nvidia.pkg.rpm import build_rpm, build_rpm_repo
    from .nvidia.pkg.signing import SigningKey

    key = SigningKey().ensure()
    done = []
    for os_name in KERNELS:
        repo = OUT / os_name
        for old in repo.glob("*.rpm"):
            old.unlink()
        for pkg in packages(os_name):
            build_rpm(pkg, repo)
        build_rpm_repo(repo, key)
        done.append(repo)
    return done


def _recipe() -> str:
    """This module's text and the fake devel package builder's: what the repository is made
    from (a change rebuilds it)."""
    import hashlib

    from .nvidia.pkg import elrpms

    text = Path(__file__).read_text() + Path(elrpms.__file__).read_text()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ensure() -> None:
    """Build the repositories when missing or made from another recipe (about 10 s), the
    Debian and Ubuntu ones (sandbox/kernels_debian.py, sandbox/kernels_ubuntu.py) too."""
    from . import kernels_debian, kernels_ubuntu

    kernels_debian.ensure()
    kernels_ubuntu.ensure()
    stamp = OUT / "recipe"
    if stamp.is_file() and stamp.read_text().strip() == _recipe() and all(
            (OUT / name / "repodata" / "repomd.xml").is_file() for name in KERNELS):
        return
    build()
    stamp.write_text(_recipe() + "\n")


if __name__ == "__main__":
    ensure()
    for built in (OUT / name for name in KERNELS):
        print(built)
    sys.exit(0)
