"""The operations of a driver upgrade. Each reads the host at execute time and does only
what is still to do, so a rerun after an interruption picks up where the last run stopped.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

from packaging.version import Version

from pyinfra import host, logger, state
from pyinfra.api import FunctionCommand, QuoteString, StringCommand, operation

from facts.host import GpuHostState
from facts.nvidia import NvidiaDriver, NvidiaGpus
from facts.pyinfra_api import joined
from facts.upgrade import UpgradeProbe
from gpuhost import converged, packages
from gpuhost.upgrade import health_gate as health_gate_check, is_branched, old_packages
from roles.common import executing, fail_command
from roles.upgrade import record as upgrade_record

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
def remove_local_repos(distro_tag: str, keep_version: str):
    """
    Remove every NVIDIA local repo package but the target's, with its sources and the
    keyrings only it used.

    + distro_tag: the host's distribution tag
    + keep_version: the driver version whose local repo stays
    """
    repos = host.get_fact(NvidiaDriver)["local_repos"]
    old = [repo for repo in repos if repo["version"] != keep_version]
    if not old:
        host.noop(f"only the {keep_version} local repo is installed")
        return
    keep_dir = packages.local_repo_dir(distro_tag, keep_version)
    for repo in old:
        old_dir = packages.local_repo_dir(repo["distro"], repo["version"])
        if packages.family(distro_tag) == "debian":
            # A keyring file the new repo also ships stays: both are usually NVIDIA's key.
            yield StringCommand(
                "for key in", joined(QuoteString(old_dir), "/nvidia-driver-*-keyring.gpg"),
                '; do test -e "$key" || continue; name="${key##*/}"; test -e',
                joined(QuoteString(keep_dir), '/"$name"'),
                '|| rm -f "/usr/share/keyrings/$name"; done',
            )
            yield StringCommand("DEBIAN_FRONTEND=noninteractive apt-get purge -y",
                                QuoteString(repo["package"]))
        else:
            yield StringCommand("dnf remove -y", QuoteString(repo["package"]))
    if packages.family(distro_tag) == "debian":
        yield "apt-get update -qq"
    else:
        yield "dnf clean expire-cache"


@operation()
def switch_module_stream(stream: str, module: str = "nvidia-driver"):
    """
    Move the dnf module to ``stream`` (EL8/EL9): ``module switch-to`` when another stream is
    enabled (stream and packages in one transaction), ``module enable`` when none is.

    + stream: e.g. ``570-open``
    + module: the module name
    """
    probe = _probe()
    if probe["dnf_stream"] == stream and probe["dnf_state"] == "enabled":
        host.noop(f"dnf module {module}:{stream} is enabled")
        return
    if probe["dnf_stream"] and probe["dnf_state"] == "enabled":
        yield StringCommand("dnf -y module switch-to", QuoteString(f"{module}:{stream}"),
                            "--allowerasing")
    else:
        if probe["dnf_stream"]:
            yield StringCommand("dnf -y module reset", QuoteString(module))
        yield StringCommand("dnf -y module enable", QuoteString(f"{module}:{stream}"))


@operation()
def switch_packages(distro_tag: str, version: str, flavor: str, wanted: list[str]):
    """
    Install the target branch's driver packages and remove the old branch's, in one
    package manager transaction (apt: ``install NEW... OLD-``).

    + distro_tag: the host's distribution tag
    + version: the target driver version
    + flavor: ``open`` or ``proprietary``
    + wanted: the target's packages (``gpuhost.packages.driver_packages``)
    """
    driver = host.get_fact(NvidiaDriver)
    installed = driver["packages"]
    old = old_packages(list(installed), version, flavor, wanted)
    # The pinning package (branch >= 590) is not a driver package in the facts: the
    # installed version stands for it.
    missing = [name for name in wanted
               if name not in installed and not name.startswith("nvidia-driver-pinning-")]
    if driver["installed_versions"] == [version] and not missing and not old:
        host.noop(f"the {flavor} driver {version} packages are installed")
        return
    if packages.family(distro_tag) == "debian":
        # A downgrade (allowed by upgrade_allow_downgrade, refused before any host otherwise)
        # takes packages that keep their name across branches (nvidia-persistenced, the
        # unversioned companions) to an older version: apt needs to be told so.
        older = any(Version(v) > Version(version) for v in driver["installed_versions"])
        yield StringCommand(
            "dpkg --configure -a && DEBIAN_FRONTEND=noninteractive apt-get install -y",
            *(["--allow-downgrades"] if older else []),
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold",
            "--no-install-recommends", *[QuoteString(name) for name in wanted],
            *[QuoteString(f"{name}-") for name in old],
        )
    else:
        yield StringCommand("dnf install -y --allowerasing",
                            *[QuoteString(f"{name}-{version}") for name in wanted])
        # The other flavour's meta package, if the transaction above did not erase it.
        for name in (name for name in old if not is_branched(name)):
            yield StringCommand("if rpm -q", QuoteString(name),
                                ">/dev/null 2>&1; then dnf remove -y", QuoteString(name), "; fi")


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
def health_gate(before: list[dict[str, Any]] | None, module_signing_cert: str | None):
    """
    Fail the host (and so stop the rollout) when it has a critical health finding it did not
    have before the upgrade: an Xid that needs a reset, a GPU missing from nvidia-smi, a row
    remap failure, a fabric not initialised, a module that will not load at the next boot
    (``gpuhost.health``, docs/health.md).

    + before: the critical findings read before the upgrade (the resume point keeps them)
    + module_signing_cert: the inventory's ``nvidia_module_signing_cert``
    """
    if not executing():
        host.noop("the health gate reads the host when the upgrade runs")
        return
    passed, line = health_gate_check(before, host.get_fact(GpuHostState), module_signing_cert)
    if not passed:
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
