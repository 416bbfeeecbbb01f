"""AlmaLinux 8, 9 and 10.

Vendor facts (docs/real-hosts.md, "Enterprise Linux repositories"): the same layout as
Rocky Linux: CodeReady Builder ``crb`` on 9 and 10, ``powertools`` on 8 (``dnf
config-manager --set-enabled``); EPEL from ``epel-release`` in AlmaLinux's ``extras``
repository (AlmaLinux wiki, "Extra repositories", https://wiki.almalinux.org/repos/Extras.html;
Fedora's EPEL "Getting started" names ``crb`` for AlmaLinux 9/10).
"""

from __future__ import annotations

from gpuhost.eldistros.base import Channels, ElDistribution
from gpuhost.eldistros.rocky import crb_id


def channels(major: int, update: int, arch: str) -> Channels:
    del update, arch
    return Channels(crb=crb_id(major), epel="epel", epel_release="epel-release")


DISTRIBUTION = ElDistribution(os_id="almalinux", name="AlmaLinux", majors=(8, 9, 10),
                              channels=channels)
