"""Docker Engine from Docker's repository (its RHEL one on Oracle Linux), the distribution,
or local package files; enabled and running."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages
from pyinfra.operations import apt, dnf, server

from gpuhost.facts.files import FileDigest
from gpuhost import packages, settings
from gpuhost.runtime import docker_packages
from gpuhost.roles.common import (GpuhostError, distro_tag, fetch_key, host_settings, host_state,
                          replace_conflicting)
from gpuhost.roles.el_packaging import remove_container_tools
from gpuhost.roles.files import config_file
from gpuhost.roles.repos import apt_repository, local_packages, rpm_repository


def _replace_container_tools(config: settings.Settings, state: dict) -> None:
    """docker_replace_podman: remove OL8's container-tools first, as Docker's RHEL guide
    does (roles.common.host_ready stopped the host already when the setting is false)."""
    docker = state.get("docker") or {}
    tools = docker.get("el_container_tools") or []
    if tools and replace_conflicting(config) and not docker.get("docker_installed"):
        remove_container_tools(name=f"Remove {', '.join(tools)} (docker_replace_podman; "
                                    "containerd.io conflicts with runc)", names=tools)


def pin_docker(family: str, source: str, version: str, wanted: list[str]) -> None:
    """Docker at exactly ``docker_version``: on apt a preferences pin (priority 1000, like
    the toolkit's) then the packages; on dnf the ``name-version`` specs Docker documents.
    (A dnf versionlock, when gpuhost has one for EL, belongs here too.)"""
    if family == "debian":
        config_file(name=f"Pin Docker at {version}", dest=docker_packages.DOCKER_APT_PIN,
                    content=docker_packages.docker_apt_pin(source, version), mode="644")
    docker_at_version(name=f"Install Docker {version} ({', '.join(wanted)})", family=family,
                      source=source, version=version, wanted=wanted)


@operation()
def docker_at_version(family: str, source: str, version: str, wanted: list[str]):
    """
    Docker's pinned packages at ``version``, unless they already are (a downgrade too).

    + family: "debian" (apt: the pin chooses the version) or "rhel" (dnf specs)
    + source: docker_source ("docker" or "distro")
    + version: docker_version, like "27.5.1"
    + wanted: the packages to install (apt)
    """
    installed = host.get_fact(DebPackages if family == "debian" else RpmPackages) or {}
    pinned = docker_packages.docker_pinned_packages(source)
    at_version = all(any(docker_packages.docker_version_matches(v, version) for v in installed.get(n, ()))
                     for n in pinned)
    if at_version and all(name in installed for name in wanted):
        host.noop(f"Docker {version} is installed")
        return
    if family == "debian":
        yield StringCommand(
            "DEBIAN_FRONTEND=noninteractive apt-get -y --allow-downgrades --no-install-recommends",
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install",
            *[QuoteString(name) for name in wanted])
    else:
        yield StringCommand("dnf install -y --allowerasing",
                            *[QuoteString(spec) for spec in docker_packages.docker_rpm_specs(version)])


@deploy("Docker Engine")
def install() -> None:
    config = host_settings()
    source = config.docker_source
    if source == "none":
        return
    state = host_state()
    tag = distro_tag(state)
    family = packages.family(tag)

    if source == "docker":
        url, key_location = settings.docker_repo(config, state["os"]["id"])
        key = fetch_key(key_location, config)
        if family == "debian":
            apt_repository(
                "Docker", key, "/etc/apt/keyrings/docker.asc",
                docker_packages.docker_apt_sources(tag, url), "/etc/apt/sources.list.d/docker.sources",
            )
        else:
            rpm_repository(
                "Docker", key, "/etc/pki/rpm-gpg/docker-ce.asc",
                docker_packages.docker_rpm_repo(url), "/etc/yum.repos.d/docker-ce.repo",
            )
    if source == "docker" and family == "debian":
        # without docker_replace_conflicting, roles.common.host_ready stopped such a host
        found = docker_packages.docker_apt_conflicting(host.get_fact(DebPackages) or {})
        if found:
            apt.packages(
                name=f"Remove the packages Docker lists as conflicting ({', '.join(found)}; "
                "docker_replace_conflicting)",
                packages=found, present=False)
    if source in ("docker", "distro"):
        try:
            wanted = docker_packages.docker_packages(tag, source)
        except ValueError as error:
            raise GpuhostError(f"{state['os']['pretty_name']}: {error}") from error
        if family != "debian":
            _replace_container_tools(config, state)
        if config.docker_version:
            pin_docker(family, source, config.docker_version, wanted)
        elif family == "debian":
            # docker_version was removed from the inventory: gpuhost's pin goes too, or it
            # would hold Docker at the old version for good
            if host.get_fact(FileDigest, path=docker_packages.DOCKER_APT_PIN):
                server.shell(name=f"Remove gpuhost's Docker pin ({docker_packages.DOCKER_APT_PIN}; "
                                  "docker_version is not set)",
                             commands=[f"rm -f {docker_packages.DOCKER_APT_PIN}"])
            apt.packages(name=f"Install Docker ({', '.join(wanted)})", packages=wanted,
                         no_recommends=True)
        else:
            dnf.packages(name=f"Install Docker ({', '.join(wanted)})", packages=wanted)
    elif source == "local":
        if family == "rhel":
            _replace_container_tools(config, state)
        local_packages("Docker", list(config.docker_local_packages), family)

    server.service(name="Docker is enabled and running", service="docker", running=True,
                   enabled=True)
