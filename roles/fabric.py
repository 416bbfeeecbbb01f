"""The NVLink fabric of HGX and NVL hosts (``nvidia_fabric``, docs/fabric.md).

Called by ``roles.nvidia_driver.install`` once the driver packages are in (and the host
rebooted into the driver when allowed): the companions at the driver's exact version (a
host where one drifted gets it moved back), then

- nvswitch: Fabric Manager enabled, ordered before containers, DCGM and kubelet (a drop-in:
  NVIDIA's unit is left as shipped), started once the driver is loaded, restarted when its
  package moved; on an NVLink 5 board (HGX B200/B300) NVLSM is installed with it and
  Fabric Manager's own start script starts NVLSM first (a Fabric Manager running without
  NVLSM is restarted);
- nvl: IMEX channel 0 created by the driver at every load (``NVreg_CreateImexChannel0=1``),
  ``/etc/nvidia-imex/nodes_config.cfg`` with the peers, nvidia-imex enabled and started.

``roles.verify`` then waits, bounded, for every GPU's fabric state Completed.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.server import Command
from pyinfra.operations import server, systemd

from gpuhost.facts.nvidia import NvidiaDriver
from gpuhost.facts.services import ServiceInstalled
from gpuhost import fabric, kubernetes, packages
from gpuhost.roles.files import config_file

IMEX_MODPROBE = "/etc/modprobe.d/gpuhost-imex-channel.conf"


@operation()
def companions_at(version: str, family: str):
    """
    Every installed fabric companion (Fabric Manager, NSCQ, IMEX, NVSDM) at ``version``:
    one that drifted (installed by hand, a partial upgrade) is moved to the driver's.

    + version: the driver version
    + family: ``debian`` or ``rhel``
    """
    have = host.get_fact(NvidiaDriver).get("companion_versions") or {}
    wrong = sorted(name for name, at in have.items() if at != version)
    if not wrong:
        host.noop(f"the fabric companions are at {version}")
        return
    if family == "debian":
        yield StringCommand("DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades "
                            "--no-install-recommends",
                            *[QuoteString(f"{name}={version}-*") for name in wrong])
    else:
        yield StringCommand("dnf install -y", *[QuoteString(f"{name}-{version}") for name in wrong])


def _installed(service: str) -> bool:
    return host.get_fact(ServiceInstalled, service=service)


def _loaded() -> bool:
    return host.get_fact(NvidiaDriver)["state"] == "loaded"


# Fabric Manager runs and NVLSM does not (NVLSM installed after Fabric Manager started, or
# it died): "restart" (facts.script's nvlsm section reads the same pid file)
_NVLSM_CHECK = ("if systemctl is-active -q nvidia-fabricmanager && ! { "
                "p=$(cat /run/nvidia-fabricmanager/nvlsm.pid 2>/dev/null) && [ -n \"$p\" ] && "
                "kill -0 \"$p\" 2>/dev/null; } && ! pgrep -f '[/]opt/nvidia/nvlsm/sbin/nvlsm' "
                ">/dev/null 2>&1; then echo restart; else echo ok; fi")


@operation()
def nvlsm_with_fabric_manager():
    """
    On an NVLink 5 board NVLSM runs beside Fabric Manager: Fabric Manager's start script
    starts it, so a Fabric Manager that runs without it is restarted.
    """
    if (host.get_fact(Command, command=_NVLSM_CHECK) or "").strip() != "restart":
        host.noop("NVLSM runs with Fabric Manager (or Fabric Manager does not run)")
        return
    yield "systemctl restart nvidia-fabricmanager"


def configure(fabric_kind: str, version: str, family: str, peers: tuple[str, ...],
              nvlink5: bool = False, profile: str = "none") -> None:
    """The daemons of ``fabric_kind`` (none, nvswitch, nvl) after the packages; ``nvlink5``:
    the board's switches are NVLink 5 ones (NVLSM beside Fabric Manager); ``profile``: the
    Kubernetes node profile, which decides who runs IMEX (roles.kubernetes)."""
    if fabric_kind == "none":
        return
    moved = companions_at(name=f"The fabric packages are at the driver's version {version}",
                          version=version, family=family)
    if fabric_kind == "nvswitch":
        _fabric_manager(moved)
        if nvlink5:
            nvlsm_with_fabric_manager(name="NVLSM runs with Fabric Manager (NVLink 5)",
                                      _if=lambda: _installed(fabric.FM_SERVICE) and _loaded())
    else:
        _imex(peers, moved, profile)


def _fabric_manager(moved) -> None:
    service = fabric.FM_SERVICE
    order = config_file(name="Fabric Manager starts before containers, DCGM and kubelet",
                        content=fabric.fm_drop_in(), dest=fabric.FM_DROP_IN, mode="644")
    systemd.daemon_reload(name="systemd reads Fabric Manager's order", _if=order.did_change)
    server.service(name="Enable the NVIDIA Fabric Manager", service=service, running=None,
                   enabled=True, _if=lambda: _installed(service))
    server.service(name="Run the NVIDIA Fabric Manager (driver loaded)", service=service,
                   running=True, _if=lambda: _installed(service) and _loaded())
    server.service(name="Restart the NVIDIA Fabric Manager (its package moved)", service=service,
                   running=True, restarted=True,
                   _if=lambda: moved.did_change() and _installed(service) and _loaded())


def _imex(peers: tuple[str, ...], moved, profile: str = "none") -> None:
    service = fabric.IMEX_SERVICE
    # IMEX channels "will not persist through a reboot" (NVIDIA's IMEX guide, "IMEX
    # Channels"); "the driver can create channel0 if the NVreg_CreateImexChannel0 module
    # parameter is specified" (CUDA programming guide): at every load of the module
    channel = config_file(name="IMEX channel 0 at every driver load",
                          content="# Managed by gpuhost (nvidia_fabric: nvl)\n"
                                  "options nvidia NVreg_CreateImexChannel0=1\n",
                          dest=IMEX_MODPROBE, mode="644")
    server.shell(name="Rebuild the initramfs with the IMEX channel option",
                 commands=["if command -v update-initramfs >/dev/null 2>&1; then "
                           "update-initramfs -u; elif command -v dracut >/dev/null 2>&1; then "
                           "dracut --force; fi"], _if=channel.did_change)
    nodes = config_file(name="IMEX peers (nodes_config.cfg)",
                        content=fabric.imex_nodes_config(peers),
                        dest=fabric.IMEX_NODES_CONFIG, mode="644")
    from gpuhost.roles import kubernetes as kubernetes_role

    host_managed = kubernetes_role.configure(profile, lambda: _installed(service))
    if kubernetes.imex_masked(profile):  # the DRA driver runs IMEX per ComputeDomain
        return
    server.service(name="Enable nvidia-imex", service=service, running=None, enabled=True,
                   _if=lambda: _installed(service))
    server.service(name="Run nvidia-imex with its peers", service=service, running=True,
                   restarted=True,
                   _if=lambda: _installed(service) and _loaded()
                   and (nodes.did_change() or moved.did_change()
                        or (host_managed is not None and host_managed.did_change())))
    server.service(name="nvidia-imex is running", service=service, running=True,
                   _if=lambda: _installed(service) and _loaded())


def wanted_packages(tag: str, version: str, flavor: str, fabric_kind: str,
                    nvlink5: bool = False) -> list[str]:
    """The driver's packages plus the fabric's companions (and NVLSM on NVLink 5 boards)."""
    names = packages.driver_packages(tag, version, flavor, fabric_kind == "nvswitch")
    return names + [n for n in fabric.fabric_packages(tag, version, fabric_kind, nvlink5)
                    if n not in names]
