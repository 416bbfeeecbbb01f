"""Move a host to a newer kernel, the NVIDIA module built for it first (docs/kernel-updates.md).

Prepare (facts only, before any host is touched): every host of the run is assessed at once
(``gpuhost.kernel_update.assess``, from ``GpuHostState`` and ``KernelCandidate``); a host
whose kernel cannot be installed with its headers, that has no driver, or whose driver is
known not to build for the kernel stops the whole run with one line per host. With
``--dry`` nothing more happens: the plan events say per host what would.

The pyinfra run gets ``--data gpuhost_kernel_targets=TAG=RELEASE,...`` (the exact kernel
per distribution; without it the newest of the running flavour) and the event file of
``roles.upgrade.record``.
"""

from __future__ import annotations

from typing import Any

from gevent.pool import Group
from pyinfra import host, state
from pyinfra.api import deploy
from pyinfra.context import inventory
from pyinfra.operations import server

from gpuhost import kernel_update
from gpuhost.facts.host import GpuHostState
from gpuhost.facts.kernel_update import KernelCandidate
from gpuhost.facts.pyinfra_api import RunShared, use_host
from gpuhost.roles.common import GpuhostError, check_inventory, fail_command
from gpuhost.roles.upgrade import record as upgrade_record

TARGETS_KEY = "gpuhost_kernel_targets"  # --data: TAG=RELEASE,TAG=RELEASE
PLAN_KEY = "gpuhost_kernel_plan"
CHECK_KEY = "gpuhost_kernel_check"


class FleetCheck(RunShared):
    """The pre-check of one pyinfra run, shared by its hosts (as the driver upgrade's)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done.is_set(), "refusal": self.refusal}


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
    return {**plan, "run_lock": gpu_state.get("run_lock")}


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


@deploy("Kernel update")
def run() -> None:
    plan = check_fleet()
    upgrade_record.events_for(state)
    if plan["action"] == "none":
        return
    # --dry stops before this runs: the plan events are the answer
    server.shell(name="gpuhost kernel-update plans only (--dry) in this version",
                 commands=[fail_command("gpuhost kernel-update can only plan (--dry) in this "
                                        "version; nothing was changed")])
