"""Which packages, files and pins a host gets, per distribution family (pure, no pyinfra).

Names follow NVIDIA's packaging as its driver installation guide documents it:

- apt, Ubuntu 22.04/24.04: before branch 590 the branch is in the package name
  (``nvidia-open-570``, ``cuda-drivers-570``); from 590 the branch is chosen by
  ``nvidia-driver-pinning-<branch>`` and the driver packages are unversioned.
- apt, Debian 12: NVIDIA's debian12 repositories carry Debian's packaging (``nvidia-open``,
  ``cuda-drivers``, ``nvidia-kernel-open-dkms``, ``nvidia-driver-cuda``, ``libcuda1``,
  ``nvidia-smi``, ...) under the same names on every branch; the local repo holds one
  version and gpuhost's apt pin holds it (docs/real-hosts.md, "Debian 12's driver names").
- dnf (Oracle Linux 8/9 via NVIDIA's rhel8/rhel9 builds): the branch is a module stream
  ``nvidia-driver:<branch>-open`` or ``<branch>-dkms``; the packages are ``nvidia-open`` or
  ``cuda-drivers``.
"""

from __future__ import annotations

import re

DEB_DISTROS = ("debian12", "ubuntu2204", "ubuntu2404")
RPM_DISTROS = ("rhel8", "rhel9")

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


# Debian 12: what gpuhost installs besides the meta package. NVIDIA's Debian packages follow
# Debian's, where nvidia-smi is not a dependency of the driver's libraries (Debian's libcuda1
# only Recommends the kernel module and its helpers, packages.debian.org bookworm) and gpuhost
# installs with --no-install-recommends (nvidia-persistenced: roles/nvidia_driver.py).
DEBIAN12_EXPLICIT = ("nvidia-smi",)


def driver_packages(distro_tag: str, version: str, flavor: str, fabricmanager: bool) -> list[str]:
    """The packages to install for this driver (the pin or stream chooses the version)."""
    br = branch(version)
    meta = "nvidia-open" if flavor == "open" else "cuda-drivers"
    pinning = [f"nvidia-driver-pinning-{br}"] if int(br) >= APT_UNVERSIONED_FROM else []
    if family(distro_tag) == "rhel":
        names = [meta]
    elif distro_tag == "debian12":
        # unversioned on every branch (docs/real-hosts.md, "Debian 12's driver names")
        names = [*pinning, meta, *DEBIAN12_EXPLICIT]
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


# The engine, its CLI and containerd: what a GPU container host needs. Docker's buildx and
# compose plugins are build/dev tools, not part of gpuhost's host.
DOCKER_CE_PACKAGES = ["docker-ce", "docker-ce-cli", "containerd.io"]


def docker_packages(distro_tag: str, source: str) -> list[str]:
    """Docker's packages for a source: Docker's repository or the distribution's."""
    if source == "docker":
        return list(DOCKER_CE_PACKAGES)
    if source == "distro":
        if family(distro_tag) == "rhel":
            raise ValueError(
                "Oracle Linux has no Docker Engine package of its own: set docker_source to "
                "'docker' (Docker's RHEL repository) or 'local'"
            )
        return ["docker.io"]
    raise ValueError(f"no package list for docker_source {source!r}")


# Docker's Ubuntu and Debian install guides: "Uninstall conflicting packages" before
# installing docker-ce (`apt remove $(dpkg --get-selections docker.io docker-compose
# docker-compose-v2 docker-doc podman-docker containerd runc | cut -f1)`); containerd.io
# itself declares Conflicts/Replaces containerd and runc, docker-ce Conflicts docker.io.
DOCKER_APT_CONFLICTING = ("docker.io", "docker-compose", "docker-compose-v2", "docker-doc",
                          "podman-docker", "containerd", "runc")


def docker_apt_conflicting(installed: dict | list | set) -> list[str]:
    """Which of Docker's documented conflicting packages are installed (``installed``: the
    installed package names, e.g. pyinfra's DebPackages fact)."""
    return [name for name in DOCKER_APT_CONFLICTING if name in installed]


def docker_conflict_message(host_os: str, found: list[str]) -> str:
    return (
        f"{host_os} has {', '.join(found)} installed; Docker's packages (docker-ce, "
        "containerd.io) conflict with them and apt would remove them silently (a running "
        "docker.io/containerd and its containers would stop). Docker's guide removes them "
        "first: set docker_replace_conflicting: true to let gpuhost do that (images and "
        "containers under /var/lib/docker are kept, the packages' configuration too), "
        "remove them yourself, or set docker_source: distro to keep the distribution's Docker"
    )



# Where Docker's version pin lives on apt hosts (docker_version).
DOCKER_APT_PIN = "/etc/apt/preferences.d/gpuhost-docker"


def docker_pinned_packages(source: str) -> list[str]:
    """The packages ``docker_version`` holds: Docker's "install a specific version" pins
    docker-ce and docker-ce-cli and leaves containerd.io (and the plugins) free."""
    return ["docker-ce", "docker-ce-cli"] if source == "docker" else ["docker.io"]


def docker_version_regex(version: str) -> str:
    """A package version of upstream ``version``: Docker's ``5:27.5.1-1~debian.12~bookworm``,
    ``3:27.5.1-1.el9``, Debian's ``20.10.24+dfsg1-1+deb12u1`` (any epoch, any revision)."""
    return rf"^([0-9]+:)?{re.escape(version)}([-~+]|$)"


def docker_version_matches(installed: str, version: str) -> bool:
    return re.match(docker_version_regex(version), installed) is not None


def docker_apt_pin(source: str, version: str) -> str:
    """apt preferences holding Docker's packages at ``version`` (priority 1000: installed
    even when that is a downgrade; apt_preferences(5) accepts a /regex/ as version)."""
    return (
        "# Managed by gpuhost: Docker stays at docker_version. Change it in the inventory.\n"
        f"Package: {' '.join(docker_pinned_packages(source))}\n"
        f"Pin: version /{docker_version_regex(version)}/\n"
        "Pin-Priority: 1000\n"
    )


def docker_rpm_specs(version: str) -> list[str]:
    """``dnf install`` specs for Docker at ``version`` (Docker's RHEL page: ``docker-ce-<V>
    docker-ce-cli-<V> containerd.io``; dnf matches name-version against any epoch/release)."""
    return [f"docker-ce-{version}", f"docker-ce-cli-{version}", "containerd.io"]


def docker_apt_suite(distro_tag: str) -> str:
    return {"debian12": "bookworm", "ubuntu2204": "jammy", "ubuntu2404": "noble"}[distro_tag]


def docker_apt_sources(distro_tag: str, url: str) -> str:
    """deb822 sources for Docker's apt repository (docker.sources, as Docker documents)."""
    return (
        "# Managed by gpuhost\n"
        "Types: deb\n"
        f"URIs: {url}\n"
        f"Suites: {docker_apt_suite(distro_tag)}\n"
        "Components: stable\n"
        "Signed-By: /etc/apt/keyrings/docker.asc\n"
    )


def docker_rpm_repo(url: str) -> str:
    """Docker's RHEL repository, as ``dnf config-manager --add-repo`` would write it.

    ``url`` is the baseurl as dnf wants it (Docker's own is
    ``https://download.docker.com/linux/rhel/$releasever/$basearch/stable``).
    """
    return (
        "# Managed by gpuhost\n"
        "[docker-ce-stable]\n"
        "name=Docker CE Stable - $basearch\n"
        f"baseurl={url}\n"
        "enabled=1\n"
        "gpgcheck=1\n"
        "gpgkey=file:///etc/pki/rpm-gpg/docker-ce.asc\n"
    )


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


# --- Oracle Linux: channels, container-tools vs Docker, exact version lock ---------------
# docs/real-hosts.md has the vendor sources of each fact below.

# OL8's container-tools packages: Docker's containerd.io obsoletes and conflicts with runc
# (podman and buildah require it), so `dnf install docker-ce containerd.io` stops on them.
EL_CONTAINER_TOOLS = ("podman", "buildah", "runc", "containers-common")
VERSIONLOCK_PLUGIN = "python3-dnf-plugin-versionlock"
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"


def ol_channels(major: str) -> dict[str, str]:
    """Oracle's channel ids NVIDIA's driver needs on OL8/OL9: CodeReady Builder (enabled
    by NVIDIA's guide) and developer EPEL (the only source of dkms)."""
    return {"codeready": f"ol{major}_codeready_builder", "epel": f"ol{major}_developer_EPEL"}


def epel_release_package(major: str) -> str:
    """Oracle's package that installs the developer EPEL .repo file (in BaseOS)."""
    return f"oracle-epel-release-el{major}"


def el_repos_to_enable(os_id: str, major: str, setting: tuple[str, ...] | None) -> list[str]:
    """The repository ids to enable on an EL host: the ``el_enable_repos`` setting, or by
    default Oracle's channels on Oracle Linux (nothing on other EL distributions)."""
    if setting is not None:
        return list(setting)
    if os_id == "ol":
        return list(ol_channels(major).values())
    return []


def dkms_missing_message(major: str, enabled: list[str]) -> str:
    """Why the driver cannot install when no enabled repository carries dkms."""
    epel = ol_channels(major)["epel"]
    if epel in enabled:
        where = (f"gpuhost enabled {epel} (el_enable_repos), yet it offers no dkms here: "
                 "check that channel or your mirror of it")
    else:
        where = (f"dkms comes from Oracle's {epel} channel, which gpuhost did not enable "
                 f"(el_enable_repos): add {epel}, or the id of your mirror of it, to "
                 "el_enable_repos")
    return (f"gpuhost: NVIDIA's kmod-nvidia-*-dkms packages need dkms, and no enabled "
            f"repository provides it. {where}, then run again.")


def container_tools_message(host: str, installed: list[str]) -> str:
    return (f"{host}: {', '.join(installed)} installed: Docker's containerd.io obsoletes and "
            "conflicts with runc, so dnf cannot install Docker next to them. Set "
            "docker_replace_podman: true to remove them first (as Docker's RHEL guide "
            "does), or docker_source: none to keep them; nothing was changed on this host")


def versionlock_spec(name: str, version: str) -> str:
    """The line `dnf versionlock add` writes for an installed package: NAME-EPOCH:VERSION-
    RELEASE.* (epoch 0 when the package has none); ``version`` as rpm facts give it."""
    evr = version if ":" in version.split("-", 1)[0] else f"0:{version}"
    return f"{name}-{evr}.*"


def versionlock_changes(installed: dict[str, str], locks: list[str], version: str
                        ) -> tuple[list[str], list[str]]:
    """(lock entries to delete, packages to add) so that every installed NVIDIA package at
    ``version`` is locked at its exact version and no NVIDIA lock names another version.

    ``installed``: name -> rpm version ('3:570.172.08-1.el9') of the installed *nvidia*
    packages; ``locks``: the non-comment lines of versionlock.list."""
    wanted = {versionlock_spec(n, v) for n, v in installed.items()
              if upstream(v) == version}
    stale = [lock for lock in locks if is_driver_lock(lock) and lock not in wanted]
    add = sorted(spec[:-2] for spec in wanted if spec not in locks)
    return stale, add


def is_driver_lock(lock: str) -> bool:
    """A versionlock.list line of an NVIDIA driver package ('nvidia-open-3:570.172.08-1.el9.*'),
    not of another NVIDIA package (the container toolkit's 1.17.8 is no driver version)."""
    _, _, evr = lock.partition(":")
    return "nvidia" in lock and re.match(r"\d{3}\.\d+", evr) is not None


def upstream(version: str) -> str:
    """'3:570.172.08-1.el9' -> '570.172.08'."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]

def dnf_conf_with_proxy(text: str | None, proxy: str) -> str:
    """``/etc/dnf/dnf.conf`` (``text``; None when missing) with ``proxy=`` set in its
    ``[main]`` section; every other line kept as it was.

    dnf reads its global options only from this file (dnf.conf(5): no drop-in directory),
    so gpuhost edits it on the controller and uploads it whole (never through a command
    line: the URL may carry credentials).
    """
    lines = (text or "").splitlines()
    wanted = f"proxy={proxy}"
    section = None
    main_at = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            if section == "main" and main_at is None:
                main_at = index
            continue
        if section == "main" and re.match(r"proxy\s*=", stripped):
            lines[index] = wanted
            return "\n".join(lines) + "\n"
    if main_at is None:
        lines = ["[main]", wanted, *lines]
    else:
        lines.insert(main_at + 1, wanted)
    return "\n".join(lines) + "\n"
