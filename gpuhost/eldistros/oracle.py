"""Oracle Linux 8, 9 and 10: Oracle's own channels (yum.oracle.com or ULN).

Vendor facts (docs/real-hosts.md, "Enterprise Linux repositories"):

- CodeReady Builder is ``ol<N>_codeready_builder`` (NVIDIA's CUDA installation guide,
  "Oracle Linux 9: dnf config-manager --set-enabled ol9_codeready_builder"; Oracle's OL10
  yum repository table lists ``ol10_codeready_builder``:
  https://docs.oracle.com/en/operating-systems/oracle-linux/software-management/sfw-mgmt-AvailableYumRepositories.html,
  read 2026-11-29).
- EPEL is Oracle's developer EPEL mirror, defined by ``oracle-epel-release-el<N>``:
  ``ol8_developer_EPEL``, ``ol9_developer_EPEL``. On OL10 it follows the update level:
  "Unlike previous releases of Oracle Linux, the EPEL channel is synchronized with the
  update level of the release (for example ol10_u0_x86_64_developer_EPEL)"
  (https://docs.oracle.com/en/operating-systems/oracle-linux/uln/uln-MainChannels.html,
  read 2026-11-29); the yum server's id drops the arch: ``ol10_u0_developer_EPEL``
  (lima-vm/lima PR #4236, 2025-10).
"""

from __future__ import annotations

from gpuhost.eldistros.base import Channels, ElDistribution

# From this major on, Oracle's EPEL channel carries the update level in its id.
EPEL_PER_UPDATE_FROM = 10


def channels(major: int, update: int, arch: str) -> Channels:
    del arch  # yum.oracle.com's repository ids name no arch
    epel = (f"ol{major}_u{update}_developer_EPEL" if major >= EPEL_PER_UPDATE_FROM
            else f"ol{major}_developer_EPEL")
    return Channels(crb=f"ol{major}_codeready_builder", epel=epel,
                    epel_release=f"oracle-epel-release-el{major}")


DISTRIBUTION = ElDistribution(os_id="ol", name="Oracle Linux", majors=(8, 9, 10),
                              channels=channels)
