"""The operations of a driver upgrade. Each reads the host at execute time and does only
what is still to do, so a rerun after an interruption picks up where the last run stopped.

By subject: ``roles.upgrade.ops_gpu`` (hooks, GPU clients and containers, kernel modules,
MIG put back), ``roles.upgrade.ops_packages`` (local repos, dnf stream, the package
switch); here the checks after the switch (verify, health gate) and the record. Callers use
every operation as ``ops.NAME``.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, state
from pyinfra.api import operation

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.nvidia import NvidiaDriver, NvidiaGpus
from gpuhost import converged
from gpuhost.upgrade import health_gate as health_gate_check
from gpuhost.roles import slurm
from gpuhost.roles.common import executing, fail_command
from gpuhost.roles.upgrade import record as upgrade_record
from gpuhost.roles.upgrade.ops_gpu import (
    HOOK_TIMEOUT,
    UNLOAD_ORDER,
    _probe,
    containers,
    controller_command,
    gpu_idle,
    load_modules,
    restore_mig,
    restore_mig_instances,
    start_services,
    stop_services,
    unload_modules,
)
from gpuhost.roles.upgrade.ops_packages import remove_local_repos, switch_module_stream, switch_packages

__all__ = ["HOOK_TIMEOUT", "UNLOAD_ORDER", "containers", "controller_command", "gpu_idle",
           "health_gate", "load_modules", "record_done", "remove_local_repos", "restore_mig",
           "restore_mig_instances", "start_services", "stop_services", "switch_module_stream",
           "switch_packages", "unload_modules", "verify"]


@operation()
def verify(target: str, gpu_count: int, mig: dict[str, str], daemon_json_sha256: str | None):
    """
    Prove the upgrade with facts: the loaded module, the user space and every driver package
    at the target; as many GPUs and the same MIG modes as before; daemon.json untouched.

    + target: the driver version
    + gpu_count: GPUs before the upgrade
    + mig: GPU index -> MIG mode before the upgrade
    + daemon_json_sha256: sha256 of /etc/docker/daemon.json before (None: there was none)
    """
    if not executing():
        host.noop("the upgrade is verified with facts when it runs")
        return
    driver = host.get_fact(NvidiaDriver)
    gpus = [gpu for gpu in host.get_fact(NvidiaGpus) if gpu["source"] == "nvidia-smi"]
    daemon_json = _probe()["daemon_json_sha256"]
    # converged (gpuhost.converged, the driver's reasons), and what only an upgrade adds: no
    # package of the old driver left, nvidia-smi's user space at the target too
    problems = converged.judge({"driver": driver}, {"nvidia_driver_version": target}
                               ).only(converged.DRIVER).messages()
    if driver["userspace_version"] not in (None, target):
        problems.append(f"nvidia-smi reports {driver['userspace_version']}, want {target}")
    if not problems and driver["installed_versions"] != [target]:
        installed = ", ".join(driver["installed_versions"]) or "none"
        problems.append(f"driver packages are at {installed}, want only {target}")
    if len(gpus) != gpu_count:
        problems.append(f"nvidia-smi shows {len(gpus)} GPU(s), {gpu_count} before")
    now = {str(gpu["index"]): gpu["mig_current"] for gpu in gpus}
    problems += [f"GPU {index} MIG mode is {now.get(index)}, was {mode}"
                 for index, mode in sorted(mig.items()) if now.get(index) != mode]
    if daemon_json != daemon_json_sha256:
        problems.append(f"/etc/docker/daemon.json changed during the upgrade (sha256 "
                        f"{daemon_json_sha256} before, {daemon_json} now)")
    if problems:
        yield fail_command("upgrade verification failed: " + "; ".join(problems))
        return
    host.noop(f"verified: driver {target} loaded, user space and packages at {target}, "
              f"{len(gpus)} GPU(s), MIG modes and daemon.json as before")


@operation()
def health_gate(before: list[dict[str, Any]] | None, module_signing_cert: str | None,
                slurm_what: str | None = None):
    """
    Fail the host (and so stop the rollout) when it has a critical health finding it did not
    have before the upgrade: an Xid that needs a reset, a GPU missing from nvidia-smi, a row
    remap failure, a fabric not initialised, a module that will not load at the next boot
    (``gpuhost.health``, docs/health.md).

    + before: the critical findings read before the upgrade (the resume point keeps them)
    + module_signing_cert: the inventory's ``nvidia_module_signing_cert``
    + slurm_what: on a Slurm host, what gpuhost did (``driver upgrade to 580.95.05``): a
      failing gate leaves gpuhost's drain in place with a reason saying so (roles/slurm.py)
    """
    if not executing():
        host.noop("the health gate reads the host when the upgrade runs")
        return
    passed, line = health_gate_check(before, host.get_fact(GpuHostState), module_signing_cert)
    if not passed:
        if slurm_what:
            yield from slurm.failed_gate_commands(slurm_what, line)
        yield fail_command(line)
        return
    host.noop(line)


@operation()
def record_done(from_version: str | None, result: str):
    """
    Append this host's result to the controller's upgrade event file (changes nothing).

    + from_version: the driver the host ran before
    + result: ``upgraded`` or ``already at target``
    """
    if not executing():
        host.noop("the result is recorded when the upgrade runs")
        return
    to_version = host.get_fact(NvidiaDriver)["loaded_version"]
    upgrade_record.write_event("done", **{
        "from": from_version, "to": to_version, "result": result,
        "seconds": upgrade_record.seconds_since_start(state, host.name)})
    host.noop(f"{result}: {from_version} -> {to_version}")
    yield from ()  # an operation is a generator, even one that never changes the host
