"""MIG layouts against GPU models: the per-GPU profile tables of
``gpuhost/data/mig_profiles.json`` (profile -> id, max, size, starts; each table names its
source and date), the placement of GPU instances in memory slices, and the one judgement
of a layout (``layout_problems``; ``mig_layout_valid`` for a gpu_models key). Pure: no
pyinfra, no I/O on hosts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpuhost.gpu_models import GPU_MODELS, load_data, lookup_model
from gpuhost.mig.grammar import parse_profile, profile_name

NVIDIA_VENDOR = 0x10DE


def packed_pci_id(pci_device_id: str | None) -> str | None:
    """'20b0' (facts) -> '0x20B010DE', mig-parted's form (device id, then vendor id)."""
    if not pci_device_id:
        return None
    text = str(pci_device_id).strip().lower().removeprefix("0x")
    if len(text) == 8:
        return "0x" + text.upper()
    if len(text) == 4:
        return f"0x{text.upper()}{NVIDIA_VENDOR:04X}"
    return None


# gpuhost/data/mig_profiles.json: ``tables`` (profile -> id, max, size, starts), their
# sources and dates (``table_sources``) and ``gpus``: product name as nvidia-smi prints it
# -> table, compute slices and the gpu_models.json key.

@dataclass(frozen=True)
class GpuTable:
    """The MIG profile table of one GPU product."""

    name: str          # shown in messages: the gpu_models key where there is one
    table: str         # the key in mig_profiles.json's tables
    slices: int        # compute slices
    profiles: Mapping[str, Mapping[str, Any]]


def _norm(name: str) -> str:
    text = " ".join(str(name).split()).lower()
    return text[len("nvidia "):] if text.startswith("nvidia ") else text


@lru_cache(maxsize=1)
def _data() -> dict:
    return load_data("mig_profiles.json")


@lru_cache(maxsize=1)
def _gpus() -> dict[str, GpuTable]:
    """Normalised product name, gpu_models key and PCI device id ("pci:2348") -> its
    GpuTable. A gpu_models key whose products have different tables (GH200 96GB and
    144GB) maps to the first; messages then name the product, not the key."""
    data = _data()
    tables_of: dict[str, set[str]] = {}
    for spec in data["gpus"].values():
        if spec["model"]:
            tables_of.setdefault(spec["model"], set()).add(spec["table"])
    result: dict[str, GpuTable] = {}
    for product, spec in data["gpus"].items():
        model = spec["model"]
        shown = model if model and len(tables_of[model]) == 1 else product
        gpu = GpuTable(shown, spec["table"], spec["slices"], data["tables"][spec["table"]])
        result[_norm(product)] = gpu
        if model:
            result.setdefault(_norm(model), gpu)
        for pci in spec.get("pci_device_ids") or ():
            result[f"pci:{pci.lower()}"] = gpu
    return result


def gpu_table(model_key: str | None = None, name: str | None = None,
              pci_device_id: str | None = None) -> GpuTable | None:
    """The profile table for a GPU named by its PCI device id ("2348", "0x234810DE"), its
    product name (as nvidia-smi prints it, "NVIDIA " prefix or not) or its gpu_models
    key, in that order; None when gpuhost has none."""
    packed = packed_pci_id(pci_device_id)
    if packed and f"pci:{packed[2:6].lower()}" in _gpus():
        return _gpus()[f"pci:{packed[2:6].lower()}"]
    for text in (name, model_key):
        if text and _norm(text) in _gpus():
            return _gpus()[_norm(text)]
    model = lookup_model(model_key or name, pci_device_id) \
        if (model_key or name or pci_device_id) else None
    if model and _norm(model["key"]) in _gpus():
        return _gpus()[_norm(model["key"])]
    return None


def table_problems(gpu: GpuTable, profiles: Iterable[str]) -> list[str]:
    """Why ``profiles`` (one entry per instance, as Entry.profiles) do not fit one GPU of
    ``gpu``: profile known to it, instances per profile, compute slices, a placement of
    the memory slices. A compute-instance form (``1c.2g.10gb`` x n) needs GPU instances
    of its G profile, each holding G // C such compute instances. [] fits."""
    problems: list[str] = []
    wanted: dict[str, int] = {}       # GPU instance profile -> compute instances (by C)
    per_gi: dict[str, int] = {}
    for text in profiles:
        parsed, why = parse_profile(text)
        if why:
            problems.append(why)
            continue
        gi = parsed.gpu_instance
        if gi not in gpu.profiles:
            problems.append(f"unknown MIG profile {gi!r} for {gpu.name} (known: "
                            f"{', '.join(gpu.profiles)})")
            continue
        if parsed.c < 1 or parsed.c > parsed.g:
            problems.append(f"{parsed}: a compute instance of {parsed.c} slices does not fit "
                            f"a {parsed.g}-slice GPU instance")
            continue
        key = f"{parsed.c}c.{gi}" if parsed.compute_instance_form else gi
        wanted[key] = wanted.get(key, 0) + 1
        per_gi[key] = parsed.g // parsed.c
    if problems:
        return sorted(set(problems), key=problems.index)
    instances: dict[str, int] = {}    # GPU instance profile -> GPU instances needed
    for key, count in wanted.items():
        gi = key.split("c.", 1)[1] if "c." in key else key
        instances[gi] = instances.get(gi, 0) + -(-count // per_gi[key])
    for gi, count in instances.items():
        allowed = gpu.profiles[gi]["max"]
        if count > allowed:
            problems.append(f"{gi} x{count}: {gpu.name} allows at most {allowed}")
    slices = sum(int(gi.split("g.", 1)[0]) * n for gi, n in instances.items())
    if slices > gpu.slices:
        problems.append(f"layout uses {slices} compute slices, {gpu.name} has {gpu.slices}")
    if not problems:
        sizes = sorted(((gpu.profiles[gi]["size"], tuple(gpu.profiles[gi]["starts"]))
                        for gi, n in instances.items() for _ in range(n)), reverse=True)
        if not placement_fits(sizes, frozenset()):
            names = [gi for gi, n in instances.items() for _ in range(n)]
            problems.append(f"layout {' + '.join(names)} does not fit on {gpu.name}: no "
                            "placement of the memory slices works (see `nvidia-smi mig -lgipp`)")
    return problems


def layout_problems(model_key: str | None, profiles: list[str], name: str | None = None,
                    pci_device_id: str | None = None) -> list[str]:
    """Why ``profiles`` do not fit one GPU of ``model_key`` (gpu_models key), ``name``
    (product name) or ``pci_device_id``: by gpuhost's profile table for that GPU; a GPU
    with none gets the grammar and the slice sum only; a GPU gpuhost does not know at all is not
    checked ([]). [] fits."""
    gpu = gpu_table(model_key, name, pci_device_id)
    if gpu is not None:
        return table_problems(gpu, profiles) if profiles else []
    model = lookup_model(model_key or name) if (model_key or name) else None
    if model is None:
        return []
    if not model["mig"]:
        return [f"{model['key']} does not support MIG"]
    return _untabled_problems(model["key"], model["mig"]["slices"], profiles)


def _untabled_problems(shown: str, slices: int, profiles: Iterable[str]) -> list[str]:
    """A MIG GPU without a profile table: only the grammar and the compute slices of the
    GPU instances (the host's ``nvidia-smi mig -lgip`` is the authority)."""
    problems: list[str] = []
    instances: dict[str, list[int]] = {}   # GPU instance -> [its slices, compute instances]
    for text in profiles:
        parsed, why = parse_profile(text)
        if why:
            problems.append(why)
            continue
        per_gi = parsed.g // max(parsed.c, 1)
        slot = instances.setdefault(f"{parsed.c}c.{parsed.gpu_instance}", [parsed.g, per_gi, 0])
        slot[2] += 1
    used = sum(g * -(-n // per) for g, per, n in instances.values())
    if used > slices:
        problems.append(f"layout uses {used} compute slices, {shown} has {slices}")
    return problems


def profile_names(model: str | None, profiles: Iterable) -> list[str]:
    """``profiles`` (names, "MIG " names or profile ids) as the names this GPU's table
    (``model``: a gpu_models key or the product name) and ``nvidia-smi mig -lgi`` use; an
    id the table lacks stays digits, a name that does not parse is only lower-cased."""
    gpu = gpu_table(model) if model else None
    ids = {spec["id"]: prof for prof, spec in gpu.profiles.items()
           if spec.get("id") is not None} if gpu else {}
    names = []
    for item in profiles:
        text = str(item).strip().lower()
        if text.startswith("mig "):
            text = text[4:].strip()
        if text.isdigit():
            names.append(ids.get(int(text), text))
        else:
            names.append(profile_name(text))
    return names


def distinct_tables() -> dict[str, list[str]]:
    """Table -> the GPU names that use it (for messages), in the file's order."""
    tables: dict[str, list[str]] = {}
    for gpu in _gpus().values():
        names = tables.setdefault(gpu.table, [])
        if gpu.name not in names:
            names.append(gpu.name)
    return tables


def placement_fits(sizes: list[tuple[int, tuple[int, ...]]], used: frozenset[int]) -> bool:
    """Backtracking placement: can every (size, starts) be placed without overlap?"""
    if not sizes:
        return True
    size, starts = sizes[0]
    for start in starts:
        slots = frozenset(range(start, start + size))
        if not slots & used and placement_fits(sizes[1:], used | slots):
            return True
    return False


def mig_profile_names(model_key: str | None, profiles: Iterable) -> list[str]:
    """``profiles`` as the names ``nvidia-smi mig -lgi`` prints for this GPU model (a
    gpu_models key or the product name): profile ids (19), "MIG 1g.5gb" and any case become
    "1g.5gb" through the GPU's own profile table (``profile_names``), so a layout given as
    ids compares equal to the instances it created. An id the table does not have (or no
    table) stays digits; names are only lower-cased and stripped of "MIG "."""
    return profile_names(model_key, profiles)


def mig_layout_valid(model_key: str, profiles: Iterable) -> list[str]:
    """Problems with creating GPU instances ``profiles`` (names like "3g.20gb", "1g.24gb+gfx"
    or profile ids) on one GPU of ``model_key``; an empty list means the layout fits.

    The same judgement as a named configuration's (``layout_problems``):
    the model supports MIG, every profile parses (mig-parted's grammar: ``+me``, ``+me.all``,
    ``-me``, ``+gfx``) and exists in the GPU's table, no profile is used more often than its
    maximum, the compute slices add up to at most the GPU's (7; 4 on A30 and RTX PRO 6000
    Blackwell), and a non-overlapping placement exists (as ``nvidia-smi mig -lgipp`` lists
    them). A MIG model without a table gets the grammar and the slice sum only.
    """
    model = lookup_model(model_key)
    if model is None:
        return [f"unknown GPU model {model_key!r} (known: {', '.join(GPU_MODELS)})"]
    if not model["mig"]:
        return [f"{model['key']} does not support MIG"]
    names = mig_profile_names(model["key"], profiles)
    return layout_problems(model["key"], names) if names else []


def mig_needs_reset(model_key: str) -> bool | None:
    """Whether enabling MIG stays pending until a GPU reset or reboot (Ampere yes,
    Hopper and newer no). None for unknown or non-MIG models."""
    model = lookup_model(model_key)
    if model is None or not model["mig"]:
        return None
    return bool(model["mig"]["reset_required"])
