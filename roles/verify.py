"""Prove the result with facts after a run; changes nothing on a converged host."""

from __future__ import annotations

from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import FileUploadCommand, QuoteString, StringCommand, deploy, operation

from gpuhost.facts.container import DockerImagePresent, NvidiaContainerRun
from gpuhost.facts.host import GpuHostState
from gpuhost import converged, fabric
from gpuhost.runtime import cdi
from gpuhost.roles.cdi import runtime_mode
from gpuhost.roles.common import REMOTE_CACHE, executing, fail_command, host_settings, host_state


@operation()
def verify_image(image: str, archive: str | None):
    """
    Make sure the verification image exists in the host's Docker (offline: sent from the
    controller as an archive and loaded, only when the image is missing).

    + image: image name
    + archive: a ``docker save`` archive on the controller that holds ``image``
    """
    if host.get_fact(DockerImagePresent, image=image):
        host.noop(f"image {image} is present")
        return
    if not archive:
        yield fail_command(f"image {image} is not on the host and verify_image_archive is not set")
        return
    remote = f"{REMOTE_CACHE}/{Path(archive).name}"
    yield StringCommand("mkdir -p", QuoteString(REMOTE_CACHE))
    yield FileUploadCommand(archive, remote, remote_temp_filename=host.get_temp_filename(remote))
    yield StringCommand("docker load -i", QuoteString(remote))
    yield StringCommand("rm -f", QuoteString(remote))


def container_runs(image: str, runtime_mode: str, gpus: int) -> tuple[list[str], list[str]]:
    """(problems, notes) of the GPU containers users start: ``docker run --gpus all`` in
    every mode and ``--device nvidia.com/gpu=all`` in cdi mode (one fact read each); each
    must list the host's ``gpus`` GPUs."""
    problems, notes = [], []
    for how in ("gpus", "cdi") if runtime_mode == "cdi" else ("gpus",):
        flags = NvidiaContainerRun.FLAGS[how]
        run = host.get_fact(NvidiaContainerRun, image=image, how=how)
        seen = sum(1 for line in run["output"].splitlines() if line.startswith("GPU "))
        if run["rc"] != 0:
            problems.append(f"docker run {flags} {image} nvidia-smi -L failed "
                            f"(rc {run['rc']}): {run['output'][-300:]}")
        elif seen != gpus:
            problems.append(f"docker run {flags} {image} nvidia-smi -L lists {seen} GPU(s), "
                            f"the host has {gpus}")
        else:
            notes.append(f"docker run {flags} sees {seen} GPU(s)")
    return problems, notes


@operation()
def fabric_completed(wait_s: int):
    """
    nvidia_fabric nvswitch or nvl: wait, bounded, for every GPU's NVLink fabric state Completed
    (Fabric Manager registers the GPUs once it configured the NVSwitches); fail the host
    with the states and Fabric Manager's own log lines otherwise. Nothing to do when every
    GPU is Completed already, or no GPU prints a fabric state (A100 and older: N/A).

    + wait_s: how long to wait
    """
    if not executing():
        host.noop("the fabric is verified after the run")
        return
    state = host.get_fact(GpuHostState)
    if state["driver"]["state"] != "loaded":
        host.noop("driver not loaded yet: the fabric comes with it")
        return
    states = fabric.fabric_states(state)
    if states and not fabric.incomplete(state):
        host.noop(f"NVLink fabric Completed on {len(states)} GPU(s)")
        return
    if not states:
        host.noop("no GPU prints a fabric state (NVSwitch GPUs before Hopper)")
        return
    yield fabric.wait_script(wait_s)


@operation()
def check(target_version: str, toolkit_version: str, reboot_allowed: bool,
          image: str | None = None, runtime_mode: str = "legacy", fabric_kind: str = "none"):
    """
    Read the host back and fail it when the result is not what was asked.

    + target_version: the driver version that must be loaded and installed
    + toolkit_version: the container toolkit version that must be installed
    + reboot_allowed: when False, a driver installed but not yet loaded is a warning
    + image: when set, ``docker run --gpus all IMAGE nvidia-smi -L`` (and in cdi mode
      ``--device nvidia.com/gpu=all``) must list the host's GPUs
    + runtime_mode: the resolved container_runtime_mode (cdi: a fresh CDI spec, the CDI run)
    + fabric_kind: the host's resolved nvidia_fabric (nvswitch: every fabric state Completed)
    """
    if not executing():
        host.noop("the result is verified with facts after the run")
        return
    state = host.get_fact(GpuHostState)
    driver, toolkit = state["driver"], state["toolkit"]
    problems, notes = [], []
    verdict = converged.judge(state, {"nvidia_driver_version": target_version,
                                      "container_toolkit_version": toolkit_version})
    for reason in verdict.only(converged.STACK).reasons:
        if reason["item"] == "reboot_pending" and not reboot_allowed:
            logger.warning(f"{host.name}: driver {target_version} installed, state "
                           f"{driver['state']}: a reboot is due (reboot_policy: never)")
            notes.append(f"driver {target_version} installed, reboot pending")
        else:
            problems.append(reason["message"])
    if driver["state"] == "loaded":
        smi_gpus = [gpu for gpu in state["gpus"] if gpu["source"] == "nvidia-smi"]
        if not smi_gpus:
            problems.append("the driver is loaded but nvidia-smi shows no GPU")
        notes.append(f"driver {driver['loaded_version']} ({driver['loaded']['flavor']}) loaded, "
                     f"{len(smi_gpus)} GPU(s)")
    if runtime_mode == "cdi" and driver["state"] == "loaded":
        judged = cdi.judge(state)
        if judged["status"] == "missing":
            problems.append("no NVIDIA CDI spec in /etc/cdi or /var/run/cdi (cdi mode)")
        elif judged["status"] == "stale":
            problems.append("the NVIDIA CDI spec is stale: " + "; ".join(judged["problems"]))
        elif judged["status"] == "fresh":
            notes.append(f"CDI spec {', '.join(judged['specs'])} fresh")
    if image and driver["state"] == "loaded":
        smi_count = len([gpu for gpu in state["gpus"] if gpu["source"] == "nvidia-smi"])
        run_problems, run_notes = container_runs(image, runtime_mode, smi_count)
        problems += run_problems
        notes += run_notes
    if fabric_kind in ("nvswitch", "nvl") and driver["state"] == "loaded":
        waiting = fabric.incomplete(state)
        if waiting:
            problems.append("NVLink fabric not Completed on " + ", ".join(
                f"{bus} ({value})" for bus, value in sorted(waiting.items())))
        elif fabric.fabric_states(state):
            notes.append(f"fabric Completed on {len(fabric.fabric_states(state))} GPU(s)")
    if problems:
        yield fail_command("verification failed: " + "; ".join(problems))
        return
    host.noop("verified: " + "; ".join(notes + ["nvidia runtime configured",
                                                f"toolkit {toolkit['version']}"]))


@deploy("Verify")
def run() -> None:
    config = host_settings()
    image = config.verify_image
    if image and config.docker_source != "none":
        verify_image(name=f"Verification image {image} is present", image=image,
                     archive=config.verify_image_archive)
    kind = fabric.resolve(config.nvidia_fabric, config.nvidia_fabricmanager,
                          fabric.switch_count(host_state()))
    if kind in ("nvswitch", "nvl"):  # every mode that has a fabric is verified
        fabric_completed(name="Every GPU's NVLink fabric state is Completed (bounded wait)",
                         wait_s=fabric.FABRIC_WAIT_S)
    check(
        name="Verify driver, GPUs, runtime and toolkit with facts",
        target_version=config.nvidia_driver_version,
        toolkit_version=config.container_toolkit_version,
        reboot_allowed=config.reboot_policy == "when_needed",
        image=image,
        runtime_mode=runtime_mode(config),
        fabric_kind=kind,
    )
