"""The composite fact: the whole GPU stack of a host in one remote command.

``pyinfra INVENTORY fact facts.host.GpuHostState --json``
"""

from __future__ import annotations

from facts.assemble import host_state
from facts.base import SectionFact
from facts.script import ALL_SECTIONS


class GpuHostState(SectionFact):
    """
    Everything gpuhost reads from a host, gathered by ONE remote command (every section of
    ``facts.script`` in a single shell script), for audits and post-deploy verification.

    .. code:: python

        {"schema": 1,
         "os": {"id": "debian", "version_id": "12", "pretty_name": ..., "kernel_release": ...,
                "arch": "x86_64", "family": "debian" | "rhel" | None,
                "distro_tag": "debian12" | ... | None, "supported": bool, "error": str | None},
         "kernel": <facts.kernel.KernelHeaders>,
         "driver": <facts.nvidia.NvidiaDriver>,
         "gpus": <facts.nvidia.NvidiaGpus>,
         "mig": <facts.mig.MigState>,
         "docker": <facts.container.DockerDaemonConfig>,
         "toolkit": <facts.container.ContainerToolkit>}
    """

    sections = ALL_SECTIONS
    assemble = staticmethod(host_state)
