"""What ``gpuhost recover`` reads besides ``GpuHostState`` and ``UpgradeProbe``: one fact.

``RecoverProbe`` runs one read-only command: every running Docker container with the GPUs it
asked for (``docker inspect``: the runtime, ``HostConfig.DeviceRequests`` of ``--gpus`` and
of CDI ``--device nvidia.com/gpu=...``, and ``Config.Env`` for ``NVIDIA_VISIBLE_DEVICES``),
the recovery's resume point (``gpuhost.health.recover.MARKER``) and the saved result of the last
``nvidia-smi -r`` (``gpuhost.health.recover.RESULT``). Which container holds which GPU is decided
in ``gpuhost.health.recover.container_holds``.
"""

from __future__ import annotations

import json
from typing import Any

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.facts.upgrade import parse_marker
from gpuhost.health.recover import HANDLED, MARKER, RESULT, parse_result

_FIELDS = ("{{json .Id}} {{json .Name}} {{json .HostConfig.Runtime}} "
           "{{json .HostConfig.DeviceRequests}} {{json .Config.Env}}")
COMMAND = (
    "if command -v docker >/dev/null 2>&1 && ids=$(timeout 10 docker ps -q 2>/dev/null)"
    ' && [ -n "$ids" ]; then timeout 10 docker inspect --format'
    f" 'container {_FIELDS}' $ids 2>/dev/null; fi;"
    f" if [ -e {MARKER} ]; then printf 'marker '; head -c 65536 {MARKER} | tr -d '\\n'; echo; fi;"
    f" if [ -e {RESULT} ]; then head -c 8192 {RESULT} | sed 's/^/result /'; fi;"
    f" if [ -e {HANDLED} ]; then printf 'handled '; head -c 65536 {HANDLED} | tr -d '\n'; echo;"
    " fi;"
    " cat /proc/sys/kernel/random/boot_id 2>/dev/null | sed 's/^/boot /'; true"
)


def _container(text: str) -> dict[str, Any] | None:
    decoder, values, at = json.JSONDecoder(), [], 0
    try:
        while at < len(text) and len(values) < 5:
            while text[at] == " ":
                at += 1
            value, at = decoder.raw_decode(text, at)
            values.append(value)
    except (ValueError, IndexError):
        return None
    if len(values) != 5:
        return None
    cid, name, runtime, requests, env = values
    return {"id": str(cid), "name": str(name).lstrip("/"), "runtime": runtime or "",
            "device_requests": requests if isinstance(requests, list) else [],
            "env": env if isinstance(env, list) else []}


def parse(lines: list[str]) -> dict[str, Any]:
    """The probe's output as ``{"containers", "marker", "marker_error", "result", "boot_id",
    "handled"}``."""
    out: dict[str, Any] = {"containers": [], "marker": None, "marker_error": None,
                           "result": None, "boot_id": None, "handled": {}}
    result: list[str] = []
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "container":
            container = _container(value)
            if container:
                out["containers"].append(container)
        elif key == "marker":
            out.update(parse_marker(value, MARKER))
        elif key == "result":
            result.append(value)
        elif key == "handled":
            try:
                handled = json.loads(value)
            except ValueError:
                handled = None  # unreadable: no GPU counts as handled, a rerun resets again
            out["handled"] = handled if isinstance(handled, dict) else {}
        elif key == "boot":
            out["boot_id"] = value.strip() or None
    out["result"] = parse_result("\n".join(result))
    return out


class RecoverProbe(FactBase):
    """
    Running containers with their GPU requests, the recovery's resume point and the last
    reset's result, in one read-only command.

    .. code:: python

        {"containers": [{"id", "name", "runtime", "device_requests": [...], "env": [...]}],
         "marker": {...} | None, "marker_error": str | None,
         "result": {"run": str, "rc": int, "output": str} | None, "boot_id": str | None,
         "handled": {bus_id: {"boot_id", "xid_count", "ecc_volatile"}}}
    """

    @override
    def command(self) -> str:
        return COMMAND

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        return parse(output)

    @override
    def default(self) -> dict[str, Any]:  # type: ignore[override]
        return parse([])
