"""Ubuntu 22.04 "jammy", 24.04 "noble" and 26.04 "resolute".

Driver packages (NVIDIA's Driver Installation Guide, "Version locking"; NVIDIA's driver
container): before branch 590 the branch is in the names (``nvidia-open-570``,
``cuda-drivers-570``); from 590 the names are unversioned and a pinning package holds the
branch: ``nvidia-driver-pinning-<branch>`` on 22.04/24.04. On 26.04 NVIDIA's own driver
container installs ``nvidia-driver-pinning-${DRIVER_VERSION}`` (the full version) first,
then the unversioned open packages, and installs ``zstd`` itself because "zstd is used by
dkms to compress built modules (kernel modules are zstd-compressed on 26.04) but is not one
of its dependencies" (NVIDIA/gpu-driver-container@bd20cb2 ``ubuntu26.04/install.sh``,
read 2026-11-29). That container names no branch in any package, whatever the version, so
gpuhost installs the unversioned names with the full-version pinning package on every branch
there (NVIDIA's repositories carry both ``nvidia-driver-pinning-580`` and
``nvidia-driver-pinning-580.105.08``, "APT driver pinning file for driver branch 580", as a
user's ``apt-cache search`` shows). dkms on 26.04 is 3.2.2-1ubuntu1 (packages.ubuntu.com,
resolute).

No ``nvidia-driver-local-repo-ubuntu2604-*`` package was found in any public source as of
2026-11-29: on 26.04 the driver comes from NVIDIA's network repository
(``https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2604/x86_64/``, the one
NVIDIA's 26.04 driver container uses) or a mirror of it (``nvidia_driver_repo``).

26.04 also replaces initramfs-tools with dracut and drops cgroup v1 (2nd-hand: release
reviews of 2026-04-23); gpuhost writes no cgroup v1 setting anywhere, and its initramfs
rebuild tries dracut first there.

Kernel meta packages, as the archives carry them (packages.ubuntu.com, read 2026-11-27):
``<version>-<ABI>-<flavour>``. Each LTS series has its GA kernel (22.04: 5.15, 24.04: 6.8,
26.04: 7.0 with ``7.0.0-12-generic`` at release); a newer version on that series is an HWE
(or rolling cloud) kernel.

- ``generic``, ``lowlatency`` (and their ``-64k``): GA -> ``linux-headers-<flavour>``,
  newer -> ``linux-headers-<flavour>-hwe-<series>`` (``linux-headers-generic-hwe-22.04``).
- ``oem``: ``linux-headers-oem-<series>``.
- cloud and other flavours (``aws``, ``azure``, ``gcp``, ``oracle``, ``nvidia``, ...):
  ``linux-headers-<flavour>`` rolls to newer kernels (noble's ``linux-headers-azure`` is
  built from linux-meta-azure-6.17), and ``linux-headers-<flavour>-lts-<series>`` stays on
  the GA version (jammy's ``linux-headers-aws-lts-22.04`` 5.15.0.1114; noble's
  ``linux-headers-aws-lts-24.04`` 6.8.0-1063): a GA-version kernel -> the ``-lts-`` one, a
  newer one -> the rolling one. 26.04 follows the same scheme (its ``-lts-26.04`` names are
  not yet published: a name the host's repositories lack is a warning, not a failure).
"""

from __future__ import annotations

import re

from gpuhost.aptdistros.base import AptRelease

HWE_FLAVOURS = ("generic", "lowlatency", "generic-64k", "lowlatency-64k")
_RELEASE = re.compile(r"^(\d+\.\d+)\.\d+-\d+-([a-z0-9][a-z0-9-]*)$")


def headers_meta_for(series: str, ga: str):
    """The ``headers_meta`` of the LTS series ``series`` whose GA kernel is ``ga``."""

    def headers_meta(release: str) -> str:
        match = _RELEASE.match(release or "")
        if not match:
            return "linux-headers-generic"
        version, flavour = match.groups()
        if flavour in HWE_FLAVOURS:
            return f"linux-headers-{flavour}" + ("" if version == ga else f"-hwe-{series}")
        if flavour == "oem":
            return f"linux-headers-oem-{series}"
        return f"linux-headers-{flavour}" + (f"-lts-{series}" if version == ga else "")

    return headers_meta


# Kernel 7.0 (Ubuntu 26.04's GA kernel): the first driver of each branch whose kernel module
# builds on it, read 2026-11-29. None: no release of that branch is known to.
# - 580: 580.142 ("DKMS for Linux 7.0.0 now builds", void-linux/void-packages PR #59943,
#   2026-04-14); 580.126.18 fails on 7.0.1 (void-linux/void-packages#60171, 2026-04-25) and
#   580.119.02 on 7.0.9 (Frogging-Family/nvidia-all#379, 2026-05-21). Canonical's signed
#   580-server modules for 7.0 are built from its own 580-server packages (inferred: patched).
# - 590: none known: 590.48.01 fails on 7.0-rc1 (NVIDIA/open-gpu-kernel-modules#1041,
#   2026-02-26), no later 590 is reported to build, and resolute's nvidia-*-590 packages are
#   transitional to 595 (packages.ubuntu.com).
# - 595: 595.71.05 (resolute's own nvidia-dkms-595 595.71.05-0ubuntu0.26.04.1, built for its
#   7.0 kernels; packages.ubuntu.com). No earlier 595 is known to build.
# - branches after 595 (610 and on) came out after kernel 7.0 and build on it (610.43.02
#   builds even on 7.1: olafkfreund/nixos_config PR #921, 2026-06-17).
# Branches before 580: none is known to build on 7.0 (and none is in resolute's archive).
KERNEL_7_0_FIRST = {580: "580.142", 590: None, 595: "595.71.05"}
KERNEL_7_0_NEWER_BRANCHES_FROM = 610
_BUILDING = ", ".join([*(f"{v}+" for v in KERNEL_7_0_FIRST.values() if v),
                       f"{KERNEL_7_0_NEWER_BRANCHES_FROM}+"])


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def builds_on_kernel_7_0(version: str) -> bool:
    """Whether driver ``version`` is known to build on kernel 7.0 (``KERNEL_7_0_FIRST``)."""
    branch = _key(version)[0]
    if branch >= KERNEL_7_0_NEWER_BRANCHES_FROM:
        return True
    first = KERNEL_7_0_FIRST.get(branch)
    return first is not None and _key(version) >= _key(first)


def first_building_on_kernel_7_0(version: str) -> str:
    """The driver to name instead: the first of ``version``'s branch that builds on 7.0,
    else the first of the next branch that has one."""
    branch = _key(version)[0]
    for candidate in sorted(KERNEL_7_0_FIRST):
        if candidate >= branch and KERNEL_7_0_FIRST[candidate]:
            return KERNEL_7_0_FIRST[candidate]
    return f"{KERNEL_7_0_NEWER_BRANCHES_FROM}.x"


def kernel_7_driver_problem(kernel_release: str, version: str) -> str | None:
    """Why ``version`` cannot be built for kernel ``kernel_release`` (a 7.0 kernel), or
    None: one line naming the first version that builds."""
    if not re.match(r"^7\.0\.", kernel_release or "") or builds_on_kernel_7_0(version):
        return None
    return (f"driver {version} does not build on kernel {kernel_release} (Linux 7.0, Ubuntu "
            f"26.04): the first that does is {first_building_on_kernel_7_0(version)}; set "
            f"nvidia_driver_version to it or a newer one ({_BUILDING})")


_COMMON = dict(os_id="ubuntu", driver_names="ubuntu")

RELEASES = (
    AptRelease(tag="ubuntu2204", version_id="22.04", name="Ubuntu 22.04", codename="jammy",
               headers_meta=headers_meta_for("22.04", "5.15"), dkms_line="2.8", **_COMMON),
    AptRelease(tag="ubuntu2404", version_id="24.04", name="Ubuntu 24.04", codename="noble",
               headers_meta=headers_meta_for("24.04", "6.8"), **_COMMON),
    AptRelease(tag="ubuntu2604", version_id="26.04", name="Ubuntu 26.04", codename="resolute",
               headers_meta=headers_meta_for("26.04", "7.0"), pinning="version",
               unversioned_from=0,
               local_repo=False, needs_zstd=True, initramfs="dracut",
               driver_problem=kernel_7_driver_problem, **_COMMON),
)
