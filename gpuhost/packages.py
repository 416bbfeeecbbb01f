"""Which packages, files and pins a host gets, per distribution family (pure, no pyinfra).

Names follow NVIDIA's packaging as its driver installation guide documents it:

- apt, Ubuntu: before branch 590 the branch is in the package name (``nvidia-open-570``,
  ``cuda-drivers-570``); from 590 the branch is chosen by a pinning package and the driver
  packages are unversioned: ``nvidia-driver-pinning-<branch>`` on 22.04/24.04,
  ``nvidia-driver-pinning-<full version>`` on 26.04 (``gpuhost.aptdistros.ubuntu``).
- apt, Debian 12/13: NVIDIA's debian12/debian13 repositories carry Debian's packaging
  (``nvidia-open``, ``cuda-drivers``, ``nvidia-kernel-open-dkms``, ``nvidia-driver-cuda``,
  ``libcuda1``, ``nvidia-smi``, ...) under the same names on every branch; gpuhost's apt pin
  holds the version (docs/real-hosts.md, "Debian 12's driver names";
  ``gpuhost.aptdistros.debian``).
- dnf, EL 8/9 (NVIDIA's rhel8/rhel9 builds on RHEL, Oracle Linux, Rocky Linux, AlmaLinux):
  the branch is a module stream ``nvidia-driver:<branch>-open`` or ``<branch>-dkms``; the
  packages are ``nvidia-open`` or ``cuda-drivers``.
- dnf, EL 10 (NVIDIA's rhel10 build): no module streams. NVIDIA's R620 "Open GPU Kernel
  Modules Installation" table puts RHEL/Rocky/Alma/Oracle Linux 10 on ``dnf install
  nvidia-open`` with ``dnf versionlock`` as the branch lock; gpuhost installs the exact
  version and locks it (``roles/el_packaging.install_locked``).

Docker's packages, pins and repositories are in ``gpuhost.runtime.docker_packages``; Oracle Linux's
channels, container-tools and version lock in ``gpuhost.el_packages``.
"""

from __future__ import annotations

import re

from gpuhost import aptdistros
from gpuhost.distro import RPM_TAGS

DEB_DISTROS = tuple(aptdistros.RELEASES)
RPM_DISTROS = RPM_TAGS
# The last EL major with dnf module streams of the driver (NVIDIA's R620 kernel-modules page:
# EL 8/9 `dnf module enable nvidia-driver:<branch>-open`; EL 10 `dnf versionlock`).
MODULE_STREAMS_UNTIL = 9

TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)

# The driver's own packages, for apt pinning. The container toolkit (nvidia-container-*,
# libnvidia-container*) must NOT match: it has its own version line. Two naming schemes:
# Ubuntu's (nvidia-utils-570, libnvidia-compute-570, ...) and Debian's, which NVIDIA's
# Debian repository uses too (nvidia-kernel-dkms, nvidia-open-kernel-dkms, libcuda1,
# nvidia-smi, firmware-nvidia-gsp, libnvidia-ml1, ...: Debian's nvidia-graphics-drivers
# packaging, packages.debian.org). POSIX ERE only: apt compiles it with regcomp.
DRIVER_PACKAGE_REGEX = (
    "^(cuda-drivers|nvidia-open|nvidia-driver|nvidia-dkms|nvidia-utils|nvidia-kernel"
    "|nvidia-compute-utils|nvidia-fabricmanager|nvidia-persistenced|nvidia-settings"
    "|nvidia-modprobe|nvidia-firmware|libnvidia-(compute|decode|encode|extra|fbc1|gl|cfg1"
    "|common|fabric|gpucomp|nscq|ml1|ptxjitcompiler|pkcs11|nvvm|allocator|egl|rtcore|ngx"
    "|opticalflow)|xserver-xorg-video-nvidia"
    "|nvidia-smi|nvidia-alternative|libcuda1|firmware-nvidia-gsp|nvidia-imex|libnvsdm"
    # more of Debian's driver closure (an Azure HPC image's pin for NVIDIA's Debian repo:
    # nvidia-xconfig, nvidia-{egl,vulkan,opencl}-icd, nvidia-vdpau-driver, libcudadebugger1;
    # Debian's packaging: libnvcuvid1, libnvoptix1, the GL front libraries)
    "|nvidia-xconfig|nvidia-(egl|vulkan|opencl)-(icd|common)|nvidia-vdpau-driver"
    "|nvidia-suspend-common|libcudadebugger1|libnvcuvid1|libnvoptix1"
    "|libgl1-nvidia|libglx-nvidia|libegl-nvidia|libgles-nvidia)"
)


def family(distro_tag: str) -> str:
    if distro_tag in DEB_DISTROS:
        return "debian"
    if distro_tag in RPM_DISTROS:
        return "rhel"
    raise ValueError(f"unsupported distribution {distro_tag!r}")


def branch(version: str) -> str:
    return version.split(".", 1)[0]


def local_repo_package(distro_tag: str, version: str) -> str:
    """``nvidia-driver-local-repo-debian12-570.172.08``."""
    return f"nvidia-driver-local-repo-{distro_tag}-{version}"


def local_repo_filename(distro_tag: str, version: str) -> str:
    """NVIDIA's file name of the local repo package for this distribution."""
    if family(distro_tag) == "debian":
        return f"{local_repo_package(distro_tag, version)}_1.0-1_amd64.deb"
    return f"{local_repo_package(distro_tag, version)}-1.0-1.x86_64.rpm"


def local_repo_dir(distro_tag: str, version: str) -> str:
    """Where the local repo package unpacks its repository."""
    return f"/var/nvidia-driver-local-repo-{distro_tag}-{version}"


def has_module_streams(distro_tag: str) -> bool:
    """Whether NVIDIA's repositories for this distribution select the branch with a dnf
    module stream (rhel8, rhel9), not a version lock alone (rhel10; apt distributions)."""
    return family(distro_tag) == "rhel" and int(distro_tag.removeprefix("rhel")) <= MODULE_STREAMS_UNTIL


def module_stream(version: str, flavor: str) -> str:
    """The EL8/EL9 dnf module stream of a driver branch and flavour."""
    return f"{branch(version)}-{'open' if flavor == 'open' else 'dkms'}"


# The branch from which NVIDIA names the HGX companions (Fabric Manager, NSCQ, IMEX, NVSDM)
# without the branch, on apt and dnf alike: NVIDIA's driver container installs
# `nvidia-fabricmanager=${DRIVER_VERSION}-1` from 580 and `nvidia-fabricmanager-${BRANCH}`
# before (gpu-driver-container@8cbaa51 ubuntu22.04/install.sh), and on EL
# `nvidia-fabricmanager-${DRIVER_VERSION}` from 580, `nvidia-fabric-manager-${VERSION}` and
# `libnvidia-nscq-${BRANCH}` before (gpu-driver-container@038c8b5 rhel9/install.sh).
# Sources and the field reports: docs/real-hosts.md, "HGX companions".
COMPANIONS_UNVERSIONED_FROM = 580
# From 590 NVIDIA's apt packages of the driver itself lose the branch too, and
# nvidia-driver-pinning-<branch> holds the branch (Driver Installation Guide, "Version
# locking").
APT_UNVERSIONED_FROM = 590


def fabricmanager_package(distro_tag: str, version: str) -> str:
    """Fabric Manager's package name for this driver branch and distribution family."""
    br = int(branch(version))
    if br >= COMPANIONS_UNVERSIONED_FROM:
        return "nvidia-fabricmanager"
    return "nvidia-fabric-manager" if family(distro_tag) == "rhel" else f"nvidia-fabricmanager-{br}"


def driver_packages(distro_tag: str, version: str, flavor: str, fabricmanager: bool) -> list[str]:
    """The packages to install for this driver (the pin or stream chooses the version)."""
    br = branch(version)
    meta = "nvidia-open" if flavor == "open" else "cuda-drivers"
    if family(distro_tag) == "rhel":
        names = [meta]
    else:
        release = aptdistros.release(distro_tag)
        pinned = version if release.pinning == "version" else br
        unversioned = int(br) >= min(APT_UNVERSIONED_FROM, release.unversioned_from)
        pinning = [f"nvidia-driver-pinning-{pinned}"] if unversioned else []
        if release.driver_names == "debian":
            # unversioned on every branch (docs/real-hosts.md, "Debian 12's driver names");
            # what the driver's packages only recommend is named (--no-install-recommends)
            names = [*pinning, meta, *release.explicit]
        elif pinning:
            names = [*pinning, meta]
        else:
            names = [f"{meta}-{br}"]
    if fabricmanager:
        names.append(fabricmanager_package(distro_tag, version))
    return names


# Where the driver's branch lock lives on apt hosts (written by the install role and the
# upgrade; read back by facts.upgrade).
APT_PIN = "/etc/apt/preferences.d/gpuhost-nvidia-driver"
UNATTENDED = "/etc/apt/apt.conf.d/51gpuhost-nvidia-no-unattended-upgrades"


def apt_pin(version: str) -> str:
    """apt preferences pinning the driver's packages to exactly this version (priority 1000)."""
    return (
        "# Managed by gpuhost: keeps the NVIDIA driver at the version gpuhost installed.\n"
        "# A newer driver from any repository would cause 'Driver/library version mismatch'\n"
        "# until the next reboot. Change nvidia_driver_version in the inventory instead.\n"
        f"Package: /{DRIVER_PACKAGE_REGEX}/\n"
        f"Pin: version {version}-*\n"
        "Pin-Priority: 1000\n"
    )


def unattended_upgrades_blacklist() -> str:
    """apt.conf snippet keeping unattended-upgrades away from the driver and the toolkit."""
    return (
        "// Managed by gpuhost: driver upgrades are done by deploys/upgrade_driver.py, never\n"
        "// unattended (an unattended driver upgrade causes 'Driver/library version mismatch').\n"
        "Unattended-Upgrade::Package-Blacklist {\n"
        '    "nvidia-";\n'
        '    "libnvidia-";\n'
        '    "libnvsdm";\n'
        '    "cuda-drivers";\n'
        "};\n"
    )


def toolkit_version(version: str, distro_tag: str) -> str:
    """``1.17.8`` -> the package version ``1.17.8-1`` (a given ``-N`` release is kept)."""
    del distro_tag  # same release scheme on apt and dnf
    return version if re.search(r"-\d+$", version) else f"{version}-1"


def toolkit_packages(distro_tag: str, version: str) -> list[str]:
    """The four toolkit packages pinned to one version, in the package manager's syntax."""
    full = toolkit_version(version, distro_tag)
    separator = "=" if family(distro_tag) == "debian" else "-"
    return [f"{name}{separator}{full}" for name in TOOLKIT_PACKAGES]


def toolkit_apt_sources(url: str, keyring: str) -> str:
    """NVIDIA's flat apt repository line (``$(ARCH)`` in the URL is apt's own variable)."""
    return f"# Managed by gpuhost\ndeb [signed-by={keyring}] {url} /\n"


def toolkit_apt_pin(distro_tag: str, version: str) -> str:
    """apt preferences keeping the four toolkit packages at one version."""
    return (
        "# Managed by gpuhost: the four NVIDIA Container Toolkit packages must share one\n"
        "# version. Change container_toolkit_version in the inventory instead.\n"
        f"Package: {' '.join(TOOLKIT_PACKAGES)}\n"
        f"Pin: version {toolkit_version(version, distro_tag)}\n"
        "Pin-Priority: 1000\n"
    )


def toolkit_rpm_repo(url: str) -> str:
    """NVIDIA's ``nvidia-container-toolkit.repo`` (stable section), as NVIDIA serves it at
    https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo:
    the repository metadata is signed (``repo_gpgcheck=1``: dnf checks repomd.xml.asc),
    the packages are not checked one by one (``gpgcheck=0``), TLS verified against the
    system's CA bundle. Only two lines differ: ``baseurl`` (NVIDIA's or a mirror) and
    ``gpgkey``, the key gpuhost fetched on the controller and checked against NVIDIA's
    fingerprint, instead of NVIDIA's URL fetched again by dnf on every host."""
    return (
        "# Managed by gpuhost\n"
        "[nvidia-container-toolkit]\n"
        "name=nvidia-container-toolkit\n"
        f"baseurl={url}\n"
        "repo_gpgcheck=1\n"
        "gpgcheck=0\n"
        "enabled=1\n"
        "gpgkey=file:///etc/pki/rpm-gpg/nvidia-container-toolkit.asc\n"
        "sslverify=1\n"
        "sslcacert=/etc/pki/tls/certs/ca-bundle.crt\n"
    )
