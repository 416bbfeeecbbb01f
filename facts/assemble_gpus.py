"""The GPU list (``state["gpus"]``; ``gpuhost.facts.nvidia.NvidiaGpus``): from nvidia-smi when it
answers, else from the PCI bus (sysfs or lspci), each GPU classified by its PCI id, with its
health and NVLink summary. Pure, like ``facts.assemble``."""

from __future__ import annotations

from typing import Any

from gpuhost.facts import parsers
from gpuhost.facts.assemble_driver import smi_xml
from gpuhost.facts.sections import Sections, ok, section
from gpuhost import policy


def slot(slot: str | None) -> str | None:
    """'00000000:07:00.0' (nvidia-smi), '0000:07:00.0' (sysfs), '07:00.0' (lspci without
    a domain) -> '0000:07:00.0'."""
    if not slot:
        return None
    text = str(slot).strip().lower()
    if text.count(":") == 1:
        text = "0000:" + text
    return text[-12:]


def pci_gpus(sections: Sections) -> tuple[list[dict[str, Any]], str]:
    """NVIDIA GPU functions (3D controller / VGA class; NVSwitch bridges and audio functions
    are not GPUs) with their PCI ids: from /sys/bus/pci/devices when the host has it (the
    kernel's ids, no pciutils needed), else from lspci; lspci's names are added when present.
    Returns (devices, source)."""
    lspci = ok(sections, "lspci")
    listed = parsers.parse_lspci_nvidia(lspci) if lspci else []
    names = {slot(d["slot"]): d.get("device_name") for d in listed}
    rc, sysfs = section(sections, "pci_sysfs")
    if rc == 0:
        devices = [
            {**d, "device_name": names.get(slot(d["slot"]))}
            for d in parsers.parse_pci_sysfs(sysfs)
            if (d.get("class") or "").startswith(("0302", "0300"))
        ]
        return devices, "sysfs"
    devices = [d for d in listed if d.get("class", "").startswith(("3D controller", "VGA"))]
    return devices, "lspci"


def _classified(device_id: str | None) -> dict[str, Any]:
    info = policy.classify_pci(device_id)
    return {"pci_device_id": info["device_id"], "generation": info["generation"],
            "legacy_branch": info["legacy_branch"], "classified_by": info["known_by"]}


def _nvlink_counts(links: dict[int, dict[str, Any]]) -> dict[str, int]:
    """Replay, recovery and CRC error counts summed over a GPU's links (the counter names of
    every NVLink generation: "Replay Errors", "Recovery Errors", "CRC Errors", "CRC FLIT/Data
    Errors", NVLink 5's "Link recovery failed events")."""
    totals = {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}
    for counters in links.values():
        for name, value in counters.items():
            low = name.lower()
            if not isinstance(value, int):
                continue
            if "replay" in low:
                totals["replay_errors"] += value
            elif "recovery" in low and ("error" in low or "failed" in low):
                totals["recovery_errors"] += value
            elif "crc" in low:
                totals["crc_errors"] += value
    return totals


def nvlink_state(sections: Sections) -> dict[str, dict[str, Any]]:
    """Each GPU's NVLink summary by UUID (else ``#INDEX``) from ``nvidia-smi nvlink -s/-e``:
    ``links_total``, ``links_active``, ``links_inactive`` (link numbers), ``all_inactive``
    (NVML's "all links are inActive"), and the error counts (None when -e did not run).
    GPUs that print no link and no note (no NVLink) are left out."""
    status = ok(sections, "nvlink_status")
    if status is None:
        return {}
    errors_out = ok(sections, "nvlink_errors")
    try:
        gpus = parsers.parse_nvlink_status(status)
        errors = parsers.parse_nvlink_errors(errors_out) if errors_out is not None else []
    except ValueError:
        return {}
    by_key = {(e["uuid"] or f"#{e['index']}"): e["links"] for e in errors}
    result = {}
    for gpu in gpus:
        if not gpu["links"] and gpu["note"] != "all_inactive":
            continue
        key = gpu["uuid"] or f"#{gpu['index']}"
        links = gpu["links"]
        counts = _nvlink_counts(by_key[key]) if key in by_key else {
            "replay_errors": None, "recovery_errors": None, "crc_errors": None}
        result[key] = {
            "links_total": len(links),
            "links_active": sum(1 for link in links if link["state"] == "active"),
            "links_inactive": [link["link"] for link in links if link["state"] == "inactive"],
            "all_inactive": gpu["note"] == "all_inactive" or bool(links) and all(
                link["state"] == "inactive" for link in links),
            **counts,
        }
    return result


def _with_nvlink(health: dict[str, Any] | None, nvlink: dict[str, dict[str, Any]],
                 gpu: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU's health dict with its ``nvlink`` summary (None: no NVLink seen)."""
    if health is None:
        return None
    found = nvlink.get(gpu.get("uuid") or "") or nvlink.get(f"#{gpu['index']}")
    return {**health, "nvlink": found}


def gpus_state(sections: Sections) -> list[dict[str, Any]]:
    """See ``gpuhost.facts.nvidia.NvidiaGpus``."""
    smi, _error = smi_xml(sections)
    result = []
    pci, pci_source = pci_gpus(sections)
    ids_by_slot = {slot(d["slot"]): d["device_id"] for d in pci}
    if smi and smi["gpus"]:
        nvlink = nvlink_state(sections)
        for gpu in smi["gpus"]:
            model = policy.lookup_model(name=gpu["name"])
            capability = gpu.get("compute_capability") or (model or {}).get("compute_capability")
            mig_capable = gpu.get("mig_capable")
            if mig_capable is None and model is not None:
                mig_capable = model.get("mig") is not None
            device_id = ids_by_slot.get(slot(gpu["pci_bus_id"]))
            classified = _classified(device_id)
            architecture = gpu.get("architecture") or (model or {}).get("architecture")
            if architecture and architecture.strip().lower() in policy.ARCHITECTURES + (
                    "ada lovelace",):
                classified["generation"] = ("turing-or-newer" if policy.open_module_supported(
                    architecture) else "pre-turing")
            result.append(
                {
                    "index": gpu["index"],
                    "name": gpu["name"],
                    "model": model["key"] if model else None,
                    "architecture": architecture,
                    "uuid": gpu["uuid"],
                    "pci_bus_id": gpu["pci_bus_id"],
                    "memory_total_mib": gpu["memory_total_mib"],
                    "persistence_mode": gpu["persistence_mode"],
                    "mig_current": gpu["mig_current"],
                    "mig_pending": gpu["mig_pending"],
                    "mig_capable": mig_capable,
                    "compute_capability": capability,
                    "processes": gpu.get("processes") or [],
                    **classified,
                    "health": _with_nvlink(gpu["health"], nvlink, gpu),
                    "source": "nvidia-smi",
                }
            )
        return result
    for index, device in enumerate(pci):
        info = policy.classify_pci(device["device_id"])
        model = policy.lookup_model(info["model"]) if info["model"] else None
        listed = device.get("device_name")
        if listed in (None, "", "Device"):  # lspci without the id in its pci.ids: "Device [2901]"
            listed = None
        name = info["name"] or listed or f"NVIDIA device 10de:{device['device_id']}"
        result.append(
            {
                "index": index,
                "name": name,
                "model": model["key"] if model else None,
                "architecture": (model or {}).get("architecture"),
                "uuid": None,
                "pci_bus_id": device["slot"],
                "memory_total_mib": (model or {}).get("memory_mib"),
                "persistence_mode": None,
                "mig_current": None,
                "mig_pending": None,
                "mig_capable": (model.get("mig") is not None) if model else None,
                "compute_capability": (model or {}).get("compute_capability"),
                "processes": [],
                **_classified(device["device_id"]),
                "health": None,  # seen on the PCI bus only: nothing read from the GPU
                "source": pci_source,
            }
        )
    return result
