"""Driver versions, branches and the kernel-module flavour (open or proprietary) per GPU
architecture: NVIDIA's rules as pure data and functions (no pyinfra, no I/O).

Versions are strings compared with ``packaging.version``. ``gpuhost.gpu_classes`` applies
these rules to GPUs as the facts report them (by PCI id).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from gpuhost.gpu_models import ARCHITECTURES

OPEN_MODULE_DEFAULT_BRANCH = 560  # open modules are the default (and suggested) from R560
LEGACY_LAST_BRANCH = 580  # last branch for Maxwell, Pascal and Volta
PROPRIETARY_REMOVED_BRANCH = 620  # the 620 release removed the proprietary modules
LEGACY_ARCHITECTURES = ("maxwell", "pascal", "volta")
OPEN_ONLY_ARCHITECTURES = ("blackwell",)  # NVIDIA: Blackwell requires the open modules
FLAVORS = ("open", "proprietary", "auto")


def parse_version(text: str, what: str = "version") -> Version:
    """``text`` as a Version; ValueError naming ``what`` when it is not one."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a string like '570.124.06', got {text!r}")
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{what} {text!r} is not a version (want digits and dots)") from None


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
    return (parse_version(to_version, "driver version")
            < parse_version(from_version, "driver version"))


def arch_key(architecture: str) -> str:
    """The ARCHITECTURES name of ``architecture`` ("Ada Lovelace" -> "ada"); ValueError
    when unknown."""
    arch = str(architecture).strip().lower()
    if arch == "ada lovelace":
        arch = "ada"
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown GPU architecture {architecture!r} (known: {', '.join(ARCHITECTURES)})")
    return arch


def open_module_supported(architecture: str) -> bool:
    """The open kernel modules run on Turing and newer only."""
    return ARCHITECTURES.index(arch_key(architecture)) >= ARCHITECTURES.index("turing")


def proprietary_supported(architecture: str, driver_version: str) -> bool:
    """Whether the proprietary modules of ``driver_version`` drive this architecture.

    R580 is the last branch for Maxwell/Pascal/Volta; the 620 release removed the
    proprietary modules altogether; Blackwell requires the open modules.
    """
    arch = arch_key(architecture)
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
            arch = arch_key(item)
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
