"""The model of every inventory key gpuhost reads (``Settings``) and the key table derived
from it (``SETTINGS``, ``BY_NAME``, ``defaults()``).

Each field of ``Settings`` is one key: its Python type, its default (none: required), and in
its metadata the type as users write it, its meaning and its check (``gpuhost.checks``).
Callers use these names through ``gpuhost.settings``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any

from gpuhost.checks import (
    TOOLKIT_RE, check_bool, check_choice, check_command, check_daemon_settings, check_image,
    check_list_of, check_local_repo, check_mig_layout, check_path, check_seconds, check_service,
    check_url, check_url_map, check_version, masked, show,
)
from gpuhost import driver_repo, fabric, kubernetes, rdma, signed_modules, slurm
from gpuhost.distro import DISTRO_TAGS
from gpuhost.driver_rules import DRIVER_RE

DOCKER_REPO_URL = {
    "debian": "https://download.docker.com/linux/debian",
    "ubuntu": "https://download.docker.com/linux/ubuntu",
    "rhel": "https://download.docker.com/linux/rhel/$releasever/$basearch/stable",
}
DOCKER_REPO_GPGKEY = {
    "debian": "https://download.docker.com/linux/debian/gpg",
    "ubuntu": "https://download.docker.com/linux/ubuntu/gpg",
    "rhel": "https://download.docker.com/linux/rhel/gpg",
}
TOOLKIT_REPO_URL = {
    "apt": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
    "rpm": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch",
}
TOOLKIT_GPGKEY = {
    "apt": "https://nvidia.github.io/libnvidia-container/gpgkey",
    "rpm": "https://nvidia.github.io/libnvidia-container/gpgkey",
}


Check = Callable[[str, Any], list[str]]


def _key(shown_type: str, meaning: str, check: Check, default: Any = MISSING) -> Any:
    """One key of the model: no ``default`` means required; a dict default is copied per
    instance."""
    metadata = {"type": shown_type, "meaning": meaning, "check": check}
    if isinstance(default, dict):
        return field(default_factory=lambda: json.loads(json.dumps(default)), metadata=metadata)
    return field(default=default, metadata=metadata)


# NVIDIA Container Toolkit 1.20.0 (2026-08-12, CHANGELOG.md @v1.20.0), the one GPU Operator
# 26.7.0 ships (cloud-native-docs gpu-operator/release-notes.rst)
TOOLKIT_DEFAULT = "1.20.0"

DOCKER_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_docker_version = check_version(DOCKER_VERSION_RE, "27.5.1", "a Docker Engine version")


def _check_docker_version(key: str, value: Any) -> list[str]:
    return [] if value is None else _docker_version(key, value)


_check_reboot_timeout = check_seconds(60, 14400)
_url_list = check_list_of(check_url, "URLs")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


def _repo_id(key: str, value: Any) -> list[str]:
    if not isinstance(value, str) or not _REPO_ID.fullmatch(value):
        return [f"{show(value)} is not a dnf repository id (letters, digits, _ . : -)"]
    return []


_repo_ids = check_list_of(_repo_id, "dnf repository ids")


def _repo_urls(key: str, value: Any) -> list[str]:
    """el_repo_urls: {repo id: {"baseurl": URL, "gpgkey": URL}} or null."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"{show(value)} is not a mapping of dnf repository ids to "
                "{\"baseurl\": URL, \"gpgkey\": URL}"]
    problems = []
    for repo_id, entry in value.items():
        problems += [f"[{repo_id}] {p}" for p in _repo_id(key, repo_id)]
        if not isinstance(entry, dict) or set(entry) != {"baseurl", "gpgkey"}:
            problems.append(f"[{repo_id}] {show(entry)} is not {{\"baseurl\": URL, "
                            "\"gpgkey\": URL} (both required: gpuhost checks signatures)")
            continue
        for field_name in ("baseurl", "gpgkey"):
            problems += [f"[{repo_id}] {field_name}: {p}"
                         for p in check_url(key, entry[field_name])]
    return problems


def _ip(key: str, value: Any) -> list[str]:
    import ipaddress

    try:
        ipaddress.ip_address(value if isinstance(value, str) else "")
    except ValueError:
        return [f"{show(value)} is not an IP address (IMEX's nodes_config.cfg lists addresses)"]
    return []


_ip_list = check_list_of(_ip, "IP addresses")
_path_list = check_list_of(check_path, "absolute paths")
_DOCKER_MAP = "URL or {debian, ubuntu, rhel: URL}"
_TOOLKIT_MAP = "URL or {apt, rpm: URL}"


def _check_mig_config_name(key: str, value: Any) -> list[str]:
    if value is None or (isinstance(value, str) and value.strip() and "\n" not in value):
        return []
    return [f"{show(value)} is not a configuration name (a string, like \"all-1g.10gb\")"]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Validated gpuhost settings of one host (defaults applied), one attribute per key.

    Lists are tuples; URL settings given as one string are a mapping with that URL for
    every key; sha256 digests are lower case. Build it with ``resolve(data)``.
    """

    nvidia_driver_version: str = _key(
        "str", "driver to install, full version like \"580.95.05\"",
        check_version(DRIVER_RE, "570.172.08", "a driver version"))
    nvidia_driver_flavor: str = _key(
        "str", "kernel module flavour; auto: open when every GPU is Turing+ and the branch >= 560",
        check_choice("open", "proprietary", "auto"), "auto")
    nvidia_kernel_modules: str = _key(
        "str", "where the NVIDIA kernel module comes from: dkms (built on the host; under Secure "
        "Boot signed with an enrolled MOK) or distribution (the distribution's signed modules, "
        "nothing enrolled: Ubuntu; docs/secure-boot.md)",
        check_choice(*signed_modules.CHOICES), "dkms")
    nvidia_local_repo: dict[str, dict[str, str]] = _key(
        "dict", "NVIDIA local repo package per distro tag: {tag: {url or path, sha256}}, tags "
        + ", ".join(DISTRO_TAGS) + " (required unless every host takes nvidia_driver_repo)",
        check_local_repo, {})
    nvidia_driver_source: str = _key(
        "str", "where the driver comes from: local_repo (NVIDIA's local repo package, "
        "nvidia_local_repo), network (NVIDIA's network repository or a mirror of it, "
        "nvidia_driver_repo), auto: the local repo package where NVIDIA publishes one for the "
        "host's distribution, else the network repository (Ubuntu 26.04); docs/settings.md, "
        "\"How the driver's source is verified\"", check_choice("auto", "local_repo", "network"),
        "auto")
    nvidia_driver_repo: dict[str, dict[str, str]] = _key(
        "dict", "NVIDIA's network repository or your mirror of it (aptly, Artifactory, Pulp) "
        "per distro tag: {tag: {url: the repository's directory (NVIDIA's "
        "https://developer.download.nvidia.com/compute/cuda/repos/<tag>/x86_64/), key: its "
        "signing key (URL or controller path), fingerprint: that key's 40-hex fingerprint}}; "
        "verified on the controller before any host changes", driver_repo.check_setting, {})
    nvidia_artifact_cache: str = _key(
        "path", "controller cache for downloads", check_path, "~/.cache/gpuhost")
    nvidia_fabric: str = _key(
        "str", "what connects the GPUs (docs/fabric.md): none; nvswitch (HGX/DGX boards with "
        "NVSwitches: Fabric Manager and NSCQ at the driver's exact version, Fabric Manager "
        "started before containers, verify waits for every GPU's fabric state Completed); nvl "
        "(GB200/GB300 NVL domains: nvidia-imex and libnvsdm, IMEX channel 0 at boot, "
        "nvidia_imex_peers); auto: nvswitch where the host shows NVSwitches on its PCI bus, "
        "else none", check_choice(*fabric.CHOICES), "auto")
    nvidia_fabricmanager: bool = _key(
        "bool", "older spelling of nvidia_fabric: nvswitch (true: Fabric Manager and NSCQ at "
        "the driver's version; contradicts nvidia_fabric none or nvl); false: nvidia_fabric "
        "decides", check_bool, False)
    nvidia_imex_peers: tuple[str, ...] = _key(
        "list of IP addresses", "nvidia_fabric: nvl: every node of the NVLink domain (this one "
        "too), written one per line to /etc/nvidia-imex/nodes_config.cfg", _ip_list, ())
    nvidia_gpudirect_rdma: str = _key(
        "str", "GPUDirect RDMA (docs/rdma.md): off (nothing changed; the audit still reports RDMA "
        "NICs, topology and ACS); auto (where an RDMA NIC is seen: nvidia_peermem loaded now "
        "and at boot from /etc/modules-load.d/nvidia-peermem.conf; nothing elsewhere); peermem "
        "(the same, and a host without RDMA NIC stops); dmabuf (nothing loaded: DMA-BUF of the "
        "open modules on Linux 5.12+; gpuhost's modules-load.d file removed)",
        check_choice(*rdma.CHOICES), "off")
    nvidia_persistenced: bool = _key("bool", "enable nvidia-persistenced", check_bool, True)
    docker_source: str = _key(
        "str", "where Docker comes from (local: docker_local_packages)",
        check_choice("docker", "distro", "local", "none"), "docker")
    docker_repo_url: dict[str, str] = _key(
        _DOCKER_MAP, "Docker's repository (apt URI / dnf baseurl) or a mirror of it",
        check_url_map(tuple(DOCKER_REPO_URL)), DOCKER_REPO_URL)
    docker_repo_gpgkey: dict[str, str] = _key(
        _DOCKER_MAP, "signing key of the Docker repository",
        check_url_map(tuple(DOCKER_REPO_GPGKEY)), DOCKER_REPO_GPGKEY)
    docker_version: str | None = _key(
        "str or null", "exact Docker Engine version, like \"27.5.1\" (docker-ce and "
        "docker-ce-cli, or docker.io with docker_source: distro), pinned like the toolkit; "
        "null: the repository's newest", _check_docker_version, None)
    docker_local_packages: tuple[str, ...] = _key(
        "list of paths", "controller paths of Docker packages (with docker_source: local)",
        _path_list, ())
    docker_replace_conflicting: bool = _key(
        "bool", "apt hosts, docker_source: docker: remove the packages Docker's guide lists as "
        "conflicting (docker.io, docker-compose, docker-compose-v2, docker-doc, podman-docker, "
        "containerd, runc) before installing Docker's; on EL the same as docker_replace_podman "
        "(either one true allows); false: such a host stops, packages named",
        check_bool, False)
    container_toolkit_version: str = _key(
        "str", "version of the four NVIDIA Container Toolkit packages (the toolkit GPU Operator "
        "26.7 ships; 1.19.1 and 1.18.2 are still chosen per host or group; the audit judges "
        "every host against this version, the default included)",
        check_version(TOOLKIT_RE, "1.18.2", "a toolkit version"), TOOLKIT_DEFAULT)
    container_toolkit_source: str = _key(
        "str", "NVIDIA's repository, a mirror of it (container_toolkit_repo_url) or local files",
        check_choice("nvidia", "mirror", "local"), "nvidia")
    container_toolkit_repo_url: dict[str, str] = _key(
        _TOOLKIT_MAP, "toolkit repository (apt URI / dnf baseurl)",
        check_url_map(tuple(TOOLKIT_REPO_URL)), TOOLKIT_REPO_URL)
    container_toolkit_gpgkey: dict[str, str] = _key(
        _TOOLKIT_MAP, "signing key of the toolkit repository",
        check_url_map(tuple(TOOLKIT_GPGKEY)), TOOLKIT_GPGKEY)
    container_toolkit_local_packages: tuple[str, ...] = _key(
        "list of paths", "controller paths of the toolkit packages "
        "(with container_toolkit_source: local)", _path_list, ())
    docker_daemon_settings: dict[str, Any] = _key(
        "dict", "extra /etc/docker/daemon.json keys merged in", check_daemon_settings, {})
    docker_daemon_allow_unknown_keys: bool = _key(
        "bool", "let docker_daemon_settings set keys gpuhost's table of Docker's options "
        "does not know (a typo makes dockerd refuse to start)", check_bool, False)
    docker_restart_running_containers: str = _key(
        "str", "a Docker restart with containers running and live-restore off: \"warn\" "
        "(a warning line, then restart) or \"refuse\" (fail the host, change nothing)",
        check_choice("warn", "refuse"), "warn")
    nvidia_default_runtime: bool = _key(
        "bool", "make nvidia Docker's default runtime", check_bool, False)
    container_runtime_mode: str = _key(
        "str", "legacy: the nvidia runtime entry in daemon.json (as before); cdi: that entry "
        "plus Docker's CDI (\"features\": {\"cdi\": true}) and a fresh NVIDIA CDI spec "
        "(docker run --device nvidia.com/gpu=all; Docker 25+); auto: cdi when the toolkit is "
        "1.18+ and Docker 25+, or where Docker sends --gpus through CDI (29.2+), else legacy "
        "(docs/container-runtime.md)",
        check_choice("legacy", "cdi", "auto"), "legacy")
    containerd_nvidia_runtime: bool = _key(
        "bool", "Kubernetes nodes: give containerd's CRI plugin the nvidia runtime through "
        "/etc/containerd/conf.d/99-nvidia.toml (config.toml is never rewritten: it must import "
        "that directory; docs/containerd.md)", check_bool, False)
    containerd_nvidia_default_runtime: bool = _key(
        "bool", "with containerd_nvidia_runtime: make nvidia the CRI plugin's default runtime "
        "(else pods pick it with a RuntimeClass whose handler is nvidia)", check_bool, False)
    kubernetes_profile: str = _key(
        "str", kubernetes.MEANING, check_choice(*kubernetes.PROFILES), "none")
    reboot_policy: str = _key(
        "str", "may gpuhost reboot the host", check_choice("never", "when_needed"), "never")
    reboot_timeout: int = _key(
        "int (seconds)", "how long a reboot may take until SSH answers again (install, "
        "upgrade, a MIG mode change); HGX/DGX servers often need more than 10 minutes to POST",
        _check_reboot_timeout, 1800)
    http_proxy: str | None = _key(
        "URL or null", "proxy for controller downloads and host package managers",
        lambda k, v: check_url(k, v, nullable=True, schemes=("http", "https")), None)
    offline: bool = _key(
        "bool", "no internet: every source must be a local path, a file:// URL or a URL under "
        "offline_mirror_urls", check_bool, False)
    offline_mirror_urls: tuple[str, ...] = _key(
        "list of URLs", "base URLs of the local mirror(s) that count as reachable when offline",
        _url_list, ())
    full_check: bool = _key(
        "bool", "walk every role even when the host is unchanged since gpuhost's last "
        "successful run (false: such a host costs one read; docs/converged.md)", check_bool, False)
    lock_wait: int = _key("int (seconds)", "how long a run waits for another gpuhost run's lock on "
                          "a host before it stops that host, changing nothing (docs/locking.md)",
                          check_seconds(0, 14400), 300)
    lock_lease: int = _key("int (seconds)", "a run's lock on a host expires this long after the "
                           "run took or renewed it; an expired lock is taken over (docs/locking.md)",
                           check_seconds(300, 86400), 3600)
    lock_break: bool = _key("bool", "take over another (dead) run's lock on the host by hand "
                            "(`gpuhost upgrade`/`recover --break-lock`)", check_bool, False)
    verify_image: str | None = _key(
        "str or null", "image for `docker run --gpus all IMAGE nvidia-smi -L` (and, in "
        "container_runtime_mode cdi, `--device nvidia.com/gpu=all`) (null: skip the check)", check_image, None)
    verify_image_archive: str | None = _key(
        "path or null", "controller path of a `docker save` archive holding verify_image, "
        "loaded with `docker load -i` when the image is missing on the host",
        lambda k, v: check_path(k, v, nullable=True), None)
    mig_mode: str | None = _key(
        "str or null", "desired MIG mode (null: leave as is)",
        check_choice("enabled", "disabled", nullable=True), None)
    mig_layout: tuple[str | int, ...] | None = _key(
        "list or null", "GPU instances to create on every GPU, profile names or ids, like "
        "[\"3g.20gb\", \"3g.20gb\"] or [\"1g.24gb+gfx\", \"2g.48gb\"] (mig-parted's names, "
        "attribute profiles included; checked against the GPU model's table; null: leave as is)",
        check_mig_layout, None)
    mig_config_file: str | None = _key(
        "path or null", "controller path of a MIG configuration file in NVIDIA mig-parted's "
        "format (version: v1, mig-configs: {NAME: [{devices, device-filter, mig-enabled, "
        "mig-devices}]}); docs/mig.md", lambda k, v: check_path(k, v, nullable=True), None)
    mig_config: str | None = _key(
        "str or null", "name of the configuration in mig_config_file this host gets (null: "
        "none; not together with mig_mode/mig_layout)", _check_mig_config_name, None)
    upgrade_allow_downgrade: bool = _key(
        "bool", "allow moving to an older driver", check_bool, False)
    upgrade_force: bool = _key(
        "bool", "upgrade even when GPU processes are running", check_bool, False)
    upgrade_drain_command: str | None = _key(
        "str or null", "controller command run before a host's driver upgrade or GPU recovery "
        "(gpuhost recover); {host} is replaced by the shell-quoted host name", check_command, None)
    upgrade_uncordon_command: str | None = _key(
        "str or null", "controller command run after a host's driver upgrade or GPU recovery; "
        "{host} as above",
        check_command, None)
    slurm: bool | str = _key(
        "auto, true or false", "drain the host's Slurm node (scontrol update state=drain, with "
        "a reason, on the host) before a driver upgrade or GPU recovery, wait for its jobs, and "
        "resume it only after the health gate passed; a node someone else drained stays "
        "drained; auto: when slurmd is installed and enabled (docs/slurm.md)",
        slurm.check_setting, "auto")
    slurm_drain_timeout: int = _key(
        "int (seconds)", "how long the Slurm drain waits for the node's running jobs to end "
        "before it fails the host (nothing else changed)", _check_reboot_timeout, 3600)
    upgrade_stop_services: tuple[str, ...] = _key(
        "list of names", "extra services stopped before an upgrade",
        check_list_of(check_service, "service names"), ())
    el_enable_repos: tuple[str, ...] | None = _key(
        "list of repo ids or null", "Enterprise Linux: dnf repositories enabled before the "
        "driver (null: the distribution's CodeReady Builder and EPEL as its vendor names "
        "them: Oracle Linux olN_codeready_builder and olN_developer_EPEL (OL10: "
        "ol10_uU_developer_EPEL of the host's update level) from oracle-epel-release-elN; "
        "Rocky/Alma crb (8: powertools) and epel from epel-release; RHEL "
        "codeready-builder-for-rhel-N-ARCH-rpms through subscription-manager and epel from "
        "Fedora's epel-release-latest-N; nothing when el_repo_urls is set; []: enable "
        "nothing, e.g. offline mirrors); docs/real-hosts.md has the sources",
        lambda k, v: [] if v is None else _repo_ids(k, v), None)
    el_repo_urls: dict[str, dict[str, str]] | None = _key(
        "mapping or null", "Enterprise Linux: repositories given by URL (a Satellite, Pulp "
        "or local mirror of CodeReady Builder and EPEL): {repo id: {\"baseurl\": URL, "
        "\"gpgkey\": URL}}, written enabled with gpgcheck=1 to "
        "/etc/yum.repos.d/gpuhost-mirrors.repo; with it gpuhost enables no vendor "
        "repository itself and a RHEL host need not be registered", _repo_urls, None)
    debian_enable_contrib: bool = _key(
        "bool", "Debian (12, 13): add Debian's contrib component, which NVIDIA's Debian packages "
        "need, for the suites the host's own sources use, in gpuhost's own "
        "/etc/apt/sources.list.d/gpuhost-debian-contrib.sources (false: leave the sources "
        "alone, e.g. mirrors that carry contrib under other names, and remove that file)",
        check_bool, True)
    docker_replace_podman: bool = _key(
        "bool", "EL: remove podman, buildah, runc, containers-common before installing "
        "Docker (false: stop the host and name them); on apt hosts the same as "
        "docker_replace_conflicting (either one true allows)", check_bool, False)
    nvidia_module_signing_key: str | None = _key(
        "path or null", "Secure Boot hosts: controller path of the private key DKMS signs the "
        "NVIDIA module with (sent mode 0600, never on a command line); its certificate must be "
        "enrolled on the host (`mokutil --list-enrolled`)",
        lambda k, v: check_path(k, v, nullable=True), None)
    nvidia_module_signing_cert: str | None = _key(
        "path or null", "Secure Boot hosts: controller path of that key's X.509 certificate "
        "(DER or PEM), the MOK enrolled on the host",
        lambda k, v: check_path(k, v, nullable=True), None)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __repr__(self) -> str:  # URL credentials masked
        return "Settings(" + ", ".join(f"{f.name}={masked(getattr(self, f.name))!r}"
                                       for f in dataclasses.fields(self)) + ")"


# --- the key table, derived from the model ---------------------------------------------

@dataclass(frozen=True)
class Setting:
    name: str
    type: str
    default: Any
    meaning: str
    check: Check
    required: bool = False

    @property
    def allowed(self) -> tuple | None:
        return getattr(self.check, "allowed", None)


def _setting(f: dataclasses.Field) -> Setting:
    required = f.default is MISSING and f.default_factory is MISSING
    default = None if required else f.default if f.default is not MISSING else f.default_factory()
    return Setting(f.name, f.metadata["type"], default, f.metadata["meaning"], f.metadata["check"],
                   required)


SETTINGS: tuple[Setting, ...] = tuple(_setting(f) for f in dataclasses.fields(Settings))
BY_NAME = {s.name: s for s in SETTINGS}


def defaults() -> dict:
    """Defaults of every key that has one (required keys have none), as plain data (lists,
    dicts): what ``inventories/group_data/all.py`` gives pyinfra."""
    return {s.name: json.loads(json.dumps(s.default)) for s in SETTINGS if not s.required}
