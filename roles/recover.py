"""Reset one GPU of a host without rebooting it (``gpuhost recover``, docs/recover.md).

Prepare (facts only): ``gpuhost.health.recover.assess`` picks the GPU and refuses, with one line
naming what to do instead, when no finding of it asks for a reset (NVIDIA's Xid catalog,
docs/health.md), when one asks for a reboot or a replacement, or while processes or
containers use that GPU (without ``--force``). Execute, in this order:

1. the resume point on the host (``gpuhost.health.recover.MARKER``: what ran before)
2. drain hook (``upgrade_drain_command`` on the controller); the GPU still unused
3. stop the GPU clients that block a reset (DCGM, nvsm, upgrade_stop_services; never IMEX,
   Fabric Manager or a display manager: ``gpuhost.health.recover.KEEP_RUNNING``) with the
   driver upgrade's operations (``roles.upgrade.ops``); with ``--force`` the GPU's containers
4. persistence mode off for that GPU only; ``nvidia-smi -r -i N``, its result kept on the
   host, never failing the run here
5. persistence mode, MIG instances, clients and containers back as they were (also when
   the reset failed); on a GPU with an NVLink fabric state, a bounded wait for it to
   register with the fabric again (``gpuhost.fabric.wait_script``; the driver restarts the
   fabric probe when it re-initialises the GPU); a reboot instead only with ``--reboot-fallback`` and
   ``reboot_policy: when_needed``; the CDI spec refreshed if it went stale
6. verify with the health checks (``gpuhost.health.recover.verify``): a failed reset or a finding
   that did not clear fails the host here, with nothing left changed
7. uncordon hook (``upgrade_uncordon_command``), record

Slurm (``roles.slurm``, docs/slurm.md) drains in step 2 and resumes in step 7; a failed
step 6 leaves the node drained with a reason saying so.
"""

from __future__ import annotations

import fcntl
import json
import time
from io import StringIO
from typing import Any

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.operations import files, server

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.nvidia import NvidiaGpus
from gpuhost.facts.recover import RecoverProbe
from gpuhost.facts.upgrade import UpgradeProbe
from gpuhost.health import recover
from gpuhost import fabric
from gpuhost import slurm as gpuslurm
from gpuhost.roles import cdi, mig, runlock, slurm
from gpuhost.roles.common import GpuhostError, check_inventory, executing, fail_command, host_settings, \
    host_state
from gpuhost.roles.upgrade import ops

GPU_KEY, FORCE_KEY, REBOOT_KEY = "gpuhost_recover_gpu", "gpuhost_recover_force", \
    "gpuhost_recover_reboot"
RECORD_KEY = "gpuhost_recover_record"


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def record(kind: str, **fields: Any) -> None:
    """Append one event to the controller's record file (``--data gpuhost_recover_record``)."""
    path = host.data.get(RECORD_KEY)
    if not path:
        return
    line = json.dumps({"event": kind, "host": host.name, "time": round(time.time(), 3),
                       **fields}, sort_keys=True, default=str) + "\n"
    try:
        with open(str(path), "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(line)
    except OSError as error:
        logger.warning(f"gpuhost: cannot append to the recover record {path}: {error}")


def _gpu_now(index: int) -> dict[str, Any] | None:
    return next((g for g in host.get_fact(NvidiaGpus) if g["index"] == index), None)


@operation()
def gpu_unused(index: int, uuid: str | None, force: bool):
    """
    Fail the host while a process or a container uses this GPU (after any drain).

    + index: the GPU's nvidia-smi index
    + uuid: its UUID
    + force: go on anyway (``--force``: its containers are stopped next)
    """
    if not executing():
        host.noop(f"GPU {index}'s users are checked when the recovery runs (after any drain)")
        return
    gpu = _gpu_now(index) or {"index": index, "uuid": uuid, "processes": []}
    busy = [f"pid {p.get('pid')} {p.get('name') or ''}".rstrip() for p in gpu["processes"] or []]
    busy += [f"container {c['name']}" for c in host.get_fact(RecoverProbe)["containers"]
             if recover.container_holds(c, gpu)]
    if busy and not force:
        yield fail_command(f"GPU {index} is still in use after the drain ({'; '.join(busy)}): "
                           "stop its jobs, or pass --force; nothing was changed")
        return
    host.noop(f"GPU {index} is unused" if not busy else f"--force: going on with {busy}")


@operation()
def persistence(index: int, wanted: str | None):
    """
    Set the persistence mode of one GPU (``nvidia-smi -i N -pm 0|1``) when it differs.

    + index: the GPU's nvidia-smi index
    + wanted: ``enabled`` or ``disabled`` (None: leave it)
    """
    if wanted not in ("enabled", "disabled"):
        host.noop(f"GPU {index}'s persistence mode stays as it is")
        return
    now = (_gpu_now(index) or {}).get("persistence_mode") if executing() else None
    if now == wanted:
        host.noop(f"GPU {index} persistence mode is {wanted}")
        return
    yield StringCommand("nvidia-smi -i", QuoteString(str(index)), "-pm",
                        "1" if wanted == "enabled" else "0")


@operation()
def reset(index: int, run: str):
    """
    ``nvidia-smi -r -i N``; its exit status and words go to ``gpuhost.health.recover.RESULT`` on the
    host, and this step never fails the run (the clients are put back first; the
    verification says what happened). A rerun skips a reset this run already did.

    + index: the GPU's nvidia-smi index
    + run: this recovery's id (the resume point's start time)
    """
    done = host.get_fact(RecoverProbe)["result"] if executing() else None
    if done and done["run"] == run and done["rc"] == 0:
        host.noop(f"GPU {index} was already reset by this recovery")
        return
    yield StringCommand(
        "mkdir -p", QuoteString(recover.RESULT.rsplit("/", 1)[0]), "&& out=$(nvidia-smi -r -i",
        QuoteString(str(index)), '2>&1); rc=$?;', HOLDERS,
        '{ echo "run="', QuoteString(run), '; echo "rc=$rc";',
        'printf "%s\\n" "$out"; } >', QuoteString(recover.RESULT), '; printf "%s\\n" "$out"; true')


# After a reset refused for a client ("In use by another client"), the processes that hold
# an NVIDIA device file (nvidia-smi(1): "There can't be any applications using these
# devices"), so the failure names them
HOLDERS = ('case "$out" in *"In use by another client"*) h=$(for p in /proc/[0-9]*; do '
           'ls -l "$p/fd" 2>/dev/null | grep -q " /dev/nvidia" && printf "%s %s; " '
           '"${p#/proc/}" "$(cat "$p/comm" 2>/dev/null)"; done); '
           'out=$(printf "%s\\nholders: %s" "$out" "${h:-none}");; esac;')


def reset_failed(run: str) -> bool:
    result = host.get_fact(RecoverProbe)["result"]
    return not result or result["run"] != run or result["rc"] != 0


@operation()
def check(plan: dict[str, Any], run: str, reboot: bool, slurm_on: bool = False):
    """
    Judge the GPU with the health checks (``gpuhost.health.recover.verify``); fail the host when the
    reset failed or what it was for did not clear.

    + plan: the recovery's plan (GPU, findings, what was true before)
    + run: this recovery's id
    + reboot: the reboot fallback was allowed (a failed reset was followed by a reboot)
    + slurm_on: the Slurm node was drained (a failure leaves it drained with the reason)
    """
    if not executing():
        host.noop("the GPU is judged when the recovery runs")
        return
    result = host.get_fact(RecoverProbe)["result"]
    if result and result["run"] != run:
        result = None
    rebooted = reboot and (result is None or result["rc"] != 0)
    passed, line = recover.verify(plan, result, host.get_fact(GpuHostState), rebooted=rebooted)
    record("done" if passed else "failed", gpu=plan["gpu"]["index"], reason=line,
           rebooted=rebooted)
    if not passed:
        if slurm_on:  # the node stays drained, its reason saying why (roles/slurm.py)
            yield from slurm.failed_gate_commands(_what(plan), line)
        yield fail_command(line)
        return
    host.noop(line)


def drain(config, plan: dict[str, Any]) -> None:
    """Before the GPU is touched: the drain hook on the controller, then the host's Slurm node
    (``roles.slurm.drain``: drained with gpuhost's reason, its jobs waited for)."""
    if config.upgrade_drain_command:
        ops.controller_command(name="Drain the host (upgrade_drain_command, on the controller)",
                               command=config.upgrade_drain_command, what="drain")
    if plan["slurm"]:
        slurm.drain(name="Drain the Slurm node and wait for its jobs (slurm)",
                    reason=gpuslurm.reason(_what(plan)), timeout=config.slurm_drain_timeout)


def resume(config, plan: dict[str, Any]) -> None:
    """After the GPU passed the health checks: the Slurm node back in service (only a drain
    of gpuhost's own), then the uncordon hook."""
    if plan["slurm"]:
        slurm.resume(name="Resume the Slurm node (only gpuhost's own drain)")
    if config.upgrade_uncordon_command:
        ops.controller_command(name="Uncordon the host (upgrade_uncordon_command, on the "
                                    "controller)",
                               command=config.upgrade_uncordon_command, what="uncordon")


def _what(plan: dict[str, Any]) -> str:
    return f"GPU {plan['gpu']['index']} recovery (reset)"


def assess() -> dict[str, Any]:
    """This host's plan; raise (nothing changed) when it is refused."""
    check_inventory()
    gpu = host.data.get(GPU_KEY)
    try:
        wanted = None if gpu in (None, "", "None") else int(str(gpu))
    except ValueError:
        raise GpuhostError(f"{host.name}: --gpu {gpu!r} is not a GPU index") from None
    probe = host.get_fact(RecoverProbe)
    if probe["marker_error"]:
        raise GpuhostError(f"{host.name}: {probe['marker_error']}: it is gpuhost's resume point; "
                           "look at it, remove it, then rerun")
    state = host_state()
    slurm_on = slurm.active(host_settings(), state)
    stop = recover.services({"upgrade_stop_services": host_settings().upgrade_stop_services})
    plan = recover.assess(host.name, state, host.get_fact(UpgradeProbe, services=stop),
                          probe["containers"], stop=stop, gpu=wanted, force=_flag(host.data.get(FORCE_KEY)),
                          marker=probe["marker"],
                          handled={**probe["handled"], "boot_id_now": probe["boot_id"]},
                          drain=bool(host_settings().upgrade_drain_command) or slurm_on)
    plan["slurm"] = slurm_on
    if plan["problems"]:
        record("refused", reason="; ".join(plan["problems"]))
        raise GpuhostError(f"{host.name}: recovery refused, nothing was changed: "
                           + "; ".join(plan["problems"]))
    return plan


@deploy("GPU recovery")
def run() -> None:
    plan = assess()
    config = host_settings()
    if not runlock.guard("recover", wait=False):  # another live run holds the host
        return
    if plan["action"] == "none":
        record("nothing", reason=plan["note"])
        host.noop(f"nothing to recover: {plan['note']}")
        return
    runlock.take()
    gpu, before = plan["gpu"], plan["before"]
    index = gpu["index"]
    marker = (host.get_fact(RecoverProbe)["marker"] if plan["action"] == "resume" else None) or {
        "schema": 1, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": gpu, "before": before, "findings": plan["findings"]}
    run_id = marker["started"]
    record("plan", gpu=index, action=plan["action"], findings=[f["id"] for f in plan["findings"]])
    if plan["action"] == "reset":
        files.put(name="Mark the recovery as under way on the host (the resume point)",
                  src=StringIO(json.dumps(marker, sort_keys=True) + "\n"), dest=recover.MARKER,
                  mode="600", create_remote_dir=True)
    force = _flag(host.data.get(FORCE_KEY))
    drain(config, plan)
    gpu_unused(name=f"No process or container uses GPU {index}", index=index, uuid=gpu["uuid"],
               force=force)
    names = before["services"] + (["nv-hostengine"] if before["hostengine"] else [])
    ops.stop_services(name=f"Stop the GPU clients that block a reset ({', '.join(names) or 'none run'})",
                      services=before["services"], hostengine=before["hostengine"])
    if before["containers"]:
        ops.containers(name=f"Stop the containers on GPU {index} (--force)",
                       ids=before["containers"], running=False)
    persistence(name=f"Persistence mode off for GPU {index}", index=index,
                wanted="disabled" if before["persistence"] == "enabled" else None)
    reset(name=f"Reset GPU {index} ({gpu['bus_id']}): nvidia-smi -r -i {index}", index=index,
          run=run_id)
    persistence(name=f"Persistence mode of GPU {index} back to {before['persistence']}",
                index=index, wanted=before["persistence"])
    if before["mig"] == "enabled":  # a reset destroys the GPU's MIG instances
        ops.restore_mig_instances(name="Put the MIG instances back (gpuhost-mig-layout)",
                                  modes={str(index): "enabled"}, script=mig.BOOT_SCRIPT)
    own = list(reversed(before["services"]))  # stopped in recover.services' order
    ops.start_services(name=f"Start the GPU clients again ({', '.join(names) or 'none ran'})",
                       services=own, hostengine=before["hostengine"])
    if before["containers"]:
        ops.containers(name=f"Start the containers of GPU {index} again",
                       ids=before["containers"], running=True)
    reboot = _flag(host.data.get(REBOOT_KEY)) and config.reboot_policy == "when_needed"
    if _flag(host.data.get(REBOOT_KEY)) and not reboot:
        host.noop("--reboot-fallback asked, but reboot_policy is not when_needed: no reboot")
    if reboot:
        server.reboot(name="Reboot: the GPU reset failed (--reboot-fallback, reboot_policy: "
                           "when_needed)", reboot_timeout=config.reboot_timeout,
                      _if=lambda: reset_failed(run_id))
    if before.get("fabric"):  # a reset GPU registers with the fabric again (gpu.c gpuStatePostLoad)
        server.shell(name=f"Wait for GPU {index} to join the NVLink fabric again (up to "
                          f"{fabric.FABRIC_WAIT_S} s; the verification judges it)",
                     commands=[f"( {fabric.wait_script(fabric.FABRIC_WAIT_S)} ) || true"])
    cdi.refresh_after_change(f"GPU {index} was reset")
    files.file(name="Everything is back as it was: remove the resume point",
               path=recover.MARKER, present=False)
    check(name=f"Verify GPU {index} with the health checks", plan={**plan, "before": before},
          run=run_id, reboot=reboot, slurm_on=plan["slurm"])
    probe = host.get_fact(RecoverProbe)
    handled = recover.handled_after(probe["handled"], probe["boot_id"], plan)
    files.put(name=f"Remember that GPU {index} was reset for this boot's findings",
              src=StringIO(json.dumps(handled, sort_keys=True) + "\n"), dest=recover.HANDLED,
              mode="600", create_remote_dir=True)
    resume(config, plan)
    runlock.release()
