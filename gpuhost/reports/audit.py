"""The fleet audit as data: drift against the desired settings, health findings, CUDA
answers, the document.

Pure (no pyinfra; the only I/O is reading a module signing certificate named in the
inventory). ``deploys/audit.py`` gathers one ``gpuhost.facts.host.GpuHostState`` per host and hands
{host name: state or ``HostError``} plus each host's inventory data to ``build()``;
``gpuhost.reports.text`` renders the resulting document (schema ``gpuhost.audit/2``,
docs/audit-schema.md) as a terminal table, JSON or HTML. Drift (is the stack as wanted) and
health (``gpuhost.health``: is the host sound, will it survive its next boot, is its driver
branch supported) are kept apart per host.

Exit codes of an audit run (``exit_code()``): 0 every host matches and is healthy, 2 at
least one host drifts, 4 at least one host is unhealthy (a finding at or above the
``fail_on`` severity, critical by default, or GPUs that could not be read without a driver
drift that says why: ``gpuhost.health.unhealthy``), 3 at least one host failed or was
unreachable. 3 wins over 4, 4 over 2. 1 is left to pyinfra and to usage errors (invalid
``--data`` or settings), which stop the run before any host.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost import converged, distro, health, policy, settings
from gpuhost.reports.groups import drift_groups
from gpuhost.reports.hostlist import natural_key

SCHEMA = "gpuhost.audit/2"
SCHEMAS_READ = ("gpuhost.audit/1", SCHEMA)  # what --baseline accepts
EXIT_OK, EXIT_USAGE, EXIT_DRIFT, EXIT_UNREACHABLE, EXIT_UNHEALTHY = 0, 1, 2, 3, 4
EXIT_MEANING = {EXIT_OK: "all hosts as wanted, none unhealthy", EXIT_DRIFT: "drift",
                EXIT_UNHEALTHY: "unhealthy hosts or GPUs not read",
                EXIT_UNREACHABLE: "hosts failed or unreachable"}
FAIL_ON = ("critical", "warning", "never")  # which health findings make the exit status 4

# The settings the audit compares (the signing certificate: for the Secure Boot finding);
# every other inventory key is ignored here.
AUDITED = ("nvidia_driver_version", "container_toolkit_version", "nvidia_default_runtime",
           "mig_mode", "mig_layout", "nvidia_module_signing_cert", "container_runtime_mode",
           "mig_config", "mig_config_file", "containerd_nvidia_runtime",
           "containerd_nvidia_default_runtime", "nvidia_fabric", "nvidia_fabricmanager",
           "nvidia_gpudirect_rdma", "kubernetes_profile")
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
        from gpuhost.mig import config as mig_config

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


# --- drift: gpuhost.converged judges; the audit shows every reason -----------------------

def host_drift(state: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every difference between a host's GpuHostState and its desired settings
    (``gpuhost.converged.judge``); each item is ``{"item", "have", "want", "message"}``. An
    empty list means the host matches."""
    return list(converged.judge(state, desired).reasons)


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
               "supported": os_info["supported"],
               "release": distro.release_name(os_info["id"], os_info["version_id"],
                                              os_info["pretty_name"])},
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
                               "drift_groups": drift_groups({"hosts": hosts}),
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
    """The audit document (schema ``gpuhost.audit/2``) of a fleet; hosts in natural order
    (gpu-2 before gpu-10, ``gpuhost.reports.hostlist``).

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
             for name in sorted(results, key=natural_key)]
    return document(hosts, cuda, stamp, fail_on)


def document(hosts: list[dict[str, Any]], cuda: str | None, generated_at: str,
             fail_on: str = "critical", shards: list[dict[str, Any]] | None = None,
             ) -> dict[str, Any]:
    """The document around already built host entries (``build`` and ``gpuhost.reports.merge``)."""
    return {"schema": SCHEMA, "generated_at": generated_at, "cuda": cuda,
            "summary": summarise(hosts, cuda, fail_on), "hosts": hosts, "baseline": None,
            "shards": shards}


def exit_code(document: Mapping[str, Any]) -> int:
    """0 ok, 2 drift, 4 unhealthy, 3 failed or unreachable hosts (the module docstring)."""
    return int(document["summary"]["exit_code"])
