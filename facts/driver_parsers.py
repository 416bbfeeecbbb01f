"""Parsers of the driver's own outputs and the Container Toolkit's version lines:
/proc/driver/nvidia/version, the kernel log's Xid / SXid lines, ``nvidia-ctk --version``.

Text in, plain data out; no pyinfra, no I/O; only ``ValueError`` (``facts.parser_contract``).
``facts.parsers`` names every parser.
"""
import re

from gpuhost.facts.parser_contract import contract

# --- /proc/driver/nvidia/version -------------------------------------------------------------

@contract("/proc/driver/nvidia/version text")
def parse_driver_version_file(text):
    lines = [ln.strip() for ln in text.split("\n")]
    line = next((ln for ln in lines if ln.startswith("NVRM version:")), None)
    if line is None:
        return None  # module not loaded
    open_form = re.search(r"NVIDIA UNIX Open Kernel Module for (\S+)\s+(\d+(?:\.\d+)+)\b", line)
    closed_form = re.search(r"NVIDIA UNIX (\S+) Kernel Module\s+(\d+(?:\.\d+)+)\b", line)
    if open_form:
        flavor, (arch, version) = "open", open_form.groups()
    elif closed_form and closed_form.group(1) != "Open":
        flavor, (arch, version) = "proprietary", closed_form.groups()
    else:
        raise ValueError("expected /proc/driver/nvidia/version: an 'NVRM version: NVIDIA UNIX "
                         f"[Open ]Kernel Module ... <version>' line, got {line[:120]!r}")
    gcc = None
    gcc_line = next((ln for ln in lines if ln.startswith("GCC version:")), "")
    match = (re.search(r"gcc version (\d+(?:\.\d+)+)", gcc_line)
             or re.search(r"(?<![\w-])(\d+\.\d+(?:\.\d+)?)", gcc_line.split(":", 1)[-1]))
    if match:
        gcc = match.group(1)
    return {"version": version, "flavor": flavor, "arch": arch, "gcc": gcc}


# --- NVIDIA Container Toolkit versions -------------------------------------------------------

@contract("nvidia-ctk / nvidia-container-cli / nvidia-container-runtime --version output")
def parse_tool_version(text):
    version = r"(\d+\.\d+(?:\.\d+)?(?:[-~+][0-9A-Za-z.~+-]*)?)"
    for pattern in (rf"NVIDIA Container (?:Toolkit CLI|Runtime(?: Hook)?) version {version}",
                    rf"^\s*cli-version:\s*{version}", rf"^\s*version:\s*{version}"):
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            return match.group(1)
    return None


# --- kernel log: Xid / SXid lines ------------------------------------------------------------

# The driver prints "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, ..." (or without
# pid/name) and, with MIG, " GPU-I:%02u" and " GPU-CI:%02u" inside the parenthesis (NVIDIA
# open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c, XID_PRINT_WITH_ATTR;
# read 2026-04). Some old drivers print the bus without "PCI:".
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
    r"(?:\s+GPU-I:(?P<gi>\d+))?(?:\s+GPU-CI:\d+)?\):\s*(?P<number>\d+)\s*(?:,(?P<text>.*))?$")
# NVSwitch: "<device name>: SXid (PCI:<bus with function>): %05d, ..." (the nvswitch driver's
# SXid print macro), the name being nvidia-nvswitchN; one event can be several lines with the
# same number, each its own entry.
_SXID = re.compile(
    r"nvidia-nvswitch\d*: SXid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
    r"(?:\.[0-7])?)\):\s*(?P<number>\d+)\s*(?:,(?P<text>.*))?$")


@contract("kernel log text (dmesg / journalctl -k / syslog) with NVRM Xid or SXid lines")
def parse_xid_lines(text):
    """One dict per Xid / SXid line, in input order; every other line is ignored, whatever
    precedes ``NVRM:`` / ``nvidia-nvswitch`` (timestamps, host, facility) too:
    ``{"pci_bus_id", "xid", "gpu_instance_id", "text"}`` or ``{"pci_bus_id", "sxid", "text"}``.
    Only a value that is not text is a ``ValueError``."""
    events = []
    for line in text.split("\n"):
        if "Xid (" not in line:
            continue
        match = _XID.search(line)
        if match:
            gi = match.group("gi")
            events.append({"pci_bus_id": match.group("bus"), "xid": int(match.group("number")),
                           "gpu_instance_id": int(gi) if gi is not None else None,
                           "text": (match.group("text") or "").strip()})
            continue
        match = _SXID.search(line)
        if match:
            events.append({"pci_bus_id": match.group("bus"), "sxid": int(match.group("number")),
                           "text": (match.group("text") or "").strip()})
    return events
