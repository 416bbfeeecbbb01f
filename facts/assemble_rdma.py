"""The GPUDirect RDMA fact value (``state["rdma"]``; issue 25 item 5). Pure, like
facts/assemble.py: the ``rdma`` and ``rdma_topo`` sections of facts/script.py in,
``gpuhost.rdma``'s parsers over them."""

from __future__ import annotations

from typing import Any

from gpuhost.facts.sections import Sections, ok, section
from gpuhost import rdma


def rdma_state(sections: Sections) -> dict[str, Any]:
    """``{"gpus": [SLOT], "nics": {SLOT: NAME|None}, "switches": {SLOT: NAME|None},
    "paths": {SLOT: [BRIDGE, ...]}, "acs": {BRIDGE: [FLAG, ...]}, "acs_read": bool,
    "peermem_loaded": bool|None, "persisted_in": [FILE], "topo": <parse_topo>|None,
    "topo_error": str|None}``; ``peermem_loaded`` and the paths only where a NIC is seen."""
    state = rdma.parse_section(ok(sections, "rdma") or "")
    state["topo"], state["topo_error"] = None, None
    rc, out = section(sections, "rdma_topo")
    if rc == 0:
        try:
            state["topo"] = rdma.parse_topo(out)
        except ValueError as error:
            state["topo_error"] = str(error)
    elif rc not in (None, 4):
        state["topo_error"] = f"nvidia-smi topo -m exited {rc}: {out.strip()[:200]}"
    return state
