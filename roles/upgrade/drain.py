"""Taking a host out of service around a change that restarts its GPUs, and back in: the
same steps for the rolling driver upgrade (roles/upgrade) and the kernel update
(roles/kernel_update.py), with the same operation names.

``out_of_service``: the operator's drain hook (on the controller), Slurm's drain with its
reason (only where slurmd runs), then no GPU process or GPU container may be running.
``back_in_service``: Slurm's resume (only gpuhost's own drain), then the uncordon hook.
"""

from __future__ import annotations

from gpuhost import settings
from gpuhost import slurm as gpuslurm
from gpuhost.roles import slurm as roles_slurm
from gpuhost.roles.upgrade import ops


def out_of_service(config: settings.Settings, slurm: bool, what: str) -> None:
    """``what``: the change, for Slurm's drain reason ("driver upgrade to 595.71.05")."""
    if config.upgrade_drain_command:
        ops.controller_command(name="Drain the host (upgrade_drain_command, on the controller)",
                               command=config.upgrade_drain_command, what="drain")
    if slurm:
        roles_slurm.drain(name="Drain the Slurm node and wait for its jobs (slurm)",
                          reason=gpuslurm.reason(what), timeout=config.slurm_drain_timeout)
    ops.gpu_idle(name="No GPU compute process or GPU container runs",
                 force=config.upgrade_force)


def back_in_service(config: settings.Settings, slurm: bool) -> None:
    if slurm:
        roles_slurm.resume(name="Resume the Slurm node (only gpuhost's own drain)")
    if config.upgrade_uncordon_command:
        ops.controller_command(name="Uncordon the host (upgrade_uncordon_command, on the "
                                    "controller)",
                               command=config.upgrade_uncordon_command, what="uncordon")
