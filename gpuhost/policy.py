"""Version rules and GPU knowledge, as pure data and functions (no pyinfra, no I/O).

The tables are data files in ``gpuhost/data/`` (each names its source and date):
``gpu_models.json`` (architecture, compute capability, MIG, PCI ids), ``mig_profiles.json``
(GPU instance profiles and placements) and ``cuda_drivers.json`` (NVIDIA's CUDA release
notes, table 3, Linux x86_64). Versions are strings compared with ``packaging.version``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib import resources

from packaging.version import InvalidVersion, Version


def _data(name: str) -> dict:
    return json.loads(resources.files("gpuhost").joinpath("data", name).read_text(encoding="utf-8"))


# --- GPU models ---------------------------------------------------------------------------
ARCHITECTURES = ("maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")


def _mig_profiles(table: dict) -> dict:
    return {name: {**spec, "starts": tuple(spec["starts"])} for name, spec in table.items()}


MIG_PROFILES: dict[str, dict] = {
    name: _mig_profiles(table) for name, table in _data("mig_profiles.json")["tables"].items()
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
    key: _model(spec) for key, spec in _data("gpu_models.json")["models"].items()
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

# --- CUDA toolkit -> minimum Linux x86_64 driver ---------------------------------------
# "X.Y" is the GA release (X.Y.0), "X.Y.N" is Update N (12.8.1 = 12.8 Update 1). Only
# NVIDIA's published rows are listed: a version that is not here raises ValueError.
_CUDA = _data("cuda_drivers.json")
CUDA_MIN_DRIVER: dict[str, str] = dict(_CUDA["min_driver"])
# Toolkits NVIDIA released whose own minimum gpuhost could not read from NVIDIA's table: the
# value is a lower bound (the newest confirmed row before it; NVIDIA's toolkit drivers never
# go down from one release to the next). cuda_drivers.json's _notes say which and why.
CUDA_MIN_DRIVER_LOWER_BOUND: dict[str, str] = dict(_CUDA.get("min_driver_lower_bound", {}))

# Minor-version compatibility: an application built with any CUDA X.* runtime runs on a
# driver at or above this floor (features that need a newer driver are unavailable).
# CUDA 10.x has no such rule: every 10.x minor release has its own minimum.
MINOR_VERSION_COMPAT_FLOOR: dict[int, str] = {
    int(major): floor for major, floor in _CUDA["minor_version_compat_floor"].items()
}

OPEN_MODULE_DEFAULT_BRANCH = 560  # open modules are the default (and suggested) from R560
LEGACY_LAST_BRANCH = 580  # last branch for Maxwell, Pascal and Volta
PROPRIETARY_REMOVED_BRANCH = 620  # the 620 release removed the proprietary modules
LEGACY_ARCHITECTURES = ("maxwell", "pascal", "volta")
OPEN_ONLY_ARCHITECTURES = ("blackwell",)  # NVIDIA: Blackwell requires the open modules
FLAVORS = ("open", "proprietary", "auto")


def _version(text: str, what: str = "version") -> Version:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a string like '570.124.06', got {text!r}")
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{what} {text!r} is not a version (want digits and dots)") from None


def _cuda_key(cuda: str) -> str:
    """Normalise '12.8.0' -> '12.8' (GA); other forms are returned unchanged."""
    parts = str(cuda).strip().split(".")
    if len(parts) == 3 and parts[2] == "0":
        parts = parts[:2]
    return ".".join(parts)


def min_driver_for_cuda(cuda: str) -> str:
    """Minimum Linux x86_64 driver that runs CUDA toolkit ``cuda`` natively.

    ``cuda`` is "12.8" (GA, also accepted as "12.8.0") or "12.8.1" (Update 1).
    Raises ValueError for a version NVIDIA's table does not list. For a toolkit NVIDIA
    released whose row gpuhost could not confirm (``cuda_drivers.json``,
    ``min_driver_lower_bound``) the answer is a lower bound: see
    ``cuda_min_driver_confirmed``.
    """
    key = _cuda_key(cuda)
    if key in CUDA_MIN_DRIVER:
        return CUDA_MIN_DRIVER[key]
    if key in CUDA_MIN_DRIVER_LOWER_BOUND:  # released; NVIDIA's exact row not confirmed
        return CUDA_MIN_DRIVER_LOWER_BOUND[key]
    known = ", ".join(sorted({**CUDA_MIN_DRIVER, **CUDA_MIN_DRIVER_LOWER_BOUND}, key=Version))
    raise ValueError(f"unknown CUDA version {cuda!r}: known versions are {known}")


def cuda_min_driver_confirmed(cuda: str) -> bool:
    """Whether ``min_driver_for_cuda(cuda)`` is NVIDIA's own row (False: a lower bound)."""
    return _cuda_key(cuda) in CUDA_MIN_DRIVER


def newest_cuda(driver_version: str) -> str | None:
    """Newest CUDA toolkit in CUDA_MIN_DRIVER whose minimum driver <= ``driver_version``.

    None when the driver is older than every listed toolkit (older than 440.33).
    """
    driver = _version(driver_version, "driver version")
    fitting = [c for c, d in CUDA_MIN_DRIVER.items() if Version(d) <= driver]
    return max(fitting, key=Version) if fitting else None


def cuda_compat(driver: str, cuda: str, gpu_model: str | None = None) -> dict:
    """How (whether) a CUDA ``cuda`` application runs on driver ``driver``.

    Rules, checked in order:

    * native: the driver is at least the toolkit's minimum (``min_driver_for_cuda``).
    * minor-version compatibility: CUDA 13.x runs on drivers >= 580, 12.x on >= 525,
      11.x on >= 450.80.02, with features that need a newer driver unavailable and no
      PTX JIT for the newer toolkit. Not for CUDA 10.x.
    * forward compatibility: the ``cuda-compat`` package brings a newer CUDA user-mode
      driver to an older kernel driver. Data-center GPUs only (and a few RTX parts, not
      modelled); None (unknown) when ``gpu_model`` is not given or not known.

    Returns ``{"driver", "cuda", "driver_needed", "driver_needed_confirmed", "native",
    "minor_version_compat", "forward_compat", "runs", "how"}``; ``driver_needed`` is the native
    minimum (a lower bound where ``driver_needed_confirmed`` is False) and
    ``how`` is "native", "minor-version-compat", "forward-compat" or None.
    """
    drv = _version(driver, "driver version")
    needed = min_driver_for_cuda(cuda)
    native = drv >= Version(needed)
    major = Version(_cuda_key(cuda)).major
    floor = MINOR_VERSION_COMPAT_FLOOR.get(major)
    minor = (not native) and floor is not None and drv >= Version(floor)
    forward: bool | None
    if native or minor:
        forward = False
    else:
        model = lookup_model(gpu_model) if gpu_model else None
        forward = None if model is None else bool(model["data_center"])
    how = None
    if native:
        how = "native"
    elif minor:
        how = "minor-version-compat"
    elif forward:
        how = "forward-compat"
    return {
        "driver": driver,
        "cuda": cuda,
        "driver_needed": needed,
        "driver_needed_confirmed": cuda_min_driver_confirmed(cuda),
        "native": native,
        "minor_version_compat": minor,
        "forward_compat": forward,
        "runs": how is not None,
        "how": how,
    }


# --- driver branches and kernel-module flavour ------------------------------------------

# A full Linux driver version: branch, then one or two parts ("570.172.08", "440.33"). The
# one pattern for driver versions (gpuhost.settings validates nvidia_driver_version with it).
DRIVER_RE = re.compile(r"^\d{3}(\.\d{1,3}){1,2}$")


def driver_branch(version: str) -> str:
    """The driver branch: "570.124.06" -> "570"."""
    if not isinstance(version, str) or not DRIVER_RE.fullmatch(version.strip()):
        raise ValueError(f"{version!r} is not a driver version (want digits and dots like '570.124.06')")
    return version.strip().split(".")[0]


def is_downgrade(from_version: str | None, to_version: str) -> bool:
    """True when going from ``from_version`` (installed, None if nothing) to ``to_version``
    lowers the version."""
    if from_version is None:
        return False
    return _version(to_version, "driver version") < _version(from_version, "driver version")


def _arch(architecture: str) -> str:
    arch = str(architecture).strip().lower()
    if arch == "ada lovelace":
        arch = "ada"
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown GPU architecture {architecture!r} (known: {', '.join(ARCHITECTURES)})")
    return arch


def open_module_supported(architecture: str) -> bool:
    """The open kernel modules run on Turing and newer only."""
    return ARCHITECTURES.index(_arch(architecture)) >= ARCHITECTURES.index("turing")


def proprietary_supported(architecture: str, driver_version: str) -> bool:
    """Whether the proprietary modules of ``driver_version`` drive this architecture.

    R580 is the last branch for Maxwell/Pascal/Volta; the 620 release removed the
    proprietary modules altogether; Blackwell requires the open modules.
    """
    arch = _arch(architecture)
    branch = int(driver_branch(driver_version))
    if branch >= PROPRIETARY_REMOVED_BRANCH or arch in OPEN_ONLY_ARCHITECTURES:
        return False
    if arch in LEGACY_ARCHITECTURES:
        return branch <= LEGACY_LAST_BRANCH
    return True


# Rules of a GPU known only by NVIDIA's supported-gpus.json or gpuhost's device-id rule (no
# architecture there): the pre-Turing generations (Maxwell, Pascal, Volta) share one rule
# set, so do Turing and newer; a GPU NVIDIA's table lists for the open modules only (no
# 'gsp_proprietary_supported': Blackwell, GH200) follows Blackwell's. (shown, rules)
GENERATIONS = {"pre-turing": ("pre-Turing", "volta"),
               "turing-or-newer": ("Turing or newer", "turing"),
               "open-only": ("open-modules-only", "blackwell")}


def _labelled(architectures: Iterable) -> list[tuple[str, str, str]]:
    """(label, architecture as shown in messages, architecture whose rules apply)."""
    out = []
    for item in architectures:
        label = None
        if isinstance(item, (tuple, list)):
            label, item = item
        if str(item) in GENERATIONS:
            shown, arch = GENERATIONS[str(item)]
        else:
            arch = _arch(item)
            shown = arch
        out.append((str(label) if label is not None else f"a {shown.capitalize()} GPU", shown, arch))
    return out


def choose_flavor(setting: str, architectures: Iterable, driver_version: str) -> str:
    """Pick "open" or "proprietary" for ``setting`` ("open", "proprietary" or "auto").

    ``architectures`` holds one entry per GPU: an architecture name, or a
    ``(label, architecture)`` pair whose label names the GPU in error messages.
    ``auto`` gives "open" when every GPU is Turing or newer and the branch is >= 560
    (NVIDIA's default), or when a GPU requires it (Blackwell) or the branch has no
    proprietary modules (>= 620); else "proprietary". With no GPUs, auto follows the
    branch default. An impossible combination raises ValueError naming the GPU and fix.
    """
    if setting not in FLAVORS:
        raise ValueError(f"nvidia_driver_flavor {setting!r} is not one of {', '.join(FLAVORS)}")
    gpus = _labelled(architectures)
    branch = int(driver_branch(driver_version))
    no_open = [(label, shown, a) for label, shown, a in gpus if not open_module_supported(a)]
    no_prop = [(label, shown, a) for label, shown, a in gpus
               if not proprietary_supported(a, driver_version)]
    if setting == "auto":
        if branch >= PROPRIETARY_REMOVED_BRANCH or any(a in OPEN_ONLY_ARCHITECTURES for *_, a in gpus):
            setting = "open"
        elif not no_open and branch >= OPEN_MODULE_DEFAULT_BRANCH:
            setting = "open"
        else:
            setting = "proprietary"
    if setting == "open" and no_open:
        label, shown, arch = no_open[0]
        raise ValueError(
            f"{label} ({shown}) cannot run the open kernel modules (Turing and newer only): "
            f"set nvidia_driver_flavor to 'proprietary' and a driver branch <= {LEGACY_LAST_BRANCH}"
        )
    if setting == "proprietary" and no_prop:
        label, shown, arch = no_prop[0]
        if branch >= PROPRIETARY_REMOVED_BRANCH:
            why = (f"driver {driver_version} has no proprietary modules "
                   f"(removed in {PROPRIETARY_REMOVED_BRANCH})")
        elif arch in OPEN_ONLY_ARCHITECTURES:
            why = (f"{arch.capitalize()} GPUs need the open kernel modules" if shown == arch
                   else "NVIDIA's supported-gpus.json lists it for the open kernel modules only")
        else:
            who = arch.capitalize() if shown == arch else f"{shown} GPUs"
            why = f"R{LEGACY_LAST_BRANCH} is the last driver branch for {who}"
        fix = (
            f"pin nvidia_driver_version to a {LEGACY_LAST_BRANCH} driver"
            if arch in LEGACY_ARCHITECTURES
            else "set nvidia_driver_flavor to 'open' (or 'auto')"
        )
        raise ValueError(f"{label} ({shown}) cannot run driver {driver_version} proprietary: {why}; {fix}")
    return setting


# --- GPUs by PCI id: gpuhost's table, NVIDIA's device table, NVIDIA's device numbering -----
# nvidia_supported_gpus.json: NVIDIA's supported-gpus.json (shipped with every Linux driver and
# with NVIDIA's nvidia-driver-assistant), reduced by ``python -m gpuhost.supported_gpus`` to
# device id -> name, generation, open, proprietary, legacy_branch, kernelopen; its _source,
# _driver and _date say which table it is.
SUPPORTED_GPUS: dict = _data("nvidia_supported_gpus.json")
_SUPPORTED = SUPPORTED_GPUS["devices"]
SUPPORTED_GPUS_DRIVER = SUPPORTED_GPUS["_driver"].split(":")[0]  # "R590 era"

# NVIDIA's PCI device numbering, for a display-class NVIDIA device id no table has yet
# (docs/real-hosts.md, "GPUs by PCI id"). NVIDIA gives each GPU chip a block of device ids and
# the blocks grow with each generation. In NVIDIA's R590-era supported-gpus.json every id of
# 0x1340-0x1DFF is a Maxwell, Pascal or Volta GPU whose last branch is R580 (the 162 ids
# tagged 'legacybranch 580.xx' are exactly the ids of that span it lists), every id from
# 0x1E00 up is Turing or newer with 'kernelopen' and no legacy branch, and every id below
# 0x1340 has an older legacy branch (<= 470). No new pre-Turing chip will come, so an unknown
# id from 0x1E00 up is a Turing-or-newer GPU. NVIDIA's gpu-admin-tools (gpu/devid_chips.py,
# NVIDIA/gpu-admin-tools@82422cc, 2025-10-21) names the Blackwell chips' blocks: GB100
# 0x2900-0x297F, GB102 0x2980-0x29FF, GB202 0x2B80-0x2BFF, GB203 0x2C00-0x2C7F, GB206
# 0x2D00-0x2D7F, GB207 0x2D80-0x2DFF, GB205 0x2F00-0x2F7F, GB110 0x3180-0x31FF, GB112
# 0x3200-0x327F: Blackwell, open kernel modules only. Ids below 0x1340 are not claimed (a
# legacy branch gpuhost does not install; NVIDIA's table lists them all).
DEVICE_ID_TURING_FIRST = 0x1E00
DEVICE_ID_LEGACY_580 = (0x1340, 0x1DFF)
DEVICE_ID_BLACKWELL_BLOCKS = ((0x2900, 0x297F), (0x2980, 0x29FF), (0x2B80, 0x2BFF),
                              (0x2C00, 0x2C7F), (0x2D00, 0x2D7F), (0x2D80, 0x2DFF),
                              (0x2F00, 0x2F7F), (0x3180, 0x31FF), (0x3200, 0x327F))


def _pci_id(device_id: str | None) -> str | None:
    if not device_id:
        return None
    pci = str(device_id).strip().lower().removeprefix("0x")
    if len(pci) == 8 and pci.endswith("10de"):
        pci = pci[:4]
    return pci if re.fullmatch(r"[0-9a-f]{4}", pci) else None


def device_id_rule(device_id: str | None) -> dict | None:
    """What NVIDIA's device numbering says of display-class NVIDIA device ``device_id``:
    ``{"generation", "architecture", "open", "proprietary", "legacy_branch"}`` where a field
    the rule does not decide is None (``architecture`` is given for the Blackwell blocks only,
    ``proprietary`` for the R580-legacy span and the Blackwell blocks only). None below 0x1340
    and for what is not a device id."""
    pci = _pci_id(device_id)
    if pci is None:
        return None
    number = int(pci, 16)
    low, high = DEVICE_ID_LEGACY_580
    if low <= number <= high:
        return {"generation": "pre-turing", "architecture": None, "open": False,
                "proprietary": True, "legacy_branch": str(LEGACY_LAST_BRANCH)}
    if number >= DEVICE_ID_TURING_FIRST:
        blackwell = any(a <= number <= b for a, b in DEVICE_ID_BLACKWELL_BLOCKS)
        return {"generation": "turing-or-newer", "architecture": "blackwell" if blackwell else None,
                "open": True, "proprietary": False if blackwell else None, "legacy_branch": None}
    return None


def classify_pci(device_id: str | None) -> dict:
    """What gpuhost knows of NVIDIA PCI device ``device_id`` ("1db4", "0x1DB4").

    ``{"device_id", "name", "model", "architecture", "generation", "open_modules",
    "proprietary_modules", "legacy_branch", "known_by"}``: ``known_by`` is "gpu_models"
    (gpuhost's table, with the architecture), "supported-gpus" (NVIDIA's table: ``generation``
    "pre-turing" when it gives the GPU a legacy branch, else "turing-or-newer"),
    "device-id-rule" (NVIDIA's device numbering, ``device_id_rule``) or None (unknown: every
    other field but ``device_id`` is None). ``architecture`` comes from gpuhost's table or, for
    the Blackwell id blocks, from the rule; ``proprietary_modules`` False means the open
    modules only (None: not known).
    """
    pci = _pci_id(device_id)
    out = {"device_id": pci, "name": None, "model": None, "architecture": None,
           "generation": None, "open_modules": None, "proprietary_modules": None,
           "legacy_branch": None, "known_by": None}
    model = lookup_model(pci_device_id=pci) if pci else None
    row = _SUPPORTED.get(pci) if pci else None
    rule = device_id_rule(pci)
    if model:
        arch = model["architecture"]
        opens = open_module_supported(arch)
        out.update(name=row["name"] if row else model["names"][0], model=model["key"],
                   architecture=arch, generation="turing-or-newer" if opens else "pre-turing",
                   open_modules=opens,
                   proprietary_modules=arch not in OPEN_ONLY_ARCHITECTURES
                   and (bool(row["proprietary"]) if row else True),
                   legacy_branch=str(LEGACY_LAST_BRANCH) if arch in LEGACY_ARCHITECTURES else None,
                   known_by="gpu_models")
    elif row:
        out.update(name=row["name"], generation=row["generation"], open_modules=bool(row["open"]),
                   proprietary_modules=bool(row["proprietary"]),
                   architecture=(rule or {}).get("architecture"), known_by="supported-gpus")
    elif rule:
        out.update(generation=rule["generation"], architecture=rule["architecture"],
                   open_modules=rule["open"], proprietary_modules=rule["proprietary"],
                   legacy_branch=rule["legacy_branch"], known_by="device-id-rule")
    if row:
        out["legacy_branch"] = row["legacy_branch"]
    return out


def _pci_label(gpu: dict) -> str:
    name = gpu.get("name") or "unknown model"
    if gpu.get("pci_device_id") and name.endswith(f"10de:{gpu['pci_device_id']}"):
        name = "unknown model"  # the facts' placeholder name "NVIDIA device 10de:xxxx"
    pci = f", PCI id 10de:{gpu['pci_device_id']}" if gpu.get("pci_device_id") else ""
    return f"GPU {gpu.get('index', '?')} ({name}{pci})"


def _known_arch(text) -> bool:
    return bool(text) and str(text).strip().lower() in ARCHITECTURES + ("ada lovelace",)


def _rules_of(gpu: dict) -> str | None:
    """The architecture (or GENERATIONS key) whose flavour rules apply to ``gpu``: the
    architecture nvidia-smi or gpuhost's table named, else what its PCI id says (gpuhost's
    table, NVIDIA's supported-gpus.json, NVIDIA's device numbering), else the facts'
    generation; "open-only" where NVIDIA's table lists the GPU for the open modules only;
    None when nothing classifies it."""
    info = classify_pci(gpu.get("pci_device_id"))
    arch = gpu["architecture"] if _known_arch(gpu.get("architecture")) else info["architecture"]
    if info["open_modules"] and info["proprietary_modules"] is False and not (
            arch and _arch(arch) in OPEN_ONLY_ARCHITECTURES):
        return "open-only"  # NVIDIA lists it for the open modules only (GH200)
    if arch:
        return arch
    if info["generation"]:
        return info["generation"]
    if gpu.get("generation") in GENERATIONS:
        return gpu["generation"]
    return None


def flavor_for_gpus(setting: str, gpus: Iterable[dict], driver_version: str) -> str:
    """``choose_flavor`` for GPUs as the facts report them (``facts.nvidia.NvidiaGpus``:
    ``architecture``, ``generation``, ``legacy_branch``, ``pci_device_id``, ``name``,
    ``index``). Raises ValueError naming the GPU, its PCI id and the fix when:

    * a GPU needs a legacy branch older than R580 (NVIDIA's legacybranch: gpuhost installs
      none of them) and ``driver_version`` is newer; a GPU whose last branch is R580
      (Maxwell, Pascal, Volta) follows the pre-Turing rules of ``choose_flavor`` instead
      (proprietary modules, a driver <= 580);
    * ``setting`` is "auto" and a GPU cannot be classified (neither gpuhost's table, NVIDIA's
      supported-gpus.json nor NVIDIA's device numbering knows its PCI id, and nvidia-smi did
      not name its architecture): auto would guess, and a wrong guess leaves a driver that
      never loads.
    """
    branch = int(driver_branch(driver_version))
    labelled = []
    for gpu in gpus:
        label = _pci_label(gpu)
        legacy = gpu.get("legacy_branch")
        if legacy and str(legacy).isdigit() and int(legacy) < LEGACY_LAST_BRANCH \
                and branch > int(legacy):
            raise ValueError(
                f"{label} is driven only by NVIDIA's {legacy}.xx legacy driver branch "
                f"(NVIDIA's supported-gpus.json), not by {driver_version}: gpuhost does not "
                "install legacy branches; remove this host from the inventory")
        rules = _rules_of(gpu)
        if rules is not None:
            labelled.append((label, rules))
        elif setting == "auto":
            raise ValueError(
                f"{label} is in neither gpuhost's GPU table nor NVIDIA's supported-gpus.json "
                f"({SUPPORTED_GPUS_DRIVER} table), and NVIDIA's device numbering does not place "
                "it, so nvidia_driver_flavor 'auto' cannot tell whether the open kernel modules "
                "drive it: set nvidia_driver_flavor to 'open' (Turing and newer GPUs) or "
                "'proprietary' (Maxwell, Pascal, Volta) for this host, or refresh "
                "gpuhost/data/nvidia_supported_gpus.json from a newer driver "
                "(python -m gpuhost.supported_gpus)")
    return choose_flavor(setting, labelled, driver_version)


# --- MIG --------------------------------------------------------------------------------
# One judgement of a layout: gpuhost.mig_config (mig-parted's profile grammar, the per-GPU
# tables of mig_profiles.json, placements). mig_config imports this module, so the two
# functions below import it when called.


def mig_profile_names(model_key: str | None, profiles: Iterable) -> list[str]:
    """``profiles`` as the names ``nvidia-smi mig -lgi`` prints for this GPU model (a
    gpu_models key or the product name): profile ids (19), "MIG 1g.5gb" and any case become
    "1g.5gb" through the GPU's own profile table (gpuhost.mig_config), so a layout given as
    ids compares equal to the instances it created. An id the table does not have (or no
    table) stays digits; names are only lower-cased and stripped of "MIG "."""
    from gpuhost import mig_config

    return mig_config.profile_names(model_key, profiles)


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


def mig_layout_valid(model_key: str, profiles: Iterable) -> list[str]:
    """Problems with creating GPU instances ``profiles`` (names like "3g.20gb", "1g.24gb+gfx"
    or profile ids) on one GPU of ``model_key``; an empty list means the layout fits.

    The same judgement as a named configuration's (``gpuhost.mig_config.layout_problems``):
    the model supports MIG, every profile parses (mig-parted's grammar: ``+me``, ``+me.all``,
    ``-me``, ``+gfx``) and exists in the GPU's table, no profile is used more often than its
    maximum, the compute slices add up to at most the GPU's (7; 4 on A30 and RTX PRO 6000
    Blackwell), and a non-overlapping placement exists (as ``nvidia-smi mig -lgipp`` lists
    them). A MIG model without a table gets the grammar and the slice sum only.
    """
    from gpuhost import mig_config

    model = lookup_model(model_key)
    if model is None:
        return [f"unknown GPU model {model_key!r} (known: {', '.join(GPU_MODELS)})"]
    if not model["mig"]:
        return [f"{model['key']} does not support MIG"]
    names = mig_profile_names(model["key"], profiles)
    return mig_config.layout_problems(model["key"], names) if names else []


def mig_needs_reset(model_key: str) -> bool | None:
    """Whether enabling MIG stays pending until a GPU reset or reboot (Ampere yes,
    Hopper and newer no). None for unknown or non-MIG models."""
    model = lookup_model(model_key)
    if model is None or not model["mig"]:
        return None
    return bool(model["mig"]["reset_required"])
