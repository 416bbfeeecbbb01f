"""Docker Engine from Docker's repository (its RHEL one on Oracle Linux), the distribution,
or local package files; enabled and running."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt, dnf, server

from gpuhost import packages, settings
from roles.common import (GpuhostError, distro_tag, fetch_key, host_settings, host_state,
                          replace_conflicting)
from roles.el_packaging import remove_container_tools
from roles.repos import apt_repository, local_packages, rpm_repository


def _replace_container_tools(config: settings.Settings, state: dict) -> None:
    """docker_replace_podman: remove OL8's container-tools first, as Docker's RHEL guide
    does (roles.common.host_ready stopped the host already when the setting is false)."""
    docker = state.get("docker") or {}
    tools = docker.get("el_container_tools") or []
    if tools and replace_conflicting(config) and not docker.get("docker_installed"):
        remove_container_tools(name=f"Remove {', '.join(tools)} (docker_replace_podman; "
                                    "containerd.io conflicts with runc)", names=tools)


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
                packages.docker_apt_sources(tag, url), "/etc/apt/sources.list.d/docker.sources",
            )
        else:
            rpm_repository(
                "Docker", key, "/etc/pki/rpm-gpg/docker-ce.asc",
                packages.docker_rpm_repo(url), "/etc/yum.repos.d/docker-ce.repo",
            )
    if source == "docker" and family == "debian":
        # without docker_replace_conflicting, roles.common.host_ready stopped such a host
        found = packages.docker_apt_conflicting(host.get_fact(DebPackages) or {})
        if found:
            apt.packages(
                name=f"Remove the packages Docker lists as conflicting ({', '.join(found)}; "
                "docker_replace_conflicting)",
                packages=found, present=False)
    if source in ("docker", "distro"):
        try:
            wanted = packages.docker_packages(tag, source)
        except ValueError as error:
            raise GpuhostError(f"{state['os']['pretty_name']}: {error}") from error
        if family == "debian":
            apt.packages(name=f"Install Docker ({', '.join(wanted)})", packages=wanted,
                         no_recommends=True)
        else:
            _replace_container_tools(config, state)
            dnf.packages(name=f"Install Docker ({', '.join(wanted)})", packages=wanted)
    elif source == "local":
        if family == "rhel":
            _replace_container_tools(config, state)
        local_packages("Docker", list(config.docker_local_packages), family)

    server.service(name="Docker is enabled and running", service="docker", running=True,
                   enabled=True)
