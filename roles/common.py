"""What every role needs: validated settings, the host's immutable facts, controller artifacts.

Values read once per run (a host's settings and facts, a downloaded package, a signing key)
are kept in ``run_cache``: one cache per pyinfra ``State``, gone with it, so nothing leaks
from one run (or one host) into another.
"""

from __future__ import annotations

import os
import subprocess
import weakref
from pathlib import Path
from typing import Any

from pyinfra import host, logger
from pyinfra.api import QuoteString, State, StringCommand
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import inventory
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import server

from gpuhost.facts import pyinfra_api
from gpuhost.facts.host import GpuHostState
from gpuhost import aptdistros, artifacts, el_packages, fabric, packages, policy, settings
from gpuhost import distro, settings_cross, signed_modules
from gpuhost.runtime import docker_packages, daemon_json as daemon_json_rules

REMOTE_CACHE = "/var/cache/gpuhost"


class GpuhostError(PyinfraError):
    """A problem gpuhost found before changing anything; the message says what to do."""


_RUNS: weakref.WeakKeyDictionary[State, dict[str, dict]] = weakref.WeakKeyDictionary()


def run_cache(name: str) -> dict:
    """The cache ``name`` of the current run (the current host's pyinfra ``State``)."""
    return _RUNS.setdefault(host.state, {}).setdefault(name, {})


def check_inventory() -> None:
    """Validate the settings of this run's hosts (``settings.validate_inventory``) once per
    run, before any operation runs anywhere.

    This run's hosts are pyinfra's activated hosts (``Inventory.iter_activated_hosts()``,
    pyinfra 3.x API docs): those within ``--limit``/``--exclude`` that it connected to. A web
    server of the same inventory without gpuhost's settings does not stop ``--limit gpu``.

    pyinfra runs deploy code host by host while it prepares, and executes nothing until all
    hosts are prepared: raising here stops the whole run with no host changed, and lists
    every problem of every host (not just the first). An inventory that calls
    ``inventories.preflight.check`` has already done this before any host was contacted.

    A host whose deploy is a ``gpuhost.deploys.api`` function with keyword settings
    (``use_settings``) is validated alone, with those settings over its data: the functions
    validate only the hosts they run on (a web server of the same run is none of theirs).
    """
    what = "inventory data is invalid"
    if host.name in run_cache("overrides"):  # a gpuhost.deploys.api call: this host only
        what = "settings (keyword arguments over the host's inventory data) are invalid"
        checked = run_cache("host_checked").setdefault(host.name, {})
        if "problems" not in checked:
            checked["problems"] = settings.validate_inventory({host.name: host_data()})
    else:
        checked = run_cache("inventory")
    if "problems" not in checked:
        # (and the host asking: the API may run a deploy without connect_all)
        running = {other.name for other in inventory.iter_activated_hosts()} | {host.name}
        checked["problems"] = settings.validate_inventory(
            {other.name: other.data.dict() for other in inventory if other.name in running}
        )
    if checked["problems"]:
        raise GpuhostError(
            f"{what}, nothing was changed on any host:\n  "
            + "\n  ".join(checked["problems"])
        )


def use_settings(overrides: dict[str, Any], target: Any = None) -> None:
    """Keyword settings of a ``gpuhost.deploys.api`` call for the current host of this run:
    ``host_data``/``host_settings`` merge them over its inventory data (for the whole run:
    operations that read the settings while they execute see them too). Kept per host and
    per run (``run_cache``), so nothing leaks to another host or run; a second call for the
    same host replaces the first's settings."""
    name = (target or host).name
    run_cache("overrides")[name] = dict(overrides)
    run_cache("host_checked").pop(name, None)
    run_cache("settings").pop(name, None)


def host_data(target: Any = None) -> dict[str, Any]:
    """The data gpuhost's settings are read from: ``target``'s (default: the current host's)
    inventory data, with the keyword settings of its ``gpuhost.deploys.api`` call over them."""
    target = target or host
    given = _RUNS.setdefault(target.state, {}).setdefault("overrides", {})
    return {**target.data.dict(), **given.get(target.name, {})}


def host_settings() -> settings.Settings:
    """The current host's settings, validated, with defaults applied (read by attribute:
    ``host_settings().nvidia_driver_version``)."""
    check_inventory()
    cache = run_cache("settings")
    if host.name not in cache:
        try:
            cache[host.name] = settings.resolve(host_data())
        except settings.SettingsError as error:  # already reported by check_inventory
            raise GpuhostError(f"{host.name}: {error}") from error
    return cache[host.name]


def executing() -> bool:
    """True while pyinfra executes operations (False while it prepares the plan)."""
    return pyinfra_api.executing(host.state)


def fail_command(message: str) -> StringCommand:
    """A command that fails this host (only this host) with gpuhost's message on stderr.

    An exception raised by an operation would stop the whole run; a failing command is how
    pyinfra fails one host and lets the others go on.
    """
    return StringCommand("echo", QuoteString(f"gpuhost: {message}"), ">&2; exit 1")


def host_ready() -> bool:
    """Checks that concern this host only (OS, GPU flavour): on a problem, add one operation
    that fails this host with the reason and return False so no other operation is added."""
    config = host_settings()
    state = host_state()
    try:
        tag = distro_tag(state)
        stale = settings_cross.local_repo_version_problem(  # the host's own tag only
            config.nvidia_local_repo, tag, config.nvidia_driver_version,
            config.nvidia_driver_source)
        if stale:  # before any change, one line for this host
            raise GpuhostError(f"{host.name}: {stale}")
        if state["os"]["family"] == "rhel":  # before any change: repositories it cannot have
            from gpuhost.roles.el_packaging import repo_problem  # (imports this module)

            problem = repo_problem(config, state)
            if problem:
                raise GpuhostError(problem)
        if state["kernel"]["problem"]:
            raise GpuhostError(f"{host.name}: {state['kernel']['problem']}")
        kernels = (state["os"]["kernel_release"],
                   (state["kernel"].get("next_boot") or {}).get("kernel_release"))
        if config.nvidia_kernel_modules == "distribution":  # issue 39: before any change
            unbuildable = signed_modules.problem(state["os"]["distro_tag"], kernels,
                                                 config.nvidia_driver_version,
                                                 config.nvidia_driver_flavor)
        else:
            unbuildable = aptdistros.driver_problem(state["os"]["distro_tag"], kernels,
                                                    config.nvidia_driver_version)
        if unbuildable:  # a driver whose module cannot build on the kernel: before any change
            raise GpuhostError(f"{host.name}: {unbuildable}")
        docker = state.get("docker") or {}
        if docker.get("exists") and not docker.get("valid"):
            # Refused before anything changes: with it, Docker's unit cannot start (a real
            # systemd host fails at "Docker is enabled and running"), and gpuhost never
            # rewrites a file it cannot read.
            raise GpuhostError(daemon_json_rules.invalid_message(docker["path"], docker["error"]))
        if docker.get("exists"):
            from gpuhost.roles.daemon_json import preflight_problem  # (imports this module)

            clash = preflight_problem()
            if clash:
                raise GpuhostError(clash)
        choose_flavor(config, state)
        misfit = fabric.host_problem(config.nvidia_fabric, config.nvidia_fabricmanager,
                                     fabric.switch_count(state),
                                     state["gpus"])
        if misfit:  # issue 25: before any change
            raise GpuhostError(f"{host.name}: {misfit}")
        if config.nvidia_kernel_modules == "distribution" and fabric.resolve(
                config.nvidia_fabric, config.nvidia_fabricmanager,
                fabric.switch_count(state)) != "none":
            raise GpuhostError(f"{host.name}: nvidia_kernel_modules: distribution does not "
                               "install Fabric Manager or IMEX yet: use dkms on NVSwitch hosts")
        tools = docker.get("el_container_tools") or []
        if tools and config.docker_source != "none" and not docker.get("docker_installed") \
                and not replace_conflicting(config):  # issue 13 item 2: before any change
            raise GpuhostError(el_packages.container_tools_message(host.name, tools))
        docker_conflicts_check(config, state)
        from gpuhost.roles.cdi import preflight_problem as cdi_problem  # (imports this module)

        refused = cdi_problem()  # CDI spec schema vs. the engines: before any change
        if refused:
            raise GpuhostError(f"{host.name}: {refused}")
    except GpuhostError as error:
        server.shell(name="gpuhost cannot provision this host", commands=[fail_command(str(error))])
        return False
    return True


def replace_conflicting(config: settings.Settings) -> bool:
    """May gpuhost remove the packages that conflict with Docker's? One decision with two
    names: docker_replace_conflicting (any OS) and docker_replace_podman (the EL name)."""
    return config.docker_replace_conflicting or config.docker_replace_podman


def docker_conflicts_check(config: settings.Settings, state: dict[str, Any]) -> None:
    """apt hosts taking Docker from Docker's repository: the packages Docker's guide lists
    as conflicting stop the host before anything changes, unless docker_replace_conflicting
    (roles/docker_engine.py then removes them, as the guide does)."""
    if config.docker_source != "docker" or replace_conflicting(config):
        return
    if packages.family(distro_tag(state)) != "debian":
        return
    found = docker_packages.docker_apt_conflicting(host.get_fact(DebPackages) or {})
    if found:
        raise GpuhostError(f"{host.name}: " + docker_packages.docker_conflict_message(
            state["os"]["pretty_name"] or distro_tag(state), found))


def host_state() -> dict[str, Any]:
    """The host as it is before the deploy (one remote command, read once per host and run).

    Only immutable parts (OS, kernel release, GPU models) may steer deploy code; state that
    the deploy changes is read again by the operations themselves at execute time.
    """
    cache = run_cache("state")
    if host.name not in cache:
        cache[host.name] = host.get_fact(GpuHostState)
    return cache[host.name]


def distro_tag(state: dict[str, Any]) -> str:
    tag = state["os"]["distro_tag"]
    if not tag:  # the os fact's error names the system and the supported ones (one line)
        raise GpuhostError(f"{host.name}: " + distro.os_problem(state["os"]))
    return tag


def choose_flavor(config: settings.Settings, state: dict[str, Any]) -> str:
    """open or proprietary for this host's GPUs (auto follows NVIDIA's recommendation; a GPU
    that cannot be classified stops "auto" with its PCI id and the setting to make)."""
    try:
        return policy.flavor_for_gpus(
            config.nvidia_driver_flavor, state["gpus"], config.nvidia_driver_version
        )
    except ValueError as error:
        raise GpuhostError(f"{host.name}: {error}") from error


def local_repo_artifact(config: settings.Settings, tag: str) -> Path:
    """The verified local repo package for this distribution, on the controller.

    Downloaded once per run (and cached across runs), its sha256 checked before it can be
    sent to any host: a wrong checksum stops the run while nothing has been sent.
    """
    version = config.nvidia_driver_version
    key = (tag, version)
    fetched = run_cache("artifacts")
    if key not in fetched:
        source = config.nvidia_local_repo.get(tag)
        if not source:
            raise GpuhostError(
                f"{host.name}: nvidia_local_repo has no entry for {tag!r}; add "
                f"{tag}: {{url: ..., sha256: ...}} for "
                f"{packages.local_repo_filename(tag, version)}"
            )
        cache = Path(os.path.expanduser(config.nvidia_artifact_cache))
        try:
            path = artifacts.fetch(
                dict(source),
                cache,
                proxy=config.http_proxy,
                offline=config.offline,
                mirror_urls=config.offline_mirror_urls,
                progress=True,
            )
        except artifacts.ArtifactError as error:
            raise GpuhostError(f"{tag} local repo package: {error}") from error
        expected = packages.local_repo_filename(tag, version)
        if path.name != expected:
            logger.warning(
                f"{tag} local repo package is named {path.name}, NVIDIA names it {expected}"
            )
        fetched[key] = path
    return fetched[key]


# Signing-key fingerprints that the vendors document; a key fetched from a vendor's default
# URL must carry one of them. Docker prints its fingerprints on its install pages. NVIDIA
# prints none for the container toolkit's key ("NVIDIA CORPORATION (Open Source Projects)
# <cudatools@nvidia.com>", 4096R, 2017-09-28): its long key id DDCAE044F796ECB0 is the one
# NVIDIA's maintainers name (NVIDIA/nvidia-container-runtime#88, NVIDIA/libnvidia-container
# #171); C95B...ECB0 is that key's full fingerprint (docs/real-hosts.md).
KNOWN_KEY_FINGERPRINTS = {
    "https://download.docker.com/linux/debian/gpg": {"9DC858229FC7DD38854AE2D88D81803C0EBFCD88"},
    "https://download.docker.com/linux/ubuntu/gpg": {"9DC858229FC7DD38854AE2D88D81803C0EBFCD88"},
    "https://download.docker.com/linux/rhel/gpg": {"060A61C51B558A7F742B77AAC52FEB6B621E9F35"},
    "https://nvidia.github.io/libnvidia-container/gpgkey": {
        "C95B321B61E88C1809C4F759DDCAE044F796ECB0"},
}


def check_key_fingerprint(location: str, data: bytes) -> None:
    """Raise GpuhostError when ``data`` (a key fetched from ``location``) lacks the
    fingerprint its vendor documents for that URL; keys from other places pass."""
    expected = KNOWN_KEY_FINGERPRINTS.get(location)
    if not expected:
        return
    shown = subprocess.run(
        ["gpg", "--show-keys", "--with-colons"], input=data, capture_output=True, check=False
    ).stdout.decode(errors="replace")
    fingerprints = {line.split(":")[9] for line in shown.splitlines() if line.startswith("fpr:")}
    if not fingerprints & expected:
        raise GpuhostError(
            f"the signing key from {location} has fingerprint(s) {sorted(fingerprints)}, "
            f"not the documented {sorted(expected)}: refusing to trust it"
        )

def fetch_key(location: str, config: settings.Settings) -> bytes:
    """A repository signing key, fetched on the controller (URL or path), checked against
    the fingerprint its vendor documents when it comes from the vendor's default URL."""
    keys = run_cache("keys")
    if location in keys:
        return keys[location]
    if settings.is_local_source(location):
        data = Path(location.removeprefix("file://")).read_bytes()
    else:
        if config.offline and not settings.on_mirror(location, config.offline_mirror_urls):
            raise GpuhostError(
                f"offline is set but the signing key {settings.mask_url(location)} is not on "
                "a mirror in offline_mirror_urls: point the *_gpgkey setting at the mirror or "
                "a local file"
            )
        session = artifacts.make_session(proxy=config.http_proxy)
        try:
            response = session.get(location, timeout=30)
            response.raise_for_status()
        except Exception as error:  # requests raises many types; report one line
            raise GpuhostError(
                f"cannot fetch the signing key {settings.mask_url(location)}: {error}"
            ) from error
        data = response.content
    check_key_fingerprint(location, data)
    keys[location] = data
    return data


def is_armored(key: bytes) -> bool:
    return key.lstrip().startswith(b"-----BEGIN PGP")
