"""Debian 12 "bookworm" and Debian 13 "trixie".

Vendor facts:

- NVIDIA's debian12 and debian13 repositories carry Debian's own packaging of the driver
  (``nvidia-open``, ``cuda-drivers``, ``nvidia-kernel-open-dkms``, ``nvidia-driver-cuda``,
  ``libcuda1``, ``nvidia-smi``, ...) under the same names on every branch (docs/real-hosts.md,
  "Debian 12's driver names"; debian13: a Proxmox tool's changelog lists
  ``nvidia-driver-cuda`` 615.71.09 from NVIDIA's debian13 index, 2026-09-25). nvidia-smi is
  only recommended by the driver's libraries there (Debian's libcuda1, packages.debian.org),
  so gpuhost installs it explicitly.
- NVIDIA's Debian guide starts with ``add-apt-repository contrib``: the packages depend on
  packages Debian ships in contrib (``roles/debian_archive.py``).
- Local repo packages exist for both: ``nvidia-driver-local-repo-debian12-*``,
  ``https://developer.download.nvidia.com/compute/nvidia-driver/590.48.01/local_installers/
  nvidia-driver-local-repo-debian13-590.48.01_1.0-1_amd64.deb`` (a public Makefile that
  downloads it, read 2026-11-29).
- Debian 13 (released 2025-08-09): kernel 6.12 LTS, apt 3 with deb822 sources by default,
  dkms 3.2.x, ``initramfs-tools`` still the default initramfs generator. Its ``docker.io``
  (26.1.5+dfsg1-9+deb13u1) no longer holds the docker CLI: that is ``docker-cli``, which
  docker.io only recommends (trixie's Packages index, read 2026-11-29), so gpuhost installs
  both (it installs without recommends).
- Kernel meta packages: ``<ABI>-<flavour>`` -> ``linux-headers-<flavour>``: ``6.1.0-56-amd64``
  -> ``linux-headers-amd64``, ``-cloud-amd64``, ``-rt-amd64``, ``-arm64`` likewise
  (packages.debian.org, source linux-signed-amd64, read 2026-11-27). Trixie's kernels are
  named ``6.12.<N>+deb13-<flavour>`` (``6.12.74+deb13+1-amd64`` in
  NVIDIA/open-gpu-kernel-modules#1128, 2026-04-28): the same flavour suffix.
"""

from __future__ import annotations

import re

from gpuhost.aptdistros.base import AptRelease

# 6.1.0-56-amd64, 6.1.0-0.deb11.13-amd64 style (-N), 6.12.74+deb13+1-amd64, 6.12.9+bpo-amd64
_RELEASE = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:-[0-9][0-9.a-z]*|\+[0-9a-z+.~]+)-([a-z0-9][a-z0-9-]*)$")


def headers_meta(release: str) -> str:
    """``linux-headers-<flavour>`` of a Debian kernel; ``linux-headers-amd64`` for a
    release string of another shape."""
    match = _RELEASE.match(release or "")
    return f"linux-headers-{match.group(1)}" if match else "linux-headers-amd64"


_COMMON = dict(os_id="debian", driver_names="debian", explicit=("nvidia-smi",), contrib=True,
               headers_meta=headers_meta)

RELEASES = (
    AptRelease(tag="debian12", version_id="12", name="Debian 12", codename="bookworm",
               **_COMMON),
    AptRelease(tag="debian13", version_id="13", name="Debian 13", codename="trixie",
               distro_docker=("docker.io", "docker-cli"), **_COMMON),
)
