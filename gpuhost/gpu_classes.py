"""GPUs by PCI id (gpuhost's table, NVIDIA's supported-gpus.json, NVIDIA's device numbering)
and the kernel-module flavour for GPUs as the facts report them. Pure data and functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpuhost.driver_rules import (
    GENERATIONS,
    LEGACY_ARCHITECTURES,
    LEGACY_LAST_BRANCH,
    OPEN_ONLY_ARCHITECTURES,
    arch_key,
    choose_flavor,
    driver_branch,
    open_module_supported,
)
from gpuhost.gpu_models import ARCHITECTURES, load_data, lookup_model

# --- GPUs by PCI id: gpuhost's table, NVIDIA's device table, NVIDIA's device numbering -----
# nvidia_supported_gpus.json: NVIDIA's supported-gpus.json (shipped with every Linux driver and
# with NVIDIA's nvidia-driver-assistant), reduced by ``python -m gpuhost.supported_gpus`` to
# device id -> name, generation, open, proprietary, legacy_branch, kernelopen; its _source,
# _driver and _date say which table it is.
SUPPORTED_GPUS: dict = load_data("nvidia_supported_gpus.json")
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
            arch and arch_key(arch) in OPEN_ONLY_ARCHITECTURES):
        return "open-only"  # NVIDIA lists it for the open modules only (GH200)
    if arch:
        return arch
    if info["generation"]:
        return info["generation"]
    if gpu.get("generation") in GENERATIONS:
        return gpu["generation"]
    return None


def flavor_for_gpus(setting: str, gpus: Iterable[dict], driver_version: str) -> str:
    """``choose_flavor`` for GPUs as the facts report them (``gpuhost.facts.nvidia.NvidiaGpus``:
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
