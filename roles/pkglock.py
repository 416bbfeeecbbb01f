"""Before any package is installed: the package manager's lock free, dpkg whole (issue 23
item 12). Every install of gpu_host and upgrade_driver (pyinfra's apt/dnf operations and
gpuhost's own apt-get/dnf commands) runs after ``ready()``:

- apt hosts get ``/etc/apt/apt.conf.d/90gpuhost-lock-timeout`` (``DPkg::Lock::Timeout``):
  every later apt-get of the run (and of the host) waits for the dpkg lock, bounded,
  instead of failing at once when unattended-upgrades starts in between;
- ``free``: when a process holds a lock now, the host waits for it (bounded,
  ``gpuhost.pkglock.WAIT_SECONDS``), saying who holds it; then an interrupted dpkg is
  finished (``dpkg --configure -a``). dnf waits for another dnf by itself.

The facts and shell text: ``gpuhost/pkglock.py`` (with the vendor facts), ``facts/pkglock.py``.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import deploy, operation

from gpuhost.facts.pkglock import PackageLock
from gpuhost import packages, pkglock
from gpuhost.roles.common import distro_tag, host_state
from gpuhost.roles.files import config_file


@operation()
def free(family: str):
    """
    Wait (bounded) for the package manager's locks, saying who holds them; finish an
    interrupted dpkg. No command when the locks are free and dpkg is whole.

    + family: ``debian`` (apt/dpkg) or ``rhel`` (dnf/rpm)
    """
    lock = host.get_fact(PackageLock, family=family)
    if not lock["held"] and not lock["interrupted"]:
        host.noop("the package manager's locks are free")
        return
    if lock["held"]:  # said when planned and again when the host waits
        logger.warning(f"{host.name}: {pkglock.describe(lock['held'])}: gpuhost waits up to "
                       f"{pkglock.WAIT_SECONDS} s for it before installing packages")
        yield pkglock.wait_command(family)
    if family == "debian":
        yield pkglock.REPAIR_DPKG


@deploy("Package manager")
def ready() -> None:
    family = packages.family(distro_tag(host_state()))
    if family == "debian":
        config_file(name=f"apt waits for the dpkg lock ({pkglock.APT_CONF})",
                    dest=pkglock.APT_CONF, content=pkglock.APT_CONF_TEXT)
    free(name="Wait for the package manager's lock; finish an interrupted dpkg", family=family)
