"""The container facts (``facts.container``): Docker's daemon.json and daemon, containerd,
the NVIDIA Container Toolkit's packages and tools, the CDI specs. Pure, like
``facts.assemble``."""

from __future__ import annotations

import json
from typing import Any

from gpuhost.facts import parsers
from gpuhost.facts.sections import Sections, ok, packages, section, upstream_version
from gpuhost.el_packages import EL_CONTAINER_TOOLS

TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)


def _nvidia_runtime(config: dict[str, Any]) -> dict[str, Any]:
    runtimes = config.get("runtimes")
    entry = runtimes.get("nvidia") if isinstance(runtimes, dict) else None
    if not isinstance(entry, dict):
        return {"defined": False, "path": None, "style": None, "args": []}
    style = "runtimeArgs" if "runtimeArgs" in entry else "args" if "args" in entry else None
    args = entry.get("runtimeArgs", entry.get("args", [])) or []
    path = entry.get("path")
    return {
        "defined": isinstance(path, str) and path.rsplit("/", 1)[-1] == "nvidia-container-runtime",
        "path": path,
        "style": style,
        "args": args if isinstance(args, list) else [],
    }


def docker_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.container.DockerDaemonConfig``."""
    rc, text = section(sections, "daemon_json")
    exists = rc == 0
    config: dict[str, Any] = {}
    error = None
    if exists:
        try:
            config = parsers.parse_daemon_json(text)
        except ValueError as problem:
            error = str(problem)
    runtime = _nvidia_runtime(config)
    default_runtime = config.get("default-runtime") if isinstance(config, dict) else None
    dockerd_path = ok(sections, "docker_version")
    info_rc, info_out = section(sections, "docker_info")
    daemon: dict[str, Any] = {"running": False, "runtimes": [], "default_runtime": None}
    if info_rc == 0 and info_out.strip():
        runtimes_json, _, rest = info_out.strip().partition("\t")
        default, _, server_version = rest.partition("\t")
        try:
            runtimes = json.loads(runtimes_json) or {}
        except ValueError:
            runtimes = {}
        daemon = {
            "running": True,
            "runtimes": sorted(runtimes) if isinstance(runtimes, dict) else [],
            "default_runtime": default or None,
            "version": server_version or None,
        }
    return {
        "path": "/etc/docker/daemon.json",
        "exists": exists,
        "valid": error is None,
        "error": error,
        "config": config,
        "nvidia_runtime": runtime,
        "default_runtime": default_runtime,
        "nvidia_is_default": default_runtime == "nvidia" and runtime["defined"],
        "docker_installed": dockerd_path is not None,
        # EL container-tools that stop Docker's containerd.io (rpm hosts only)
        "el_container_tools": sorted(
            name for name in packages(sections)
            if name in EL_CONTAINER_TOOLS and ok(sections, "rpm") is not None),
        "docker_version": daemon.get("version"),
        "daemon": daemon,
    }


def containerd_state(sections: Sections) -> dict[str, Any]:
    """containerd's version, config.toml and gpuhost's drop-in (gpuhost.runtime.containerd)."""
    from gpuhost.runtime import containerd as containerd_config

    return containerd_config.parse_section(*section(sections, "containerd"))


def cdi_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.container.CdiSpecs``."""
    from gpuhost.runtime import cdi

    rc, text = section(sections, "cdi_specs")
    unit_rc, unit_text = section(sections, "cdi_boot_unit")
    podman = packages(sections).get("podman")  # it reads the specs itself (cdi_schema)
    return {"specs": cdi.parse_specs(text) if rc == 0 else [],
            "boot_unit": cdi.parse_boot_unit(unit_rc, unit_text),
            "refresh_unit": cdi.parse_refresh_unit(*section(sections, "cdi_refresh_unit")),
            "podman": upstream_version(podman["version"]) if podman else None}


def toolkit_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.container.ContainerToolkit``."""
    installed = packages(sections)
    versions = {
        name: upstream_version(installed[name]["version"]) if name in installed else None
        for name in TOOLKIT_PACKAGES
    }
    ctk_out = ok(sections, "nvidia_ctk")
    cli_out = ok(sections, "nvidia_container_cli")
    ctk = parsers.parse_tool_version(ctk_out) if ctk_out else None
    cli = parsers.parse_tool_version(cli_out) if cli_out else None
    seen = sorted({v for v in versions.values() if v} | {v for v in (ctk, cli) if v})
    any_installed = bool(seen)
    return {
        "installed": any_installed,
        "packages": versions,
        "nvidia_ctk": ctk,
        "nvidia_container_cli": cli,
        "version": seen[0] if len(seen) == 1 else None,
        "versions_seen": seen,
        "consistent": len(seen) <= 1 and (not any_installed or all(versions.values())),
        "held_packages": sorted(
            name for name in TOOLKIT_PACKAGES if installed.get(name, {}).get("held")
        ),
    }
