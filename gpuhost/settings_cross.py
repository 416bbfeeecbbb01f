"""The checks of settings against each other (``cross_checks``: run by
``gpuhost.settings.validate`` on the values that passed their own check): sources and their
pins, MIG forms, the local repo's file name, the flavour a branch has, offline sources."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuhost import fabric, kubernetes, rdma
from gpuhost.distro import DISTRO_TAGS
from gpuhost.checks import is_local_source, mask_url, on_mirror, show
from gpuhost.settings_keys import TOOLKIT_REPO_URL


def _flavor_problems(v: dict) -> list[str]:
    """A flavour the driver branch does not have at all (known before any host is read)."""
    from gpuhost.driver_rules import PROPRIETARY_REMOVED_BRANCH

    version = v["nvidia_driver_version"]
    if v["nvidia_driver_flavor"] != "proprietary" or not version:
        return []
    branch = int(str(version).split(".", 1)[0])
    if branch < PROPRIETARY_REMOVED_BRANCH:
        return []
    return [f"nvidia_driver_flavor: proprietary, but driver {version} has no proprietary "
            f"kernel modules (NVIDIA removed them in R{PROPRIETARY_REMOVED_BRANCH}): set "
            "nvidia_driver_flavor to open or auto, or a driver branch below "
            f"{PROPRIETARY_REMOVED_BRANCH} (R580 for pre-Turing GPUs)"]


def _driver_source_problems(v: dict) -> list[str]:
    """A driver source without its setting (which hosts need which is known per host)."""
    local, network = v["nvidia_local_repo"] or {}, v["nvidia_driver_repo"] or {}
    if v["nvidia_driver_source"] == "network" and not network:
        return ["nvidia_driver_repo: empty, but nvidia_driver_source is network (give "
                "{tag: {url, key, fingerprint}} of NVIDIA's network repository or your mirror)"]
    if v["nvidia_driver_source"] == "local_repo" and not local:
        return ["nvidia_local_repo: empty, but nvidia_driver_source is local_repo"]
    if not local and not network and v["nvidia_kernel_modules"] != "distribution":
        return [NO_DRIVER_SOURCE]
    return []


# The first run of a new inventory meets this line: it says what to set, both ways.
NO_DRIVER_SOURCE = (
    "nvidia_local_repo: not set (nor nvidia_driver_repo), so gpuhost has no NVIDIA driver to "
    "install: set nvidia_local_repo to {TAG: {\"url\" (or \"path\" on the controller): NVIDIA's "
    "local repo package, \"sha256\": its sha256sum}} for each distribution you run (TAG: "
    + ", ".join(DISTRO_TAGS) + "), or nvidia_driver_repo to NVIDIA's network repository or "
    "your mirror ({TAG: {\"url\", \"key\", \"fingerprint\"}})")


def cross_checks(v: dict) -> list[str]:
    problems = []
    if v["docker_source"] == "local" and not v["docker_local_packages"]:
        problems.append("docker_local_packages: empty, but docker_source is local (list the package files)")
    if v["docker_version"] is not None and v["docker_source"] in ("local", "none"):
        problems.append(f"docker_version: set, but docker_source is {v['docker_source']} (gpuhost "
                        "installs no Docker package to pin: remove docker_version)")
    if v["container_toolkit_source"] == "local" and not v["container_toolkit_local_packages"]:
        problems.append("container_toolkit_local_packages: empty, but container_toolkit_source is local")
    if v["container_toolkit_source"] == "mirror" and v["container_toolkit_repo_url"] == TOOLKIT_REPO_URL:
        problems.append("container_toolkit_repo_url: is NVIDIA's, but container_toolkit_source is mirror "
                        "(set it to your mirror's URL)")
    if v["mig_layout"] is not None and v["mig_mode"] != "enabled":
        problems.append("mig_layout: set, but mig_mode is not \"enabled\" (set mig_mode: enabled)")
    if v["containerd_nvidia_default_runtime"] and not v["containerd_nvidia_runtime"]:
        problems.append("containerd_nvidia_default_runtime: true without containerd_nvidia_runtime "
                        "(set containerd_nvidia_runtime: true)")
    problems += rdma.settings_problems(v["nvidia_gpudirect_rdma"], v["nvidia_driver_flavor"])
    problems += fabric.settings_problems(v["nvidia_fabric"], bool(v["nvidia_fabricmanager"]),
                                         v["nvidia_imex_peers"] or ())
    problems += kubernetes.settings_problems(v)
    problems += _mig_config_problems(v)
    problems += _local_repo_version_problems(v)
    problems += _driver_source_problems(v)
    problems += _flavor_problems(v)
    if v["nvidia_kernel_modules"] == "distribution" and v["nvidia_driver_flavor"] == "proprietary":
        problems.append("nvidia_kernel_modules: distribution installs the distribution's open "
                        "signed modules (-server-open): set nvidia_driver_flavor to open or auto")
    if v["verify_image_archive"] is not None and v["verify_image"] is None:
        problems.append("verify_image_archive: set without verify_image (name the image it holds)")
    if (v["nvidia_module_signing_key"] is None) != (v["nvidia_module_signing_cert"] is None):
        problems.append("nvidia_module_signing_key/nvidia_module_signing_cert: set both (the "
                        "private key and its enrolled certificate) or neither")
    if v["offline"]:
        problems += _offline_problems(v)
    if isinstance(v["docker_daemon_settings"], Mapping) and not v["docker_daemon_allow_unknown_keys"]:
        from gpuhost.runtime.daemon_json import OPTION_TYPES, option_problems

        problems += [f"docker_daemon_settings: {p}" for p in option_problems(
            {k: x for k, x in v["docker_daemon_settings"].items() if k not in OPTION_TYPES})]
    return problems


# NVIDIA's local repo file names: nvidia-driver-local-repo-<distro>-<version>_1.0-1_amd64.deb,
# nvidia-driver-local-repo-<distro>-<version>-1.0-1.x86_64.rpm (docs/real-hosts.md)
LOCAL_REPO_NAME_RE = re.compile(
    r"^nvidia-driver-local-repo-(?P<distro>[a-z]+[0-9]+)-(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)[_-]")


def _local_repo_name(src) -> re.Match | None:
    where = src.get("url") or src.get("path") if isinstance(src, Mapping) else None
    if not isinstance(where, str):
        return None
    return LOCAL_REPO_NAME_RE.match(where.rstrip("/").rsplit("/", 1)[-1])


def _local_repo_version_problems(v: dict) -> list[str]:
    """A local repo package named as NVIDIA names them must be the one of its distro tag
    (checked on the file name, before any host is contacted; a file named otherwise is checked
    by its header once fetched). Its driver version is checked per host, on the entry of the
    host's own distro tag only (``local_repo_version_problem``): a host with its own
    ``nvidia_driver_version`` does not use the other distributions' entries."""
    problems = []
    for tag, src in sorted((v["nvidia_local_repo"] or {}).items()):
        m = _local_repo_name(src)
        if m and m.group("distro") != tag:
            problems.append(f"nvidia_local_repo[{tag}]: {m.group(0).rstrip('_-')} is NVIDIA's "
                            f"package for {m.group('distro')}, not {tag}")
    return problems


def takes_local_repo(driver_source: str, tag: str) -> bool:
    """Does a host of ``tag`` take its driver from the local repo package with
    ``nvidia_driver_source`` ``driver_source``? (auto: where NVIDIA publishes one.)"""
    from gpuhost import aptdistros

    if driver_source != "auto":
        return driver_source == "local_repo"
    release = aptdistros.RELEASES.get(tag)
    return release is None or release.local_repo


def local_repo_version_problem(local_repo: Mapping | None, tag: str, version: str | None,
                               driver_source: str = "auto") -> str | None:
    """One line when ``local_repo[tag]`` (``nvidia_local_repo``'s entry of the host's own
    distro tag) is named as NVIDIA's package of another driver than ``version``
    (``nvidia_driver_version``); None when it matches, is named otherwise, or the host takes
    its driver from a network repository (``driver_source``: ``nvidia_driver_source``)."""
    if not version or not takes_local_repo(driver_source or "auto", tag):
        return None
    m = _local_repo_name((local_repo or {}).get(tag))
    if not m or m.group("version") == version:
        return None
    return (f"nvidia_local_repo[{tag}]: {m.group(0).rstrip('_-')} is the local repo of driver "
            f"{m.group('version')}, but nvidia_driver_version is {version} (point "
            f"nvidia_local_repo[{tag}] at the {version} package and its sha256, or set "
            "nvidia_driver_version to match)")


def _mig_config_problems(v: dict) -> list[str]:
    """The named MIG configuration: one form per host, the file and the name checked on the
    controller (``gpuhost.mig.config.check``) before any host is contacted."""
    if v["mig_config"] is None:
        return []
    if v["mig_mode"] is not None or v["mig_layout"] is not None:
        return ["mig_config: set together with mig_mode/mig_layout; choose one form per host "
                "(mig_config: a layout per GPU from mig_config_file; mig_mode/mig_layout: one "
                "layout on every GPU)"]
    if v["mig_config_file"] is None:
        return ["mig_config: set, but mig_config_file is not (name the controller's "
                "mig-parted-style YAML file)"]
    from gpuhost.mig import config as mig_config

    return [p if p.startswith("mig_config_file") else f"mig_config: {p}"
            for p in mig_config.check(v["mig_config_file"], v["mig_config"])]


def _urls_in_use(v: dict) -> list[tuple[str, str]]:
    found = []
    for tag, src in (v["nvidia_local_repo"] or {}).items():
        if isinstance(src, Mapping) and isinstance(src.get("url"), str):
            found.append((f"nvidia_local_repo[{tag}].url", src["url"]))
    for tag, repo in (v["nvidia_driver_repo"] or {}).items():
        found += [(f"nvidia_driver_repo[{tag}].{part}", repo[part]) for part in ("url", "key")
                  if isinstance(repo, Mapping) and isinstance(repo.get(part), str)
                  and "://" in repo[part]]
    groups = []
    if v["docker_source"] == "docker":
        groups += ["docker_repo_url", "docker_repo_gpgkey"]
    if v["container_toolkit_source"] in ("nvidia", "mirror"):
        groups += ["container_toolkit_repo_url", "container_toolkit_gpgkey"]
    for key in groups:
        value = v[key]
        items = value.items() if isinstance(value, Mapping) else [(None, value)]
        found += [(key if k is None else f"{key}[{k}]", u) for k, u in items if isinstance(u, str)]
    return found


def _offline_problems(v: dict) -> list[str]:
    mirrors = v["offline_mirror_urls"]
    where = ("a URL under " + ", ".join(mask_url(m) for m in mirrors)) if mirrors else \
        "a URL under offline_mirror_urls (empty now)"
    bad: dict[str, list[str]] = {}
    for key, url in _urls_in_use(v):
        if not is_local_source(url) and not on_mirror(url, mirrors):
            group = key if key.startswith(("nvidia_local_repo", "nvidia_driver_repo")) \
                else key.split("[")[0]
            bad.setdefault(group, []).append(url)
    return [f"{key}: {', '.join(show(u) for u in urls)} not reachable offline (want a local path, "
            f"a file:// URL or {where})" for key, urls in bad.items()]
