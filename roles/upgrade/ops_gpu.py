"""The operations of a driver upgrade (and of ``gpuhost recover``) around the GPUs: the
controller's drain/uncordon hooks, the GPU clients and containers stopped and started, the
kernel modules unloaded and loaded, the MIG modes and instances put back. Each reads the
host at execute time and does only what is still to do. Used as ``roles.upgrade.ops.NAME``.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, QuoteString, StringCommand, operation

from gpuhost.facts.nvidia import NvidiaGpus
from gpuhost.facts.upgrade import UpgradeProbe
from gpuhost.roles.common import executing, fail_command

# Unload order: users before the module they use (lsmod's "Used by"). After nvidia_drm
# (which uses nvidia_modeset), the order of NVIDIA's own driver manager
# (NVIDIA/k8s-driver-manager cmd/driver-manager/main.go unloadDriver, bd62ca7, 2026-08-19):
# GDRCopy's gdrdrv and nvidia_peermem hold nvidia too (sandbox/nvidia/README.md).
UNLOAD_ORDER = ("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem", "nvidia_fs",
                "nvidia_vgpu_vfio", "gdrdrv", "nvidia")
HOOK_TIMEOUT = 3600


def _run_hook(state, host, command: str, what: str) -> bool:
    """FunctionCommand body: the controller command with {host} -> the quoted host name."""
    line = command.format(host=shlex.quote(host.name))
    logger.info(f"{host.print_prefix}{what} on the controller: {line}")
    try:
        done = subprocess.run(["sh", "-c", line], capture_output=True, text=True,
                              timeout=HOOK_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        logger.error(f"{host.print_prefix}gpuhost: {what} command timed out after "
                     f"{HOOK_TIMEOUT}s: {line}")
        return False
    for text in (done.stdout + done.stderr).splitlines():
        logger.info(f"{host.print_prefix}  {text}")
    if done.returncode != 0:
        logger.error(f"{host.print_prefix}gpuhost: {what} command failed (exit "
                     f"{done.returncode}): {line}; fix it, or the host stays untouched")
        return False
    return True


@operation(is_idempotent=False)
def controller_command(command: str, what: str):
    """
    Run a command on the controller for this host (a drain or uncordon hook).

    + command: shell command; ``{host}`` becomes the shell-quoted host name
    + what: what it is, for the log ("drain", "uncordon")
    """
    yield FunctionCommand(_run_hook, (command, what), {})


def _probe(services: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    return host.get_fact(UpgradeProbe, services=list(services))


@operation()
def gpu_idle(force: bool):
    """
    Fail the host while GPU compute processes or GPU containers run (after any drain).

    + force: ``upgrade_force``: go ahead anyway (GPU containers are stopped later)
    """
    if not executing():
        host.noop("GPU processes are checked when the upgrade runs (after any drain)")
        return
    busy = [f"GPU {gpu['index']}: pid {proc.get('pid')} {proc.get('name') or ''}".rstrip()
            for gpu in host.get_fact(NvidiaGpus) for proc in gpu.get("processes") or []]
    busy += [f"container {c['name']}" for c in _probe()["containers"]]
    if busy and not force:
        yield fail_command(
            "GPU clients still run: " + "; ".join(busy) + ". Stop them (or configure "
            "upgrade_drain_command), or set upgrade_force: true to upgrade anyway"
        )
        return
    host.noop("no GPU compute processes" if not busy else f"upgrade_force: going on with {busy}")


def _service_command(name: str, action: str) -> StringCommand:
    # Services are systemd units on every supported distribution; a host that did not boot
    # with systemd was refused by the pre-check (gpuhost.upgrade.assess).
    return StringCommand("systemctl", action, QuoteString(name))


@operation()
def stop_services(services: list[str], hostengine: bool):
    """
    Stop GPU client services in the given order, then a stand-alone ``nv-hostengine``.

    + services: service names, in stop order
    + hostengine: also terminate a running ``nv-hostengine`` (DCGM without its service)
    """
    probe = _probe(services)
    running = [name for name in services if probe["services"].get(name) == "running"]
    for name in running:
        yield _service_command(name, "stop")
    if hostengine and probe["hostengine"]:
        yield "nv-hostengine --term"
    if not running and not (hostengine and probe["hostengine"]):
        host.noop("no GPU client service runs")


@operation()
def start_services(services: list[str], hostengine: bool):
    """
    Start the GPU client services that ran before the upgrade and do not run now.

    + services: service names, in start order
    + hostengine: start ``nv-hostengine`` when no DCGM service brought it back
    """
    probe = _probe(services)
    stopped = [name for name in services if probe["services"].get(name) != "running"]
    for name in stopped:
        yield _service_command(name, "start")
    if hostengine and not probe["hostengine"]:
        yield "nv-hostengine"
    if not stopped and not (hostengine and not probe["hostengine"]):
        host.noop("the GPU client services run")


@operation()
def containers(ids: list[str], running: bool):
    """
    Stop (before) or start again (after) the GPU containers that ran before the upgrade.

    + ids: container ids
    + running: False to stop them, True to start them
    """
    if not ids:
        host.noop("no GPU container to handle")
        return
    now = {c["id"] for c in _probe()["containers"]}
    todo = [cid for cid in ids if (cid in now) != running]
    if not todo:
        host.noop(f"GPU containers are {'running' if running else 'stopped'}")
        return
    yield StringCommand("docker", "start" if running else "stop", *[QuoteString(c) for c in todo])


@operation()
def unload_modules():
    """
    Unload the nvidia kernel modules, users first (no reboot is planned).
    """
    loaded = set(_probe()["modules"])
    order = [name for name in UNLOAD_ORDER if name in loaded]
    order += sorted(loaded - set(UNLOAD_ORDER))  # other users of nvidia, before nvidia
    if "nvidia" in order:
        order.remove("nvidia")
        order.append("nvidia")
    if not order:
        host.noop("no nvidia kernel module is loaded")
        return
    for name in order:
        yield StringCommand(
            "modprobe -r", QuoteString(name), "|| { echo", QuoteString(
                f"gpuhost: cannot unload {name}: something still uses the GPU. Stop it, or "
                "set reboot_policy: when_needed to switch the driver with a reboot"
            ), ">&2; exit 1; }",
        )


@operation()
def load_modules(modules: list[str]):
    """
    Load the new driver's modules (those loaded before the upgrade, nvidia at least).

    + modules: module names that were loaded before
    """
    loaded = set(_probe()["modules"])
    wanted = [name for name in reversed(UNLOAD_ORDER) if name in set(modules) | {"nvidia"}]
    missing = [name for name in wanted if name not in loaded]
    if not missing:
        host.noop("the nvidia modules are loaded")
        return
    for name in missing:
        yield StringCommand("modprobe", QuoteString(name))



@operation()
def restore_mig(modes: dict[str, str]):
    """
    Put each GPU's MIG mode back to what it was before (Hopper and newer lose it with the
    driver; Ampere keeps it). MIG instances are not recreated here.

    + modes: GPU index (as a string) -> ``enabled`` or ``disabled``
    """
    if not modes:
        host.noop("no GPU had a MIG mode")
        return
    if not executing():
        host.noop("MIG modes are compared after the driver switch")
        return
    now = {str(gpu["index"]): gpu["mig_current"] for gpu in host.get_fact(NvidiaGpus)}
    changed = sorted((index, mode) for index, mode in modes.items() if now.get(index) != mode)
    if not changed:
        host.noop("MIG modes are as before")
        return
    for index, mode in changed:
        yield StringCommand("nvidia-smi -i", QuoteString(index), "-mig",
                            "1" if mode == "enabled" else "0")


@operation()
def restore_mig_instances(modes: dict[str, str], script: str):
    """
    Re-create the inventory's MIG layout (GPU instances are gone with the old driver) with
    gpuhost's boot-time script (roles/mig.py), when the host has it: it creates the layout
    on every MIG-enabled GPU that has no instance and leaves the others alone.

    + modes: GPU index (as a string) -> MIG mode before the upgrade
    + script: the boot-time script's path on the host
    """
    if "enabled" not in modes.values():
        host.noop("no GPU had MIG enabled")
        return
    yield StringCommand("if [ -x", QuoteString(script), "]; then", QuoteString(script), "; fi")
