"""CUDA toolkit -> minimum Linux x86_64 driver, and how a CUDA application runs on a driver
(natively, by minor-version or by forward compatibility). Pure data and functions.

The table is ``gpuhost/data/cuda_drivers.json`` (NVIDIA's CUDA release notes, table 3,
Linux x86_64; it names its source and date).
"""

from __future__ import annotations

from packaging.version import Version

from gpuhost.driver_rules import parse_version
from gpuhost.gpu_models import load_data, lookup_model

# --- CUDA toolkit -> minimum Linux x86_64 driver ---------------------------------------
# "X.Y" is the GA release (X.Y.0), "X.Y.N" is Update N (12.8.1 = 12.8 Update 1). Only
# NVIDIA's published rows are listed: a version that is not here raises ValueError.
_CUDA = load_data("cuda_drivers.json")
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
    driver = parse_version(driver_version, "driver version")
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
    drv = parse_version(driver, "driver version")
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
