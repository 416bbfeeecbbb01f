"""The fleet audit as data: drift against the desired settings, health findings, CUDA
answers, the document.

Pure (no pyinfra; the only I/O is reading a module signing certificate named in the
inventory). ``deploys/audit.py`` gathers one ``facts.host.GpuHostState`` per host and hands
{host name: state or ``HostError``} plus each host's inventory data to ``build()``;
``gpuhost.report`` renders the resulting document (schema ``gpuhost.audit/2``,
docs/audit-schema.md) as a terminal table, JSON or HTML. Drift (is the stack as wanted) and
health (``gpuhost.health``: is the host sound, will it survive its next boot, is its driver
branch supported) are kept apart per host.

Exit codes of an audit run (``exit_code()``): 0 every host matches and is healthy, 2 at
least one host drifts, 4 at least one host is unhealthy (a finding at or above the
``fail_on`` severity, critical by default), 3 at least one host failed or was unreachable.
3 wins over 4, 4 over 2. 1 is left to pyinfra and to usage errors (invalid ``--data`` or
settings), which stop the run before any host.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost import health, policy, settings

SCHEMA = "gpuhost.audit/2"
SCHEMAS_READ = ("gpuhost.audit/1", SCHEMA)  # what --baseline accepts
EXIT_OK, EXIT_USAGE, EXIT_DRIFT, EXIT_UNREACHABLE, EXIT_UNHEALTHY = 0, 1, 2, 3, 4
EXIT_MEANING = {EXIT_OK: "all hosts as wanted, none unhealthy", EXIT_DRIFT: "drift",
                EXIT_UNHEALTHY: "unhealthy hosts", EXIT_UNREACHABLE: "hosts failed or unreachable"}
FAIL_ON = ("critical", "warning", "never")  # which health findings make the exit status 4

# The settings the audit compares (the signing certificate: for the Secure Boot finding);
# every other inventory key is ignored here.
AUDITED = ("nvidia_driver_version", "container_toolkit_version", "nvidia_default_runtime",
           "mig_mode", "mig_layout", "nvidia_module_signing_cert", "container_runtime_mode",
           "mig_config", "mig_config_file", "containerd_nvidia_runtime",
           "containerd_nvidia_default_runtime", "nvidia_fabric", "nvidia_fabricmanager")
STATUSES = ("ok", "drift", "failed", "unreachable")
VERDICTS = ("native", "forward-compat", "minor-version-compat", "no", "unknown")


class AuditError(ValueError):
    """Bad audit input (settings or options); the message says what to change."""


@dataclass(frozen=True)
class HostError:
    """A host that produced no state: ``status`` is "failed" or "unreachable"."""

    status: str
    message: str

    def __post_init__(self) -> None:
        if self.status not in ("failed", "unreachable"):
            raise ValueError(f"HostError status {self.status!r}: want failed or unreachable")


# --- inputs ---------------------------------------------------------------------------------

def desired_settings(data: Mapping[str, Any], host_name: str | None = None) -> dict[str, Any]:
    """The audited settings of one host (defaults applied; a required key that is not set is
    None and is not checked). Raises AuditError listing every invalid value."""
    defaults = settings.defaults()
    desired: dict[str, Any] = {}
    problems: list[str] = []
    for key in AUDITED:
        value = data.get(key, defaults.get(key))
        if value is not None:
            problems += [f"{key}: {p}" for p in settings.BY_NAME[key].check(key, value)]
        desired[key] = list(value) if isinstance(value, (list, tuple)) else value
    if desired["mig_layout"] is not None and desired["mig_mode"] != "enabled":
        problems.append('mig_layout: set, but mig_mode is not "enabled" (set mig_mode: enabled)')
    if desired["mig_config"] is not None:
        from gpuhost import mig_config

        if desired["mig_mode"] is not None or desired["mig_layout"] is not None:
            problems.append("mig_config: set together with mig_mode/mig_layout (choose one form)")
        elif not desired["mig_config_file"]:
            problems.append("mig_config: set, but mig_config_file is not (the file that names it)")
        else:
            problems += mig_config.check(desired["mig_config_file"], desired["mig_config"])
    if problems:
        prefix = f"{host_name}: " if host_name else ""
        raise AuditError("invalid settings for the audit:\n  "
                         + "\n  ".join(prefix + p for p in problems))
    return desired


def parse_cuda(value: Any) -> str | None:
    """``--data cuda=12.4`` arrives as the float 12.4, ``cuda=12`` as an int, a quoted value
    as a string: all become "12.4"-style strings checked against NVIDIA's table."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise AuditError(f"cuda={value!r} is not a CUDA version (want like 12.4 or \"12.8.1\")")
    text = repr(value) if isinstance(value, float) else str(value).strip()
    try:
        policy.min_driver_for_cuda(text)
    except ValueError as error:
        raise AuditError(f"cuda={text}: {error}. Pass it as --data cuda=12.4, or quoted for "
                         "updates: --data 'cuda=\"12.8.1\"'") from None
    return text


# --- drift -----------------------------------------------------------------------------------

def _item(item: str, have: Any, want: Any, message: str) -> dict[str, Any]:
    return {"item": item, "have": have, "want": want, "message": message}


def _profile_names(profiles: list[Any], model_key: str | None) -> list[str]:
    """Desired MIG profiles as names ("MIG 3g.20gb", 9 -> "3g.20gb" on an A100-40GB)."""
    model = policy.lookup_model(model_key) if model_key else None
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
        if desired["nvidia_default_runtime"]:
            items.append(_item("default_runtime", "Docker not installed", "nvidia",
                               "Docker is not installed, want nvidia as its default runtime"))
        return items
    if desired["container_toolkit_version"] is not None and not docker["nvidia_runtime"]["defined"]:
        items.append(_item("nvidia_runtime", "not in daemon.json", "defined",
                           "the nvidia runtime is not defined in /etc/docker/daemon.json"))
    if desired["nvidia_default_runtime"]:
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
    and be fresh (gpuhost.cdi.judge). A stale spec is also a health finding in any mode."""
    from gpuhost import cdi

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
    from gpuhost import cdi, containerd_config

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
                                    enable_cdi=mode == "cdi")
    return [_item("containerd_drop_in", "drift", "gpuhost's", message) for message in found]


def _mig_config_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """mig_config: per GPU that an entry of the named configuration matches, its MIG mode and
    GPU instances against the entry (gpuhost.mig_config, as ``gpuhost mig plan`` shows)."""
    from gpuhost import mig_config

    name = desired["mig_config"]
    entries = mig_config.select(desired["mig_config_file"], name)
    gpus = state.get("gpus") or []
    wants = mig_config.wanted(entries, gpus)
    items = [_item("mig_config", "does not fit", name, problem)
             for problem in mig_config.host_problems(name, wants, gpus)]
    if items:
        return items
    for plan in mig_config.diff(wants, (state.get("mig") or {}).get("gpus") or []):
        if plan.changes:
            items.append(_item("mig_config", plan.now, plan.wanted,
                               f"GPU {plan.index}: {plan.now}, mig_config {name} wants "
                               f"{plan.wanted}"))
    return items


def _mig_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    if desired.get("mig_config") is not None:
        return _mig_config_drift(state, desired)
    mode = desired["mig_mode"]
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
    if desired["mig_layout"] is None or mode != "enabled":
        return items
    for gpu in capable:
        if gpu["mode_current"] != "enabled":
            continue
        model = (gpus.get(gpu["index"]) or {}).get("model")
        want = _profile_names(desired["mig_layout"], model)
        have = sorted(str(i["profile"]).lower() for i in gpu["gpu_instances"])
        if have != want:
            shown = " + ".join(have) or "no GPU instances"
            items.append(_item("mig_layout", shown, " + ".join(want),
                               f"GPU {gpu['index']}: MIG layout {shown}, want {' + '.join(want)}"))
    return items


def _fabric_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Fabric Manager, NSCQ, IMEX, NVSDM against the driver's version, and with a resolved
    nvidia_fabric nvswitch Fabric Manager installed, enabled and running (gpuhost.fabric)."""
    from gpuhost import fabric

    kind = fabric.resolve(desired.get("nvidia_fabric") or "auto",
                          bool(desired.get("nvidia_fabricmanager")),
                          (state.get("health") or {}).get("nvswitch_count"))
    return [_item(*found) for found in fabric.drift(state, kind)]


def host_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every difference between a host's GpuHostState and its desired settings; each item is
    ``{"item", "have", "want", "message"}``. An empty list means the host matches."""
    items = []
    if not state["os"]["supported"]:
        items.append(_item("os", state["os"]["pretty_name"] or "unknown", "a supported OS",
                           state["os"]["error"] or "the OS is not supported by gpuhost"))
    items += _driver_drift(state, desired["nvidia_driver_version"])
    items += _toolkit_drift(state, desired["container_toolkit_version"])
    items += _docker_drift(state, desired)
    items += _mig_drift(state, desired)
    items += _cdi_drift(state, desired)
    items += _containerd_drift(state, desired)
    items += _fabric_drift(state, desired)
    return items


# --- CUDA ----------------------------------------------------------------------------------

def cuda_answer(state: Mapping[str, Any], cuda: str) -> dict[str, Any]:
    """Can this host run images built for CUDA ``cuda``?

    ``verdict``: "native" (the loaded driver is new enough), "forward-compat" (only with the
    cuda-compat package: every GPU is a data-center GPU), "minor-version-compat" (runs, but
    features that need a newer driver and PTX JIT for the newer toolkit are unavailable;
    forward compatibility would give the full toolkit on data-center GPUs), "no", or
    "unknown" (a GPU model gpuhost does not know). ``driver_needed`` is the native minimum.
    """
    needed = policy.min_driver_for_cuda(cuda)
    driver = state["driver"]["loaded_version"]
    models = [gpu["model"] for gpu in state["gpus"]]
    data_center: bool | None = None
    if models and all(models):
        data_center = all(policy.lookup_model(m)["data_center"] for m in models)
    answer = {"version": cuda, "driver": driver, "driver_needed": needed,
              "verdict": "no", "forward_compat_possible": data_center, "message": ""}
    if driver is None:
        answer["message"] = f"no NVIDIA driver loaded; needs driver >= {needed}"
        return answer
    compat = policy.cuda_compat(driver, cuda, models[0] if len(set(models)) == 1 else None)
    if compat["native"]:
        answer.update(verdict="native", message=f"driver {driver} >= {needed}")
    elif data_center:
        answer.update(verdict="forward-compat",
                      message=f"driver {driver} < {needed}: with the cuda-compat package "
                              "(data-center GPUs), or upgrade the driver")
    elif compat["minor_version_compat"]:
        answer.update(verdict="minor-version-compat",
                      message=f"driver {driver} < {needed}: CUDA {cuda} apps run without "
                              "newer-driver features or PTX JIT; upgrade for full support")
    elif data_center is None and models:
        answer.update(verdict="unknown", message=f"driver {driver} < {needed}; GPU model "
                                                 "unknown, forward compatibility not known")
    else:
        answer["message"] = f"driver {driver} < {needed}: upgrade the driver to >= {needed}"
    return answer


# --- the observed summary of one host --------------------------------------------------------

def _gpu_groups(gpus: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    counts = Counter(gpu["model"] or gpu["name"] or "unknown" for gpu in gpus)
    return [{"model": model, "count": count} for model, count in sorted(counts.items())]


def _mig_summary(state: Mapping[str, Any]) -> dict[str, Any]:
    capable = [gpu for gpu in state["mig"]["gpus"] if gpu["mig_capable"]]
    modes = sorted({str(gpu["mode_current"]) for gpu in capable})
    mode = modes[0] if len(modes) == 1 else "mixed" if modes else None
    if not capable and any(gpu["mig_capable"] for gpu in state["gpus"]):
        mode = "unknown"  # MIG-capable GPUs seen by lspci, but nvidia-smi did not answer
    layouts = {str(gpu["index"]): sorted(str(i["profile"]) for i in gpu["gpu_instances"])
               for gpu in capable if gpu["mode_current"] == "enabled"}
    return {"mode": mode, "pending": any(gpu["pending_change"] for gpu in capable),
            "capable_gpus": len(capable), "layout": layouts}


def observed(state: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a GpuHostState the report shows (the full fact is kept beside it)."""
    os_info, driver, docker, toolkit = state["os"], state["driver"], state["docker"], state["toolkit"]
    return {
        "os": {"id": os_info["id"], "version_id": os_info["version_id"],
               "pretty_name": os_info["pretty_name"], "distro_tag": os_info["distro_tag"],
               "supported": os_info["supported"]},
        "kernel_release": os_info["kernel_release"],
        "driver": {"state": driver["state"], "loaded_version": driver["loaded_version"],
                   "installed_version": driver["installed_version"],
                   "flavor": (driver["loaded"] or {}).get("flavor") or driver["installed_flavor"],
                   "newest_cuda": driver["newest_cuda"],
                   "reboot_required": driver["reboot_required"]},
        "gpus": _gpu_groups(state["gpus"]),
        "gpu_count": len(state["gpus"]),
        "mig": _mig_summary(state),
        "toolkit": {"installed": toolkit["installed"], "version": toolkit["version"],
                    "consistent": toolkit["consistent"]},
        "docker": {"installed": docker["docker_installed"], "version": docker["docker_version"],
                   "nvidia_runtime": docker["nvidia_runtime"]["defined"],
                   "default_runtime": docker["default_runtime"]},
    }


# --- the document ----------------------------------------------------------------------------

def masked(value: Any) -> Any:
    """``value`` with URL credentials and query strings hidden (daemon.json may hold proxy
    URLs with passwords; audit reports travel)."""
    if isinstance(value, str):
        return settings.mask_url(value) if "://" in value else value
    if isinstance(value, Mapping):
        return {key: masked(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(item) for item in value]
    return value


def host_entry(name: str, result: Mapping[str, Any] | HostError, desired: Mapping[str, Any],
               cuda: str | None = None, today: _dt.date | None = None) -> dict[str, Any]:
    """One host of the document; ``result`` is its GpuHostState or a HostError. ``today``
    is the date the driver branch lifecycle is judged on."""
    entry: dict[str, Any] = {"name": name, "status": "ok", "error": None, "desired": dict(desired),
                             "observed": None, "drift": [], "health": health.block(None),
                             "cuda": None, "facts": None}
    if isinstance(result, HostError):
        entry.update(status=result.status, error=result.message)
        return entry
    drift = host_drift(result, desired)
    found = health.findings(result, today=today,
                            module_signing_cert=desired.get("nvidia_module_signing_cert"))
    entry.update(status="drift" if drift else "ok", observed=observed(result), drift=drift,
                 health=health.block(found), cuda=cuda_answer(result, cuda) if cuda else None,
                 facts=masked(result))
    return entry


def summarise(hosts: list[Mapping[str, Any]], cuda: str | None,
              fail_on: str = "critical") -> dict[str, Any]:
    counts = Counter(h["status"] for h in hosts)
    drift_items = Counter(item["item"] for h in hosts for item in h["drift"])
    summary: dict[str, Any] = {"hosts": len(hosts), **{s: counts.get(s, 0) for s in STATUSES},
                               "drift_items": dict(sorted(drift_items.items())),
                               "driver_versions": dict(sorted(Counter(
                                   (h["observed"] or {}).get("driver", {}).get("loaded_version")
                                   or ("not loaded" if h["observed"] else h["status"])
                                   for h in hosts).items())),
                               "cuda": None}
    if cuda:
        by_verdict: dict[str, list[str]] = {v: [] for v in VERDICTS}
        for h in hosts:
            if h["cuda"]:
                by_verdict[h["cuda"]["verdict"]].append(h["name"])
        summary["cuda"] = {"version": cuda, "driver_needed": policy.min_driver_for_cuda(cuda),
                           "hosts": by_verdict}
    summary["health"] = health.fleet_summary(hosts, fail_on)
    summary["exit_code"] = (
        EXIT_UNREACHABLE if counts.get("failed") or counts.get("unreachable")
        else EXIT_UNHEALTHY if summary["health"]["unhealthy"]
        else EXIT_DRIFT if counts.get("drift") else EXIT_OK)
    return summary


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(results: Mapping[str, Mapping[str, Any] | HostError],
          desired: Mapping[str, Mapping[str, Any]], cuda: str | None = None,
          generated_at: str | None = None, fail_on: str = "critical") -> dict[str, Any]:
    """The audit document (schema ``gpuhost.audit/2``) of a fleet; hosts sorted by name.

    + results: host name -> GpuHostState (the fact's value) or HostError
    + desired: host name -> ``desired_settings()`` of that host
    + cuda: a CUDA version from ``parse_cuda()`` to answer for every host, or None
    + generated_at: the document's time (default now); its date judges driver lifecycles
    + fail_on: which health findings make a host unhealthy for the exit status (FAIL_ON)
    """
    if fail_on not in FAIL_ON:
        raise AuditError(f"fail_on {fail_on!r}: want one of {', '.join(FAIL_ON)}")
    stamp = generated_at or now()
    today = _dt.date.fromisoformat(stamp[:10])
    hosts = [host_entry(name, results[name], desired[name], cuda, today)
             for name in sorted(results)]
    return document(hosts, cuda, stamp, fail_on)


def document(hosts: list[dict[str, Any]], cuda: str | None, generated_at: str,
             fail_on: str = "critical", shards: list[dict[str, Any]] | None = None,
             ) -> dict[str, Any]:
    """The document around already built host entries (``build`` and ``gpuhost.merge``)."""
    return {"schema": SCHEMA, "generated_at": generated_at, "cuda": cuda,
            "summary": summarise(hosts, cuda, fail_on), "hosts": hosts, "baseline": None,
            "shards": shards}


def exit_code(document: Mapping[str, Any]) -> int:
    """0 ok, 2 drift, 4 unhealthy, 3 failed or unreachable hosts (the module docstring)."""
    return int(document["summary"]["exit_code"])
