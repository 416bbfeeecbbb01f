"""RDMA trait: a host with an InfiniBand NIC for GPUDirect RDMA (issue 25 item 5,
docs/rdma.md). The effect is in the simulator, which reads the host's traits from
machine.json: lspci and /sys/bus/pci/devices show a ConnectX-7 function beside GPU 0
(gpusim/lspci.py rdma_nics), and `nvidia-smi topo -m` has a NIC0 column (gpusim/topo.py)."""
from __future__ import annotations

from . import Trait, register

register(Trait(
    name="rdma-nic",
    doc="one ConnectX-7 InfiniBand NIC (15b3:1021, class 0x0207) under GPU 0's PCIe switch; "
        "nvidia-smi topo -m lists it as NIC0 (mlx5_N)",
    source="pci.ids: 15b3:1021 'MT2910 Family [ConnectX-7]', class 0207 Infiniband controller; "
           "NVIDIA gpu-driver-container _mellanox_devices_present (vendor 0x15b3 in "
           "/sys/bus/pci/devices) before it loads nvidia-peermem; nvidia-smi topo -m layout "
           "with a NIC Legend as in NVIDIA/nccl#1505 (2024-11-06)",
))
