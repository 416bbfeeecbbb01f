"""The composite fact: the whole GPU stack of a host in one remote command.

``pyinfra INVENTORY fact gpuhost.facts.host.GpuHostState --json``
"""

from __future__ import annotations

from gpuhost.facts.assemble import host_state
from gpuhost.facts.base import SectionFact
from gpuhost.facts.script import ALL_SECTIONS, READ_SECTIONS


class GpuHostState(SectionFact):
    """
    Everything gpuhost reads from a host, gathered by ONE remote command (every section of
    ``facts.script`` in a single shell script), for audits and post-deploy verification.

    .. code:: python

        {"schema": 2,
         "os": {"id": "debian", "version_id": "12", "pretty_name": ..., "kernel_release": ...,
                "arch": "x86_64", "family": "debian" | "rhel" | None,
                "distro_tag": "debian12" | ... | None, "supported": bool, "error": str | None},
         "kernel": <facts.kernel.KernelHeaders>,
         "driver": <facts.nvidia.NvidiaDriver>,
         "gpus": <facts.nvidia.NvidiaGpus>,        # each with its "health" dict (or None)
         "mig": <facts.mig.MigState>,
         "docker": <facts.container.DockerDaemonConfig>,
         "toolkit": <facts.container.ContainerToolkit>,
         "cdi": <facts.container.CdiSpecs>,          # issue 16; gpuhost.runtime.cdi.judge reads it
         "slurm": <facts.slurm.SlurmNode> | None,   # issue 26; None without slurmd
         "health": {
             "xid_events": [{"pci_bus_id": "0000:3b:00", "xid": 79, "gpu_instance_id": None,
                             "text": "..."},
                            {"pci_bus_id": "0000:c4:00.0", "sxid": 12028, "text": "..."}],
             "xid_source": "journal" | "dmesg" | None,  # None: no kernel log readable
             "gpus_missing": ["0000:09:00.0"] | None,   # see below
             "nvswitch_count": 0}}

    Schema 2 (issue 15) added ``health`` and each GPU's ``health``; nothing was removed.

    ``health.xid_events`` are ``facts.parsers.parse_xid_lines`` entries of this boot's kernel
    log (section ``kernel_xid``: ``journalctl -k -b``, else ``dmesg``; only the Xid/SXid
    lines, the newest 200). ``gpus_missing``: NVIDIA GPUs (PCI class 0x0300/0x0302) that the
    PCI bus shows (sysfs, else lspci; the slot as they print it) and ``nvidia-smi`` does not
    list; ``None`` when nvidia-smi gave no answer (no driver, error, timeout), ``[]`` when
    every GPU is listed; when nvidia-smi says "No devices were found" every GPU on the bus is
    missing. ``nvswitch_count``: NVIDIA functions of PCI class 0x0680 (NVSwitch bridges).

    Deploys, upgrades and recoveries read these sections; ``kernel.offered`` is None here
    (``AuditHostState`` reads it).
    """

    sections = READ_SECTIONS
    assemble = staticmethod(host_state)


class AuditHostState(GpuHostState):
    """
    ``GpuHostState`` plus what only the audit reads (``facts.script.AUDIT_ONLY_SECTIONS``:
    the newest kernel the package manager offers, ``kernel.offered``), in the same one
    remote command.
    """

    sections = ALL_SECTIONS
