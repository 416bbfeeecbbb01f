"""MIG facts.

``pyinfra INVENTORY fact gpuhost.facts.mig.MigState --json``
"""

from __future__ import annotations

from gpuhost.facts.assemble_mig import mig_state
from gpuhost.facts.base import SectionFact


class MigState(SectionFact):
    """
    MIG mode and layout per GPU: ``nvidia-smi -q -x`` (modes), ``nvidia-smi mig -lgi`` and
    ``-lci`` (GPU and compute instances, read only when a GPU has MIG enabled) and
    ``nvidia-smi -L`` (MIG device UUIDs).

    .. code:: python

        {"gpus": [{"index": 0, "name": ..., "uuid": ..., "mig_capable": bool | None,
                   "mode_current": "enabled" | "disabled" | None,
                   "mode_pending": "enabled" | "disabled" | None,
                   "pending_change": bool,   # a reset or reboot is due
                   "gpu_instances": [{"gpu": 0, "profile": "3g.20gb", "profile_id": 9,
                                      "instance_id": 1, "placement": [4, 4] | None}],
                   "compute_instances": [{"gpu": 0, "gpu_instance_id": 1, ...}],
                   "devices": [{"profile": "3g.20gb", "device": 0, "uuid": "MIG-..."}]}],
         "enabled_gpus": [0],
         "layout": {"0": ["3g.20gb", "3g.20gb"]}}

    A host without nvidia-smi answers ``{"gpus": [], "enabled_gpus": [], "layout": {}}``.
    """

    sections = ("smi_xml", "smi_list", "mig_lgi", "mig_lci")
    assemble = staticmethod(mig_state)
