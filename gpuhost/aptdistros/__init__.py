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

__all__ = ["RELEASES", "AptRelease", "release"]


def release(tag: str) -> AptRelease:
    """The ``AptRelease`` of NVIDIA's tag ``tag``; ValueError for another tag."""
    if tag not in RELEASES:
        raise ValueError(f"no apt distribution {tag!r} (known: {', '.join(RELEASES)})")
    return RELEASES[tag]
