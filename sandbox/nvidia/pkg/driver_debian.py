"""The fake debian12 and debian13 driver packages, under the names of NVIDIA's repositories
for them (debian13 uses the same Debian-style names: NVIDIA's debian13
repository carries nvidia-driver-cuda 615.71.09).

NVIDIA's Debian repositories carry Debian's packaging (the nvidia-graphics-drivers scheme)
with the same unversioned names on every branch: meta packages ``nvidia-open`` /
``cuda-drivers``, the kernel module in ``nvidia-kernel-open-dkms`` / ``nvidia-kernel-dkms``
(NVIDIA's order of words; Debian's own archive says ``nvidia-open-kernel-dkms``), the CUDA
user space under ``nvidia-driver-cuda`` (``libcuda1``, ``libnvidia-ml1``, ``nvidia-smi``),
and from 590 ``nvidia-driver-pinning-<branch>``. Sources and what is inferred:
sandbox/nvidia/pkg/README.md, "debian12"; docs/real-hosts.md, "Debian 12's driver names".

Modelled, not the whole real closure: no desktop stack (``nvidia-driver``,
``xserver-xorg-video-nvidia``, GL libraries), one ``nvidia-kernel-support`` for both
flavours, no ``firmware-nvidia-gsp``.
"""

from __future__ import annotations

from . import driver
from .common import template
from .deb import DebPackage

LIBDIR = "/usr/lib/x86_64-linux-gnu"
SUPPORT = "nvidia-kernel-support"
# flavour -> (its DKMS package, the meta package that installs it, the virtual name the
# module package provides: Debian's nvidia-kernel-<ver> / nvidia-open-kernel-<ver>)
MODULE = {"proprietary": ("nvidia-kernel-dkms", "cuda-drivers", "nvidia-kernel-{}"),
          "open": ("nvidia-kernel-open-dkms", "nvidia-open", "nvidia-open-kernel-{}")}


def packages(version: str, distro: str = "debian12") -> list[DebPackage]:
    v = f"{version}-1"
    eq = f"(= {v})"
    b = driver.branch_of(version)
    hook = f"/usr/src/nvidia-{version}/gpusim-dkms-hook.sh"
    libs = driver.library_files(version, LIBDIR)
    smi_files = {"/usr/bin/nvidia-smi": (template("nvidia-smi"), 0o755), **driver.gpusim_files()}
    flavors = driver.flavors(version)
    pkgs = [
        # Debian 12 and 13: these need Debian's contrib (nvidia-support, sandbox/README.md)
        DebPackage(SUPPORT, v, f"NVIDIA binary kernel module support files (simulated, {b})",
                   depends=["nvidia-support"], section="non-free/kernel",
                   files={driver.NOUVEAU: (template("nvidia-blacklists-nouveau.conf"), 0o644)},
                   conffiles=[driver.NOUVEAU]),
        DebPackage("libcuda1", v, f"NVIDIA CUDA Driver Library (simulated, {version})",
                   files={k: f for k, f in libs.items() if "/libcuda.so" in k},
                   # Debian's libcuda1 only Recommends the kernel module (packages.debian.org)
                   recommends=[" | ".join([f"nvidia-kernel-dkms {eq}"] + [
                       MODULE[f][2].format(version) for f in flavors])]),
        DebPackage("libnvidia-ml1", v, f"NVIDIA Management Library (simulated, {version})",
                   files={k: f for k, f in libs.items() if "/libnvidia-ml.so" in k}),
        DebPackage("nvidia-smi", v, f"NVIDIA System Management Interface (simulated, {version})",
                   depends=["python3-minimal", f"libnvidia-ml1 {eq}"], files=smi_files,
                   section="non-free/utils"),
        DebPackage("nvidia-persistenced", v, "NVIDIA Persistence Daemon (simulated)",
                   files=driver.persistenced_files(version), section="non-free/utils",
                   scripts={"prerm": "#!/bin/sh\nset -e\n[ \"$1\" = remove ] || exit 0\n"
                            f"{driver.SYSTEMD_STOP}\n"}),
        # nvidia-smi and the daemon only recommended (inferred from Debian's packaging,
        # README): a --no-install-recommends install of the meta package lacks them
        DebPackage("nvidia-driver-cuda", v,
                   f"NVIDIA driver CUDA integration components (simulated, {version})",
                   depends=[f"libcuda1 {eq}", f"libnvidia-ml1 {eq}"],
                   recommends=[f"nvidia-smi {eq}", f"nvidia-persistenced {eq}"],
                   section="non-free/libs"),
        *driver.apt_companions(version, v, SUPPORT),
        *([driver.nvlsm_deb()] if hasattr(driver, "nvlsm_deb") else []),
    ]
    for flavor in flavors:
        dkms, meta, virtual = MODULE[flavor]
        others = [MODULE[f][0] for f in driver.FLAVORS if f != flavor]
        pkgs += [
            DebPackage(dkms, v, f"NVIDIA binary kernel module DKMS source, {flavor} (simulated, "
                       f"{version})", depends=["dkms", f"{SUPPORT} {eq}"],
                       files=driver.module_files(version, flavor), section="non-free/kernel",
                       provides=[virtual.format(version)], conflicts=others, replaces=others,
                       scripts={"postinst": driver.deb_postinst(hook),
                                "prerm": driver.deb_prerm(hook)}),
            DebPackage(meta, v, f"NVIDIA driver meta package, {flavor} kernel module (simulated, "
                       f"{version})", depends=[f"nvidia-driver-cuda {eq}", f"{dkms} {eq}"],
                       section="non-free/metapackages"),
        ]
    if driver.apt_unbranched(version):
        # the driver's packages, not nvlsm (a version line of its own)
        pkgs.append(driver.pinning_package(version, distro,
                                           [p.name for p in pkgs if p.name != "nvlsm"]))
    return pkgs
