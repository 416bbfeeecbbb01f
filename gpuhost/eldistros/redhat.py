"""Red Hat Enterprise Linux 8, 9 and 10: repositories through subscription-manager.

Vendor facts (docs/real-hosts.md, "Enterprise Linux repositories"):

- CodeReady Builder is ``codeready-builder-for-rhel-<N>-<arch>-rpms``, enabled with
  ``subscription-manager repos --enable=`` (NVIDIA's CUDA installation guide, 4.2.1
  "Preparation", RHEL 8 and 9; NVIDIA/gpu-driver-container@06a208c ``rhel10/install.sh``
  for RHEL 10).
- EPEL comes from Fedora's ``epel-release`` package, installed by URL:
  https://dl.fedoraproject.org/pub/epel/epel-release-latest-<N>.noarch.rpm (Fedora's EPEL
  "Getting started"; the repository id is ``epel``).
- An unregistered host has no Red Hat repositories at all; ``subscription-manager
  identity`` exits 1 on it ("This system is not yet registered", subscription-manager's
  ``ERR_NOT_REGISTERED_CODE = 1``).
"""

from __future__ import annotations

from gpuhost.eldistros.base import Channels, ElDistribution

EPEL_RELEASE_URL = "https://dl.fedoraproject.org/pub/epel/epel-release-latest-{major}.noarch.rpm"


def channels(major: int, update: int, arch: str) -> Channels:
    del update
    return Channels(crb=f"codeready-builder-for-rhel-{major}-{arch}-rpms", epel="epel",
                    epel_release=EPEL_RELEASE_URL.format(major=major),
                    crb_by="subscription-manager")


DISTRIBUTION = ElDistribution(os_id="rhel", name="RHEL", majors=(8, 9, 10),
                              channels=channels, registration=True)
