"""What hosts boot from: base roots, OS layers and package mirrors, built once and cached
(sandbox/README.md, "What is where")."""
from __future__ import annotations

from . import base, debian13, mirror, spec, ubuntu


def build(ol: bool, ubuntu_hosts: bool, oses: set[str],
          refresh: bool = False) -> tuple[dict, dict[str, str]]:
    """The bases, layers and mirrors hosts of ``oses`` boot from (under cache_lock); returns
    the Debian mirror's state and the kernels of the OSes whose kernel comes from a mirror."""
    kernels = {}
    base.build_all(ol=ol, ubuntu_layers=ubuntu_hosts, oses=oses)
    mstate = mirror.build(refresh=refresh)
    with_ubuntu = bool(ubuntu_hosts or oses & set(ubuntu.RELEASES))
    # the Ubuntu archive always carries resolute (trixie's pool): built once, never
    # rebuilt under another fleet's Ubuntu hosts when a 26.04 host first appears
    if with_ubuntu or debian13.OS_NAME in oses:
        kernels[debian13.OS_NAME] = debian13.build_mirror(refresh=refresh)["kernel_release"]
    if with_ubuntu:
        ubuntu.build_repo(mstate)
    return mstate, kernels


def build_everything() -> None:
    """Every base root, layer and mirror any fleet spec needs (`python -m sandbox caches`):
    `make test` builds them beside the fake NVIDIA artifacts, before its tests start."""
    from .fleet import cache_lock

    with cache_lock():
        build(True, True, set(spec.OSES))
