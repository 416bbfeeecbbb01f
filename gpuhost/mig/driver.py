"""The first driver that offers MIG on each GPU model (``gpu_models.json`` ``mig.min_driver``,
from NVIDIA's MIG User Guide, "Deployment Considerations").

Below that driver ``nvidia-smi -mig 1`` answers "not supported" and mig-parted stops with an
error; gpuhost refuses the same way, before any host is changed, instead of leaving the GPU
without MIG and reporting success.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

from gpuhost import gpu_models


def first_mig_driver(model_key: str | None) -> str | None:
    """The first driver with MIG on ``model_key`` (None: not MIG-capable, or not known)."""
    model = gpu_models.lookup_model(model_key) if model_key else None
    if model is None or not model["mig"]:
        return None
    return model["mig"]["min_driver"]


def _older(driver: str, first: str) -> bool:
    try:
        return Version(driver) < Version(first)
    except InvalidVersion:
        return False


def problems(gpus: Iterable[tuple[int, str | None]], driver: str | None) -> list[str]:
    """Why MIG cannot be enabled on these GPUs (index, model key) with ``driver``: one line per
    GPU model whose first MIG driver is newer. [] when every GPU can, or the driver is not
    known."""
    if not driver:
        return []
    by_model: dict[str, list[int]] = {}
    for index, model in gpus:
        first = first_mig_driver(model)
        if first and _older(driver, first):
            by_model.setdefault(model, []).append(index)
    return [
        f"GPU {', '.join(map(str, sorted(indexes)))} ({model}): MIG needs driver "
        f"{first_mig_driver(model)} or newer (NVIDIA's MIG User Guide), this host gets "
        f"{driver}; set nvidia_driver_version to a newer branch, or leave MIG off on it"
        for model, indexes in sorted(by_model.items())
    ]
