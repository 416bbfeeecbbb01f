"""What an Enterprise Linux distribution entry holds (pure, no pyinfra): its os-release ID,
the majors gpuhost supports, and where its CodeReady Builder and EPEL come from.

Each distribution is one module of this package (``oracle``, ``redhat``, ``rocky``, ``alma``)
with one ``DISTRIBUTION`` and the vendor sources of its facts; ``gpuhost.eldistros`` lists
them. A new distribution is a new module and one entry in that list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Channels:
    """The repositories NVIDIA's driver needs on one release of one distribution.

    ``crb``: CodeReady Builder's repository id (NVIDIA's CUDA guide enables it for the
    driver's dependencies); ``crb_by``: how it is enabled, ``"config-manager"``
    (``dnf config-manager --set-enabled``) or ``"subscription-manager"``
    (``subscription-manager repos --enable=``, RHEL); ``epel``: the id of the repository
    that carries dkms (NVIDIA's kmod-nvidia-*-dkms needs it); ``epel_release``: what
    ``dnf install`` takes to define that repository when the host lacks it (a package
    name, or a URL of the release package)."""

    crb: str
    epel: str
    epel_release: str
    crb_by: str = "config-manager"


@dataclass(frozen=True)
class ElDistribution:
    """One Enterprise Linux distribution.

    ``os_id``: ``ID=`` of /etc/os-release; ``name``: as users know it; ``majors``: the
    releases gpuhost supports (each takes NVIDIA's ``rhel<major>`` build);
    ``channels(major, update, arch)``: its ``Channels`` (``update`` is the minor release,
    10.1 -> 1; ``arch`` as ``uname -m`` prints it); ``registration``: its repositories come
    only through a registered subscription (RHEL: an unregistered host has none)."""

    os_id: str
    name: str
    majors: tuple[int, ...]
    channels: Callable[[int, int, str], Channels]
    registration: bool = False
