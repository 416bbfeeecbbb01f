"""A named MIG configuration on one host: what it wants per GPU (``wanted``), why it does
not fit the host's GPUs (``host_problems``) and what would change (``diff``), on the GPUs
as ``facts`` report them. Pure: no pyinfra, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuhost.mig.config import Entry
from gpuhost.mig.grammar import compact
from gpuhost.mig.tables import layout_problems, mig_profile_names


@dataclass(frozen=True)
class Want:
    """What a named configuration wants for one GPU."""

    index: int
    model: str | None
    mode: str                 # "enabled" | "disabled"
    profiles: tuple[str, ...]  # GPU instance profiles (enabled only)
    entry: Entry


def wanted(entries: Iterable[Entry], gpus: Iterable[Mapping]) -> dict[int, Want]:
    """Per MIG-capable GPU (``facts`` ``gpus``: index, model, pci_device_id, mig_capable)
    the last entry that matches it, as mig-parted applies them in order. GPUs no entry
    matches are not in the result (left alone)."""
    entries = list(entries)
    result: dict[int, Want] = {}
    for gpu in gpus:
        if not gpu.get("mig_capable"):
            continue
        for entry in entries:
            if entry.matches(gpu["index"], gpu.get("pci_device_id")):
                names = tuple(mig_profile_names(gpu.get("model"), entry.profiles))
                result[gpu["index"]] = Want(gpu["index"], gpu.get("model"),
                                            "enabled" if entry.enabled else "disabled",
                                            names if entry.enabled else (), entry)
    return result


def host_problems(name: str, wants: Mapping[int, Want], gpus: Iterable[Mapping]) -> list[str]:
    """Per GPU this host has, why its entry does not fit it (the GPU, the profiles, why)."""
    by_index = {gpu["index"]: gpu for gpu in gpus}
    problems = []
    for index, want in sorted(wants.items()):
        if want.mode != "enabled" or not want.profiles:
            continue
        gpu = by_index.get(index, {})
        model = want.model or gpu.get("name") or "unknown model"
        found = layout_problems(want.model, list(want.profiles), gpu.get("name"),
                                gpu.get("pci_device_id"))
        ci_forms = sorted({p for p in want.profiles if "c." in p})
        if ci_forms:
            found.append(f"{', '.join(ci_forms)}: compute-instance profiles are checked but "
                         "not created by gpuhost (it creates each GPU instance with its "
                         "default compute instance); use GPU instance profiles")
        if found:
            problems.append(f"mig_config {name} {want.entry.shown()}: GPU {index} ({model}): "
                            f"{compact(want.profiles)} does not fit: {'; '.join(found)}")
    return problems


@dataclass(frozen=True)
class GpuPlan:
    index: int
    model: str | None
    now: str
    wanted: str
    mode_change: bool
    layout_change: bool

    @property
    def changes(self) -> bool:
        return self.mode_change or self.layout_change


def _shown(mode: str | None, profiles: Iterable[str], pending: str | None = None) -> str:
    if mode != "enabled":
        text = f"MIG {mode or 'unknown'}"
    else:
        names = list(profiles)
        text = "MIG enabled, " + (compact(names) if names else "no instances")
    if pending and pending != mode:
        text += f" (pending {pending})"
    return text


def diff(wants: Mapping[int, Want], mig_gpus: Iterable[Mapping]) -> list[GpuPlan]:
    """Per wanted GPU: now (``gpuhost.facts.mig.MigState`` gpus) and wanted, compared by mode and
    by the sorted profile names of the GPU instances."""
    plans = []
    by_index = {gpu["index"]: gpu for gpu in mig_gpus}
    for index, want in sorted(wants.items()):
        gpu = by_index.get(index)
        if gpu is None:  # a MIG GPU lspci shows but no driver answers for: all to do
            plans.append(GpuPlan(index, want.model, "unknown (nvidia-smi does not answer)",
                                 _shown(want.mode, want.profiles), True, want.mode == "enabled"))
            continue
        current, pending = gpu.get("mode_current"), gpu.get("mode_pending")
        have = sorted(i["profile"] for i in gpu.get("gpu_instances") or [])
        mode_change = not (current == want.mode and pending in (want.mode, None))
        layout_change = want.mode == "enabled" and have != sorted(want.profiles)
        plans.append(GpuPlan(index, want.model or gpu.get("name"),
                             _shown(current, have, pending),
                             _shown(want.mode, want.profiles), mode_change, layout_change))
    return plans
