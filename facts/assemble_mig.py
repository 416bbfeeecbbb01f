"""The MIG fact (``state["mig"]``; ``gpuhost.facts.mig.MigState``): each GPU's MIG modes, GPU and
compute instances and MIG devices. Pure, like ``facts.assemble``."""

from __future__ import annotations

from typing import Any

from gpuhost.facts import parsers
from gpuhost.facts.assemble_gpus import gpus_state
from gpuhost.facts.sections import Sections, ok


def _mig_table(sections: Sections, name: str, parse) -> list[dict[str, Any]]:
    out = ok(sections, name)
    if not out:
        return []
    try:
        return parse(out)
    except ValueError:
        # nvidia-smi prints "No MIG-enabled devices found" and similar with rc 0 on some
        # drivers; a real table that fails to parse is caught by the structure tests.
        if "|" in out and "GPU" in out and "instance" in out.lower():
            raise
        return []


def mig_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.mig.MigState``."""
    gpus = [gpu for gpu in gpus_state(sections) if gpu["source"] == "nvidia-smi"]
    listing = ok(sections, "smi_list")
    devices_by_index = {}
    if listing:
        for entry in parsers.parse_smi_list(listing):
            devices_by_index[entry["index"]] = entry.get("mig_devices") or []
    any_enabled = any(gpu["mig_current"] == "enabled" for gpu in gpus)
    instances = _mig_table(sections, "mig_lgi", parsers.parse_mig_gpu_instances) if any_enabled else []
    computes = (
        _mig_table(sections, "mig_lci", parsers.parse_mig_compute_instances) if any_enabled else []
    )
    result = []
    for gpu in gpus:
        index = gpu["index"]
        result.append(
            {
                "index": index,
                "name": gpu["name"],
                "uuid": gpu["uuid"],
                "mig_capable": gpu["mig_capable"],
                "mode_current": gpu["mig_current"],
                "mode_pending": gpu["mig_pending"],
                "pending_change": gpu["mig_pending"] is not None
                and gpu["mig_current"] != gpu["mig_pending"],
                "gpu_instances": [i for i in instances if i["gpu"] == index],
                "compute_instances": [c for c in computes if c["gpu"] == index],
                "devices": devices_by_index.get(index, []),
            }
        )
    return {
        "gpus": result,
        "enabled_gpus": [g["index"] for g in result if g["mode_current"] == "enabled"],
        "layout": {
            str(g["index"]): sorted(i["profile"] for i in g["gpu_instances"]) for g in result
        },
    }
