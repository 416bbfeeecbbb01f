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

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuhost import policy

NVIDIA_VENDOR = 0x10DE

# --- profile grammar ---------------------------------------------------------------------
# mig-parted's (go-nvlib ``pkg/nvlib/device/mig_profile.go`` vendored in mig-parted @bd7160f,
# read 2026-11-27): ``[<C>c.]<G>g.<GB>gb[(+|-)<attr>[,<attr>...]]``. C defaults to G (a GPU
# instance with its full compute instance); with C < G it names compute instances of C
# slices inside a G-slice GPU instance (``1c.2g.10gb``). Attributes: ``+me`` (a media
# engine), ``+me.all`` (all of them), ``+gfx`` (graphics), ``-me`` (no media engine); a
# profile has either ``+`` or ``-`` attributes, never both; an attribute is unique, starts
# with a letter, has letters, digits and dots and neither starts nor ends with a dot.
_FIELDS_RE = re.compile(r"(?:(\d+)c\.)?(\d+)g\.(\d+)gb")
_ATTR_RE = re.compile(r"[A-Za-z][A-Za-z0-9.]*")


@dataclass(frozen=True)
class Profile:
    """One parsed profile name."""

    c: int
    g: int
    gb: int
    sign: str                  # "", "+" or "-"
    attributes: tuple[str, ...]

    @property
    def gpu_instance(self) -> str:
        """The GPU instance profile name (``1c.2g.10gb`` -> ``2g.10gb``)."""
        suffix = self.sign + ",".join(self.attributes) if self.attributes else ""
        return f"{self.g}g.{self.gb}gb{suffix}"

    @property
    def compute_instance_form(self) -> bool:
        return self.c != self.g

    def __str__(self) -> str:
        return (f"{self.c}c." if self.compute_instance_form else "") + self.gpu_instance


def parse_profile(text: str) -> tuple[Profile | None, str | None]:
    """(Profile, None) or (None, why): mig-parted's grammar, case-insensitive as gpuhost
    has always read profile names (nvidia-smi prints them lower case)."""
    name = str(text).strip().lower()
    if not name:
        return None, "the empty string is not a MIG profile name"
    plus, minus = "+" in name, "-" in name
    if plus and minus:
        return None, f"{text!r} has both '+' and '-' attributes (mig-parted allows one kind)"
    sign = "+" if plus else "-" if minus else ""
    fields, _, attrs = name.partition(sign) if sign else (name, "", "")
    m = _FIELDS_RE.fullmatch(fields)
    if not m:
        return None, (f"{text!r} is not a MIG profile name like \"1g.10gb\", \"1g.24gb+me.all\" "
                      "or \"1c.2g.10gb\"")
    attributes: tuple[str, ...] = ()
    if sign:
        parts = attrs.split(",")
        for attr in parts:
            if not _ATTR_RE.fullmatch(attr) or attr.endswith("."):
                return None, f"{text!r}: attribute {attr!r} is not like \"me\", \"me.all\" or \"gfx\""
        if len(set(parts)) != len(parts):
            return None, f"{text!r}: an attribute is listed twice"
        attributes = tuple(parts)
    g, gb = int(m.group(2)), int(m.group(3))
    c = int(m.group(1)) if m.group(1) is not None else g
    return Profile(c, g, gb, sign, attributes), None


def profile_name(text: str) -> str:
    """The canonical name of a valid profile (``2c.2g.10gb`` -> ``2g.10gb``); unchanged
    (lower-cased) when it does not parse."""
    parsed, _ = parse_profile(text)
    return str(parsed) if parsed else str(text).strip().lower()


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


# --- fitting layouts to GPU models ------------------------------------------------------
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
    return json.loads(resources.files("gpuhost").joinpath("data", "mig_profiles.json")
                      .read_text(encoding="utf-8"))


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
    packed = _packed(pci_device_id)
    if packed and f"pci:{packed[2:6].lower()}" in _gpus():
        return _gpus()[f"pci:{packed[2:6].lower()}"]
    for text in (name, model_key):
        if text and _norm(text) in _gpus():
            return _gpus()[_norm(text)]
    model = policy.lookup_model(model_key or name, pci_device_id) \
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
        if not policy.placement_fits(sizes, frozenset()):
            names = [gi for gi, n in instances.items() for _ in range(n)]
            problems.append(f"layout {' + '.join(names)} does not fit on {gpu.name}: no "
                            "placement of the memory slices works (see `nvidia-smi mig -lgipp`)")
    return problems


def layout_problems(model_key: str | None, profiles: list[str], name: str | None = None,
                    pci_device_id: str | None = None) -> list[str]:
    """Why ``profiles`` do not fit one GPU of ``model_key`` (gpu_models key), ``name``
    (product name) or ``pci_device_id``: by gpuhost's profile table for that GPU; a GPU
    with none falls back to policy's check; a GPU gpuhost does not know at all is not
    checked ([]). [] fits."""
    gpu = gpu_table(model_key, name, pci_device_id)
    if gpu is not None:
        return table_problems(gpu, profiles) if profiles else []
    model = policy.lookup_model(model_key or name) if (model_key or name) else None
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


def _distinct_tables() -> dict[str, list[str]]:
    """Table -> the GPU names that use it (for messages), in the file's order."""
    tables: dict[str, list[str]] = {}
    for gpu in _gpus().values():
        names = tables.setdefault(gpu.table, [])
        if gpu.name not in names:
            names.append(gpu.name)
    return tables


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
                model = policy.lookup_model(pci_device_id=packed)
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
        for table, gpus in _distinct_tables().items():
            found = table_problems(_gpus()[_norm(gpus[0])], entry.profiles)
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
