"""CDI (Container Device Interface) specs of the NVIDIA GPUs, and the container runtime mode (pure).

What NVIDIA Container Toolkit's ``nvidia-ctk cdi generate`` writes (kind ``nvidia.com/gpu``;
docs/container-runtime.md has the sources): one device per GPU under its index (``"0"``)
and its UUID (``"GPU-..."``), one per MIG device as ``"<gpu index>:<mig device index>"`` and
its UUID (``"MIG-..."``), and ``"all"``; the container edits mount the driver's libraries
under their versioned names (``libnvidia-ml.so.570.172.08``). A spec is *fresh* when its
device names are exactly the host's GPUs and MIG devices now and its libraries carry the
loaded driver's version; otherwise it is *stale* (written before a driver upgrade or a MIG
change): Docker would refuse ``--device nvidia.com/gpu=1:0`` for a MIG device that is not
in it, or mount libraries that are gone.

The runtime mode (setting ``container_runtime_mode``):

- ``legacy``: the ``nvidia`` runtime entry in daemon.json (``--runtime=nvidia``, ``--gpus``);
  no CDI spec is required;
- ``cdi``: the same runtime entry, plus Docker's CDI support (``"features": {"cdi": true}``
  in daemon.json) and a fresh spec, so that ``docker run --device nvidia.com/gpu=all`` works;
- ``auto``: ``cdi`` when the toolkit is 1.18 or newer (it generates and refreshes the spec
  itself: ``nvidia-cdi-refresh``) and Docker is 25.0 or newer (the first Docker with CDI
  devices), or when the host's Docker sends ``--gpus`` through CDI anyway (below); else
  ``legacy``.

Where ``docker run --gpus`` goes (``gpus_route``, table ``data/docker_gpus_cdi.json``): from
Docker 29.2 dockerd tries CDI first for NVIDIA devices when ``nvidia-cdi-hook`` (toolkit 1.16+)
is installed and Docker's CDI is on (the default from 28.2), and uses the prestart hook only
when CDI injection fails. On such a host a stale spec that still resolves reaches every
``--gpus`` container, whatever gpuhost's mode: that makes it critical (gpuhost.health).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

# the spec schema against the engines (toolkit 1.19.1+ writes 0.7.0): gpuhost.runtime.cdi_schema
from gpuhost.runtime.cdi_schema import (  # noqa: F401 (re-exported: callers use cdi.*)
    DOCKER_CDI,
    SCHEMA_0_7_NEEDS,
    TOOLKIT_SCHEMA_0_7,
    docker_lacks_cdi,
    docker_without_cdi,
    runtime_too_old_for_schema,
    schema_refusal,
    version_tuple,
)

KIND = "nvidia.com/gpu"
MODES = ("legacy", "cdi", "auto")
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
DEFAULT_OUTPUT = "/var/run/cdi/nvidia.yaml"  # nvidia-cdi-refresh.service's output (1.18)
# The first toolkit whose packages ship and enable nvidia-cdi-refresh.{path,service} and whose
# nvidia runtime resolves mode "auto" to jit-cdi (CHANGELOG v1.18.0-rc.1, packaging @v1.18.2).
TOOLKIT_CDI = (1, 18, 0)
DOCKER_CDI_DEFAULT = (28, 2, 0)

# gpuhost's unit that writes the spec at every boot before the container engines start
# (docs/container-runtime.md, "At boot"): NVIDIA's nvidia-cdi-refresh.service is not
# ordered before Docker (v1.18.2, v1.19.1) and in v1.19.0 even after multi-user.target, so a
# container Docker restarts at boot can find no spec; ordering Docker after NVIDIA's unit
# forms a cycle with v1.19.0 (toolkit issue #1735). This unit has no such ordering.
BOOT_UNIT = "gpuhost-cdi-spec.service"
BOOT_UNIT_PATH = f"/etc/systemd/system/{BOOT_UNIT}"


def boot_unit_text(output: str) -> str:
    """The unit file: ``nvidia-smi -L`` first (it creates the device nodes the generator
    looks for, as NVIDIA's later refresh unit does), then ``nvidia-ctk cdi generate`` to
    ``output``; after the driver's own services and gpuhost's MIG unit (the MIG devices are
    in the spec), before Docker, containerd and kubelet; bounded, so an engine never waits long."""
    return f"""[Unit]
Description=gpuhost: the NVIDIA CDI spec for this boot, before the container engines start
ConditionPathExists=/usr/bin/nvidia-ctk
After=systemd-modules-load.service nvidia-persistenced.service nvidia-fabricmanager.service gpuhost-mig-layout.service
Before=docker.service containerd.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutStartSec=120
ExecStartPre=-/usr/bin/nvidia-smi -L
ExecStart=/usr/bin/nvidia-ctk cdi generate --output={output}

[Install]
WantedBy=multi-user.target
"""


def parse_boot_unit(rc: int, text: str) -> dict[str, Any] | None:
    """The ``cdi_boot_unit`` section: None when gpuhost's unit file is absent (exit 3), else
    {"sha256": hex or None, "enabled": bool}."""
    if rc != 0:
        return None
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    digest = next((line.split()[0] for line in lines
                   if re.fullmatch(r"[0-9a-f]{64}(\s+\S.*)?", line)), None)
    return {"sha256": digest, "enabled": "enabled" in lines}


# NVIDIA's refresh unit (toolkit 1.18+). From 1.19.1 it runs `nvidia-smi -L` first, 5 starts in
# 10 s: started before the driver is active it stays failed (Azure/aks-gpu PR #175).
REFRESH_UNIT = "nvidia-cdi-refresh.service"


def parse_refresh_unit(rc: int, text: str) -> dict[str, Any] | None:
    """The ``cdi_refresh_unit`` section (``systemctl show``): None when the host has no such
    unit (or no systemctl), else {"active", "sub", "result", "failed"}."""
    if rc != 0:
        return None
    fields = dict(line.strip().split("=", 1) for line in (text or "").splitlines()
                  if "=" in line)
    if fields.get("LoadState") != "loaded":
        return None
    active = fields.get("ActiveState") or "unknown"
    return {"active": active, "sub": fields.get("SubState") or "unknown",
            "result": fields.get("Result") or "unknown", "failed": active == "failed"}


def refresh_unit_failed(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """NVIDIA's refresh unit when it is left failed, else None."""
    unit = (state.get("cdi") or {}).get("refresh_unit")
    return unit if isinstance(unit, Mapping) and unit.get("failed") else None


# a driver library's versioned name: libnvidia-ml.so.570.172.08, libcuda.so.550.54.15
_DRIVER_LIB = re.compile(r"/lib[\w.+-]*\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


def resolve_mode(setting: str, toolkit_version: str | None, docker_version: str | None,
                 cdi_feature: bool | None = None) -> str:
    """The mode a host runs: ``legacy`` or ``cdi`` (``auto`` resolved by the rule above:
    also ``cdi`` where Docker sends ``--gpus`` through CDI, so the spec is kept fresh and
    written at boot).

    An unknown version (Docker not installed yet and not pinned) resolves ``auto`` to
    ``legacy``: never a surprise change on a host gpuhost cannot read."""
    if setting != "auto":
        return setting
    toolkit, docker = version_tuple(toolkit_version), version_tuple(docker_version)
    if toolkit and docker and toolkit >= TOOLKIT_CDI and docker >= DOCKER_CDI and not \
            runtime_too_old_for_schema("Docker", toolkit_version, docker_version):
        return "cdi"
    if gpus_route(docker_version, toolkit_version, cdi_feature)["via"] == "cdi":
        return "cdi"
    return "legacy"


GPUS_TABLE = json.loads(resources.files("gpuhost").joinpath("data", "docker_gpus_cdi.json")
                        .read_text())
ESCAPE_HATCH = GPUS_TABLE["escape_hatch"]


def gpus_route(docker_version: str | None, toolkit_version: str | None,
               cdi_feature: bool | None = None) -> dict[str, Any]:
    """Where this host's ``docker run --gpus`` goes, by the release table.

    .. code:: python

        {"via": "cdi" | "runtime-hook" | None,   # None: Docker's version unknown
         "why": "Docker 29.4.0 tries CDI first for --gpus (moby/moby#50228) ..."}

    + docker_version: the running daemon's version (``29.4.0``, ``28.5.2+dfsg4``)
    + toolkit_version: the installed toolkit (``nvidia-cdi-hook`` from 1.16.0), None: none
    + cdi_feature: ``features.cdi`` of daemon.json, None when unset
    """
    docker = version_tuple(docker_version)
    if docker is None:
        return {"via": None, "why": "Docker's version is not known (not running)"}
    row = None
    for release in GPUS_TABLE["releases"]:  # an "assumed" row repeats the last one read
        if docker >= version_tuple(release["from"]) and not release.get("assumed"):
            row = release
    if row is None or row["gpus"] != "cdi-first":
        return {"via": "runtime-hook", "why": f"Docker {docker_version} hands --gpus to the "
                "NVIDIA prestart hook (nvidia-container-runtime-hook)"}
    toolkit = version_tuple(toolkit_version)
    hook_from = version_tuple(GPUS_TABLE["nvidia_cdi_hook_toolkit_from"])
    if toolkit is None or toolkit < hook_from:
        return {"via": "runtime-hook", "why": f"Docker {docker_version} would try CDI first, but "
                f"no nvidia-cdi-hook is installed (toolkit {toolkit_version or 'absent'}; it "
                f"ships from {GPUS_TABLE['nvidia_cdi_hook_toolkit_from']})"}
    default_on = docker >= version_tuple(GPUS_TABLE["cdi_default_on_from"])
    if cdi_feature is False or (cdi_feature is None and not default_on):
        return {"via": "runtime-hook", "why": f"Docker {docker_version}'s CDI is off "
                "(features.cdi), so --gpus falls back to the prestart hook"}
    return {"via": "cdi", "why": f"Docker {docker_version} with nvidia-cdi-hook (toolkit "
            f"{toolkit_version}) sends --gpus through the CDI spec first (from Docker "
            f"{'.'.join(row['from'].split('.')[:2])}, moby/moby#50228; checked through "
            f"{GPUS_TABLE['checked_through']})"}


def gpus_route_assumed(docker_version: str | None) -> str | None:
    """Why this Docker's ``--gpus`` route is assumed, not read: a release past the table's
    ``checked_through`` (a row marked "assumed", or one the table does not know) follows the
    newest row. None when the route was read (or Docker's version is unknown)."""
    docker = version_tuple(docker_version)
    checked = GPUS_TABLE["checked_through"]
    if docker is None or docker <= version_tuple(checked):
        return None
    newest = GPUS_TABLE["releases"][-1]
    read = [r for r in GPUS_TABLE["releases"] if not r.get("assumed")][-1]
    known = "a release gpuhost knows exists" if docker[:2] <= version_tuple(newest["from"])[:2] \
        else "newer than every release gpuhost's table knows"
    return (f"Docker {docker_version} is {known}, but its --gpus code was not read (read "
            f"through {checked}): gpuhost assumes it routes --gpus as {checked} does "
            f"({read['gpus']}, from {read['from']}) and judges the CDI spec by that")


def state_cdi_feature(state: Mapping[str, Any]) -> bool | None:
    """``features.cdi`` of the host's daemon.json (None: not set)."""
    docker = state.get("docker") or {}
    config = docker.get("config") if isinstance(docker.get("config"), Mapping) else {}
    features = config.get("features") if isinstance(config.get("features"), Mapping) else {}
    return features.get("cdi") if isinstance(features.get("cdi"), bool) else None


def state_gpus_route(state: Mapping[str, Any]) -> dict[str, Any]:
    """``gpus_route`` of a host state (facts.host.GpuHostState)."""
    return gpus_route((state.get("docker") or {}).get("docker_version"),
                      (state.get("toolkit") or {}).get("version"), state_cdi_feature(state))


# --- the specs ------------------------------------------------------------------------------

def split_files(text: str) -> list[tuple[str, str]]:
    """The ``cdi_specs`` section's output (``==> PATH`` before each file) as (path, text)."""
    files: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("==> ") and line.rstrip().endswith(" <=="):
            files.append((line[4:].rstrip()[:-4].strip(), []))
        elif files:
            files[-1][1].append(line)
    return [(path, "\n".join(lines)) for path, lines in files]


def _mount_paths(edits: Any) -> list[str]:
    if not isinstance(edits, Mapping):
        return []
    out = []
    for mount in edits.get("mounts") or []:
        if isinstance(mount, Mapping) and isinstance(mount.get("hostPath"), str):
            out.append(mount["hostPath"])
    return out


def parse_spec(path: str, text: str) -> dict[str, Any]:
    """One CDI spec file (YAML or JSON).

    .. code:: python

        {"path": "/var/run/cdi/nvidia.yaml", "kind": "nvidia.com/gpu" | None,
         "cdi_version": "0.5.0" | None, "devices": ["0", "GPU-...", "all"],
         "driver_versions": ["570.172.08"],   # from the versioned library names
         "error": None | "why it could not be read"}
    """
    import yaml

    out: dict[str, Any] = {"path": path, "kind": None, "cdi_version": None, "devices": [],
                           "driver_versions": [], "error": None}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        out["error"] = f"not valid YAML/JSON: {str(error).splitlines()[0]}"
        return out
    if not isinstance(data, Mapping):
        out["error"] = "not a CDI spec (no mapping at the top)"
        return out
    out["kind"] = data.get("kind") if isinstance(data.get("kind"), str) else None
    version = data.get("cdiVersion")
    out["cdi_version"] = str(version) if version is not None else None
    mounts = _mount_paths(data.get("containerEdits"))
    for device in data.get("devices") or []:
        if isinstance(device, Mapping) and device.get("name") is not None:
            out["devices"].append(str(device["name"]))
            mounts += _mount_paths(device.get("containerEdits"))
    versions = {m.group(1) for m in (_DRIVER_LIB.search(p) for p in mounts) if m}
    out["driver_versions"] = sorted(versions)
    return out


def parse_specs(text: str) -> list[dict[str, Any]]:
    return [parse_spec(path, body) for path, body in split_files(text)]


def host_devices(state: Mapping[str, Any]) -> list[str] | None:
    """The device names a fresh spec of this host has (sorted), or None when nvidia-smi gave
    no answer (no driver loaded): then freshness cannot be judged."""
    gpus = [g for g in state.get("gpus") or [] if g.get("source") == "nvidia-smi"
            and g.get("index") is not None]
    if not gpus:
        return None
    names = {"all"}
    for gpu in gpus:
        names.add(str(gpu["index"]))
        if gpu.get("uuid"):
            names.add(str(gpu["uuid"]))
    for gpu in (state.get("mig") or {}).get("gpus") or []:
        if gpu.get("mode_current") != "enabled":
            continue
        for device in gpu.get("devices") or []:
            if device.get("device") is not None:
                names.add(f"{gpu['index']}:{device['device']}")
            if device.get("uuid"):
                names.add(str(device["uuid"]))
    return sorted(names, key=_name_order)


def _name_order(name: str) -> tuple:
    parts = name.split(":")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), name)
    return (1 if name != "all" else 2, (), name)


def spec_problems(spec: Mapping[str, Any], devices: list[str],
                  loaded_version: str | None) -> list[str]:
    """Why one nvidia.com/gpu spec is stale (empty: fresh)."""
    if spec.get("error"):
        return [spec["error"]]
    problems = []
    have = set(spec["devices"])
    extra = sorted(have - set(devices), key=_name_order)
    missing = sorted(set(devices) - have, key=_name_order)
    if extra:
        problems.append(f"names device(s) the host does not have: {', '.join(extra)}")
    if missing:
        problems.append(f"lacks device(s) the host has: {', '.join(missing)}")
    if loaded_version:
        other = [v for v in spec["driver_versions"] if v != loaded_version]
        if other:
            problems.append(f"its libraries are driver {', '.join(other)}, the loaded driver is "
                            f"{loaded_version}")
        elif not spec["driver_versions"]:
            problems.append(f"mounts no library of the loaded driver {loaded_version}")
    return problems


def judge(state: Mapping[str, Any]) -> dict[str, Any]:
    """The host's NVIDIA CDI spec(s) against its GPUs, MIG devices and loaded driver.

    .. code:: python

        {"status": "fresh" | "stale" | "missing" | "unknown" | "unread",
         "specs": ["/var/run/cdi/nvidia.yaml"],       # the nvidia.com/gpu spec files
         "problems": ["/var/run/cdi/nvidia.yaml: lacks device(s) the host has: 0:1"],
         "devices": ["0", "0:0", ..., "all"] | None}   # what a fresh spec names

    ``unknown``: nvidia-smi gave no answer (no driver loaded); ``unread``: a state without
    the ``cdi`` fact (read by a gpuhost before issue 16).
    """
    cdi = state.get("cdi")
    if not isinstance(cdi, Mapping):
        return {"status": "unread", "specs": [], "problems": [], "devices": None}
    specs = [s for s in cdi.get("specs") or [] if s.get("kind") == KIND or s.get("error")]
    devices = host_devices(state)
    paths = [s["path"] for s in specs]
    if not specs:
        return {"status": "missing", "specs": [], "problems": [], "devices": devices}
    if devices is None:
        return {"status": "unknown", "specs": paths, "problems": [], "devices": None}
    loaded = (state.get("driver") or {}).get("loaded_version")
    problems = [f"{s['path']}: {p}" for s in specs for p in spec_problems(s, devices, loaded)]
    return {"status": "stale" if problems else "fresh", "specs": paths, "problems": problems,
            "devices": devices}
