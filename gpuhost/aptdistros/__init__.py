"""The apt distributions gpuhost knows, one module each (pure, no pyinfra).

``RELEASES`` maps NVIDIA's distribution tag (``debian12``, ``ubuntu2604``, ...) to its
``AptRelease`` (``base.py``); ``gpuhost.distro`` maps /etc/os-release to it. A new release is one entry in its distribution's module (``debian``,
``ubuntu``); a new distribution, a module and one entry in ``_MODULES``.
"""

from __future__ import annotations

from gpuhost.aptdistros import debian, ubuntu
from gpuhost.aptdistros.base import AptRelease

_MODULES = (debian, ubuntu)
RELEASES: dict[str, AptRelease] = {r.tag: r for m in _MODULES for r in m.RELEASES}

__all__ = ["RELEASES", "AptRelease", "driver_problem", "release"]


def release(tag: str) -> AptRelease:
    """The ``AptRelease`` of NVIDIA's tag ``tag``; ValueError for another tag."""
    if tag not in RELEASES:
        raise ValueError(f"no apt distribution {tag!r} (known: {', '.join(RELEASES)})")
    return RELEASES[tag]


def driver_problem(tag: str | None, kernel_releases, version: str) -> str | None:
    """Why driver ``version`` cannot be built for one of ``kernel_releases`` (the running
    kernel and the next boot's, as ``uname -r`` prints them) on ``tag``, in one line naming
    the first version that builds; None when nothing is known against it (or not apt)."""
    entry = RELEASES.get(tag or "")
    if entry is None:
        return None
    for kernel in dict.fromkeys(k for k in kernel_releases if k):
        problem = entry.driver_problem(kernel, version)
        if problem:
            return problem
    return None
