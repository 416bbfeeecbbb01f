"""The `slurm` trait: a host that is its own Slurm cluster (controller and compute node).

Debian 12's Slurm 22.05 (`slurmd`, `slurmctld`, `slurm-client`) and MUNGE from the sandbox
mirror, installed after the first boot, as a site's configuration management would:

- `/etc/slurm/slurm.conf`: the host is `SlurmctldHost` and the only node, `GresTypes=gpu`,
  `NodeName=HOST ... Gres=gpu:N` (N: the simulated GPU count), one partition `gpu`;
  `proctrack/linuxproc` and `task/none` (no cgroup setup needed inside the container)
- `/etc/slurm/gres.conf`: `AutoDetect=off`, `Name=gpu File=/dev/nvidia[0-(N-1)]`, the
  simulated GPUs' device nodes (gres.conf(5): without AutoDetect, File= names the devices and
  the count is the number of files)
- `/etc/slurm/cgroup.conf`: `CgroupPlugin=cgroup/v1` (see CGROUP below)
- MUNGE's key (Debian's munge postinst creates `/etc/munge/munge.key` when there is none;
  `mungekey` otherwise), then munge, slurmctld and slurmd started and enabled

`setup_script(h)` is the same shell for the trait and for tests that add Slurm to a
converged host (tests/integration/test_slurm.py), so both get the same cluster.
Sources: Slurm's slurm.conf(5), gres.conf(5) and scontrol(1) man pages (22.05), Debian's
slurm-wlm 22.05.8 packages (sandbox/README.md, "Slurm").
"""
from __future__ import annotations

import shlex

from . import Trait, register

CONF = "/etc/slurm/slurm.conf"
GRES_CONF = "/etc/slurm/gres.conf"
CGROUP_CONF = "/etc/slurm/cgroup.conf"
# slurmd 22.05 loads its cgroup plugin at start even with proctrack/linuxproc; its autodetect
# stops at the sandbox's mixed v1/v2 mounts ("fatal: Hybrid mode is not supported"), so the
# v1 plugin is named (cgroup.conf(5): CgroupPlugin)
CGROUP = "CgroupPlugin=cgroup/v1\n"
PARTITION = "gpu"


def slurm_conf(node: str, gpus: int) -> str:
    gres = f" Gres=gpu:{gpus}" if gpus else ""
    return "\n".join([
        "# gpuhost sandbox: this host is its own Slurm cluster (sandbox/traits/slurm.py)",
        "ClusterName=gpuhost-sandbox",
        f"SlurmctldHost={node}",
        "AuthType=auth/munge",
        "SlurmUser=slurm",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "GresTypes=gpu",
        f"NodeName={node} CPUs=1 RealMemory=100{gres} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def gres_conf(gpus: int) -> str:
    files = "/dev/nvidia0" if gpus == 1 else f"/dev/nvidia[0-{gpus - 1}]"
    lines = ["# gpuhost sandbox: the simulated GPUs' device nodes (sandbox/traits/slurm.py)",
             "AutoDetect=off"]
    if gpus:
        lines.append(f"Name=gpu File={files}")
    return "\n".join(lines) + "\n"


def setup_script(h: dict) -> str:
    """Shell (run as root on the host) that installs, configures and starts Slurm."""
    node, gpus = h["name"], int(h["gpu_count"])
    return " && ".join([
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get -q update >/dev/null",
        "apt-get -q install -y slurmd slurmctld slurm-client munge >/dev/null",
        "mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm",
        "chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm",
        f"printf %s {shlex.quote(slurm_conf(node, gpus))} > {CONF}",
        f"printf %s {shlex.quote(gres_conf(gpus))} > {GRES_CONF}",
        f"printf {shlex.quote(CGROUP)} > {CGROUP_CONF}",
        "{ test -s /etc/munge/munge.key || mungekey --create --keyfile=/etc/munge/munge.key; }",
        "chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key",
        "systemctl enable -q munge slurmctld slurmd",
        "systemctl restart munge && systemctl restart slurmctld && systemctl restart slurmd",
        # the node registers within seconds; wait for it (bounded) so callers find it idle
        f"for i in $(seq 60); do scontrol show node -o {shlex.quote(node)} 2>/dev/null "
        "| grep -q 'State=IDLE ' && break; sleep 1; done",
        f"scontrol show node -o {shlex.quote(node)} | grep -q 'State=IDLE '",
    ])


def _booted(h: dict, sh) -> None:
    sh(setup_script(h), timeout=900)


register(Trait(
    name="slurm",
    doc="Slurm 22.05 (Debian's slurmd, slurmctld, munge): the host is its own controller and "
        "its only node, Gres=gpu:N from the simulated GPUs' /dev/nvidia* (gres.conf, "
        "AutoDetect=off)",
    source="Slurm slurm.conf(5) (GresTypes, NodeName ... Gres=), gres.conf(5) (File=, "
           "AutoDetect), scontrol(1) (update NodeName= State=DRAIN Reason= / RESUME); Debian "
           "bookworm slurm-wlm 22.05.8",
    oses=("debian12",),
    booted=_booted,
))
