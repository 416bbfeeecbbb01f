"""Move a host to a newer kernel, the NVIDIA module built for it first (docs/kernel-updates.md).

Prepare (facts only, before any host is touched): every host of the run is assessed at once
(``gpuhost.kernel_update.assess``, from ``GpuHostState`` and ``KernelCandidate``); a host
whose kernel cannot be installed with its headers, that has no driver DKMS builds, or whose
driver is known not to build for the kernel stops the whole run with one line per host.
With ``--dry`` nothing more happens: the plan events say per host what would.

Execute, per host to update (``kernel_update_ops``): install the kernel and its headers with
the running kernel kept the boot default; DKMS builds the module for the new kernel and
``dkms status`` must show it; only then drain hook, Slurm drain, no GPU process, the new
kernel the default, reboot; after it the kernel, the loaded module and the GPUs verified,
the health gate, Slurm resume, uncordon hook, the record. A failed build fails the host with
DKMS's make.log lines before anything is drained or rebooted.

The pyinfra run gets ``--data gpuhost_kernel_targets=TAG=RELEASE,...`` (the exact kernel
per distribution; without it the newest of the running flavour) and the event file of
``roles.upgrade.record``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gevent.pool import Group
from pyinfra import host, state
from pyinfra.api import deploy
from pyinfra.context import inventory
from pyinfra.operations import server

from gpuhost import kernel_update, settings
from gpuhost import slurm as gpuslurm
from gpuhost.upgrade import critical_findings
from gpuhost.roles import kernel_update_ops as ops, pkglock, runlock
from gpuhost.roles.upgrade import drain, ops as uops
from gpuhost.facts.host import GpuHostState
from gpuhost.facts.kernel_update import KernelCandidate
from gpuhost.facts.pyinfra_api import RunShared, use_host
from gpuhost.roles.common import GpuhostError, check_inventory, host_data, host_settings
from gpuhost.roles.upgrade import record as upgrade_record

TARGETS_KEY = "gpuhost_kernel_targets"  # --data: TAG=RELEASE,TAG=RELEASE
PLAN_KEY = "gpuhost_kernel_plan"
CHECK_KEY = "gpuhost_kernel_check"
REMOVE_KEY = "gpuhost_kernel_remove_failed"  # --data: true (gpuhost kernel-update --remove-failed)


class FleetCheck(RunShared):
    """The pre-check of one pyinfra run, shared by its hosts (as the driver upgrade's)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done.is_set(), "refusal": self.refusal}


def remove_failed() -> bool:
    """``--remove-failed``: a kernel the module does not build for is removed again."""
    return str(host.data.get(REMOVE_KEY) or "").lower() in ("1", "true", "yes")


def targets(target: Any = None) -> dict[str, str]:
    return kernel_update.parse_targets((target or host).data.get(TARGETS_KEY))


def _assess_host(target: Any) -> dict[str, Any]:
    with use_host(target):
        gpu_state = target.get_fact(GpuHostState)
        wanted = targets(target)
        args = kernel_update.fact_args(gpu_state["os"], gpu_state["kernel"], wanted)
        candidate = target.get_fact(KernelCandidate, **args) if args else None
    plan = kernel_update.assess(target.name, gpu_state["os"], gpu_state["kernel"],
                                gpu_state["driver"], candidate, wanted)
    config = dataclasses.asdict(settings.resolve(host_data(target)))
    return {**plan, "run_lock": gpu_state.get("run_lock"), "fact_args": args,
            "family": gpu_state["os"].get("family"), "gpu_count": len(gpu_state["gpus"]),
            "slurm": gpuslurm.on(config["slurm"], gpu_state.get("slurm")),
            "critical": critical_findings(gpu_state, config.get("nvidia_module_signing_cert"))}


def _assess_fleet(check: FleetCheck) -> None:
    hosts = sorted(inventory.get_active_hosts(), key=lambda h: h.name)
    for target in hosts:
        setattr(target.data, CHECK_KEY, check)
    try:
        plans = Group().map(_assess_host, hosts)
        by_name = {h.name: h for h in hosts}
        for plan in plans:
            target = by_name[plan["host"]]
            setattr(target.data, PLAN_KEY, plan)
            fields = {"from": plan["running"], "to": plan["target"],
                      "detail": kernel_update.describe(plan), "headers": plan["headers"],
                      "build": plan["build"], "packages": plan["packages"]}
            for problem in plan["problems"]:
                upgrade_record.write_event("refused", target, reason=problem, **fields)
            if not plan["problems"]:
                upgrade_record.write_event("plan", target, action=plan["action"], **fields)
        check.refusal = kernel_update.refusal(plans)
    except Exception as error:
        check.refusal = f"the kernel update pre-check failed, nothing was changed: {error}"
        raise
    finally:
        check.done.set()


def check_fleet() -> dict[str, Any]:
    """This host's plan; every host of the run is assessed once, before any operation runs
    anywhere; raise with one line per refused host."""
    check_inventory()
    try:
        targets()
    except ValueError as error:
        raise GpuhostError(str(error)) from error
    check = host.data.get(CHECK_KEY)
    if check is None:
        check = FleetCheck()
        _assess_fleet(check)
    check.done.wait()
    if check.refusal:
        raise GpuhostError(check.refusal)
    return host.data.get(PLAN_KEY)


def _update(plan: dict[str, Any], config: settings.Settings) -> None:
    running, target, version = plan["running"], plan["target"], plan["driver"]
    module, family = plan["module"], plan["family"]
    pkglock.ready()
    # 1. the kernel and its headers in, the running kernel still the boot default
    ops.install_kernel(name=f"Install kernel {target} with its headers, {running} stays the "
                            "boot default", family=family, packages=plan["packages"],
                       running=running, fact_args=plan["fact_args"])
    ops.keep_default(name=f"Kernel {running} is the boot default until the module is there",
                     family=family, running=running)
    # 2. the NVIDIA module for it, checked, before anything else happens to the host
    ops.build_module(name=f"DKMS builds the NVIDIA module {version} for kernel {target}",
                     module=module, version=version, release=target,
                     remove=plan["packages"] if remove_failed() else None)
    ops.module_ready(name=f"The NVIDIA module {version} is installed for kernel {target}",
                     module=module, version=version, release=target)
    # 3. only now: drain, the new default, the reboot
    drain.out_of_service(config, bool(plan.get("slurm")), f"kernel update to {target}")
    ops.make_default(name=f"Make kernel {target} the boot default", release=target,
                     family=family)
    ops.boot_gate(name=f"The next boot ({target}) will load the NVIDIA module (DKMS, Secure "
                       "Boot key)", running=running, release=target,
                  module_signing_cert=config.nvidia_module_signing_cert, family=family)
    server.reboot(name=f"Reboot into kernel {target}", reboot_timeout=config.reboot_timeout,
                  _if=lambda: host.get_fact(GpuHostState)["os"]["kernel_release"] != target)
    runlock.renew()
    # 4. after the reboot: the new kernel with the module loaded, the GPUs, the health gate
    ops.verify(name=f"Kernel {target} runs with the NVIDIA module {version} loaded",
               release=target, version=version, gpu_count=plan["gpu_count"])
    uops.health_gate(name="Health gate: no new critical finding since the update started",
                     before=plan["critical"],
                     module_signing_cert=config.nvidia_module_signing_cert,
                     slurm_what=f"kernel update to {target}" if plan.get("slurm") else None)
    drain.back_in_service(config, bool(plan.get("slurm")))
    ops.record_done(name="Record the result", running=running, result="upgraded")


@deploy("Kernel update")
def run() -> None:
    plan = check_fleet()
    upgrade_record.events_for(state)
    if not runlock.guard("kernel-update", plan.get("run_lock"), wait=False):
        return
    if plan["action"] == "none":
        ops.record_done(name="Record the result", running=plan["running"],
                        result="already at target")
        return
    runlock.take()
    _update(plan, host_settings())
    runlock.release()
