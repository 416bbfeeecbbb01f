"""Docker Engine's packages, version pin and repositories per distribution family (pure, no
pyinfra), as Docker's install guides for Debian, Ubuntu and RHEL name them."""

from __future__ import annotations

import re

from gpuhost import aptdistros
from gpuhost.packages import family


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
        return list(aptdistros.release(distro_tag).distro_docker)
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
    return aptdistros.release(distro_tag).codename


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
