"""The CDI spec schema the NVIDIA Container Toolkit writes, against the container engines on
the host that read it (pure, no pyinfra).

From toolkit 1.19.1, ``nvidia-ctk cdi generate`` (and so ``nvidia-cdi-refresh``) writes CDI
spec schema 0.7.0 (device nodes with ``additionalGids``), which needs Docker 26.1.0,
containerd 1.7.16, podman 5.1.0 and cri-o 1.30.0 (NVIDIA/nvidia-container-toolkit#1860,
NVIDIA/cloud-native-docs PR #419, 2026-05-29). An older engine may not read the file at
all: podman 4.9.3 logs ``failed to parse CDI Spec ... json: unknown field "additionalGids"``
and every ``nvidia.com/gpu`` device of it is unresolvable (toolkit#1860); podman gained
schema 0.7.0 with container-device-interface v0.7.1 in 5.1 (containers/podman PR #22280).
Debian 12's podman 4.3.1, installed in the sandbox (2026-11-29), did not report an
unresolvable CDI device even for a name no spec has, so its behaviour could not be observed
there: gpuhost follows NVIDIA's list.

What gpuhost does with it (docs/container-runtime.md, "CDI spec schema"):

- Docker and containerd are the engines gpuhost configures for CDI (``container_runtime_mode:
  cdi``; containerd's ``enable_cdi`` through its drop-in). One too old for the schema refuses
  cdi mode in one line (``refusal``): before any change when the run does not change them
  (``preflight_problem``), else right before daemon.json or the drop-in is written.
- podman reads ``/etc/cdi`` and ``/var/run/cdi`` by itself, in every gpuhost mode (NVIDIA's
  refresh unit writes the spec in legacy mode too), and gpuhost does not configure it, so
  refusing cdi mode would not help it: a podman older than 5.1.0 next to a spec of schema
  0.7.0 is a health warning (``podman_problem``), also logged by the deploy.
- cri-o is neither read nor configured by gpuhost: not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TOOLKIT_SCHEMA_0_7 = (1, 19, 1)
SCHEMA_0_7_NEEDS = {"Docker": (26, 1, 0), "containerd": (1, 7, 16), "podman": (5, 1, 0),
                    "cri-o": (1, 30, 0)}
# The first Docker Engine with CDI devices (`--device vendor/class=name`, behind
# "features": {"cdi": true}); enabled by default from 28.2 (docs/container-runtime.md).
DOCKER_CDI = (25, 0, 0)


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``"1.18.2"`` -> (1, 18, 2); ``"20.10.24+dfsg1"`` -> (20, 10, 24); None when unreadable."""
    if not text:
        return None
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(text))
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def engine_version(text: str | None) -> str | None:
    """The version in an engine's version line: ``containerd --version`` reads "containerd
    containerd.io 1.7.27 05044ec..." (its first word that looks like a version); Docker's and
    podman's are the version itself (``26.1.5+dfsg1``, ``4.3.1+ds1``)."""
    words = [w for w in (text or "").split() if re.match(r"v?\d+\.\d+", w)]
    return words[0].lstrip("v") if words else None


def writes_schema_0_7(toolkit_version: str | None) -> bool:
    toolkit = version_tuple(toolkit_version)
    return bool(toolkit and toolkit >= TOOLKIT_SCHEMA_0_7)


def runtime_too_old_for_schema(runtime: str, toolkit_version: str | None,
                               runtime_version: str | None) -> bool:
    """A known ``runtime`` (a key of SCHEMA_0_7_NEEDS) version too old to read the CDI spec
    schema that ``toolkit_version`` writes (0.7.0 from 1.19.1)."""
    have = version_tuple(engine_version(runtime_version))
    return bool(writes_schema_0_7(toolkit_version) and have and have < SCHEMA_0_7_NEEDS[runtime])


def _need(runtime: str) -> str:
    return f"{runtime} {'.'.join(map(str, SCHEMA_0_7_NEEDS[runtime]))}"


MODE_CDI = ("container_runtime_mode is cdi", "use container_runtime_mode legacy")


def why_cdi(config: Any, mode_cdi: bool) -> tuple[str, str]:
    """Why CDI is on (for the refusal's first words) and the setting that turns it off:
    cdi mode, else a DRA profile's CDI in containerd."""
    if mode_cdi:
        return MODE_CDI
    profile = getattr(config, "kubernetes_profile", "none")
    return (f"kubernetes_profile {profile} turns CDI on in containerd",
            "use kubernetes_profile none")


def refusal(toolkit_version: str, engines: list[tuple[str, str]],
            why: tuple[str, str] = MODE_CDI) -> str:
    """The one line that refuses CDI where the engines ([(runtime, version)], one or two)
    cannot read the toolkit's spec: what is wrong, then the three ways out (``why``: the
    setting that asked for CDI and how to turn it off, ``why_cdi``)."""
    have = " and ".join(f"{runtime} {engine_version(v) or v}" for runtime, v in engines)
    need = " and ".join(_need(runtime) for runtime, _ in engines)
    first = "is the first that does" if len(engines) == 1 else "are the first that do"
    return (f"{why[0]} but {have} cannot read the CDI spec schema 0.7.0 that toolkit "
            f"{toolkit_version} writes ({need} {first}): upgrade to {need} or newer, or keep "
            f"this host on container_toolkit_version 1.18.2, or {why[1]}; gpuhost left the "
            "runtime's configuration as it was")


def schema_refusal(runtime: str, toolkit_version: str, runtime_version: str,
                   why: tuple[str, str] = MODE_CDI) -> str:
    """``refusal`` for one engine."""
    return refusal(toolkit_version, [(runtime, runtime_version)], why)


def docker_lacks_cdi(docker_version: str | None) -> bool:
    """A known Docker version older than 25.0 (no CDI devices)."""
    docker = version_tuple(docker_version)
    return docker is not None and docker < DOCKER_CDI


def docker_without_cdi(docker_version: str) -> str:
    """The one line that refuses cdi mode on a Docker older than 25.0 (a toolkit before 1.19.1:
    with a newer one ``refusal`` names 26.1.0)."""
    return (f"container_runtime_mode is cdi but Docker {docker_version} has no CDI support "
            "(Docker 25.0 is the first with --device nvidia.com/gpu=...): upgrade Docker "
            "(docker_version) or use container_runtime_mode legacy or auto; gpuhost left "
            "daemon.json as it was")


def docker_after_run(config: Any, state: Mapping[str, Any]) -> str | None:
    """The Docker version the host runs after this deploy when it is known before any change:
    ``docker_version`` when gpuhost pins it, the running one when the run keeps Docker's
    packages as they are (``docker_source: none``, or ``distro`` with Docker installed and
    no pin: apt keeps an installed package); else None (gpuhost installs or replaces Docker,
    the check waits for the Docker step)."""
    if config.docker_version and config.docker_source in ("docker", "distro"):
        return config.docker_version
    if docker_packages_kept(config, state):
        return (state.get("docker") or {}).get("docker_version")
    return None


def docker_packages_kept(config: Any, state: Mapping[str, Any]) -> bool:
    """This run leaves Docker's packages (and the containerd they bring) as they are:
    ``docker_source: none``, or ``distro`` with Docker installed and no ``docker_version``."""
    return config.docker_source == "none" or bool(
        config.docker_source == "distro" and not config.docker_version
        and (state.get("docker") or {}).get("docker_installed"))


def preflight_problem(config: Any, state: Mapping[str, Any], docker_cdi: bool,
                      containerd_cdi: bool) -> str | None:
    """cdi mode refused before any change (``roles.common.host_ready``): the Docker this run
    leaves (``docker_after_run``) when ``docker_cdi``, and the installed containerd when
    gpuhost's drop-in enables CDI (``containerd_cdi``) and the run keeps Docker's packages
    (which may bring a containerd); one line naming every engine too old."""
    toolkit = config.container_toolkit_version
    engines = []
    docker = docker_after_run(config, state) if docker_cdi else None
    if runtime_too_old_for_schema("Docker", toolkit, docker):
        engines.append(("Docker", docker))
    kept = docker_packages_kept(config, state)
    containerd = (state.get("containerd") or {}).get("version") if containerd_cdi and kept \
        else None
    if runtime_too_old_for_schema("containerd", toolkit, containerd):
        engines.append(("containerd", containerd))
    if engines:
        return refusal(toolkit, engines, why_cdi(config, docker_cdi))
    return docker_without_cdi(docker) if docker_cdi and docker_lacks_cdi(docker) else None


def podman_problem(state: Mapping[str, Any]) -> str | None:
    """podman older than 5.1.0 with an NVIDIA CDI spec of schema 0.7.0 or newer on the host
    (read from the spec itself, whatever wrote it): the warning text, else None."""
    podman = (state.get("cdi") or {}).get("podman")
    if not podman or not runtime_too_old_for_schema("podman", "1.19.1", podman):
        return None
    specs = [s for s in (state.get("cdi") or {}).get("specs") or []
             if s.get("kind") == "nvidia.com/gpu"
             and (version_tuple(s.get("cdi_version")) or (0,)) >= (0, 7, 0)]
    if not specs:
        return None
    paths = ", ".join(s["path"] for s in specs)
    return (f"podman {engine_version(podman)} is older than 5.1.0, the first podman NVIDIA lists "
            f"as reading the CDI spec schema 0.7.0 of {paths} (toolkit 1.19.1 and newer write "
            "it; podman 4.9.3 rejects such a file): podman run --device nvidia.com/gpu=... may "
            "not resolve; upgrade podman, or keep this host on container_toolkit_version 1.18.2")
