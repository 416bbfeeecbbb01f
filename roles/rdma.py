"""GPUDirect RDMA (``nvidia_gpudirect_rdma``, docs/rdma.md; issue 25 item 5).

Where the setting and the host's RDMA NICs say so (``gpuhost.rdma.wanted``):

- peermem: the module loaded now once the driver is loaded (after roles.nvidia_driver),
  then ``/etc/modules-load.d/nvidia-peermem.conf`` (systemd-modules-load loads
  ``nvidia_peermem`` at every boot; modprobe pulls in nvidia and ib_core first), written
  only after the module loaded, so a failed modprobe leaves no file failing every boot. The upgrade and
  gpuhost recover already unload it before nvidia (roles/upgrade/ops.py UNLOAD_ORDER).
- dmabuf: nothing loaded; gpuhost's own modules-load.d file removed if an earlier run wrote it.
- inbox (auto or peermem on an inbox RDMA stack, whose ib_core has no peer-memory API:
  nvidia_peermem would fail with -EINVAL): as dmabuf; the audit says why and names DMA-BUF.
- off, or auto on a host without RDMA NIC: nothing touched.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import files, server

from gpuhost.facts.nvidia import NvidiaDriver
from gpuhost.facts.rdma import RdmaState
from gpuhost import rdma
from gpuhost.roles.common import fail_command, host_settings, host_state
from gpuhost.roles.files import config_file


def host_ready() -> bool:
    """Refuse, before anything changes, ``peermem`` on a host without RDMA NIC (the module
    needs ib_core's peer memory API and has nothing to serve there)."""
    mode = host_settings().nvidia_gpudirect_rdma
    if rdma.wanted(mode, host_state().get("rdma") or {}) != "refuse":
        return True
    server.shell(name="gpuhost cannot provision this host", commands=[fail_command(
        f"{host.name}: nvidia_gpudirect_rdma is peermem but the host shows no RDMA NIC "
        "(no Mellanox network function on the PCI bus, nothing in /sys/class/infiniband): "
        "set nvidia_gpudirect_rdma: auto (acts only where a NIC is seen) or off for this host")])
    return False


def _driver_loaded() -> bool:
    return host.get_fact(NvidiaDriver)["state"] == "loaded"


def _peermem_loaded() -> bool:
    return bool(host.get_fact(RdmaState).get("peermem_loaded"))


@deploy("GPUDirect RDMA")
def configure() -> None:
    want = rdma.wanted(host_settings().nvidia_gpudirect_rdma, host_state().get("rdma") or {})
    if want == "inbox":
        host.noop(f"no {rdma.MODULE}: {rdma.INBOX_WHY}; GPUDirect RDMA goes through DMA-BUF "
                  "(docs/rdma.md)")
    if want in ("dmabuf", "inbox"):
        files.file(name=f"No nvidia_peermem at boot (nvidia_gpudirect_rdma: "
                        f"{host_settings().nvidia_gpudirect_rdma}, {want})",
                   path=rdma.MODULES_LOAD, present=False)
        return
    if want != "peermem":
        return
    server.shell(name="Load nvidia_peermem (the driver is loaded)",
                 commands=[f"modprobe {rdma.MODULE}"],
                 _if=lambda: _driver_loaded() and not _peermem_loaded())
    config_file(name="nvidia_peermem is loaded at boot (GPUDirect RDMA)",
                content=rdma.modules_load_conf(), dest=rdma.MODULES_LOAD, mode="644")
