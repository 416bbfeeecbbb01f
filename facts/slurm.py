"""Slurm's record of this host, alone: ``pyinfra INVENTORY fact gpuhost.facts.slurm.SlurmNode``.

The same ``slurm`` section the composite ``gpuhost.facts.host.GpuHostState`` runs (``facts.script``),
read on its own by the upgrade and ``gpuhost recover`` when they drain and resume the node
(``roles.slurm``). None when ``slurmd`` is not installed; else
``facts.assemble_slurm.parse_section``'s dict::

    {"node_name": "gpu-01", "enabled": "enabled", "active": "active",
     "gres": {"gpus": 2, "lines": [...], "error": None},          # slurmd -G
     "node": {"name": "gpu-01", "state": "IDLE", "flags": ["DRAIN"],
              "reason": "gpuhost: ...", "gres": "gpu:2", "gpus": 2},  # scontrol show node -o
     "node_error": None | "slurm_load_node error: Unable to contact slurm controller ..."}
"""

from __future__ import annotations

from gpuhost.facts.assemble_slurm import slurm_state
from gpuhost.facts.base import SectionFact


class SlurmNode(SectionFact):
    """
    This host's Slurm node: slurmd's unit, its gres (``slurmd -G``) and slurmctld's record of
    it (``scontrol show node -o $(hostname -s)``); None without slurmd.
    """

    sections = ("slurm",)
    assemble = staticmethod(slurm_state)
