"""Assemble gpuhost's fact values from the sections of ``facts.script`` (pure, no pyinfra).

Each ``*_state`` function takes the dict returned by ``facts.parsers.split_sections``
(name -> {"rc": int, "out": str}, read through ``facts.sections``) and returns plain data.
A section that is missing or whose tool is absent is a normal state (nothing installed),
never an error. Output that a tool printed successfully but that cannot be parsed raises
``ValueError``; the fact classes turn that into pyinfra's ``FactProcessError`` so only that
host fails.

Each fact's assembly lives beside its subject: ``facts.assemble_kernel`` (os, kernel),
``assemble_driver``, ``assemble_gpus`` (GPUs, NVLink), ``assemble_mig``, ``assemble_health``,
``assemble_container`` (Docker, containerd, toolkit, CDI), ``assemble_fabric``,
``assemble_rdma``, ``assemble_slurm``, ``assemble_recover``. ``host_state`` is the entry
point; the other names here are kept for callers that use them as ``assemble.NAME``.
"""

from __future__ import annotations

from typing import Any

from gpuhost.facts import assemble_rdma, assemble_slurm
from gpuhost.facts.assemble_container import cdi_state, containerd_state, docker_state, toolkit_state
from gpuhost.facts.assemble_driver import driver_state
from gpuhost.facts.assemble_fabric import fabric_state
from gpuhost.facts.assemble_gpus import gpus_state, nvlink_state
from gpuhost.facts.assemble_health import health_state
from gpuhost.facts.assemble_kernel import kernel_state, os_state
from gpuhost.facts.assemble_mig import mig_state
from gpuhost.facts.runlock import run_lock_state
from gpuhost.facts.sections import Sections, section
from gpuhost import stamp

__all__ = ["SCHEMA_VERSION", "cdi_state", "containerd_state", "docker_state", "driver_state",
           "fabric_state", "gpus_state", "health_state", "host_state", "kernel_state",
           "mig_state", "nvlink_state", "os_state", "toolkit_state"]

SCHEMA_VERSION = 2  # 2: state["health"] and each GPU's "health" (issue 15)


def host_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.host.GpuHostState``."""
    return {
        "schema": SCHEMA_VERSION,
        "os": os_state(sections),
        "kernel": kernel_state(sections),
        "driver": driver_state(sections),
        "gpus": gpus_state(sections),
        "mig": mig_state(sections),
        "docker": docker_state(sections),
        "toolkit": toolkit_state(sections),
        "health": health_state(sections),
        "cdi": cdi_state(sections),
        "containerd": containerd_state(sections),
        "fabric": fabric_state(sections),
        "rdma": assemble_rdma.rdma_state(sections),  # issue 25 item 5 (facts/assemble_rdma.py)
        "slurm": assemble_slurm.slurm_state(sections),  # issue 26 item 4 (facts/assemble_slurm.py)
        "stamp": stamp.parse(*section(sections, "stamp")),  # issue 27 item 7 (gpuhost/stamp.py)
        "run_lock": run_lock_state(sections),  # issue 36 item 7 (gpuhost/runlock.py)
    }
