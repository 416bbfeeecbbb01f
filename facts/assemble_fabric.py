"""The fabric fact (``state["fabric"]``): the fabric daemons' units and the NVLink Subnet
Manager (``state["fabric"]["nvlsm"]``; issue 25, NVLink 5 HGX). Pure, like
facts/assemble.py: the ``fabric_services`` and ``nvlsm`` sections of facts/script.py in. The NVLink 5 switches themselves are ``state["rdma"]["switches"]`` (the ``rdma``
section reads every Mellanox function's VPD for SW_MNG)."""

from __future__ import annotations

from typing import Any

from gpuhost.facts.sections import Sections, ok


def nvlsm_state(sections: Sections) -> dict[str, Any]:
    """``{"version": "2025.06.6-1" | None, "running": bool | None}`` (None: not read)."""
    out = ok(sections, "nvlsm")
    if out is None:
        return {"version": None, "running": None}
    version, running = None, None
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["version"] and len(parts) == 2 and parts[1] != "-":
            version = parts[1]
        elif parts in (["running"], ["stopped"]):
            running = parts[0] == "running"
    return {"version": version, "running": running}


def fabric_state(sections: Sections) -> dict[str, Any]:
    """The fabric daemons' units (issue 25): ``{"services": {"nvidia-fabricmanager":
    {"enabled": "enabled", "active": "active"}, ...}}`` for the units the host has, as
    ``systemctl is-enabled`` / ``is-active`` print them."""
    services: dict[str, dict[str, str]] = {}
    for line in (ok(sections, "fabric_services") or "").splitlines():
        parts = line.split()
        if len(parts) == 3:
            services[parts[0]] = {"enabled": parts[1], "active": parts[2]}
    return {"services": services, "nvlsm": nvlsm_state(sections)}
