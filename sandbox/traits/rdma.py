"""RDMA trait: a host with an InfiniBand NIC for GPUDirect RDMA (issue 25 item 5,
docs/rdma.md). The effect is in the simulator, which reads the host's traits from
machine.json: lspci and /sys/bus/pci/devices show a ConnectX-7 function beside GPU 0
(gpusim/lspci.py rdma_nics), and `nvidia-smi topo -m` has a NIC0 column (gpusim/topo.py)."""
from __future__ import annotations

from pathlib import Path

from . import Trait, register

# What /proc/kallsyms lists of an inbox ib_core (the distribution kernel's own RDMA core):
# its exported ib_* symbols, tagged [ib_core] as the kernel tags a module's symbols, and no
# ib_register_peer_memory_client, which only MLNX_OFED / DOCA-OFED's ib_core exports.
INBOX_KALLSYMS = "".join(
    f"0000000000000000 T {name}\t[ib_core]\n"
    for name in ("ib_register_client", "ib_unregister_client", "ib_register_device",
                 "ib_umem_get", "ib_umem_release", "ib_dispatch_event"))


KALLSYMS = "etc/gpusim/kallsyms"
KALLSYMS_UNIT = "etc/systemd/system/gpusim-kallsyms.service"
_UNIT = f"""[Unit]
Description=gpusim: this host's /proc/kallsyms (trait rdma-inbox)
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/mount --bind -o ro /{KALLSYMS} /proc/kallsyms

[Install]
WantedBy=sysinit.target
"""


def _inbox_create(h: dict, upper: Path) -> None:
    """/etc/gpusim/kallsyms, bound over /proc/kallsyms early at every boot by a unit (nspawn's
    /proc is this machine's kernel, whose kallsyms has no RDMA core at all)."""
    for rel, text in ((KALLSYMS, INBOX_KALLSYMS), (KALLSYMS_UNIT, _UNIT)):
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text(text, encoding="utf-8")
    wants = upper / "etc/systemd/system/sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "gpusim-kallsyms.service"
    if not link.is_symlink():
        link.symlink_to("/" + KALLSYMS_UNIT)


register(Trait(
    name="rdma-nic",
    doc="one ConnectX-7 InfiniBand NIC (15b3:1021, class 0x0207) under GPU 0's PCIe switch; "
        "nvidia-smi topo -m lists it as NIC0 (mlx5_N)",
    source="pci.ids: 15b3:1021 'MT2910 Family [ConnectX-7]', class 0207 Infiniband controller; "
           "NVIDIA gpu-driver-container _mellanox_devices_present (vendor 0x15b3 in "
           "/sys/bus/pci/devices) before it loads nvidia-peermem; nvidia-smi topo -m layout "
           "with a NIC Legend as in NVIDIA/nccl#1505 (2024-11-06)",
))

register(Trait(
    name="rdma-inbox",
    doc="the RDMA NIC (with rdma-nic) runs on the kernel's inbox RDMA stack: /proc/kallsyms "
        "lists ib_core's symbols without ib_register_peer_memory_client, and modprobe "
        "nvidia_peermem fails with Invalid argument",
    source="NVIDIA/open-gpu-kernel-modules 595.45.04: kernel-open/conftest.sh defines "
           "NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT only when ib_register_peer_memory_client is "
           "in the kernel's or MOFED's Module.symvers; nvidia-peermem.c nv_mem_client_init() "
           "returns -EINVAL otherwise; NVIDIA/gpu-operator#2868 (2026-09); the kallsyms check "
           "of public GPUDirect guides (grep ib_register_peer_memory_client /proc/kallsyms)",
    create=_inbox_create,
))
