"""The health fields of parser-contract.md ("Health fields"), read straight from the XML of
`nvidia-smi -q -x`: what gpuhost's parser must find in the simulator's outputs. Shared by
the unit tests (test_gpusim.py) and the over-SSH ones (test_gpusim_faults.py); written
here from the contract, not from the product's parser (facts/parsers.py)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET


def contract_health(gpu: ET.Element) -> dict:
    """parser-contract.md "Health fields", read straight from one <gpu> element: the values
    gpuhost's parser must find in these outputs."""
    def num(path):
        text = (gpu.findtext(path) or "").strip()
        return int(text) if text.isdigit() else None

    def ecc(kind):
        if gpu.find(f"ecc_errors/{kind}/double_bit") is not None:
            return num(f"ecc_errors/{kind}/double_bit/total")
        vals = [num(f"ecc_errors/{kind}/{k}") for k in (
            "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
            "dram_uncorrectable")]
        vals = [v for v in vals if v is not None]
        return sum(vals) if vals else None

    def yes(path):
        return {"Yes": True, "No": False}.get((gpu.findtext(path) or "").strip())

    pend = [yes(f"retired_pages/{k}") for k in ("pending_blacklist", "pending_retirement")]
    reasons = gpu.find("clocks_event_reasons")
    if reasons is None:
        reasons = gpu.find("clocks_throttle_reasons")
    width = lambda p: int(gpu.findtext(p).rstrip("x")) if gpu.findtext(p) != "N/A" else None  # noqa: E731
    return {
        "ecc_mode_current": gpu.findtext("ecc_mode/current_ecc").lower(),
        "ecc_volatile_uncorrectable": ecc("volatile"),
        "ecc_aggregate_uncorrectable": ecc("aggregate"),
        "retired_pages_double_bit": num("retired_pages/double_bit_retirement/retired_count"),
        "retired_pages_pending": True if True in pend else (False if False in pend else None),
        "remapped_rows_uncorrectable": num("remapped_rows/remapped_row_unc"),
        "remapped_rows_pending": yes("remapped_rows/remapped_row_pending"),
        "remapped_rows_failure": yes("remapped_rows/remapped_row_failure"),
        "pcie_gen_current": num("pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
        "pcie_gen_max": num("pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
        "pcie_width_current": width("pci/pci_gpu_link_info/link_widths/current_link_width"),
        "pcie_width_max": width("pci/pci_gpu_link_info/link_widths/max_link_width"),
        "throttle_reasons_active": None if reasons is None else sorted(
            c.tag.split("_reason_", 1)[1] for c in reasons if (c.text or "").strip() == "Active"),
        "fabric_state": None if gpu.findtext("fabric/state") in (None, "N/A") else
        gpu.findtext("fabric/state"),
        "fabric_status": None if gpu.findtext("fabric/status") in (None, "N/A") else
        gpu.findtext("fabric/status"),
        "sram_threshold_exceeded": yes("ecc_errors/aggregate/sram_threshold_exceeded"),
    }


def healths(xml_text: str) -> dict:
    """{pci bus id of each listed GPU: its health dict}."""
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", xml_text[xml_text.index("<?xml"):]))
    return {g.get("id"): contract_health(g) for g in root.findall("gpu")}
