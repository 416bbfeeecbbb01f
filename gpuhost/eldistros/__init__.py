"""The Enterprise Linux distributions gpuhost knows, one module each (pure, no pyinfra).

``DISTRIBUTIONS`` maps os-release ``ID`` to its ``ElDistribution`` (``base.py``); every
release of them takes NVIDIA's ``rhel<major>`` build (NVIDIA's driver guide puts RHEL, Rocky
Linux, AlmaLinux and Oracle Linux on the same rows). ``channels()`` says which repositories
a host of one of them needs.
"""

from __future__ import annotations

from gpuhost.eldistros import alma, oracle, redhat, rocky
from gpuhost.eldistros.base import Channels, ElDistribution

DISTRIBUTIONS: dict[str, ElDistribution] = {
    d.os_id: d for d in (oracle.DISTRIBUTION, redhat.DISTRIBUTION, rocky.DISTRIBUTION,
                         alma.DISTRIBUTION)
}

__all__ = ["DISTRIBUTIONS", "Channels", "ElDistribution", "channels", "update_level"]


def update_level(version_id: str) -> int:
    """The minor release of ``VERSION_ID`` ('10.1' -> 1; '10' -> 0)."""
    parts = str(version_id).split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def channels(os_id: str, version_id: str, arch: str = "x86_64") -> Channels:
    """The ``Channels`` of this release (os-release ``ID`` and ``VERSION_ID``); ValueError
    for a distribution or major this table does not hold."""
    distribution = DISTRIBUTIONS.get(os_id)
    major = int(str(version_id).split(".")[0] or 0)
    if distribution is None or major not in distribution.majors:
        raise ValueError(f"no Enterprise Linux entry for {os_id} {version_id}")
    return distribution.channels(major, update_level(version_id), arch or "x86_64")
