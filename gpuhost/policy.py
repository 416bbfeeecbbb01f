"""Version rules and GPU knowledge, as pure data and functions (no pyinfra, no I/O).

Sources: ../shared/docs/nvidia-facts.md ("Compatibility rules", "MIG"), NVIDIA's CUDA
release notes (table 3, Linux x86_64), NVIDIA's open-gpu-kernel-modules README (PCI ids)
and real nvidia-smi outputs. Versions are strings compared with ``packaging.version``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version


# --- GPU models ---------------------------------------------------------------------------
ARCHITECTURES = ("maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")


def _mig_table(rows: str) -> dict:
    """Profiles from "name:id:max:size:starts" rows; size and starts are memory-slice
    placements as ``nvidia-smi mig -lgipp`` prints them ({0,2,4,6}:2 -> starts 0246, size 2)."""
    table = {}
    for row in rows.split():
        name, pid, count, size, starts = row.split(":")
        table[name] = {"id": int(pid), "max": int(count), "size": int(size),
                       "starts": tuple(int(c) for c in starts)}
    return table


# A100-40GB as printed by `nvidia-smi mig -lgip` / `-lgipp`; 80GB parts: same ids and
# placements, doubled memory. A30: 4 compute slices, 4 memory slices.
_A100_PLACEMENTS = "19:7:1:0123456 20:1:1:0123456 15:4:2:0246 14:3:2:024 9:2:4:04 5:1:4:0 0:1:8:0"


def _sized(*names: str) -> dict:
    return _mig_table(" ".join(f"{n}:{p}" for n, p in zip(names, _A100_PLACEMENTS.split(), strict=True)))


MIG_A100_40GB = _sized("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
MIG_80GB = _sized("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
MIG_H200 = _sized("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
MIG_A30 = _mig_table("1g.6gb:14:4:1:0123 1g.6gb+me:21:1:1:0123 2g.12gb:5:2:2:02 4g.24gb:0:1:4:0")


def _mig(min_driver: str | None, reset: bool, profiles: dict | None, slices: int = 7) -> dict:
    return {"min_driver": min_driver, "reset_required": reset, "profiles": profiles, "slices": slices}


def _gpu(arch, cc, mem, dc, names, pci=(), mig=None) -> dict:
    return {"architecture": arch, "compute_capability": cc, "memory_mib": mem, "data_center": dc,
            "names": tuple(names), "pci_device_ids": tuple(pci), "mig": mig}


# key: architecture, compute capability, memory MiB (as nvidia-smi reports it where a real
# output was seen, else nominal GB x 1024, None if unknown), data-center, product names as
# printed (the "NVIDIA " prefix, added from about R470, is matched either way), PCI device
# ids (NVIDIA's open-gpu-kernel-modules README, pci.ids or a real output; only sure ones),
# MIG (minimum driver, reset needed to enable, GPU-instance profiles, compute slices).
GPU_MODELS: dict[str, dict] = {
    "A100-SXM4-40GB": _gpu("ampere", "8.0", 40960, True, ["A100-SXM4-40GB"], ["20b0"],
                           _mig("450.80.02", True, MIG_A100_40GB)),
    "A100-SXM4-80GB": _gpu("ampere", "8.0", 81920, True, ["A100-SXM4-80GB"], ["20b2"],
                           _mig("450.80.02", True, MIG_80GB)),
    "A100-PCIE-40GB": _gpu("ampere", "8.0", 40960, True, ["A100-PCIE-40GB"], ["20f1"],
                           _mig("450.80.02", True, MIG_A100_40GB)),
    "A100-PCIE-80GB": _gpu("ampere", "8.0", 81920, True, ["A100 80GB PCIe"], ["20b5"],
                           _mig("450.80.02", True, MIG_80GB)),
    "A30": _gpu("ampere", "8.0", 24576, True, ["A30"], ["20b7"], _mig("460.73.01", True, MIG_A30, 4)),
    "A10G": _gpu("ampere", "8.6", 23028, True, ["A10G"], ["2237"]),
    "A10": _gpu("ampere", "8.6", 23028, True, ["A10"], ["2236"]),
    "H100-80GB-HBM3": _gpu("hopper", "9.0", 81559, True, ["H100 80GB HBM3"], ["2330"],
                           _mig("525.85.12", False, MIG_80GB)),
    "H100-PCIE": _gpu("hopper", "9.0", 81559, True, ["H100 PCIe"], ["2331"],
                      _mig("525.85.12", False, MIG_80GB)),
    "H100-NVL": _gpu("hopper", "9.0", 95830, True, ["H100 NVL"], ["2321"], _mig("525.85.12", False, None)),
    "H20": _gpu("hopper", "9.0", 98304, True, ["H20"], ["2329"], _mig("535.161.07", False, None)),
    "H200": _gpu("hopper", "9.0", 143771, True, ["H200"], ["2335"], _mig("550.90.07", False, MIG_H200)),
    "GH200": _gpu("hopper", "9.0", None, True, ["GH200 480GB", "GH200 120GB"], ["2342"],
                  _mig("525.85.12", False, None)),
    "B200": _gpu("blackwell", "10.0", 183359, True, ["B200"], [], _mig("570.133.20", False, None)),
    "GB200": _gpu("blackwell", "10.0", None, True, ["GB200"], [], _mig("570.133.20", False, None)),
    "B300": _gpu("blackwell", "10.3", 275040, True, ["B300 SXM6 AC"], [], _mig("580.82.07", False, None)),
    "RTX-PRO-6000-BLACKWELL": _gpu(
        "blackwell", "12.0", 97887, False,
        ["RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Max-Q Workstation Edition",
         "RTX PRO 6000 Blackwell Server Edition"], ["2bb4"], _mig(None, False, None)),
    "L4": _gpu("ada", "8.9", 23034, True, ["L4"], ["27b8"]),
    "L40S": _gpu("ada", "8.9", 46068, True, ["L40S"], ["26b9"]),
    "RTX-4090": _gpu("ada", "8.9", 24564, False, ["GeForce RTX 4090"], ["2684"]),
    "RTX-3090": _gpu("ampere", "8.6", 24576, False, ["GeForce RTX 3090"], ["2204"]),
    "RTX-A5000": _gpu("ampere", "8.6", 24564, False, ["RTX A5000"], ["2231"]),
    "RTX-2080-SUPER": _gpu("turing", "7.5", 8192, False, ["GeForce RTX 2080 SUPER"], ["1e81"]),
    "T4": _gpu("turing", "7.5", 15360, True, ["Tesla T4"], ["1eb8"]),
    "V100-SXM2-16GB": _gpu("volta", "7.0", 16384, True, ["Tesla V100-SXM2-16GB"], ["1db1"]),
    "V100-SXM2-32GB": _gpu("volta", "7.0", 32768, True, ["Tesla V100-SXM2-32GB"], ["1db5"]),
    "P100": _gpu("pascal", "6.0", 16384, True, ["Tesla P100-PCIE-16GB", "Tesla P100-SXM2-16GB"],
                 ["15f8", "15f9"]),
    "P4": _gpu("pascal", "6.1", 8192, True, ["Tesla P4"], ["1bb3"]),
    "GTX-1080-TI": _gpu("pascal", "6.1", 11264, False, ["GeForce GTX 1080 Ti"], ["1b06"]),
    "M60": _gpu("maxwell", "5.2", 8192, True, ["Tesla M60"], ["13f2"]),
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
# Key scheme: "X.Y" is the GA release (X.Y.0), "X.Y.N" is Update N (12.8.1 = 12.8 Update 1).
# U1 and U2 of 12.6 and 11.6 share a minimum. Only NVIDIA's published rows are listed:
# a version that is not here raises ValueError rather than being guessed.
CUDA_MIN_DRIVER: dict[str, str] = {
    "13.0": "580.65.06", "12.9.1": "575.57.08", "12.9": "575.51.03", "12.8.1": "570.124.06",
    "12.8": "570.26", "12.6.3": "560.35.05", "12.6.2": "560.35.03", "12.6.1": "560.35.03",
    "12.6": "560.28.03", "12.5.1": "555.42.06", "12.5": "555.42.02", "12.4.1": "550.54.15",
    "12.4": "550.54.14", "12.3.1": "545.23.08", "12.3": "545.23.06", "12.2.2": "535.104.05",
    "12.2.1": "535.86.09", "12.2": "535.54.03", "12.1": "530.30.02", "12.0.1": "525.85.12",
    "12.0": "525.60.13", "11.8": "520.61.05", "11.7.1": "515.48.07", "11.7": "515.43.04",
    "11.6.2": "510.47.03", "11.6.1": "510.47.03", "11.6": "510.39.01", "11.5": "495.29.05",
    "11.4": "470.42.01", "11.0.3": "450.51.06", "10.2": "440.33",
}

# Minor-version compatibility: an application built with any CUDA X.* runtime runs on a
# driver at or above this floor (features that need a newer driver are unavailable).
# CUDA 10.x has no such rule: every 10.x minor release has its own minimum.
MINOR_VERSION_COMPAT_FLOOR: dict[int, str] = {13: "580", 12: "525", 11: "450.80.02"}

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
    Raises ValueError for a version NVIDIA's table does not list.
    """
    key = _cuda_key(cuda)
    if key not in CUDA_MIN_DRIVER:
        known = ", ".join(sorted(CUDA_MIN_DRIVER, key=Version))
        raise ValueError(f"unknown CUDA version {cuda!r}: known versions are {known}")
    return CUDA_MIN_DRIVER[key]


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

    Returns ``{"driver", "cuda", "driver_needed", "native", "minor_version_compat",
    "forward_compat", "runs", "how"}``; ``driver_needed`` is the native minimum and
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
        "native": native,
        "minor_version_compat": minor,
        "forward_compat": forward,
        "runs": how is not None,
        "how": how,
    }


# --- driver branches and kernel-module flavour ------------------------------------------

_DRIVER_RE = re.compile(r"^\d{3}(\.\d{1,3}){0,2}$")


def driver_branch(version: str) -> str:
    """The driver branch: "570.124.06" -> "570"."""
    if not isinstance(version, str) or not _DRIVER_RE.fullmatch(version.strip()):
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


def _labelled(architectures: Iterable) -> list[tuple[str, str]]:
    out = []
    for item in architectures:
        if isinstance(item, (tuple, list)):
            label, arch = item
            out.append((str(label), _arch(arch)))
        else:
            arch = _arch(item)
            out.append((f"a {arch.capitalize()} GPU", arch))
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
    no_open = [(label, a) for label, a in gpus if not open_module_supported(a)]
    no_prop = [(label, a) for label, a in gpus if not proprietary_supported(a, driver_version)]
    if setting == "auto":
        if branch >= PROPRIETARY_REMOVED_BRANCH or any(a in OPEN_ONLY_ARCHITECTURES for _, a in gpus):
            setting = "open"
        elif not no_open and branch >= OPEN_MODULE_DEFAULT_BRANCH:
            setting = "open"
        else:
            setting = "proprietary"
    if setting == "open" and no_open:
        label, arch = no_open[0]
        raise ValueError(
            f"{label} ({arch}) cannot run the open kernel modules (Turing and newer only): "
            f"set nvidia_driver_flavor to 'proprietary' and a driver branch <= {LEGACY_LAST_BRANCH}"
        )
    if setting == "proprietary" and no_prop:
        label, arch = no_prop[0]
        if branch >= PROPRIETARY_REMOVED_BRANCH:
            why = (f"driver {driver_version} has no proprietary modules "
                   f"(removed in {PROPRIETARY_REMOVED_BRANCH})")
        elif arch in OPEN_ONLY_ARCHITECTURES:
            why = f"{arch.capitalize()} GPUs need the open kernel modules"
        else:
            why = f"R{LEGACY_LAST_BRANCH} is the last driver branch for {arch.capitalize()}"
        fix = (
            f"pin nvidia_driver_version to a {LEGACY_LAST_BRANCH} driver"
            if arch in LEGACY_ARCHITECTURES
            else "set nvidia_driver_flavor to 'open' (or 'auto')"
        )
        raise ValueError(f"{label} ({arch}) cannot run driver {driver_version} proprietary: {why}; {fix}")
    return setting


# --- MIG --------------------------------------------------------------------------------

_PROFILE_RE = re.compile(r"^(\d)g\.\d+gb(\+me)?$")


def _profile_name(profile, table: dict | None) -> str:
    text = str(profile).strip().lower()
    if text.startswith("mig "):
        text = text[4:].strip()
    if text.isdigit() and table:
        for name, spec in table.items():
            if spec["id"] == int(text):
                return name
    return text


def _fits(sizes: list[tuple[int, tuple[int, ...]]], used: set[int]) -> bool:
    """Backtracking placement: can every (size, starts) be placed without overlap?"""
    if not sizes:
        return True
    size, starts = sizes[0]
    for start in starts:
        slots = set(range(start, start + size))
        if not slots & used and _fits(sizes[1:], used | slots):
            return True
    return False


def mig_layout_valid(model_key: str, profiles: Iterable) -> list[str]:
    """Problems with creating GPU instances ``profiles`` (names like "3g.20gb" or profile
    ids) on one GPU of ``model_key``; an empty list means the layout fits.

    Checks: the model supports MIG, every profile exists for it, no profile is used more
    often than its maximum, the compute slices add up to at most the GPU's slices (7, or 4
    on A30), and a non-overlapping placement exists (as ``nvidia-smi mig -lgipp`` lists
    them). For MIG models whose profile table is not known here, only the syntax and the
    7-slice sum are checked: the host's ``nvidia-smi mig -lgip`` is the authority.
    """
    model = lookup_model(model_key)
    if model is None:
        return [f"unknown GPU model {model_key!r} (known: {', '.join(GPU_MODELS)})"]
    mig = model["mig"]
    if not mig:
        return [f"{model['key']} does not support MIG"]
    table = mig["profiles"]
    names = [_profile_name(p, table) for p in profiles]
    problems: list[str] = []
    if table is None:
        slices = 0
        for name in names:
            m = _PROFILE_RE.fullmatch(name)
            if not m:
                problems.append(f"{name!r} is not a MIG profile name (want like '1g.10gb')")
            else:
                slices += int(m.group(1))
        if slices > mig["slices"]:
            problems.append(f"layout uses {slices} compute slices, {model['key']} has {mig['slices']}")
        return problems
    unknown = sorted({n for n in names if n not in table})
    for name in unknown:
        problems.append(f"unknown MIG profile {name!r} for {model['key']} (known: {', '.join(table)})")
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    for name, count in counts.items():
        if name in table and count > table[name]["max"]:
            problems.append(f"{name} x{count}: {model['key']} allows at most {table[name]['max']}")
    slices = sum(int(n.split("g.")[0]) for n in names if n in table)
    if slices > mig["slices"]:
        problems.append(f"layout uses {slices} compute slices, {model['key']} has {mig['slices']}")
    if not problems:
        sizes = sorted(((table[n]["size"], table[n]["starts"]) for n in names), reverse=True)
        if not _fits(sizes, set()):
            problems.append(
                f"layout {' + '.join(names)} does not fit on {model['key']}: no placement of the "
                "memory slices works (see `nvidia-smi mig -lgipp`)"
            )
    return problems


def mig_needs_reset(model_key: str) -> bool | None:
    """Whether enabling MIG stays pending until a GPU reset or reboot (Ampere yes,
    Hopper and newer no). None for unknown or non-MIG models."""
    model = lookup_model(model_key)
    if model is None or not model["mig"]:
        return None
    return bool(model["mig"]["reset_required"])
