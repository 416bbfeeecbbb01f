"""The GPUDirect RDMA fact the deploy reads (roles/rdma.py): RDMA NICs, nvidia_peermem
loaded and persisted, ``nvidia-smi topo -m`` (facts.assemble_rdma; docs/rdma.md)."""

from __future__ import annotations

from gpuhost.facts.assemble_rdma import rdma_state
from gpuhost.facts.base import SectionFact


class RdmaState(SectionFact):
    """``facts.assemble_rdma.rdma_state`` of the ``rdma`` and ``rdma_topo`` sections."""

    sections = ("rdma", "rdma_topo")
    assemble = staticmethod(rdma_state)
