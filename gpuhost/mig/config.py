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
controller-side check (no host facts). The profile grammar is ``gpuhost.mig.grammar``, the
per-GPU tables and placements ``gpuhost.mig.tables``, and what a configuration wants of one
host's GPUs (``wanted``, ``host_problems``, ``diff``) ``gpuhost.mig.plan``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost.gpu_models import lookup_model
from gpuhost.mig.grammar import compact, parse_profile
from gpuhost.mig.tables import (
    distinct_tables,
    gpu_table,
    layout_problems,
    packed_pci_id,
    table_problems,
)


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
        own = packed_pci_id(pci_device_id)
        return own is not None and own in self.device_filter

    def shown(self) -> str:
        where = "devices: all" if self.devices == "all" else \
            f"devices: [{', '.join(str(i) for i in self.devices)}]"
        if self.device_filter:
            where += f", device-filter: {', '.join(self.device_filter)}"
        return f"entry {self.position} ({where})"


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
        counted = 0
        for profile, count in mig_devices.items():
            parsed, why = parse_profile(str(profile))
            if why:
                problems.append(f"{where}: {why}")
            elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
                problems.append(f"{where}: {profile}: count {count!r} is not a whole number >= 0")
            else:
                counted += 1
                if count:
                    pairs.append((str(parsed), count))
        # mig-parted (pkg/types/mig_config.go AssertValidFormat): a non-empty mig-devices
        # whose counts are all 0 is refused; a 0 beside other counts is ignored.
        if counted and counted == len(mig_devices) and not pairs:
            problems.append(f"{where}: mig-devices: all counts are 0 (mig-parted refuses this; "
                            "write {} for MIG enabled without instances, or a count of at "
                            "least 1)")
        if enabled is False and pairs:
            problems.append(f"{where}: MIG devices listed while mig-enabled is false")
    if problems:
        return None, problems
    return Entry(position, devices, tuple(filters), bool(enabled), tuple(pairs)), []


def parse(document: Any, source: str = "mig_config_file") -> dict[str, tuple[Entry, ...]]:
    """The file's configurations (name -> entries); MigConfigError lists every problem."""
    if isinstance(document, Mapping) and document.get("kind") == "ConfigMap":
        document = _from_config_map(document, source)
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


def _from_config_map(document: Mapping, source: str) -> Any:
    """GPU Operator ships its default as a Kubernetes ConfigMap (``default-mig-parted-config``,
    ``data: {config.yaml: |...}``, the key mig-manager reads): the config inside it."""
    import yaml

    data = document.get("data")
    if not isinstance(data, Mapping) or not data:
        raise MigConfigError([f"{source}: a ConfigMap without data"])
    key = "config.yaml" if "config.yaml" in data else (next(iter(data)) if len(data) == 1 else None)
    if key is None or not isinstance(data[key], str):
        raise MigConfigError([f"{source}: ConfigMap data has no config.yaml (it has: "
                              f"{', '.join(map(str, data))})"])
    try:
        return yaml.safe_load(data[key])
    except yaml.YAMLError as error:
        raise MigConfigError([f"{source}: ConfigMap data {key} is not YAML ({error})"]) from None


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


def check(path: str, name: str) -> list[str]:
    """The controller's check, before any host is contacted (one line per problem, each
    starting with the name or with ``mig_config_file``): the file parses, ``name`` is
    in it, every entry with a device-filter fits each GPU model the filter names (ids
    gpuhost's table does not know are matched on the host and checked there), and every
    entry without one fits at least one MIG GPU (each host's own GPUs are checked again
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
                gpu = gpu_table(pci_device_id=packed)
                model = lookup_model(pci_device_id=packed)
                if gpu is None and model is None:
                    continue
                found = table_problems(gpu, entry.profiles) if gpu else \
                    layout_problems(model["key"], entry.profiles)
                if found:
                    problems.append(f"{name} {entry.shown()}: {layout} does not fit "
                                    f"{gpu.name if gpu else model['key']} ({packed}): "
                                    f"{'; '.join(found)}")
            continue
        reasons = {}
        for table, gpus in distinct_tables().items():
            found = table_problems(gpu_table(name=gpus[0]), entry.profiles)
            if not found:
                reasons = {}
                break
            reasons[table] = (gpus, found)
        if reasons:
            shown = [f"{gpus[0]}{' (and ' + ', '.join(gpus[1:]) + ')' if gpus[1:] else ''}"
                     f": {'; '.join(found)}" for gpus, found in reasons.values()]
            problems.append(f"{name} {entry.shown()}: {layout} fits no MIG GPU "
                            f"model: {' | '.join(shown)}")
    return problems
