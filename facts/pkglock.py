"""Who holds the package manager's locks, and whether dpkg was interrupted.

``pyinfra INVENTORY fact gpuhost.facts.pkglock.PackageLock family=debian``
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase

from gpuhost import pkglock


class PackageLock(FactBase):
    """
    The package manager's locks that a process holds (from ``/proc/locks``), and on apt
    hosts whether dpkg left work unfinished (``dpkg --audit``, ``/var/lib/dpkg/updates``).

    + family: ``debian`` (apt/dpkg) or ``rhel`` (dnf/rpm)

    .. code:: python

        {"held": [{"path": "/var/lib/dpkg/lock-frontend", "pid": 222, "command": "apt-get"}],
         "interrupted": False}
    """

    def command(self, family: str = "debian") -> str:
        return pkglock.state_command(family)

    def process(self, output: list[str]) -> dict[str, Any]:
        return pkglock.parse(output)

    def default(self) -> dict[str, Any]:  # type: ignore[override]
        return {"held": [], "interrupted": False}
