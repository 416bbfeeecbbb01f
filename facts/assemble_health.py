"""The host-wide health fact (``state["health"]``): this boot's Xid/SXid events, the GPUs
fallen off the bus, the NVSwitch count, the GPUs gpuhost recovered. The per-GPU health is
each GPU's ``health`` (``facts.assemble_gpus``). Pure, like ``facts.assemble``."""

from __future__ import annotations

import re
from typing import Any

from gpuhost.facts import parsers
from gpuhost.facts.assemble_driver import smi_xml
from gpuhost.facts.assemble_gpus import pci_gpus, slot
from gpuhost.facts.assemble_recover import recovered_state
from gpuhost.facts.sections import Sections, ok, section


_XID_SOURCES = ("journal", "dmesg")
# The kernel's monotonic time of a line, as dmesg and journalctl -o short-monotonic print it
# ("[ 1234.567890] ..."): with the PCI address, Xid and text it tells two lines apart.
_STAMP = re.compile(r"^\s*\[\s*(\d+\.\d+)\]")


def _kernel_xid(sections: Sections) -> tuple[list[dict[str, Any]], str | None]:
    """(Xid/SXid events of this boot, their source) from the kernel_xid section; ([], None)
    when no kernel log was readable or the section did not run. Each event carries the
    line's monotonic ``time`` (None when the line has none)."""
    out = ok(sections, "kernel_xid")
    if out is None:
        return [], None
    first, _, rest = out.partition("\n")
    first = first.strip()
    source = first.removeprefix("source=")
    if not first.startswith("source=") or source not in _XID_SOURCES:
        return [], None
    events = []
    for line in rest.split("\n"):  # one line at a time: its time is the event's identity
        found = parsers.parse_xid_lines(line) if "Xid (" in line else []
        stamp = _STAMP.match(line)
        events += [{**e, "time": float(stamp.group(1)) if stamp else None} for e in found]
    return events, source


def _nvswitch_count(sections: Sections) -> int:
    """NVIDIA functions of PCI class 0x0680 (other bridge): the NVSwitches of an HGX board."""
    if section(sections, "pci_sysfs")[0] == 0:
        devices = parsers.parse_pci_sysfs(ok(sections, "pci_sysfs") or "")
        return sum(1 for d in devices if (d.get("class") or "").startswith("0680"))
    lspci = ok(sections, "lspci")
    devices = parsers.parse_lspci_nvidia(lspci) if lspci else []
    return sum(1 for d in devices if d.get("class_id") == "0680")


def health_state(sections: Sections) -> dict[str, Any]:
    """The host-wide health facts (``state["health"]`` of ``gpuhost.facts.host.GpuHostState``); the
    per-GPU ones are each GPU's ``health``."""
    events, source = _kernel_xid(sections)
    smi, smi_error = smi_xml(sections)
    missing = None
    # nvidia-smi answered with its list, or said it found no device although the driver
    # runs: every NVIDIA GPU on the bus that it does not list is missing (fallen off the
    # bus, failed to initialise). Without an answer (no driver, timeout) nobody is missing:
    # the driver's state says what is wrong.
    if smi is not None or smi_error == "no_devices":
        listed = {slot(gpu["pci_bus_id"]) for gpu in (smi or {}).get("gpus", [])}
        pci, _source = pci_gpus(sections)
        missing = [d["slot"] for d in pci if slot(d["slot"]) not in listed]
    return {"xid_events": events, "xid_source": source, "gpus_missing": missing,
            "nvswitch_count": _nvswitch_count(sections), "recovered": recovered_state(sections)}
