"""Rocky Linux 8, 9 and 10.

Vendor facts (docs/real-hosts.md, "Enterprise Linux repositories"):

- CodeReady Builder is ``crb`` on 9 and 10, ``powertools`` on 8, enabled with ``dnf
  config-manager --set-enabled`` (NVIDIA's CUDA installation guide, 4.2.1 "Preparation":
  "Rocky Linux 9/10: dnf config-manager --set-enabled crb", "Rocky Linux 8: ...
  powertools"; Rocky's repository wiki, https://wiki.rockylinux.org/rocky/repo/).
- EPEL comes from ``epel-release`` in Rocky's own ``extras`` repository (enabled on a
  fresh install); the repository id is ``epel``.
"""

from __future__ import annotations

from gpuhost.eldistros.base import Channels, ElDistribution


def crb_id(major: int) -> str:
    return "powertools" if major == 8 else "crb"


def channels(major: int, update: int, arch: str) -> Channels:
    del update, arch
    return Channels(crb=crb_id(major), epel="epel", epel_release="epel-release")


DISTRIBUTION = ElDistribution(os_id="rocky", name="Rocky Linux", majors=(8, 9, 10),
                              channels=channels)
