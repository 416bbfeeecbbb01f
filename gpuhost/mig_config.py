"""Named MIG configurations: a mig-parted-style YAML file, validated on the controller.

The file has the shape of NVIDIA mig-parted's config (``api/spec/v1/spec.go`` and
``examples/config.yaml`` of github.com/NVIDIA/mig-parted @bd7160f, read 2026-11-24)::

    version: v1
    mig-configs:
      NAME:
        - devices: all | [0, 1]           # nvidia-smi indexes
          device-filter: ["0x233010DE"]  # optional: PCI device id + vendor id
          mig-enabled: true
          mig-devices: {"1g.10gb": 2, "3g.40gb": 1}

As in mig-parted, ``devices`` and ``mig-enabled`` are required, ``mig-devices`` is
required when ``mig-enabled`` is true and must be empty when it is false, and the entries
are applied in order, so a GPU that several entries match gets the last one; a GPU no
entry matches is left alone. docs/mig.md is the user's description.

Pure: no pyinfra, no I/O except reading the file (``load``). ``check(path, name)`` is the
controller-side check (no host facts); ``wanted(entries, gpus)``, ``host_problems`` and
``diff`` work on a host's GPUs as ``facts`` report them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost import policy

NVIDIA_VENDOR = 0x10DE


class MigConfigError(ValueError):
    """The file cannot be used; ``problems`` has one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class Entry:
    """One item of a named configuration."""

    position: int                       # 1-based, as shown in messages
    devices: str | tuple[int, ...]      # "all" or GPU indexes
    device_filter: tuple[str, ...]      # normalised "0x233010DE"; () matches every GPU
    enabled: bool
    mig_devices: tuple[tuple[str, int], ...]  # (profile, count), as written

    @property
    def profiles(self) -> list[str]:
        return [name for name, count in self.mig_devices for _ in range(count)]

    def matches(self, index: int, pci_device_id: str | None) -> bool:
        if self.devices != "all" and index not in self.devices:
            return False
        if not self.device_filter:
            return True
        own = _packed(pci_device_id)
        return own is not None and own in self.device_filter

    def shown(self) -> str:
        where = "devices: all" if self.devices == "all" else \
            f"devices: [{', '.join(str(i) for i in self.devices)}]"
        if self.device_filter:
            where += f", device-filter: {', '.join(self.device_filter)}"
        return f"entry {self.position} ({where})"


def _packed(pci_device_id: str | None) -> str | None:
    """'20b0' (facts) -> '0x20B010DE', mig-parted's form (device id, then vendor id)."""
    if not pci_device_id:
        return None
    text = str(pci_device_id).strip().lower().removeprefix("0x")
    if len(text) == 8:
        return "0x" + text.upper()
    if len(text) == 4:
        return f"0x{text.upper()}{NVIDIA_VENDOR:04X}"
    return None


def _filter_id(value: Any, where: str) -> tuple[str | None, str | None]:
    if not isinstance(value, str):
        return None, (f"{where}: device-filter {value!r} is not a string like \"0x233010DE\" "
                      "(quote it: YAML reads 0x233010DE unquoted as a number)")
    if ":" in value:
        return None, (f"{where}: device-filter {value!r}: subsystem ids (DEVICEVENDOR:SUBSYSTEM) "
                      "are not supported by gpuhost; name the device id only")
    try:
        number = int(value.strip(), 0)
    except ValueError:
        return None, f"{where}: device-filter {value!r} is not a PCI id like \"0x233010DE\""
    if not 0 < number <= 0xFFFFFFFF:
        return None, f"{where}: device-filter {value!r} is not a PCI id like \"0x233010DE\""
    return f"0x{number:08X}", None


def _entry(raw: Any, name: str, position: int) -> tuple[Entry | None, list[str]]:
    where = f"mig-configs.{name} entry {position}"
    if not isinstance(raw, Mapping):
        return None, [f"{where}: not a mapping (want devices, mig-enabled, mig-devices)"]
    problems = []
    unknown = sorted(set(map(str, raw)) - {"devices", "device-filter", "mig-enabled", "mig-devices"})
    if unknown:
        problems.append(f"{where}: unexpected field {', '.join(unknown)}")
    for required in ("devices", "mig-enabled"):
        if required not in raw:
            problems.append(f"{where}: missing required field {required}")
    devices: Any = raw.get("devices")
    if "devices" in raw:
        if devices == "all":
            pass
        elif isinstance(devices, list) and devices and all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in devices):
            devices = tuple(devices)
        else:
            problems.append(f"{where}: devices {devices!r} is not \"all\" or a list of GPU indexes")
    filters: list[str] = []
    if raw.get("device-filter") is not None:
        given = raw["device-filter"]
        for item in (given if isinstance(given, list) else [given]):
            packed, problem = _filter_id(item, where)
            if problem:
                problems.append(problem)
            else:
                filters.append(packed)
    enabled = raw.get("mig-enabled")
    if "mig-enabled" in raw and not isinstance(enabled, bool):
        problems.append(f"{where}: mig-enabled {enabled!r} is not true or false")
    mig_devices = raw.get("mig-devices")
    pairs: list[tuple[str, int]] = []
    if mig_devices is None:
        if enabled is True:
            problems.append(f"{where}: missing required field mig-devices when mig-enabled is "
                            "true (write {} for MIG enabled without instances)")
    elif not isinstance(mig_devices, Mapping):
        problems.append(f"{where}: mig-devices is not a mapping of profile to count")
    else:
        for profile, count in mig_devices.items():
            text = str(profile).strip().lower()
            if not policy._PROFILE_RE.fullmatch(text):
                problems.append(f"{where}: {profile!r} is not a MIG profile name like \"1g.10gb\"")
            elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
                problems.append(f"{where}: {profile}: count {count!r} is not a whole number >= 0")
            elif count:
                pairs.append((text, count))
        if enabled is False and pairs:
            problems.append(f"{where}: MIG devices listed while mig-enabled is false")
    if problems:
        return None, problems
    return Entry(position, devices, tuple(filters), bool(enabled), tuple(pairs)), []


def parse(document: Any, source: str = "mig_config_file") -> dict[str, tuple[Entry, ...]]:
    """The file's configurations (name -> entries); MigConfigError lists every problem."""
    if not isinstance(document, Mapping):
        raise MigConfigError([f"{source}: not a mapping with version and mig-configs"])
    problems = []
    unknown = sorted(set(map(str, document)) - {"version", "mig-configs"})
    if unknown:
        problems.append(f"{source}: unexpected field {', '.join(unknown)}")
    if document.get("version") != "v1":
        problems.append(f"{source}: version {document.get('version')!r} is not v1")
    configs = document.get("mig-configs")
    if not isinstance(configs, Mapping) or not configs:
        raise MigConfigError(problems + [f"{source}: mig-configs: at least one named "
                                         "configuration is required"])
    result: dict[str, tuple[Entry, ...]] = {}
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            problems.append(f"{source}: mig-configs.{name}: at least one entry is required")
            continue
        parsed = []
        for position, raw in enumerate(entries, 1):
            entry, found = _entry(raw, str(name), position)
            problems += [f"{source}: {p}" for p in found]
            if entry:
                parsed.append(entry)
        result[str(name)] = tuple(parsed)
    if problems:
        raise MigConfigError(problems)
    return result


_CACHE: dict[tuple, dict[str, tuple[Entry, ...]] | MigConfigError] = {}


def load(path: str) -> dict[str, tuple[Entry, ...]]:
    """Parse the controller file ``path`` (cached while it is unchanged)."""
    import yaml

    real = os.path.expanduser(path)
    try:
        stat = os.stat(real)
    except OSError as error:
        raise MigConfigError([f"mig_config_file {path}: cannot read it ({error.strerror})"]) from None
    key = (real, stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        try:
            with open(real, encoding="utf-8") as handle:
                _CACHE[key] = parse(yaml.safe_load(handle), f"mig_config_file {path}")
        except yaml.YAMLError as error:
            _CACHE[key] = MigConfigError([f"mig_config_file {path}: not YAML ({error})"])
        except MigConfigError as error:
            _CACHE[key] = error
        except OSError as error:
            _CACHE[key] = MigConfigError([f"mig_config_file {path}: cannot read it ({error})"])
    found = _CACHE[key]
    if isinstance(found, MigConfigError):
        raise found
    return found


def select(path: str, name: str) -> tuple[Entry, ...]:
    configs = load(path)
    if name not in configs:
        raise MigConfigError([f"{name!r} is not in {path} (it has: "
                              f"{', '.join(sorted(configs))})"])
    return configs[name]


# --- fitting layouts to GPU models ------------------------------------------------------

def _tables() -> dict[str, list[str]]:
    """Profile table -> the MIG models that use it (models without a table left out)."""
    tables: dict[str, list[str]] = {}
    for key, model in policy.GPU_MODELS.items():
        if model["mig"] and model["mig"]["profiles"]:
            tables.setdefault(id(model["mig"]["profiles"]), []).append(key)  # type: ignore[arg-type]
    return {models[0]: models for models in tables.values()}


def layout_problems(model_key: str, profiles: list[str]) -> list[str]:
    """Why ``profiles`` do not fit one GPU of ``model_key`` (policy's check); [] fits."""
    return policy.mig_layout_valid(model_key, profiles) if profiles else \
        ([] if (policy.lookup_model(model_key) or {}).get("mig") else
         [f"{model_key} does not support MIG"])


def check(path: str, name: str) -> list[str]:
    """The controller's check, before any host is contacted (one line per problem, each
    starting with the name or with ``mig_config_file``): the file parses, ``name`` is
    in it, every entry with a device-filter fits each GPU model the filter names (ids
    gpuhost's table does not know are matched on the host and checked there), and every
    entry without one fits at least one MIG model (each host's own GPUs are checked again
    when its facts arrive, before any host is changed)."""
    try:
        entries = select(path, name)
    except MigConfigError as error:
        return error.problems
    problems = []
    for entry in entries:
        if not entry.enabled or not entry.profiles:
            continue
        layout = compact(entry.profiles)
        if entry.device_filter:
            for packed in entry.device_filter:
                model = policy.lookup_model(pci_device_id=packed)
                if model is None:
                    continue
                found = layout_problems(model["key"], entry.profiles)
                if found:
                    problems.append(f"{name} {entry.shown()}: {layout} does not fit "
                                    f"{model['key']} ({packed}): {'; '.join(found)}")
            continue
        reasons = {}
        candidates = [k for k, m in policy.GPU_MODELS.items() if m["mig"]]
        for key in candidates:
            found = layout_problems(key, entry.profiles)
            if not found:
                reasons = {}
                break
            reasons[key] = found
        if reasons:
            shown = [f"{models[0]}{' (and ' + ', '.join(models[1:]) + ')' if models[1:] else ''}"
                     f": {'; '.join(reasons[models[0]])}" for models in _tables().values()]
            problems.append(f"{name} {entry.shown()}: {layout} fits no MIG GPU "
                            f"model: {' | '.join(shown)}")
    return problems


# --- one host ---------------------------------------------------------------------------

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
                names = tuple(policy.mig_profile_names(gpu.get("model"), entry.profiles))
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
        found = layout_problems(want.model, list(want.profiles)) if want.model else []
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


def compact(profiles: Iterable[str]) -> str:
    """["1g.10gb", "1g.10gb", "3g.40gb"] -> "2x 1g.10gb + 3g.40gb" (sorted)."""
    counts: dict[str, int] = {}
    for name in sorted(profiles):
        counts[name] = counts.get(name, 0) + 1
    return " + ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())


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
    """Per wanted GPU: now (``facts.mig.MigState`` gpus) and wanted, compared by mode and
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
