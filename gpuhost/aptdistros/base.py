"""What an apt distribution release entry holds (pure, no pyinfra).

Each distribution is one module of this package (``debian``, ``ubuntu``) with its releases
(one ``AptRelease`` each) and the vendor sources of their facts; ``gpuhost.aptdistros``
lists them. A new release is one ``AptRelease`` in its distribution's module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AptRelease:
    """One release of an apt distribution, as gpuhost provisions it.

    ``tag``: NVIDIA's distribution tag (``debian13``, ``ubuntu2604``: the directory of its
    repositories and the name in its local repo packages); ``os_id`` / ``version_id``: the
    ``ID=`` and ``VERSION_ID=`` of /etc/os-release (Debian: the major only); ``name``: as
    users know it; ``codename``: the suite of the distribution's archive and of Docker's
    repository.

    ``driver_names``: ``"debian"`` (NVIDIA's Debian repositories carry Debian's packaging,
    the same names on every branch) or ``"ubuntu"`` (before 590 the branch is in the names;
    from 590 unversioned names and a pinning package); ``pinning``: what the pinning
    package names from 590 on, ``"branch"`` (``nvidia-driver-pinning-590``) or
    ``"version"`` (``nvidia-driver-pinning-595.71.05``); ``unversioned_from``: the first
    branch whose Ubuntu-style names drop the branch (590; 0 where every branch is unversioned);
    ``explicit``: packages installed beside the meta package because the driver's packages
    only recommend them.

    ``local_repo``: NVIDIA publishes a local repo package for it (else the driver comes
    from a network repository: ``nvidia_driver_repo``); ``contrib``: NVIDIA's packages
    need Debian's contrib component; ``needs_zstd``: dkms compresses modules with zstd
    without depending on it; ``dkms_line``: the dkms line the release ships (``"2.8"`` or
    ``"3"``); ``initramfs``: the tool that builds its initramfs (``update-initramfs`` or
    ``dracut``), tried first when the nouveau blacklist changes; ``distro_docker``: the
    distribution's Docker packages (``docker_source: distro``).

    ``headers_meta(release)``: the headers meta package of a kernel's flavour, from its
    ``uname -r``; ``driver_problem(kernel_release, version)``: why this driver version cannot
    be built for that kernel, or None.
    """

    tag: str
    os_id: str
    version_id: str
    name: str
    codename: str
    driver_names: str
    headers_meta: Callable[[str], str]
    pinning: str = "branch"
    unversioned_from: int = 590
    explicit: tuple[str, ...] = ()
    local_repo: bool = True
    contrib: bool = False
    needs_zstd: bool = False
    dkms_line: str = "3"
    initramfs: str = "update-initramfs"
    distro_docker: tuple[str, ...] = ("docker.io",)
    driver_problem: Callable[[str, str], str | None] = lambda kernel, version: None
