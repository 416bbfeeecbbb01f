"""Findings from the kernel log's Xid and SXid lines of this boot (pure).

The events are ``parse_xid_lines`` dicts (``state["health"]["xid_events"]``). What NVIDIA
says to do for each Xid comes from its Xid catalog, kept as dated data in
``gpuhost/data/nvidia_xid_catalog.json`` (the "Resolution Bucket (Immediate Action)" of
every Xid the catalog lists as used, and gpuhost's severity for it; docs/health.md).
One finding per Xid number and GPU, with how often it was logged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

_CATALOG = json.loads(resources.files("gpuhost").joinpath("data", "nvidia_xid_catalog.json")
                      .read_text(encoding="utf-8"))
CATALOG: dict[int, dict[str, Any]] = {int(k): v for k, v in _CATALOG["xids"].items()}
CATALOG_DATE: str = _CATALOG["_date"]
# Xid 154's recovery actions as the driver prints them: {words: {"severity", "action"}}; a
# word not listed is unknown (critical, never a reset; ``XID_154_UNKNOWN``).
XID_154_ACTIONS: dict[str, dict[str, Any]] = {
    k: v for k, v in _CATALOG["xid_154_actions"].items() if not k.startswith("_")}
XID_154_UNKNOWN = {"severity": "critical", "action": "unknown"}

# What to do, by the catalog's immediate-action bucket (gpuhost's wording).
ACTIONS = {
    "RESTART_BM": "drain the host and reboot it (NVIDIA: restart bare metal); if it comes back, "
                  "check the PCIe slot, riser and power and contact the hardware vendor",
    "RESET_GPU": "drain the GPU and reset it (gpuhost recover INVENTORY --limit HOST --gpu N) "
                 "or reboot the host; if it comes back, contact NVIDIA support or the hardware "
                 "vendor",
    "WORKFLOW_XID_48": "an uncorrectable ECC error: drain the GPU, reset it (gpuhost recover "
                       "INVENTORY --limit HOST --gpu N) or reboot to clear it, then check its "
                       "ECC, row-remap and retired-page counts "
                       "(nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT)",
    "WORKFLOW_NVLINK_ERR": "an NVLink error: reset the GPU or reboot, check the links with "
                           "nvidia-smi nvlink -s / -e; if it repeats, contact the hardware vendor",
    "WORKFLOW_NVLINK5_ERR": "an NVLink 5 error: decode its IntrInfo subcode with NVIDIA's Xid "
                            "catalog and reset the GPU where the catalog says RESET_GPU",
    "CHECK_MECHANICALS": "check the GPU's auxiliary power cables",
    "UPDATE_SWFW": "update the vGPU software and firmware",
    "RESTART_VM": "restart the VM that uses the GPU",
    "CHECK_UVM": "check the nvidia-uvm module and the application's unified-memory use",
    "CONTACT_SUPPORT": "contact NVIDIA support with an nvidia-bug-report",
    "RESTART_APP": "restart the application that hit it; the GPU stays usable",
    "IGNORE": "no action unless it repeats",
    "WORKFLOW_XID_13": "an application fault: debug the application (compute-sanitizer, "
                       "cuda-gdb)",
    "WORKFLOW_XID_31": "an application fault (illegal memory access): debug the application "
                       "(compute-sanitizer, cuda-gdb)",
    "WORKFLOW_XID_45": "an application torn down after another error: follow the other Xids",
}
NO_BUCKET = {  # catalog rows without a bucket: gpuhost's reading of their text
    162: "no action: power smoothing works again",
    163: "no GPU reset required: resolve the thermal events if power smoothing is wanted; if "
         "it was disabled by a timeout, reload the driver or reset the GPU when convenient",
    164: "watch the power swings; plan to replace the GPU if power smoothing is needed",
    165: "power smoothing is disabled: replace the GPU if the data center cannot absorb the "
         "power swings",
    166: "confidential-computing mode: check the link's encryption setup",
    167: "drain the host and reboot it; check the PCIe slot and contact the hardware vendor",
    168: "enable ECC (row remapping) or boot again",
    169: "drain the GPU and reset it (gpuhost recover INVENTORY --limit HOST --gpu N) or "
         "reboot the host",
    170: "confidential-computing mode: contact NVIDIA support",
    171: "see the Xid 48 it details: drain the GPU and reset it or reboot",
    172: "see the Xid 48 it details: drain the GPU and reset it or reboot",
}
XID_154_TODO = {  # by the action word of XID_154_ACTIONS
    "none": "no recovery action is needed",
    "drain_p2p": "drain peer-to-peer traffic of this GPU",
    "reset": "drain the GPU and reset it (gpuhost recover INVENTORY --limit HOST --gpu N)",
    "reboot": "drain the host and reboot it",
    "recover_imex": "the IMEX domain needs recovery (fabric memory allocation is disabled): "
                    "drain the IMEX domain's jobs and restart nvidia-imex on its nodes (NVIDIA "
                    "IMEX guide); a GPU reset does not fix it",
    "unknown": "a recovery action gpuhost does not know: look it up in NVIDIA's Xid catalog "
               "(docs.nvidia.com/deploy/xid-errors) or contact NVIDIA support; gpuhost does not "
               "reset the GPU for it",
}
_RECOVERY = re.compile(r"to\s+0x[0-9a-f]+\s*\(([^)]*)\)", re.I)


def slot(bus_id: str | None) -> str | None:
    """One spelling of a PCI address: '00000000:3B:00.0' (nvidia-smi), '0000:3b:00' (an Xid
    line), '3b:00.0' (lspci) -> '0000:3b:00.0'."""
    if not bus_id:
        return None
    text = str(bus_id).strip().lower().removeprefix("pci:")
    if text.count(":") == 1:
        text = "0000:" + text
    domain, _, rest = text.partition(":")
    if "." not in rest:
        rest += ".0"
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def on_gpu(events: Iterable[Mapping[str, Any]], gpu: str | None) -> list[Mapping[str, Any]]:
    """The Xid events (not SXid) of the GPU at ``gpu`` (``slot()`` spelling)."""
    return [e for e in events if "xid" in e and slot(e.get("pci_bus_id")) == gpu]


def mark(events: Iterable[Mapping[str, Any]], gpu: str | None) -> dict[str, Any]:
    """Where the GPU's Xid lines stand now: ``{"xid_count", "xid_time"}``. ``xid_time`` is
    the kernel's monotonic time of its newest line (0.0 without any; None when a line has no
    time: then only the count can tell new lines)."""
    mine = on_gpu(events, gpu)
    times = [e.get("time") for e in mine]
    if any(t is None for t in times):
        return {"xid_count": len(mine), "xid_time": None}
    return {"xid_count": len(mine), "xid_time": max(times, default=0.0)}


def new_since(events: Iterable[Mapping[str, Any]], gpu: str | None,
              before: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The GPU's Xid events logged after ``before`` (a ``mark()``): known by the kernel's
    time of the line, so an old line dropping out of the window read from the host never
    hides a new one. Without times (an older record, a log without them) the count decides:
    the lines beyond ``before``'s count."""
    mine = on_gpu(events, gpu)
    before = before or {}
    since = before.get("xid_time")
    if since is not None and all(e.get("time") is not None for e in mine):
        return [e for e in mine if e["time"] > since]
    return mine[before.get("xid_count", 0):]


def recovery_action(text: str) -> str | None:
    """The new recovery action an Xid 154 line names ('... from 0x0 (None) to 0x2 (Node
    Reboot Required)' -> 'Node Reboot Required')."""
    match = _RECOVERY.search(text or "")
    return match.group(1).strip() if match else None


def _xid_finding(number: int, gpu: str | None, events: list[Mapping[str, Any]]) -> dict[str, Any]:
    entry = CATALOG.get(number)
    where = f" on GPU {gpu}" if gpu else ""
    times = f"{len(events)}x since boot" if len(events) > 1 else "logged since boot"
    if entry is None:
        return {"id": f"xid-{number}", "severity": "warning", "gpu": gpu,
                "message": f"Xid {number} {times}{where} is not in gpuhost's Xid table "
                           f"({CATALOG_DATE}): look it up in NVIDIA's Xid catalog "
                           f"(docs.nvidia.com/deploy/xid-errors)"}
    label = f"Xid {number} ({entry['description']}) {times}{where}"
    if number == 154:
        said = recovery_action(events[-1].get("text", ""))
        known = XID_154_ACTIONS.get(said or "", XID_154_UNKNOWN)
        todo = XID_154_TODO.get(known["action"], XID_154_TODO["unknown"])
        words = f"'{said}'" if said else f"an action gpuhost cannot read ({events[-1].get('text')!r})"
        return {"id": "xid-154", "severity": known["severity"], "gpu": gpu,
                "message": f"{label}: the driver asks for {words}: {todo}"}
    todo = ACTIONS.get(entry["immediate"]) if entry["immediate"] else NO_BUCKET.get(number)
    if number == 94:
        todo = "restart the application that hit it and reset the GPU when convenient"
    follow = ACTIONS.get(entry["investigatory"] or "")
    if todo and follow and entry["investigatory"] != entry["immediate"] and "contact" not in todo:
        todo = f"{todo}; to investigate: {follow}"
    return {"id": f"xid-{number}", "severity": entry["severity"], "gpu": gpu,
            "message": f"{label}: {todo or ACTIONS['CONTACT_SUPPORT']}"}


def _sxid_finding(number: int, device: str | None, events: list[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    fatal = any(str(e.get("text", "")).lower().startswith("fatal") for e in events)
    where = f" on NVSwitch {device}" if device else ""
    lines = f"{len(events)} lines" if len(events) > 1 else "1 line"
    if fatal:
        return {"id": f"sxid-{number}", "severity": "critical", "gpu": device,
                "message": f"SXid {number} (fatal NVSwitch error, {lines} since boot){where}: "
                           "drain the host; the fabric needs a reset (restart "
                           "nvidia-fabricmanager or reboot); if it comes back, contact NVIDIA "
                           "support"}
    return {"id": f"sxid-{number}", "severity": "warning", "gpu": device,
            "message": f"SXid {number} (NVSwitch error not marked fatal, {lines} since boot)"
                       f"{where}: the fabric keeps running; check nvidia-smi nvlink -e and "
                       "watch for repeats"}


def findings(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One finding per Xid number and GPU (per SXid number and NVSwitch) of ``events``
    (``parse_xid_lines`` dicts); ``gpu`` is the device's address as ``slot()`` spells it."""
    groups: dict[tuple[str, int, str | None], list[Mapping[str, Any]]] = {}
    for event in events:
        kind = "sxid" if "sxid" in event else "xid"
        number = event.get(kind)
        if not isinstance(number, int):
            continue
        device = slot(event.get("pci_bus_id"))
        groups.setdefault((kind, number, device), []).append(event)
    result = []
    for (kind, number, device), group in groups.items():
        if kind == "xid":
            result.append(_xid_finding(number, device, group))
        else:
            result.append(_sxid_finding(number, device, group))
    return result
