"""Parser of ``nvidia-smi -q -x`` (GPUs, processes, MIG mode and the health fields).

Text in, plain data out; no pyinfra, no I/O; only ``ValueError`` (``facts.parser_contract``).
``facts.parsers`` names every parser.
"""
import re
import xml.etree.ElementTree as ET

from gpuhost.facts.parser_contract import contract, na


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


# Health fields (the ``health`` dict of each GPU). The layouts differ by GPU generation
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
        # NVML nvmlGpuFabricInfo_t: status "Must be checked only if Probe state returns
        # complete" (a Completed state with a failed probe: NVIDIA/NVSentinel#883)
        "fabric_status": _xtext(gpu, "fabric/status"),
        # Xid catalog, WORKFLOW_XID_48: "check for SRAM DBE thresholds and follow RMA flow if
        # exceeded (nvidia-smi <sram_threshold_exceeded>)"; printed in <aggregate> (r550+)
        "sram_threshold_exceeded": _yes_no(
            _xtext(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")
            or _xtext(gpu, "ecc_errors/volatile/sram_threshold_exceeded")),
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
