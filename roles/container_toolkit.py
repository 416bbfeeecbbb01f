"""The NVIDIA Container Toolkit: its four packages at one pinned version."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.operations import apt

from gpuhost.facts.container import ContainerToolkit
from gpuhost import packages, settings
from gpuhost.roles.common import distro_tag, fetch_key, host_settings, host_state, is_armored
from gpuhost.roles.files import config_file
from gpuhost.roles.repos import apt_repository, local_packages, rpm_repository

APT_PIN = "/etc/apt/preferences.d/gpuhost-nvidia-container-toolkit"


@operation()
def dnf_toolkit(packages: list[str], version: str):
    """
    Install the four toolkit packages at one version with dnf, unless they already are.

    (pyinfra's dnf.packages does not read ``name-version-release`` specs back from rpm, so a
    converged host would reinstall on every run.)

    + packages: ``name-version-release`` specs
    + version: the toolkit version they share
    """
    toolkit = host.get_fact(ContainerToolkit)
    wanted = version.split("-")[0]
    if toolkit["consistent"] and all(v == wanted for v in toolkit["packages"].values()):
        host.noop(f"the NVIDIA Container Toolkit {wanted} is installed")
        return
    yield StringCommand("dnf install -y --allowerasing", *[QuoteString(p) for p in packages])


@deploy("NVIDIA Container Toolkit")
def install() -> None:
    config = host_settings()
    state = host_state()
    tag = distro_tag(state)
    family = packages.family(tag)
    version = config.container_toolkit_version
    source = config.container_toolkit_source

    if source in ("nvidia", "mirror"):
        url, key_location = settings.toolkit_repo(config, family)
        key = fetch_key(key_location, config)
        if family == "debian":
            keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring." + (
                "asc" if is_armored(key) else "gpg"
            )
            apt_repository(
                "NVIDIA Container Toolkit", key, keyring,
                packages.toolkit_apt_sources(url, keyring),
                "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
            )
        else:
            rpm_repository(
                "NVIDIA Container Toolkit", key, "/etc/pki/rpm-gpg/nvidia-container-toolkit.asc",
                packages.toolkit_rpm_repo(url), "/etc/yum.repos.d/nvidia-container-toolkit.repo",
            )
        wanted = packages.toolkit_packages(tag, version)
        if family == "debian":
            config_file(
                name=f"Pin the toolkit packages at {version}",
                content=(packages.toolkit_apt_pin(tag, version)),
                dest=APT_PIN,
                mode="644",
            )
            apt.packages(name=f"Install the NVIDIA Container Toolkit {version}",
                         packages=wanted, no_recommends=True)
        else:
            dnf_toolkit(name=f"Install the NVIDIA Container Toolkit {version}",
                        packages=wanted, version=version)
    else:
        local_packages("the NVIDIA Container Toolkit",
                       list(config.container_toolkit_local_packages), family)
