"""GPU models: gpuhost's table of NVIDIA GPUs and the lookup by product name or PCI id.

Pure data and functions (no pyinfra, no I/O on hosts). The tables are data files in
``gpuhost/data/`` (each names its source and date): ``gpu_models.json`` (architecture,
compute capability, MIG, PCI ids) and ``mig_profiles.json`` (GPU instance profiles and
placements).
"""

from __future__ import annotations

import json
from importlib import resources


def load_data(name: str) -> dict:
    """The JSON table ``gpuhost/data/<name>``."""
    return json.loads(resources.files("gpuhost").joinpath("data", name).read_text(encoding="utf-8"))


ARCHITECTURES = ("maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")


def _mig_profiles(table: dict) -> dict:
    return {name: {**spec, "starts": tuple(spec["starts"])} for name, spec in table.items()}


MIG_PROFILES: dict[str, dict] = {
    name: _mig_profiles(table) for name, table in load_data("mig_profiles.json")["tables"].items()
}


def _model(spec: dict) -> dict:
    mig = spec["mig"]
    if mig is not None:
        mig = {**mig, "profiles": MIG_PROFILES[mig["profiles"]] if mig["profiles"] else None}
    return {**spec, "names": tuple(spec["names"]), "pci_device_ids": tuple(spec["pci_device_ids"]),
            "mig": mig}


# key -> architecture, compute capability, memory MiB, data-center, product names as printed,
# PCI device ids, MIG (minimum driver, reset needed to enable, GPU-instance profiles, compute
# slices): gpuhost/data/gpu_models.json says what each field holds and where it comes from.
GPU_MODELS: dict[str, dict] = {
    key: _model(spec) for key, spec in load_data("gpu_models.json")["models"].items()
}


def _norm_name(name: str) -> str:
    text = " ".join(str(name).split()).lower()
    return text[len("nvidia "):] if text.startswith("nvidia ") else text


_BY_NAME = {_norm_name(n): k for k, m in GPU_MODELS.items() for n in (k, *m["names"])}
_BY_PCI = {p: k for k, m in GPU_MODELS.items() for p in m["pci_device_ids"]}


def lookup_model(name: str | None = None, pci_device_id: str | None = None) -> dict | None:
    """The GPU_MODELS entry (a copy, with its ``key``) for a product name as nvidia-smi
    prints it ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", any case), a model key, or a
    PCI device id ("20b0", "0x20B010DE", "20B010DE"). None when unknown."""
    key = None
    if name:
        key = _BY_NAME.get(_norm_name(name))
    if key is None and pci_device_id:
        pci = str(pci_device_id).strip().lower().removeprefix("0x")
        if len(pci) == 8 and pci.endswith("10de"):  # nvidia-smi: device id + vendor id
            pci = pci[:4]
        key = _BY_PCI.get(pci)
    if key is None:
        return None
    return {"key": key, **GPU_MODELS[key]}
