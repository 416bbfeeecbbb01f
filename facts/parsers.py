"""Pure parsers for what the NVIDIA tools print: /proc/driver/nvidia/version, nvidia-smi
(``-q -x`` with its health fields, ``-L``, ``--query-*``, ``mig -lgi/-lci/-lgip``, its error
messages, ``nvlink -s/-e``), the driver's Xid/SXid lines in the kernel log and the
Container Toolkit's ``--version`` lines.

Text in, plain data out. No pyinfra, no I/O. Every public function raises only
``ValueError`` (its message names the format it expected), whatever the input
(``facts.parser_contract``). The host's own outputs (os-release, lspci, dpkg/rpm, dkms,
daemon.json, the composite fact's sections) are parsed in ``facts.host_parsers``; they are
importable from here too, so ``facts.parsers`` names every parser.
"""
import re
import xml.etree.ElementTree as ET

from facts.host_parsers import (
    parse_daemon_json,
    parse_dkms_status,
    parse_dpkg_query,
    parse_lspci_nvidia,
    parse_pci_sysfs,
    parse_os_release,
    parse_rpm_query,
    split_sections,
)
from facts.parser_contract import contract, na

__all__ = [
    "classify_smi_error",
    "parse_daemon_json",
    "parse_dkms_status",
    "parse_dpkg_query",
    "parse_driver_version_file",
    "parse_lspci_nvidia",
    "parse_pci_sysfs",
    "parse_mig_compute_instances",
    "parse_mig_gpu_instance_profiles",
    "parse_mig_gpu_instances",
    "parse_nvlink_errors",
    "parse_nvlink_status",
    "parse_os_release",
    "parse_query_csv",
    "parse_rpm_query",
    "parse_smi_list",
    "parse_smi_xml",
    "parse_tool_version",
    "parse_xid_lines",
    "split_sections",
]


def _mode(value):
    value = na(value)
    return value.lower() if value and value.lower() in ("enabled", "disabled") else None


def _int(value):
    value = na(value)
    return int(value) if value and re.fullmatch(r"-?\d+", value) else None


def _mib(value):
    match = re.fullmatch(r"(\d+)(?:\s*MiB)?", na(value) or "")
    return int(match.group(1)) if match else None


def _clean_version(value):
    """'610.57.04 [Deprecated; ...]' -> '610.57.04'; 'Deprecated, see ...' / N/A -> None."""
    value = na(value)
    if not value:
        return None
    match = re.match(r"\d+(?:\.\d+)*", value)
    return match.group(0) if match else None


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


# --- nvidia-smi -q -x ------------------------------------------------------------------------

def _xtext(element, path):
    node = element.find(path) if element is not None else None
    return None if node is None or node.text is None else (na(node.text) or None)


def _xml_root(text):
    fmt = "`nvidia-smi -q -x` XML"
    if "<!ENTITY" in text:
        raise ValueError(f"expected {fmt}: entity declarations are not accepted (unsafe XML)")
    start = text.find("<?xml")
    start = text.find("<nvidia_smi_log") if start < 0 else start
    if start < 0:
        raise ValueError(f"expected {fmt}: no <nvidia_smi_log> document found")
    body = re.sub(r"<!DOCTYPE\s+nvidia_smi_log(?:\s+SYSTEM\s+(?:\"[^\"<>]*\"|'[^'<>]*'))?\s*>",
                  "", text[start:], count=1)
    if "<!DOCTYPE" in body:
        raise ValueError(f"expected {fmt}: only '<!DOCTYPE nvidia_smi_log SYSTEM \"...dtd\">' is "
                         "accepted, this DOCTYPE has another form")
    body = body.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
    try:
        root = ET.fromstring(body)
    except ET.ParseError as error:
        raise ValueError(f"expected {fmt}, the XML is malformed or truncated: {error}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"expected {fmt}: the root element is <{root.tag}>, not <nvidia_smi_log>")
    return root


def _xml_process(node):
    pid = _int(_xtext(node, "pid"))
    if pid is None:
        return None
    return {"pid": pid, "name": _xtext(node, "process_name") or "", "type": _xtext(node, "type"),
            "used_memory_mib": _mib(_xtext(node, "used_memory")),
            "gpu_instance_id": _int(_xtext(node, "gpu_instance_id")),
            "compute_instance_id": _int(_xtext(node, "compute_instance_id"))}


# Health fields (parser-contract.md, "Health fields"). The layouts differ by GPU generation
# and driver: what the real XML of drivers 384-595 (dtd v9-v13) prints.

def _yes_no(value):
    value = (na(value) or "").lower()
    return True if value == "yes" else False if value == "no" else None


def _count_sum(block, names):
    """Sum of the named children that are numbers; None when none is."""
    counts = [_int(_xtext(block, name)) for name in names]
    counts = [count for count in counts if count is not None]
    return sum(counts) if counts else None


def _ecc_uncorrectable(block):
    """Uncorrectable ECC count of <ecc_errors><volatile> or <aggregate>, in its layout:
    <double_bit><total> (Kepler..Volta; its siblings are parts of that total), the
    split-SRAM counters (Ampere+ on r570+) or <sram_uncorrectable> (Turing+, r418+), each
    with <dram_uncorrectable>."""
    if block is None:
        return None
    if block.find("double_bit") is not None:
        return _int(_xtext(block, "double_bit/total"))
    if (block.find("sram_uncorrectable_parity") is not None
            or block.find("sram_uncorrectable_secded") is not None):
        return _count_sum(block, ("sram_uncorrectable_parity", "sram_uncorrectable_secded",
                                  "dram_uncorrectable"))
    return _count_sum(block, ("sram_uncorrectable", "dram_uncorrectable"))


def _retirement_pending(gpu):
    """<pending_retirement> (r384-r418), <pending_blacklist> (r430) or both (r460+)."""
    answers = [_yes_no(_xtext(gpu, f"retired_pages/{name}"))
               for name in ("pending_retirement", "pending_blacklist")]
    if True in answers:
        return True
    return False if False in answers else None


def _link_width(value):
    match = re.fullmatch(r"(\d+)\s*x?", na(value) or "", re.IGNORECASE)
    return int(match.group(1)) if match else None


_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")


def _throttle_reasons(gpu):
    """Active clock event (r535+) / throttle (up to r530) reasons, sorted; None without
    a block of reasons (absent, or a bare N/A on vGPU)."""
    block = gpu.find("clocks_event_reasons")
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
    if block is None or len(block) == 0:
        return None
    active = []
    for child in block:
        if (child.text or "").strip().lower() == "active":
            name = child.tag
            for prefix in _REASON_PREFIXES:
                name = name.removeprefix(prefix)
            active.append(name)
    return sorted(active)


def _xml_health(gpu):
    link = "pci/pci_gpu_link_info"
    remapped = gpu.find("remapped_rows")  # absent up to r430; bare N/A before Ampere
    has_remap = remapped is not None and len(remapped) > 0
    return {
        "ecc_mode_current": _mode(_xtext(gpu, "ecc_mode/current_ecc")),
        "ecc_volatile_uncorrectable": _ecc_uncorrectable(gpu.find("ecc_errors/volatile")),
        "ecc_aggregate_uncorrectable": _ecc_uncorrectable(gpu.find("ecc_errors/aggregate")),
        "retired_pages_double_bit": _int(
            _xtext(gpu, "retired_pages/double_bit_retirement/retired_count")),
        "retired_pages_pending": _retirement_pending(gpu),
        "remapped_rows_uncorrectable": _int(_xtext(remapped, "remapped_row_unc"))
        if has_remap else None,
        "remapped_rows_pending": _yes_no(_xtext(remapped, "remapped_row_pending"))
        if has_remap else None,
        "remapped_rows_failure": _yes_no(_xtext(remapped, "remapped_row_failure"))
        if has_remap else None,
        "pcie_gen_current": _int(_xtext(gpu, f"{link}/pcie_gen/current_link_gen")),
        "pcie_gen_max": _int(_xtext(gpu, f"{link}/pcie_gen/max_link_gen")),
        "pcie_width_current": _link_width(_xtext(gpu, f"{link}/link_widths/current_link_width")),
        "pcie_width_max": _link_width(_xtext(gpu, f"{link}/link_widths/max_link_width")),
        "throttle_reasons_active": _throttle_reasons(gpu),
        "fabric_state": _xtext(gpu, "fabric/state"),
    }


def _xml_gpu(index, gpu):
    mig_mode = gpu.find("mig_mode")
    current = _xtext(gpu, "mig_mode/current_mig")
    mig_devices = [{"index": _int(_xtext(dev, "index")),
                    "gpu_instance_id": _int(_xtext(dev, "gpu_instance_id")),
                    "compute_instance_id": _int(_xtext(dev, "compute_instance_id")),
                    "memory_total_mib": _mib(_xtext(dev, "fb_memory_usage/total"))}
                   for dev in gpu.findall("mig_devices/mig_device")]
    processes = [_xml_process(node) for node in gpu.findall("processes/process_info")]
    return {"index": index,
            "name": _xtext(gpu, "product_name"),
            "uuid": _xtext(gpu, "uuid"),
            "pci_bus_id": na(gpu.get("id")) or _xtext(gpu, "pci/pci_bus_id"),
            "memory_total_mib": _mib(_xtext(gpu, "fb_memory_usage/total")),
            "persistence_mode": _mode(_xtext(gpu, "persistence_mode")),
            "mig_current": _mode(current),
            "mig_pending": _mode(_xtext(gpu, "mig_mode/pending_mig")),
            "mig_capable": None if mig_mode is None else _mode(current) is not None,
            "compute_capability": _xtext(gpu, "compute_cap"),
            "architecture": _xtext(gpu, "product_architecture"),
            "mig_devices": mig_devices,
            "processes": [p for p in processes if p is not None],
            "health": _xml_health(gpu)}


@contract("`nvidia-smi -q -x` XML")
def parse_smi_xml(text):
    """The contract's keys, plus ``attached_gpus`` (int|None) and per GPU:
    ``mig_capable`` (True when <mig_mode> has values, False when N/A, None when the driver
    prints no <mig_mode>), ``compute_capability`` (<compute_cap>; no driver up to 590 prints
    it in the XML, use ``--query-gpu=compute_cap``), ``architecture``,
    ``mig_devices`` [{index, gpu_instance_id, compute_instance_id, memory_total_mib}]
    (a list; [] when MIG is off) and ``processes`` [{pid, name, type, used_memory_mib,
    gpu_instance_id, compute_instance_id}].
    """
    root = _xml_root(text)
    # 610+ add <kmd_version>/<cuda_umd_version> and mark the old fields deprecated
    driver = _clean_version(_xtext(root, "kmd_version")) or _clean_version(
        _xtext(root, "driver_version"))
    cuda = _clean_version(_xtext(root, "cuda_umd_version")) or _clean_version(
        _xtext(root, "cuda_version"))
    return {"driver_version": driver, "cuda_version": cuda,
            "attached_gpus": _int(_xtext(root, "attached_gpus")),
            "gpus": [_xml_gpu(i, gpu) for i, gpu in enumerate(root.findall("gpu"))]}


# --- nvidia-smi -L ---------------------------------------------------------------------------

_L_GPU = re.compile(r"GPU (\d+): (\S.*?)(?: \(UUID: ([^()\s]+)\))?")
_L_MIG = re.compile(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^()\s]+)\)")


@contract("`nvidia-smi -L` output")
def parse_smi_list(text):
    gpus = []
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("GPU "):
            match = _L_GPU.fullmatch(line)
            if not match or ("(UUID:" in line and not match.group(3)):
                raise ValueError("expected `nvidia-smi -L` 'GPU N: NAME (UUID: ...)' line, "
                                 f"got {line[:120]!r}")
            gpus.append({"index": int(match.group(1)), "name": match.group(2),
                         "uuid": match.group(3), "mig_devices": []})
        elif line.startswith("MIG "):
            match = _L_MIG.fullmatch(line)
            if not match or not gpus:
                raise ValueError("expected `nvidia-smi -L` 'MIG PROFILE Device N: (UUID: ...)' "
                                 f"line after a GPU line, got {line[:120]!r}")
            gpus[-1]["mig_devices"].append(
                {"profile": match.group(1), "device": int(match.group(2)), "uuid": match.group(3)})
    if not gpus:
        raise ValueError("expected `nvidia-smi -L` output with 'GPU N: ...' lines; found none")
    return gpus


# --- nvidia-smi --query-*=... --format=csv ---------------------------------------------------

@contract("`nvidia-smi --query-gpu/--query-compute-apps --format=csv` output")
def parse_query_csv(text, fields=None):
    fmt = "`nvidia-smi --query-... --format=csv` output"
    if "is not a valid field to query" in text or classify_smi_error(text):
        raise ValueError(f"expected {fmt}, nvidia-smi printed an error: {text.strip()[:200]!r}")
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    header = [re.sub(r"\s*\[[^\]]*\]$", "", c.strip()) for c in (lines or [""])[0].split(",")]
    if fields is None:
        if not lines or not all(re.fullmatch(r"[A-Za-z_][\w.]*", f) for f in header):
            raise ValueError(f"expected {fmt}: the first line is not a header of field names "
                             "(pass fields=[...] for --format=csv,noheader)")
        fields = header
        lines.pop(0)
    elif isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"fields for {fmt} must be a list of field names")
    elif lines and header == list(fields):
        lines.pop(0)  # a header although fields were given
    rows = []
    for number, line in enumerate(lines, 1):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):  # also a comma inside a value: refuse rather than guess
            raise ValueError(f"expected {fmt}: row {number} has {len(cells)} cells for "
                             f"{len(fields)} fields: {line[:120]!r}")
        rows.append({field: na(cell) for field, cell in zip(fields, cells, strict=True)})
    return rows


# --- nvidia-smi mig -lgi / -lci / -lgip ------------------------------------------------------

def _mig_table(text, title, row_re, empty_phrase, continuation=None):
    fmt = f"`nvidia-smi mig` table '{title}'"
    seen = in_body = False
    rows = []
    for raw in text.split("\n"):
        line = raw.strip()
        if title in line:
            seen, in_body = True, False
        elif line.startswith("|=") and seen:
            in_body = True
        elif line.startswith("|") and in_body:
            match = row_re.fullmatch(line)
            if match:
                rows.append(match)
            elif not (continuation and continuation.fullmatch(line)):
                raise ValueError(f"expected {fmt}: malformed or truncated row {line[:120]!r}")
    if not seen:
        if empty_phrase in text:
            return []
        raise ValueError(f"expected {fmt} (or '{empty_phrase}'); not found in the text")
    return rows


def _placement(start, size):
    return None if start is None else [int(start), int(size)]


@contract("`nvidia-smi mig -lgi` table")
def parse_mig_gpu_instances(text):
    """'No GPU instances found' -> []; 'No MIG-enabled devices found' is a ValueError."""
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)\s+(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "instance_id": int(m[4]),
             "placement": _placement(m[5], m[6])}
            for m in _mig_table(text, "GPU instances:", row, "No GPU instances found")]


@contract("`nvidia-smi mig -lci` table")
def parse_mig_compute_instances(text):
    row = re.compile(r"\|\s*(\d+)\s+(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\*?\s+(\d+)\s+"
                     r"(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "gpu_instance_id": int(m[2]), "profile": m[3],
             "profile_id": int(m[4]), "instance_id": int(m[5]), "placement": _placement(m[6], m[7])}
            for m in _mig_table(text, "Compute instances:", row, "No compute instances found")]


@contract("`nvidia-smi mig -lgip` table")
def parse_mig_gpu_instance_profiles(text):
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+(?:\.\d+)?)\s.*\|")
    second_line = re.compile(r"\|[\s\d]*\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "free": int(m[4]),
             "total": int(m[5]), "memory_gib": float(m[6])}
            for m in _mig_table(text, "GPU instance profiles:", row,
                                "No GPU instance profiles found", second_line)]


# --- nvidia-smi error text -------------------------------------------------------------------

@contract("nvidia-smi output")
def classify_smi_error(text):
    lowered = text.lower()
    if "couldn't communicate with the nvidia driver" in lowered:
        return "driver_not_loaded"
    if "driver/library version mismatch" in lowered:
        return "library_mismatch"
    if "no devices were found" in lowered:
        return "no_devices"
    return None


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


# --- nvidia-smi nvlink -s / -e ---------------------------------------------------------------
#
# One "GPU N: NAME (UUID: GPU-...)" header per GPU (old drivers print no UUID), then one line
# per link behind a tab: "Link 0: 25 GB/s" / "Link 0: <inactive>" for -s, "Link 0: Replay
# Errors: 0" (one line per counter, an empty line between links) for -e. A GPU without NVLink
# prints its header alone, or with "Device does not have or support Nvlink"; NVML's "Unable
# to retrieve NVLink information as all links are inActive" follows the header of a GPU whose
# links are all down (a PCIe card without a bridge, a GPU cut off from its NVSwitches).

_NVLINK_GPU = re.compile(r"GPU (\d+):\s*(.*)")
_NVLINK_UUID = re.compile(r"\(UUID:\s*([^)\s]+)\)")
_NVLINK_LINK = re.compile(r"Link (\d+):\s*(.*)")
_NVLINK_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GB/s")


def _nvlink_blocks(text):
    """[(header dict, [lines after it])] of the GPU blocks."""
    blocks = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _NVLINK_GPU.fullmatch(line)
        if match:
            rest = match[2]
            uuid = _NVLINK_UUID.search(rest)
            name, note = (rest[:uuid.start()], rest[uuid.end():]) if uuid else (rest, "")
            blocks.append(({"index": int(match[1]), "name": name.strip() or None,
                            "uuid": uuid[1] if uuid else None, "note": note.strip()}, []))
        elif blocks:
            blocks[-1][1].append(line)
    return blocks


def _nvlink_note(texts):
    text = " ".join(texts).lower()
    if "all links are inactive" in text:
        return "all_inactive"
    if "not have or support" in text or "not supported" in text:
        return "not_supported"
    return None


@contract("`nvidia-smi nvlink -s` output")
def parse_nvlink_status(text):
    """Per GPU: index, name, uuid, ``links`` ([{link, state: active|inactive|unknown,
    speed_gbps}]) and ``note`` (``all_inactive``, ``not_supported`` or None)."""
    gpus = []
    for head, lines in _nvlink_blocks(text):
        links, other = [], [head["note"]]
        for line in lines:
            match = _NVLINK_LINK.fullmatch(line)
            if not match:
                other.append(line)
                continue
            value = match[2].strip()
            speed = _NVLINK_SPEED.fullmatch(value)
            state = ("active" if speed else "inactive" if value.lower() in ("<inactive>",
                     "inactive") else "unknown")
            links.append({"link": int(match[1]), "state": state,
                          "speed_gbps": float(speed[1]) if speed else None})
        gpus.append({"index": head["index"], "name": head["name"], "uuid": head["uuid"],
                     "links": links, "note": _nvlink_note(other)})
    return gpus


def _counter(value):
    value = na(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


@contract("`nvidia-smi nvlink -e` output")
def parse_nvlink_errors(text):
    """Per GPU: index, name, uuid and ``links``: {link number: {counter name as printed:
    value}} (int, a float for rates such as a BER, None for N/A)."""
    gpus = []
    for head, lines in _nvlink_blocks(text):
        links = {}
        for line in lines:
            match = _NVLINK_LINK.fullmatch(line)
            if not match:
                continue
            name, sep, value = match[2].rpartition(":")
            if sep and name.strip():
                links.setdefault(int(match[1]), {})[name.strip()] = _counter(value)
        gpus.append({"index": head["index"], "name": head["name"], "uuid": head["uuid"],
                     "links": links})
    return gpus
