"""One judgement of "converged": is a host's state what its settings want (issue 27 item 2).

Pure (no pyinfra, no I/O). ``judge(state, wanted)`` takes a ``gpuhost.facts.host.GpuHostState``
value and the wanted settings (``gpuhost.reports.audit.desired_settings``: a key that is missing or
None is not judged) and returns a ``Verdict``: converged, or the reasons it is not, each
``{"item", "have", "want", "message"}``. A state section the state does not carry (a partial
state such as ``{"driver": ...}``) is not judged either.

Every caller asks this one function and decides only which reasons concern it:

- ``gpuhost.reports.audit`` (drift): every reason;
- ``roles.verify`` (after a ``gpu_host`` run): ``STACK``, the driver and container stack
  the run must have converged (with ``reboot_policy: never`` a pending reboot is a warning);
- ``roles.upgrade.ops.verify`` (after a driver upgrade): ``DRIVER``;
- ``gpuhost.upgrade.assess`` (is a host already at the target): ``DRIVER``, plus what only an
  upgrade asks (no other version installed, the local repo and the pin moved);
- ``vagrant/run_pyinfra.py --expect-converged`` (the VM test): ``STACK``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost import gpu_models, rdma

DRIVER = ("driver", "reboot_pending")
STACK = (*DRIVER, "toolkit", "daemon_json", "nvidia_runtime")


@dataclass(frozen=True)
class Verdict:
    """``reasons``: why the host is not as wanted (empty: it is)."""

    reasons: tuple[dict[str, Any], ...]

    @property
    def converged(self) -> bool:
        return not self.reasons

    def only(self, items: tuple[str, ...]) -> Verdict:
        """The verdict on these reason items alone (``STACK``, ``DRIVER``)."""
        return Verdict(tuple(r for r in self.reasons if r["item"] in items))

    def messages(self) -> list[str]:
        return [r["message"] for r in self.reasons]


def _item(item: str, have: Any, want: Any, message: str) -> dict[str, Any]:
    return {"item": item, "have": have, "want": want, "message": message}


def _profile_names(profiles: list[Any], model_key: str | None) -> list[str]:
    """Desired MIG profiles as names ("MIG 3g.20gb", 9 -> "3g.20gb" on an A100-40GB)."""
    model = gpu_models.lookup_model(model_key) if model_key else None
    table = ((model or {}).get("mig") or {}).get("profiles") or {}
    by_id = {spec["id"]: name for name, spec in table.items()}
    names = []
    for profile in profiles:
        text = str(profile).strip().lower().removeprefix("mig ").strip()
        if text.isdigit():
            text = by_id.get(int(text), f"profile {text}")
        names.append(text)
    return sorted(names)


def _driver_drift(state: Mapping[str, Any], want: str | None) -> list[dict[str, Any]]:
    driver = state["driver"]
    items = []
    installed, loaded = driver["installed_version"], driver["loaded_version"]
    if want is not None and installed != want:  # right packages, old module: reboot_pending
        have = installed or "not installed"
        if loaded is not None and loaded != installed:
            have = f"{have} (loaded {loaded})"
        items.append(_item("driver", have, want, f"driver {have}, want {want}"))
    if driver["reboot_required"]:
        if driver["state"] == "installed_not_loaded":
            have = f"packages {installed}, module not loaded"
        else:
            have = f"loaded {loaded or '?'}, packages {installed or '?'}"
        items.append(_item("reboot_pending", have, "loaded module == packages",
                           f"reboot pending: {have}"))
    return items


def _toolkit_drift(state: Mapping[str, Any], want: str | None) -> list[dict[str, Any]]:
    toolkit = state["toolkit"]
    if want is None:
        return []
    wanted = want.split("-", 1)[0]
    if not toolkit["consistent"]:
        have = ", ".join(toolkit["versions_seen"]) or "partly installed"
        return [_item("toolkit", have, wanted,
                      f"container toolkit packages disagree ({have}), want all at {wanted}")]
    have = toolkit["version"] or "not installed"
    if have != wanted:
        return [_item("toolkit", have, wanted, f"container toolkit {have}, want {wanted}")]
    return []


def _docker_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    docker = state["docker"]
    items = []
    if docker["exists"] and not docker["valid"]:
        items.append(_item("daemon_json", "invalid JSON", "valid JSON",
                           docker["error"] if "is not valid JSON" in docker["error"]
                           else f"{docker['path']} is not valid JSON: {docker['error']}"))
        return items
    if not docker["docker_installed"]:
        if desired.get("nvidia_default_runtime"):
            items.append(_item("default_runtime", "Docker not installed", "nvidia",
                               "Docker is not installed, want nvidia as its default runtime"))
        return items
    daemon = docker["daemon"]
    if desired.get("container_toolkit_version") is not None:
        if not docker["nvidia_runtime"]["defined"]:
            items.append(_item("nvidia_runtime", "not in daemon.json", "defined",
                               "the nvidia runtime is not defined in /etc/docker/daemon.json"))
        elif daemon["running"] and "nvidia" not in (daemon.get("runtimes") or []):
            runtimes = ", ".join(daemon.get("runtimes") or []) or "none"
            items.append(_item("nvidia_runtime", f"not in the running daemon ({runtimes})",
                               "defined", "daemon.json defines the nvidia runtime but the "
                               f"running Docker daemon does not list it (runtimes: {runtimes}): "
                               "restart Docker"))
    if desired.get("nvidia_default_runtime"):
        configured = docker["default_runtime"] or "runc (unset)"
        running = docker["daemon"]["default_runtime"] if docker["daemon"]["running"] else None
        if not docker["nvidia_is_default"]:
            items.append(_item("default_runtime", configured, "nvidia",
                               f"Docker's default runtime is {configured}, want nvidia"))
        elif running is not None and running != "nvidia":
            items.append(_item("default_runtime", f"{running} (running daemon)", "nvidia",
                               f"daemon.json says nvidia but the running daemon uses {running}: "
                               "restart Docker"))
    return items


def _cdi_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """container_runtime_mode cdi (or auto resolving to cdi): the NVIDIA CDI spec must exist
    and be fresh (gpuhost.runtime.cdi.judge). A stale spec is also a health finding in any mode."""
    from gpuhost.runtime import cdi

    docker = state["docker"]
    mode = cdi.resolve_mode(desired.get("container_runtime_mode") or "legacy",
                            state["toolkit"]["version"], docker.get("docker_version"),
                            cdi.state_cdi_feature(state))
    if mode != "cdi" or not docker["docker_installed"]:
        return []
    items = []
    judged = cdi.judge(state)
    if judged["status"] == "missing":
        items.append(_item("cdi_spec", "missing", "fresh", "cdi-spec-missing: no nvidia.com/gpu "
                           f"CDI spec in {' or '.join(cdi.SPEC_DIRS)} (container_runtime_mode "
                           "cdi): run the deploy"))
    elif judged["status"] == "stale":
        items.append(_item("cdi_spec", "stale", "fresh",
                           "cdi-spec-stale: " + "; ".join(judged["problems"])))
    unit = (state.get("cdi") or {}).get("boot_unit")
    if unit is None or not unit.get("enabled"):
        items.append(_item("cdi_boot_unit", "missing" if unit is None else "disabled", "enabled",
                           f"{cdi.BOOT_UNIT} is {'missing' if unit is None else 'not enabled'}: "
                           "after a reboot Docker may start before any CDI spec exists; run "
                           "the deploy"))
    return items


def _containerd_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """gpuhost's containerd drop-in (issue 24): with ``containerd_nvidia_runtime`` it must be
    what gpuhost writes now (enable_cdi in cdi mode); without it, gpuhost's drop-in must be
    gone (one nvidia-ctk or the user wrote is theirs). Not judged on a state without the
    ``containerd`` section (a gpuhost before issue 24) or a host without containerd."""
    from gpuhost import kubernetes
    from gpuhost.runtime import cdi, containerd as containerd_config

    view = state.get("containerd")
    if not isinstance(view, Mapping) or not view.get("installed"):
        return []
    if not desired.get("containerd_nvidia_runtime"):
        if containerd_config.is_gpuhosts(view.get("drop_in")):
            return [_item("containerd_drop_in", "present", "absent",
                          f"{containerd_config.DROP_IN} (gpuhost's) is still there but "
                          "containerd_nvidia_runtime is off: run the deploy, which removes it")]
        return []
    docker = state.get("docker") or {}
    mode = cdi.resolve_mode(desired.get("container_runtime_mode") or "legacy",
                            (state.get("toolkit") or {}).get("version"),
                            docker.get("docker_version"), cdi.state_cdi_feature(state))
    found = containerd_config.drift(dict(view),
                                    bool(desired.get("containerd_nvidia_default_runtime")),
                                    enable_cdi=mode == "cdi" or kubernetes.cdi_in_containerd(
                                        desired.get("kubernetes_profile") or "none"))
    return [_item("containerd_drop_in", "drift", "gpuhost's", message) for message in found]


def _mig_config_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """mig_config: per GPU that an entry of the named configuration matches, its MIG mode and
    GPU instances against the entry (gpuhost.mig.plan, as ``gpuhost mig plan`` shows)."""
    from gpuhost.mig import config as mig_config, plan as mig_plan

    name = desired.get("mig_config")
    entries = mig_config.select(desired.get("mig_config_file"), name)
    gpus = state.get("gpus") or []
    wants = mig_plan.wanted(entries, gpus)
    items = [_item("mig_config", "does not fit", name, problem)
             for problem in mig_plan.host_problems(name, wants, gpus)]
    if items:
        return items
    for plan in mig_plan.diff(wants, (state.get("mig") or {}).get("gpus") or []):
        if plan.changes:
            items.append(_item("mig_config", plan.now, plan.wanted,
                               f"GPU {plan.index}: {plan.now}, mig_config {name} wants "
                               f"{plan.wanted}"))
    return items


def _mig_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    if desired.get("mig_config") is not None:
        return _mig_config_drift(state, desired)
    mode = desired.get("mig_mode")
    if mode is None:
        return []
    gpus = {gpu["index"]: gpu for gpu in state["gpus"]}
    capable = [gpu for gpu in state["mig"]["gpus"] if gpu["mig_capable"]]
    if not capable:  # nvidia-smi did not answer, or no GPU of the host can do MIG
        if any(gpu["mig_capable"] for gpu in state["gpus"]):
            return [_item("mig_mode", "unknown (the driver does not answer)", mode,
                          f"MIG mode unknown: nvidia-smi did not answer, want {mode}")]
        if mode == "enabled":
            have = "no MIG-capable GPU" if state["gpus"] else "no GPU visible"
            return [_item("mig_mode", have, "enabled", f"MIG mode enabled is wanted: {have}")]
        return []
    items = []
    for gpu in capable:
        current, pending = gpu["mode_current"], gpu["mode_pending"]
        if current != mode:
            have = f"{current}, pending {pending} (reset or reboot)" if pending == mode else current
            items.append(_item("mig_mode", have, mode, f"GPU {gpu['index']}: MIG {have}, "
                               f"want {mode}"))
    if desired.get("mig_layout") is None or mode != "enabled":
        return items
    for gpu in capable:
        if gpu["mode_current"] != "enabled":
            continue
        model = (gpus.get(gpu["index"]) or {}).get("model")
        want = _profile_names(desired.get("mig_layout"), model)
        have = sorted(str(i["profile"]).lower() for i in gpu["gpu_instances"])
        if have != want:
            shown = " + ".join(have) or "no GPU instances"
            items.append(_item("mig_layout", shown, " + ".join(want),
                               f"GPU {gpu['index']}: MIG layout {shown}, want {' + '.join(want)}"))
    return items


def _fabric_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Fabric Manager, NSCQ, IMEX, NVSDM against the driver's version, and with a resolved
    nvidia_fabric nvswitch Fabric Manager installed, enabled and running (gpuhost.fabric)."""
    from gpuhost import fabric, kubernetes

    kind = fabric.resolve(desired.get("nvidia_fabric") or "auto",
                          bool(desired.get("nvidia_fabricmanager")),
                          fabric.switch_count(state))
    return [_item(*found) for found in fabric.drift(state, kind) + kubernetes.drift(
        state, desired.get("kubernetes_profile") or "none", kind)]


def _os_drift(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    if state["os"]["supported"]:
        return []
    return [_item("os", state["os"]["pretty_name"] or "unknown", "a supported OS",
                  state["os"]["error"] or "the OS is not supported by gpuhost")]


def judge(state: Mapping[str, Any], wanted: Mapping[str, Any]) -> Verdict:
    """Every difference between a host's GpuHostState and its wanted settings."""
    has = state.keys()
    items: list[dict[str, Any]] = []
    if "os" in has:
        items += _os_drift(state)
    if "driver" in has:
        items += _driver_drift(state, wanted.get("nvidia_driver_version"))
    if "toolkit" in has:
        items += _toolkit_drift(state, wanted.get("container_toolkit_version"))
    if "docker" in has:
        items += _docker_drift(state, wanted)
    if {"gpus", "mig"} <= has:
        items += _mig_drift(state, wanted)
    if {"docker", "toolkit"} <= has:
        items += _cdi_drift(state, wanted)
    items += _containerd_drift(state, wanted)
    if "driver" in has:
        items += _fabric_drift(state, wanted)
    items += [_item(*found) for found in rdma.drift(state, wanted.get("nvidia_gpudirect_rdma")
                                                    or "off")]
    return Verdict(tuple(items))
