"""The NVIDIA CDI spec in ``container_runtime_mode`` cdi: generated when missing, regenerated
when stale (gpuhost.runtime.cdi.judge), and a small op other roles call after they change the GPUs'
devices (``refresh_after_change``: the MIG role after a layout change).

Where the spec goes: ``/var/run/cdi/nvidia.yaml`` with toolkit 1.18+ (the path its
``nvidia-cdi-refresh.service`` writes, again at every boot), ``/etc/cdi/nvidia.yaml`` before
(NVIDIA's documented path for ``nvidia-ctk cdi generate``; /var/run is emptied at boot and
nothing of 1.17 writes it again). A stale spec elsewhere is regenerated where it is.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, deploy, operation

from gpuhost.facts.container import DockerDaemonConfig
from gpuhost.facts.host import GpuHostState
from gpuhost.runtime import cdi
from gpuhost.roles.common import executing, fail_command, host_settings, host_state
from gpuhost.roles.files import atomic_write

LEGACY_OUTPUT = "/etc/cdi/nvidia.yaml"


def runtime_mode(config: Any = None, state: dict[str, Any] | None = None) -> str:
    """This host's resolved mode, ``legacy`` or ``cdi`` (``auto`` by gpuhost.runtime.cdi.resolve_mode:
    the toolkit version the deploy installs, the running Docker's version, else the pinned
    ``docker_version``)."""
    config = config or host_settings()
    if config.container_runtime_mode != "auto":
        return config.container_runtime_mode
    state = state if state is not None else host_state()
    docker = (state.get("docker") or {}).get("docker_version") or (
        config.docker_version if config.docker_source in ("docker", "distro") else None)
    return cdi.resolve_mode("auto", config.container_toolkit_version, docker,
                            cdi.state_cdi_feature(state))


def output_path(toolkit_version: str | None) -> str:
    version = cdi.version_tuple(toolkit_version)
    return cdi.DEFAULT_OUTPUT if version and version >= cdi.TOOLKIT_CDI else LEGACY_OUTPUT


def _generate(path: str) -> StringCommand:
    return StringCommand("mkdir -p", QuoteString(path.rsplit("/", 1)[0]), "&&",
                         "nvidia-ctk cdi generate", QuoteString(f"--output={path}"))


@operation()
def refresh_spec(toolkit_version: str, create: bool = True, reason: str = ""):
    """
    Regenerate the NVIDIA CDI spec(s) that are stale (``nvidia-ctk cdi generate``), and
    generate one when there is none and ``create`` is set. Judged on the host as it is when
    the op runs (after the driver or MIG steps); nothing while no driver answers.

    + toolkit_version: the installed toolkit version (where a new spec goes)
    + create: generate a spec when there is none (cdi mode)
    + reason: why (for the log line)
    """
    state = host.get_fact(GpuHostState) if executing() else host_state()
    judged = cdi.judge(state)
    why = f" ({reason})" if reason else ""
    if judged["status"] == "fresh":
        host.noop(f"the NVIDIA CDI spec {', '.join(judged['specs'])} names the host's devices "
                  f"and driver{why}")
        return
    if judged["status"] in ("unknown", "unread"):
        host.noop("the NVIDIA CDI spec cannot be judged: no driver answers (nvidia-smi)")
        return
    if not (state.get("toolkit") or {}).get("nvidia_ctk"):
        host.noop("nvidia-ctk is not installed yet (the deploy's CDI step after the toolkit "
                  "generates the spec)")
        return
    if judged["status"] == "missing":
        if not create:
            host.noop("no NVIDIA CDI spec on the host (legacy mode does not need one)")
            return
        host.log(f"Generating the NVIDIA CDI spec{why}")
        yield _generate(output_path(toolkit_version))
        return
    host.log(f"Regenerating the stale NVIDIA CDI spec{why}: {'; '.join(judged['problems'])}")
    stale = sorted({problem.split(": ", 1)[0] for problem in judged["problems"]})
    for path in stale:
        yield _generate(path)


@operation()
def refresh_unit_rerun():
    """
    NVIDIA's ``nvidia-cdi-refresh.service`` left failed (started before the driver was active,
    it hit its start limit: Azure/aks-gpu PR #175): reset and started again once the driver
    is loaded, so that it writes the spec now and again after driver changes. Judged on the
    host as it is when the op runs; nothing when the unit is not failed.
    """
    state = host.get_fact(GpuHostState) if executing() else host_state()
    unit = cdi.refresh_unit_failed(state)
    if unit is None:
        host.noop(f"{cdi.REFRESH_UNIT} is not failed")
        return
    if (state.get("driver") or {}).get("state") != "loaded":
        host.noop(f"{cdi.REFRESH_UNIT} is failed, but the driver is not loaded yet")
        return
    host.log(f"{cdi.REFRESH_UNIT} was left failed (result {unit['result']}): resetting it and "
             "running it again now that the driver is loaded")
    yield StringCommand("systemctl reset-failed", QuoteString(cdi.REFRESH_UNIT), "&&",
                        "systemctl start", QuoteString(cdi.REFRESH_UNIT))


def refresh_after_change(reason: str = "the GPU devices changed") -> None:
    """Call after a step that changes the host's GPU devices (a MIG layout) or driver: in cdi
    mode the spec is generated or regenerated when it no longer matches; in legacy mode an
    existing stale spec is regenerated too (a stale spec misleads whoever uses it), none is
    created."""
    config = host_settings()
    refresh_spec(
        name="Refresh the NVIDIA CDI spec if it no longer matches the host",
        toolkit_version=config.container_toolkit_version,
        create=runtime_mode(config) == "cdi",
        reason=reason,
    )


@operation()
def boot_unit(output: str | None):
    """
    gpuhost's unit that writes the NVIDIA CDI spec at every boot before Docker, containerd and
    kubelet start (``gpuhost.runtime.cdi.BOOT_UNIT``): written and enabled in cdi mode, removed
    (gpuhost's own file only) in legacy mode. Judged from the one fact command: a host whose
    unit is as wanted gets no command.

    + output: the spec path the unit writes (cdi mode), or None (remove gpuhost's unit)
    """
    unit = (host_state().get("cdi") or {}).get("boot_unit")
    path = cdi.BOOT_UNIT_PATH
    if output is None:
        if unit is None:
            host.noop(f"no {cdi.BOOT_UNIT} (legacy mode)")
            return
        yield StringCommand("systemctl disable", cdi.BOOT_UNIT, ">/dev/null 2>&1;", "rm -f",
                            QuoteString(path), "&&", "systemctl daemon-reload")
        return
    text = cdi.boot_unit_text(output)
    digest = hashlib.sha256(text.encode()).hexdigest()
    if unit and unit["sha256"] == digest and unit["enabled"]:
        host.noop(f"{cdi.BOOT_UNIT} writes {output} at boot, before Docker starts")
        return
    if not unit or unit["sha256"] != digest:
        yield from atomic_write(path, text.encode(), "644")
        yield StringCommand("systemctl daemon-reload")
    yield StringCommand("systemctl enable", cdi.BOOT_UNIT, ">/dev/null")  # errors stay visible


@operation()
def require_docker_cdi(toolkit_version: str | None = None):
    """
    Fail the host when its Docker is older than 25.0 (no CDI devices), or too old for the spec
    schema the toolkit writes (0.7.0 from 1.19.1 needs Docker 26.1.0): read when the op runs
    (after the Docker step), before daemon.json is touched.

    + toolkit_version: the toolkit the deploy installs
    """
    if executing():
        version = host.get_fact(DockerDaemonConfig)["docker_version"]
    else:
        version = (host_state().get("docker") or {}).get("docker_version")
    if cdi.runtime_too_old_for_schema("Docker", toolkit_version, version):  # names 26.1.0
        yield fail_command(cdi.schema_refusal("Docker", toolkit_version, version))
        return
    if cdi.docker_lacks_cdi(version):
        yield fail_command(cdi.docker_without_cdi(version))
        return
    host.noop(f"Docker {version or '(installed by this run)'} supports CDI devices")


def preflight_problem() -> str | None:
    """Before any change (``roles.common.host_ready``): cdi mode refused in one line when the
    Docker this run leaves, or the containerd whose CDI gpuhost's drop-in turns on, cannot
    read the spec schema of the toolkit the run installs (gpuhost.runtime.cdi_schema); a DRA
    profile refused on a containerd without CDI. Engines this run installs or replaces are
    checked later, right before their configuration is written. Logs the podman warning."""
    from gpuhost import kubernetes
    from gpuhost.runtime import cdi_schema

    config, state = host_settings(), host_state()
    podman = cdi_schema.podman_problem(state)
    if podman:
        host.log(f"warning: {podman}", logger.warning)
    docker_cdi = runtime_mode(config, state) == "cdi"
    containerd_cdi = bool(config.containerd_nvidia_runtime) and (
        docker_cdi or kubernetes.cdi_in_containerd(config.kubernetes_profile))
    if containerd_cdi and cdi_schema.docker_packages_kept(config, state):  # no CDI at all
        problem = kubernetes.containerd_problem(config.kubernetes_profile,
                                                (state.get("containerd") or {}).get("version"))
        if problem:
            return problem
    return cdi_schema.preflight_problem(config, state, docker_cdi, containerd_cdi)


def check_docker() -> None:
    """cdi mode: refuse a Docker without CDI before daemon.json is changed (call before
    ``roles.daemon_json.configure``)."""
    if runtime_mode() == "cdi":
        require_docker_cdi(name="Docker supports CDI devices (container_runtime_mode cdi)",
                           toolkit_version=host_settings().container_toolkit_version)


@deploy("NVIDIA CDI spec")
def configure() -> None:
    """cdi mode: the spec must exist and be fresh (generated or regenerated). legacy mode: a
    spec that exists (toolkit 1.18 writes one itself) is regenerated when stale, none is
    created; a converged host with a fresh spec or none gets no change."""
    config = host_settings()
    refresh_unit_rerun(name=f"{cdi.REFRESH_UNIT} is not left failed")
    if runtime_mode(config) != "cdi":
        refresh_after_change("legacy mode: a stale spec is regenerated, none is created")
        boot_unit(name=f"No {cdi.BOOT_UNIT} (legacy mode)", output=None)
        return
    refresh_after_change("container_runtime_mode cdi")
    boot_unit(name=f"{cdi.BOOT_UNIT}: the spec written at every boot, before Docker starts",
              output=output_path(config.container_toolkit_version))
