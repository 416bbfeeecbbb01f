"""Move a host to another NVIDIA driver version, safely and resumably.

Prepare (facts only, before any host is touched): every host of the run is assessed at
once (``gpuhost.upgrade.assess``, from ``gpuhost.facts.host.GpuHostState`` and
``gpuhost.facts.upgrade.UpgradeProbe``); a host whose driver cannot drive its GPUs, that would be
downgraded without ``upgrade_allow_downgrade``, or that runs GPU clients (without a drain
hook or ``upgrade_force``) stops the whole run with one line per host.

Execute, per host that is not already at the target:

1. mark the upgrade as under way on the host (the resume point, holding "before")
2. drain hook on the controller, then the Slurm node (``roles.slurm``: drained with a reason,
   its jobs waited for); no GPU process may remain (unless ``upgrade_force``)
3. stop GPU clients: DCGM / nv-hostengine, Fabric Manager, nvidia-persistenced, the
   ``upgrade_stop_services``, GPU containers (``upgrade_force`` only); with
   ``reboot_policy: never`` unload the modules (nvidia_drm, nvidia_modeset, nvidia_uvm, nvidia)
4. switch: new local repo in, old local repos (sources, keyrings) out, apt pin or dnf
   module stream moved, new branch's packages in and the old branch's out in one transaction
5. reboot (``reboot_policy: when_needed``) or load the new modules; MIG modes back
6. refresh a stale CDI spec, verify with facts, health gate (a failing gate leaves the Slurm
   node drained with a reason saying so), restart the clients, resume the Slurm node (only
   gpuhost's own drain), uncordon hook, remove the marker, record

A host already at the target gets only the verification and the record: zero changes.

The package: this module (the ``@deploy`` and its steps), ``ops`` (the upgrade's
operations), ``record`` (the controller-side event file).
"""

from __future__ import annotations

import dataclasses
import json
import time
from io import StringIO
from typing import Any

from gevent.pool import Group
from pyinfra import host, state
from pyinfra.api import deploy
from pyinfra.context import inventory
from pyinfra.operations import files, server

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.pyinfra_api import RunShared, use_host
from gpuhost.facts.upgrade import UpgradeProbe
from gpuhost import packages, settings
from gpuhost.upgrade import CLIENT_SERVICES, MARKER, assess, refusal, services_to_check
from gpuhost import slurm as gpuslurm
from gpuhost.roles import boot_safety, cdi, debian_archive, el_packaging, mig, nvidia_driver, pkglock
from gpuhost.roles import runlock
from gpuhost.roles import signed_modules as signed_modules_role
from gpuhost.roles.upgrade import drain, ops, record as upgrade_record
from gpuhost.roles.common import GpuhostError, check_inventory, host_data, host_settings

PLAN_KEY = "gpuhost_upgrade_plan"  # host.data: this host's plan (``gpuhost.upgrade.assess``)
CHECK_KEY = "gpuhost_upgrade_check"  # host.data: the run's FleetCheck, shared by its hosts


class FleetCheck(RunShared):
    """The pre-check of one pyinfra run, shared by the run's hosts through ``host.data``
    (``RunShared``: every host's copy is this one object).

    pyinfra prepares the hosts in parallel greenlets: the first to arrive assesses every
    host, the others wait for ``done``. It lives exactly as long as the run's hosts (another
    inventory, another check).
    """

    def __init__(self) -> None:
        super().__init__()
        self.refusal: str | None = None

    def to_json(self) -> dict[str, Any]:  # how pyinfra's --debug-data / --json show it
        return {"done": self.done.is_set(), "refusal": self.refusal}


def _assess_host(target: Any) -> dict[str, Any]:
    config = dataclasses.asdict(settings.resolve(host_data(target)))
    with use_host(target):
        gpu_state = target.get_fact(GpuHostState)
        probe = target.get_fact(UpgradeProbe, services=services_to_check(config))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    slurm_on = gpuslurm.on(config["slurm"], gpu_state.get("slurm"))
    return {**assess(target.name, config, gpu_state, probe, started=started, drains=slurm_on),
            "slurm": slurm_on, "run_lock": gpu_state.get("run_lock")}


def _assess_fleet(check: FleetCheck) -> None:
    hosts = sorted(inventory.get_active_hosts(), key=lambda h: h.name)
    for target in hosts:  # before the first fact is read: the other hosts wait from now on
        setattr(target.data, CHECK_KEY, check)
    try:
        plans = Group().map(_assess_host, hosts)
        by_name = {h.name: h for h in hosts}
        for plan in plans:
            target = by_name[plan["host"]]
            setattr(target.data, PLAN_KEY, plan)
            for problem in plan["problems"]:
                upgrade_record.write_event("refused", target, reason=problem, **{
                    "from": plan["from"], "to": plan["target"]})
            if not plan["problems"]:
                upgrade_record.write_event("plan", target, **{
                    "from": plan["from"], "to": plan["target"], "action": plan["action"]})
        check.refusal = refusal(plans)
    except Exception as error:
        check.refusal = f"the driver upgrade pre-check failed, nothing was changed: {error}"
        raise
    finally:
        check.done.set()


def check_fleet() -> dict[str, Any]:
    """This host's plan. Every host of the run is assessed once (in parallel), before any
    operation runs anywhere; raise with one line per refused host. Every host's deploy code
    calls this; the first does the work, the others wait for it."""
    check_inventory()
    check = host.data.get(CHECK_KEY)
    if check is None:
        check = FleetCheck()
        _assess_fleet(check)
    check.done.wait()
    if check.refusal:
        raise GpuhostError(check.refusal)
    return host.data.get(PLAN_KEY)


def _verify(plan: dict[str, Any]) -> None:
    before = plan["before"]
    ops.verify(
        name=f"Verify driver {plan['target']}: module, user space, packages, "
             f"{before['gpu_count']} GPU(s), MIG modes, daemon.json",
        target=plan["target"],
        gpu_count=before["gpu_count"],
        mig=before["mig"],
        daemon_json_sha256=before["daemon_json_sha256"],
    )


def _stop_clients(plan: dict[str, Any], config: settings.Settings) -> None:
    before = plan["before"]
    names = before["services"] + (["nv-hostengine"] if before["hostengine"] else [])
    ops.stop_services(name=f"Stop GPU clients ({', '.join(names) or 'none running'})",
                      services=before["services"], hostengine=before["hostengine"])
    if config.upgrade_force and before["containers"]:
        ops.containers(name="Stop the GPU containers (upgrade_force)",
                       ids=before["containers"], running=False)
    if config.reboot_policy != "when_needed":
        ops.unload_modules(name="Unload the nvidia kernel modules (reboot_policy: never)")


def _switch(plan: dict[str, Any], config: settings.Settings) -> None:
    target, tag, flavor = plan["target"], plan["tag"], plan["flavor"]
    pkglock.ready()  # the package manager's lock free, dpkg whole: before any install
    # the target's packages may need Debian's contrib as the first install's did
    debian_archive.enable_contrib(tag, config.debian_enable_contrib)
    if config.nvidia_kernel_modules == "distribution":  # issue 39: Canonical's, together
        signed_modules_role.switch(tag, plan["from"], target)
        return
    nvidia_driver.install_driver_repo(config, tag, target, flavor)
    ops.remove_local_repos(name="Remove the other local repos, their sources and keyrings",
                           distro_tag=tag, keep_version=target)
    wanted = packages.driver_packages(tag, target, flavor, plan["fabricmanager"])
    wanted += [name for name in plan.get("companions", ()) if name not in wanted]
    if packages.family(tag) == "debian":
        nvidia_driver.pin_driver(target, name=f"Move the apt pin to {target}")
    else:
        # dnf versionlock hides every other version of a locked package: release the old
        # driver's lock before the switch, take it again at the target after it
        el_packaging.release_lock(name="Release the dnf versionlock of the old driver")
        if packages.has_module_streams(tag):  # EL10 has none: the lock alone holds the branch
            stream = packages.module_stream(target, flavor)
            ops.switch_module_stream(name=f"Move the dnf module to nvidia-driver:{stream}",
                                     stream=stream)
    ops.switch_packages(name=f"Switch to the {flavor} driver {target} ({', '.join(wanted)})",
                        distro_tag=tag, version=target, flavor=flavor, wanted=wanted)
    if packages.family(tag) == "rhel":
        el_packaging.version_lock(name=f"Lock the NVIDIA packages at {target} (dnf versionlock)",
                                  version=target)


def _upgrade(plan: dict[str, Any], config: settings.Settings) -> None:
    target, before = plan["target"], plan["before"]
    if plan["new_marker"]:
        files.put(name="Mark the upgrade as under way on the host (the resume point)",
                  src=StringIO(json.dumps(plan["new_marker"], sort_keys=True) + "\n"),
                  dest=MARKER, mode="600", create_remote_dir=True)
    drain.out_of_service(config, bool(plan.get("slurm")), f"driver upgrade to {target}")
    _stop_clients(plan, config)
    _switch(plan, config)
    if config.reboot_policy == "when_needed":
        # as in the deploy: never reboot into a kernel without the new module (issue 14)
        gate = (signed_modules_role.module_for_next_boot
                if config.nvidia_kernel_modules == "distribution" else boot_safety.module_for_next_boot)
        gate(name="The NVIDIA module is installed for the next boot's kernel", version=target,
             _if=lambda: nvidia_driver.reboot_needed(target))
        server.reboot(name=f"Reboot into driver {target} (reboot_policy: when_needed)",
                      reboot_timeout=config.reboot_timeout, _if=lambda: nvidia_driver.reboot_needed(target))
    else:
        ops.load_modules(name=f"Load the driver {target} modules", modules=before["modules"])
    runlock.renew()  # after the reboot or reload
    ops.restore_mig(name="Put the MIG modes back as they were", modes=before["mig"])
    ops.restore_mig_instances(name="Put the MIG instances back (gpuhost-mig-layout)",
                              modes=before["mig"], script=mig.BOOT_SCRIPT)
    # NVIDIA's refresh unit, triggered by the new modules while the old driver was loaded,
    # may have given up (1.19.1+: nvidia-smi -L failed): reset and rerun now (issue 37)
    cdi.refresh_unit_rerun(name="nvidia-cdi-refresh.service is not left failed")
    # the CDI spec names the old driver's libraries: regenerated before any GPU client or
    # container starts (toolkit 1.17 has no refresh unit; 1.18's may not have run yet)
    cdi.refresh_after_change(f"the driver is now {target}")
    _verify(plan)
    # a failing gate on a Slurm host leaves the node drained, its reason saying so
    ops.health_gate(name="Health gate: no new critical finding since the upgrade started",
                    before=plan["before"].get("critical"),
                    module_signing_cert=config.nvidia_module_signing_cert,
                    slurm_what=f"driver upgrade to {target}" if plan.get("slurm") else None)
    # Start in the reverse order of the GPU's own clients (persistenced, Fabric Manager, DCGM),
    # then the extra services (the workloads) in their configured order.
    own = [name for name in reversed(CLIENT_SERVICES) if name in before["services"]]
    start = own + [name for name in before["services"] if name not in CLIENT_SERVICES]
    names = start + (["nv-hostengine"] if before["hostengine"] else [])
    ops.start_services(name=f"Start the GPU clients again ({', '.join(names) or 'none ran'})",
                       services=start, hostengine=before["hostengine"])
    if config.upgrade_force and before["containers"]:
        ops.containers(name="Start the GPU containers again", ids=before["containers"],
                       running=True)
    drain.back_in_service(config, bool(plan.get("slurm")))
    files.file(name="The upgrade is complete: remove the resume point", path=MARKER,
               present=False)
    ops.record_done(name="Record the result", from_version=plan["from"], result="upgraded")


@deploy("Driver upgrade")
def run() -> None:
    plan = check_fleet()
    upgrade_record.events_for(state)
    if not runlock.guard("upgrade", plan.get("run_lock"), wait=False):  # gpuhost/runlock.py
        return
    if plan["action"] == "none":
        _verify(plan)
        ops.record_done(name="Record the result", from_version=plan["from"],
                        result="already at target")
        return
    runlock.take()
    _upgrade(plan, host_settings())
    runlock.release()
