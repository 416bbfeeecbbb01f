"""gpuhost's deploys as functions, for a pyinfra repository of your own.

    # my_deploy.py (pip install gpuhost; pyinfra INVENTORY my_deploy.py)
    from gpuhost.deploys.api import gpu_host
    gpu_host(nvidia_driver_version="580.95.05")

or, without a file, ``pyinfra INVENTORY gpuhost.deploys.api.gpu_host
nvidia_driver_version=580.95.05`` (pyinfra 3 runs a function given by its dotted name).

Each function is a pyinfra ``@deploy``. Its keyword arguments are gpuhost settings
(docs/settings.md), merged over the host's inventory data for this host and this run only
(``roles.common.use_settings``), and validated for the hosts that call it: a host of the same
inventory that never calls it (a web server) is not checked. pyinfra's global arguments
(``_sudo=True``, ...) pass through as for any deploy. The files in deploys/ run the same code.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.context import inventory

from gpuhost.roles import (
    boot_safety,
    cdi,
    common,
    container_toolkit,
    containerd,
    daemon_json,
    docker_engine,
    kernel_headers,
    mig,
    nvidia_driver,
    pkglock,
    proxy,
    rdma,
    runlock,
    stamp,
    upgrade,
    verify,
)
from gpuhost.roles.audit import audit_host


def provision() -> None:
    """The whole GPU stack of the current host (deploys/gpu_host.py's steps, in order)."""
    common.check_inventory()
    if not runlock.guard("gpu_host"):  # another live run holds the host (issue 36 item 7)
        return
    if stamp.as_wanted():  # unchanged since the last successful run: one read (issue 27 item 7)
        return
    if common.host_ready() and boot_safety.check_secure_boot() and rdma.host_ready():
        runlock.take()  # first change: one run at a time (gpuhost/runlock.py)
        pkglock.ready()  # the package manager's lock free, dpkg whole: before any install
        proxy.configure()
        if common.host_settings().nvidia_kernel_modules == "dkms":  # else signed modules
            kernel_headers.install()
        nvidia_driver.install()
        runlock.renew()  # after the driver's build and reboot
        rdma.configure()  # nvidia_peermem after the driver (docs/rdma.md)
        mig.configure()
        docker_engine.install()
        container_toolkit.install()
        cdi.check_docker()
        daemon_json.configure()
        cdi.configure()
        containerd.configure()
        verify.run()
        stamp.configure_record()  # last: only after every operation above succeeded
        runlock.release()


@deploy("gpuhost: GPU host")
def gpu_host(**settings: Any) -> None:
    """Provision the host: driver, MIG, Docker, Container Toolkit, CDI, containerd, verify
    (deploys/gpu_host.py). ``settings``: gpuhost settings over the host's data."""
    common.use_settings(settings)
    provision()


@deploy("gpuhost: audit")
def audit(**settings: Any) -> None:
    """Read the host (one remote command), print its row and findings; a host that drifts
    from ``settings`` over its data, or is unhealthy, fails (deploys/audit.py)."""
    common.use_settings(settings)
    audit_host(common.host_data())


@deploy("gpuhost: upgrade the NVIDIA driver")
def upgrade_driver(**settings: Any) -> None:
    """Move the host to ``nvidia_driver_version`` (deploys/upgrade_driver.py). An upgrade is
    checked for the whole run at once, before any host changes: the first host's call gives
    its settings to every host of the run, and a host that calls with other settings stops
    the run (give per-host values in inventory data instead)."""
    given = common.run_cache("upgrade_settings")
    if "settings" not in given:
        given["settings"] = dict(settings)
        for target in inventory.get_active_hosts():
            common.use_settings(settings, target)
    elif given["settings"] != settings:
        raise common.GpuhostError(
            f"{host.name}: upgrade_driver() was called with other settings than the run's "
            f"first host ({given['settings']!r}): one upgrade is planned for the whole run, "
            "so give per-host values in inventory data, not as arguments")
    common.use_settings(settings)
    upgrade.run()
