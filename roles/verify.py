"""Prove the result with facts after a run; changes nothing on a converged host."""

from __future__ import annotations

from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import FileUploadCommand, QuoteString, StringCommand, deploy, operation

from facts.container import DockerImagePresent, NvidiaContainerRun
from facts.host import GpuHostState
from roles.common import REMOTE_CACHE, executing, fail_command, host_settings


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


@operation()
def check(target_version: str, toolkit_version: str, reboot_allowed: bool,
          image: str | None = None):
    """
    Read the host back and fail it when the result is not what was asked.

    + target_version: the driver version that must be loaded and installed
    + toolkit_version: the container toolkit version that must be installed
    + reboot_allowed: when False, a driver installed but not yet loaded is a warning
    + image: when set, ``docker run --runtime=nvidia IMAGE nvidia-smi -L`` must succeed
    """
    if not executing():
        host.noop("the result is verified with facts after the run")
        return
    state = host.get_fact(GpuHostState)
    driver, docker, toolkit = state["driver"], state["docker"], state["toolkit"]
    problems, notes = [], []
    if driver["installed_version"] != target_version:
        problems.append(f"driver packages are at {driver['installed_version']}, want {target_version}")
    if driver["state"] == "loaded":
        if driver["loaded_version"] != target_version:
            problems.append(f"loaded module is {driver['loaded_version']}, want {target_version}")
        smi_gpus = [gpu for gpu in state["gpus"] if gpu["source"] == "nvidia-smi"]
        if not smi_gpus:
            problems.append("the driver is loaded but nvidia-smi shows no GPU")
        notes.append(f"driver {driver['loaded_version']} ({driver['loaded']['flavor']}) loaded, "
                     f"{len(smi_gpus)} GPU(s)")
    elif reboot_allowed:
        problems.append(f"driver state is {driver['state']} after the run ({driver['smi_error']})")
    else:
        logger.warning(f"{host.name}: driver {target_version} installed, state "
                       f"{driver['state']}: a reboot is due (reboot_policy: never)")
        notes.append(f"driver {target_version} installed, reboot pending")
    if not docker["valid"]:
        problems.append(f"daemon.json is invalid: {docker['error']}")
    elif not docker["nvidia_runtime"]["defined"]:
        problems.append("daemon.json has no nvidia runtime")
    if docker["daemon"]["running"] and "nvidia" not in docker["daemon"]["runtimes"]:
        problems.append("the running Docker daemon does not list the nvidia runtime")
    if toolkit["version"] != toolkit_version.split("-")[0] or not toolkit["consistent"]:
        problems.append(f"container toolkit versions seen {toolkit['versions_seen']}, want "
                        f"{toolkit_version} on all four packages")
    if image and driver["state"] == "loaded":
        run = host.get_fact(NvidiaContainerRun, image=image)
        if run["rc"] != 0:
            problems.append(f"docker run --runtime=nvidia {image} nvidia-smi -L failed "
                            f"(rc {run['rc']}): {run['output'][-300:]}")
        else:
            notes.append(f"a container sees {run['output'].count('GPU ')} GPU(s)")
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
    check(
        name="Verify driver, GPUs, runtime and toolkit with facts",
        target_version=config.nvidia_driver_version,
        toolkit_version=config.container_toolkit_version,
        reboot_allowed=config.reboot_policy == "when_needed",
        image=image,
    )
