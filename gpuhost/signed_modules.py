"""The distributions' own signed NVIDIA kernel modules (``nvidia_kernel_modules:
distribution``): which releases have them, for which branches, and under which names
(pure, no pyinfra).

Under Secure Boot a module built by DKMS must be signed with a Machine Owner Key enrolled on
every host; a distribution that builds and signs the NVIDIA modules itself, with the key its
shim already trusts, needs nothing enrolled.

Ubuntu (Canonical's ``linux-restricted-modules`` sources; read 2026-11-29):

- kernel side, per kernel: ``linux-modules-nvidia-<branch>-server-open-<uname -r>`` (with
  ``linux-objects-nvidia-*`` and ``linux-signatures-nvidia-*``), versioned like the kernel
  (resolute's ``linux-modules-nvidia-615-server-open-nvidia`` is 7.0.0-1018.18+2 and depends
  on ``linux-modules-nvidia-615-server-open-7.0.0-1018-nvidia``; its sibling meta packages
  are named per flavour: ``-generic``, ``-lowlatency``, ``-aws``, ``-azure``, ``-gcp``,
  ``-oracle``, ... packages.ubuntu.com, resolute). NVIDIA's GPU Operator installs the same
  per-kernel names for "precompiled and Canonical signed drivers"
  (docs.nvidia.com/datacenter/cloud-native/gpu-operator/install-precompiled-signed-drivers):
  ``linux-modules-nvidia-${DRIVER_BRANCH}-server-${KERNEL_VERSION}`` with
  ``nvidia-utils-${DRIVER_BRANCH}-server`` and ``nvidia-compute-utils-${DRIVER_BRANCH}-server``.
- user space: ``nvidia-headless-no-dkms-<branch>-server-open`` (the driver without its DKMS
  package; Canonical's nvidia-graphics-drivers templates, "nvidia-headless-no-dkms-#FLAVOUR#")
  and ``nvidia-utils-<branch>-server`` (nvidia-smi), versioned
  ``<driver>-0ubuntu0.<release>.<n>`` (``595.71.05-0ubuntu0.26.04.1``).

gpuhost installs the package of the running kernel only (the flavour's meta package would
pull in the newest kernel too) and pins the user space at the driver version; the module
package cannot move (its name is the kernel's). Which branches Canonical builds for which
release is the ``CANONICAL`` table below.

Red Hat signs NVIDIA kmods for RHEL 10.1 and newer in ``rhel-10-for-x86_64-extensions-rpms``
(NVIDIA/yum-packaging-precompiled-kmod#59); gpuhost does not install them yet. NVIDIA's own
EL9 precompiled kmods are signed with NVIDIA's key, not Red Hat's (#67): under Secure Boot
that key must be enrolled like a MOK. Oracle Linux 10 has no signed NVIDIA modules (Oracle's
OL10 Secure Boot guide covers MOK only), nor has Debian.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CHOICES = ("dkms", "distribution")

# NVIDIA's distro tag -> the driver branches whose "-server-open" modules Canonical builds
# and signs for that release's kernels. Seen 2026-11-29: resolute's 615-server-open
# (packages.ubuntu.com); resolute's 580-server and 595 (595.71.05-0ubuntu0.26.04.1) as
# gpuhost.aptdistros.ubuntu records them. The jammy and noble rows are Canonical's server
# branches of those releases as the team knows them, not re-read here: check
# `apt-cache policy linux-modules-nvidia-<branch>-server-open-$(uname -r)` on a host.
CANONICAL: dict[str, tuple[int, ...]] = {
    "ubuntu2204": (535, 550, 570, 580),
    "ubuntu2404": (535, 550, 570, 580, 595),
    "ubuntu2604": (580, 595, 615),
}
# The release part of Canonical's package versions (595.71.05-0ubuntu0.26.04.1).
_VERSION_RELEASE = {"ubuntu2204": "22.04", "ubuntu2404": "24.04", "ubuntu2604": "26.04"}
_SAFE_RELEASE = re.compile(r"^[A-Za-z0-9._+~-]+$")
SIGNER = "Canonical Ltd. Kernel Module Signing"


def branch(version: str) -> int:
    return int(version.split(".", 1)[0])


def available(tag: str | None) -> str:
    """What the distribution offers, for a refusal line."""
    branches = CANONICAL.get(tag or "")
    if not branches:
        return ("signed NVIDIA modules come only with Ubuntu "
                + ", ".join(_VERSION_RELEASE.values()) + "; use nvidia_kernel_modules: dkms "
                "with an enrolled MOK (nvidia_module_signing_key/_cert)")
    return (f"Canonical builds branches {', '.join(str(b) for b in branches)} "
            f"(-server-open) for Ubuntu {_VERSION_RELEASE[tag]}")


def problem(tag: str | None, kernel_releases: Iterable[str | None], version: str,
            flavor: str) -> str | None:
    """Why ``nvidia_kernel_modules: distribution`` cannot serve this host, in one line
    naming what is available; None when it can."""
    if tag not in CANONICAL:
        return (f"nvidia_kernel_modules: distribution: {tag or 'this system'} has no "
                f"distribution-signed NVIDIA modules ({available(tag)})")
    if flavor == "proprietary":
        return ("nvidia_kernel_modules: distribution installs Canonical's open modules "
                "(-server-open): set nvidia_driver_flavor to open or auto")
    if branch(version) not in CANONICAL[tag]:
        return (f"nvidia_kernel_modules: distribution: no signed modules of branch "
                f"{branch(version)} for Ubuntu {_VERSION_RELEASE[tag]}: {available(tag)}; "
                "set nvidia_driver_version to one of them")
    for kernel in kernel_releases:
        if kernel and not _SAFE_RELEASE.fullmatch(kernel):
            return f"kernel release {kernel!r} is not one uname -r prints"
    return None


def module_package(version: str, kernel_release: str) -> str:
    """Canonical's signed modules of ``version``'s branch for exactly this kernel."""
    return f"linux-modules-nvidia-{branch(version)}-server-open-{kernel_release}"


def user_packages(version: str) -> list[str]:
    """The user space without DKMS, and nvidia-smi."""
    br = branch(version)
    return [f"nvidia-headless-no-dkms-{br}-server-open", f"nvidia-utils-{br}-server"]


def packages(version: str, kernel_release: str) -> list[str]:
    """What ``nvidia_kernel_modules: distribution`` installs on an Ubuntu host."""
    return [module_package(version, kernel_release), *user_packages(version)]


def package_version(tag: str, version: str) -> str:
    """The apt version pattern of Canonical's user-space packages of ``version``
    (``595.71.05-0ubuntu0.26.04.*``)."""
    return f"{version}-0ubuntu0.{_VERSION_RELEASE[tag]}.*"


# Canonical's user-space package names of one branch (POSIX ERE, for apt preferences).
def pin_regex(version: str) -> str:
    br = branch(version)
    return (f"^(nvidia-(headless(-no-dkms)?|utils|compute-utils|kernel-common|kernel-source"
            f"|firmware)-{br}-server(-open)?|libnvidia-[a-z0-9-]+-{br}-server)$")


def apt_pin(tag: str, version: str) -> str:
    """apt preferences holding Canonical's user-space packages at this driver version."""
    return (
        "# Managed by gpuhost: keeps Canonical's NVIDIA user space at the version of the\n"
        "# signed modules (nvidia_kernel_modules: distribution). Change\n"
        "# nvidia_driver_version in the inventory instead.\n"
        f"Package: /{pin_regex(version)}/\n"
        f"Pin: version {package_version(tag, version)}\n"
        "Pin-Priority: 1000\n"
    )
