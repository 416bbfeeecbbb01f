"""The decisions of ``gpuhost recover``: reset one GPU of a host without rebooting it (pure).

Which findings a GPU reset is for comes from what gpuhost already knows: Xids by NVIDIA's
catalogued immediate action (``gpuhost.reports.prom.xid_action``: the bucket RESET_GPU, the Xid 48
and NVLink workflows, Xid 154's "GPU Reset Required"), the other findings by the action
their advice names (``FINDING_ACTIONS``). ``assess`` turns one host's facts into a plan or
the reasons to refuse; ``verify`` judges the host after the reset. The operations are in
``roles/recover.py``; docs/recover.md says why each step is there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost import health
from gpuhost.reports import prom
from gpuhost.health import xid
from gpuhost.upgrade import CLIENT_SERVICES

# What a non-Xid finding asks for (docs/health.md's advice). A pending row remap takes
# effect "at the next GPU reset" (NVIDIA, GPU Memory Error Management, Error Recovery and
# Response Flags); pending page retirements only at the next driver load (NVIDIA, Dynamic
# Page Retirement: "needs a driver reload to retire the page"); a remap failure is an RMA.
FINDING_ACTIONS = {
    "row-remap-pending": "reset", "ecc-volatile-uncorrectable": "reset",
    "nvlink-down": "reset", "nvlink-link-inactive": "reset",
    "retired-pages-pending": "reboot", "gpu-missing": "reboot",
    "row-remap-failure": "replace", "fabric-not-completed": "restart_fabric_manager",
    # Xid catalog WORKFLOW_XID_48: SRAM threshold exceeded -> RUN_FIELDDIAG, RMA flow
    "ecc-sram-threshold-exceeded": "replace",
    "fabric-probe-failed": "restart_fabric_manager",
}
# Findings a successful reset makes go away; the others (an Xid line, the volatile ECC count
# "since the driver loaded") stay until the next boot or driver load and are checked for
# growth instead.
CLEARED_BY_RESET = ("row-remap-pending", "nvlink-down", "nvlink-link-inactive")
# Xid 94 (contained memory error): the catalog's bucket is RESTART_APP, its text says to
# reset the GPU when convenient (gpuhost/data/nvidia_xid_catalog.json, severity_note).
RESET_WHEN_CONVENIENT = (94,)
# Stopped around the reset: the GPU clients NVIDIA's own one-GPU reset flow stops (nvsm and
# DCGM, which NVIDIA's MIG user guide stops before a reset; NVIDIA/NVSentinel design
# 019-janitor-gpu-reset: device plugin, DCGM, its exporter, GFD) and the site's
# upgrade_stop_services (a native exporter or monitoring agent: ``services(config)``), but not
# - nvidia-persistenced: persistence mode is turned off for the one GPU instead
#   (`nvidia-smi -i N -pm 0`, NVIDIA/NVSentinel#1692), so the other GPUs keep it;
# - Fabric Manager: "On Ampere NVSwitch systems, Fabric Manager is required to facilitate
#   reset" (nvidia-smi(1), -r/--gpu-reset), and stopping it would take the other GPUs off
#   the NVLink fabric;
# - nvidia-imex: on SIGTERM "existing exports from the signaled node will be terminated on
#   the corresponding remote importing node" (NVIDIA IMEX guide, Signal handling): multi-node
#   jobs on other nodes would lose this node's memory;
# - display managers: they hold nvidia_drm for every GPU, not this one; a loaded nvidia_drm
#   blocks every reset instead ("In use by another client", NVIDIA/mig-parted#181), so
#   recover refuses while it is loaded and names it (``DRM_MODULE``).
KEEP_RUNNING = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-imex", "gdm", "gdm3",
                "lightdm", "sddm")
STOP_SERVICES = tuple(name for name in CLIENT_SERVICES if name not in KEEP_RUNNING)
DRM_MODULE = "nvidia_drm"
MARKER = "/var/lib/gpuhost/gpu-recover.json"  # the resume point while a recovery is under way
RESULT = "/var/lib/gpuhost/gpu-recover-reset.txt"  # what `nvidia-smi -r` said
# GPUs recovered this boot: {bus_id: {"boot_id", "xid_count", "xid_time", "ecc_volatile"}}
# (xid_time: the kernel's monotonic time of the GPU's newest Xid line then). The Xid lines
# and the volatile ECC count that asked for the reset stay until the next boot or driver
# load; a rerun must not reset the GPU again for them (only for new ones).
HANDLED = "/var/lib/gpuhost/gpu-recover-done.json"
ADVICE = {
    "reboot": "drain the host and reboot it",
    "replace": "drain the GPU, run NVIDIA's field diagnostics and follow NVIDIA's RMA process",
    "restart_fabric_manager": "restart nvidia-fabricmanager (its version must be the "
                              "driver's); reboot if the fabric does not complete",
    "recover_imex": xid.XID_154_TODO["recover_imex"],
    "unknown": "the driver or the kernel log asks for something gpuhost does not know (the "
               "finding gives its words): look it up in NVIDIA's Xid catalog or contact NVIDIA "
               "support; gpuhost does not reset a GPU for it",
}


def services(config: Mapping[str, Any] | None = None) -> list[str]:
    """What recover stops around a reset: ``STOP_SERVICES`` and the site's
    upgrade_stop_services (never one of ``KEEP_RUNNING``)."""
    extra = [name for name in (config or {}).get("upgrade_stop_services") or ()
             if name not in STOP_SERVICES and name not in KEEP_RUNNING]
    return [*STOP_SERVICES, *extra]


def finding_action(finding: Mapping[str, Any], state: Mapping[str, Any]) -> str:
    """What a finding asks for: reset, reboot, replace, ... (``none`` when nothing)."""
    ident = str(finding["id"])
    if ident.startswith("xid-") and ident[4:].isdigit():
        number = int(ident[4:])
        if number in RESET_WHEN_CONVENIENT:
            return "reset"
        events = [e for e in ((state.get("health") or {}).get("xid_events") or [])
                  if e.get("xid") == number and xid.slot(e.get("pci_bus_id")) == finding["gpu"]]
        return prom.xid_action(number, events or [{}])[1]
    if ident.startswith("sxid-"):
        return "fabric"
    return FINDING_ACTIONS.get(ident, "none")


def xid_count(state: Mapping[str, Any], slot: str | None) -> int:
    """How many Xid lines of this boot name the GPU at ``slot``."""
    return len(xid.on_gpu(_events(state), slot))


def _events(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return (state.get("health") or {}).get("xid_events") or []


# Xids a reset procedure itself can cause, or that say nothing about the GPU: Xid 45 when
# the GPU's work is killed ("Control-C, GPU resets, sigkill are all examples": NVIDIA's Xid
# catalog, WORKFLOW_XID_45), application faults, IGNORE. Not "new Xids" after a reset.
NOT_A_FAULT = ("none", "restart_app", "follow_other_xids", "debug_app", "check_thermal")


def new_faults(state: Mapping[str, Any], slot: str | None,
               before: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The GPU's Xid lines logged after ``before`` (``xid.mark``) whose catalogued action
    is more than ``NOT_A_FAULT``."""
    return [e for e in xid.new_since(_events(state), slot, before)
            if prom.xid_action(e["xid"], [e])[1] not in NOT_A_FAULT]


def smi_gpus(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [g for g in state.get("gpus") or [] if g.get("source") == "nvidia-smi"]


def _device_tokens(container: Mapping[str, Any]) -> list[str]:
    """The GPU names a container asked for: 'all', indexes, UUIDs, MIG names."""
    tokens: list[str] = []
    for request in container.get("device_requests") or []:
        caps = [c for group in request.get("Capabilities") or [] for c in group or []]
        if request.get("Driver") == "cdi":
            tokens += [str(d).split("=", 1)[-1] for d in request.get("DeviceIDs") or []
                       if str(d).startswith("nvidia.com/")]
        elif "gpu" in caps:
            ids = request.get("DeviceIDs") or []
            count = request.get("Count") or 0
            tokens += [str(d) for d in ids] if ids else (
                ["all"] if count < 0 else [str(i) for i in range(count)])
    env = dict(e.split("=", 1) for e in container.get("env") or [] if "=" in e)
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    if container.get("runtime") == "nvidia" and visible not in (None, "", "void", "none"):
        tokens += [t.strip() for t in visible.split(",") if t.strip()]
    return tokens


def container_holds(container: Mapping[str, Any], gpu: Mapping[str, Any]) -> bool:
    """Whether a running container uses this GPU (``all``, its index, its UUID, a MIG device
    of it by index; a MIG UUID cannot be placed from here and counts as holding it)."""
    for token in _device_tokens(container):
        if token in ("all", str(gpu["index"]), gpu.get("uuid")):
            return True
        if token.partition(":")[0] == str(gpu["index"]) and ":" in token:
            return True
        if token.startswith("MIG-"):
            return True
    return False


def _handled(finding: Mapping[str, Any], state: Mapping[str, Any],
             handled: Mapping[str, Any] | None) -> bool:
    """An Xid or volatile ECC finding an earlier recovery of this boot already reset for."""
    done = (handled or {}).get(finding["gpu"] or "")
    if not done or done.get("boot_id") != handled.get("boot_id_now"):
        return False
    if str(finding["id"]).startswith("xid-"):
        return not xid.new_since(_events(state), finding["gpu"], done)
    if finding["id"] == "ecc-volatile-uncorrectable":
        gpu = next((g for g in smi_gpus(state) if xid.slot(g.get("pci_bus_id")) == finding["gpu"]),
                   {})
        count = (gpu.get("health") or {}).get("ecc_volatile_uncorrectable") or 0
        return count <= done.get("ecc_volatile", 0)
    return False


def _gpu_findings(found: Iterable[Mapping[str, Any]], state: Mapping[str, Any], slot: str,
                  handled: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    return [{**f, "action": finding_action(f, state)} for f in found
            if f["gpu"] == slot and not _handled(f, state, handled)]


def handled_after(handled: Mapping[str, Any] | None, boot_id: str | None,
                  plan: Mapping[str, Any]) -> dict[str, Any]:
    """HANDLED's new content once ``plan``'s GPU passed: this boot's entries and this GPU."""
    kept = {k: v for k, v in (handled or {}).items()
            if isinstance(v, dict) and v.get("boot_id") == boot_id}
    before = plan["before"] or {}
    kept[plan["gpu"]["bus_id"]] = {"boot_id": boot_id, "xid_count": before.get("xid_count", 0),
                                   "xid_time": before.get("xid_time"),
                                   "ecc_volatile": before.get("ecc_volatile", 0)}
    return kept


def _blocker(finding: Mapping[str, Any]) -> str:
    """One finding a reset does not fix, with what to do (an unknown one with its words)."""
    if finding["action"] in ("unknown", "recover_imex"):  # the message has the driver's words
        return f"{finding['id']}: {finding['message']}"
    return f"{finding['id']}: {ADVICE[finding['action']]}"


def _describe(findings: list[dict[str, Any]]) -> str:
    return "; ".join(f"{f['id']} ({f['action']})" for f in findings)


def _pick_gpu(state: Mapping[str, Any], found: list[dict[str, Any]], wanted: int | None,
              handled: Mapping[str, Any] | None = None,
              ) -> tuple[dict[str, Any] | None, str | None]:
    gpus = smi_gpus(state)
    if wanted is not None:
        gpu = next((g for g in gpus if g["index"] == wanted), None)
        if gpu is None:
            listed = ", ".join(str(g["index"]) for g in gpus) or "none"
            return None, (f"nvidia-smi lists no GPU {wanted} (it lists {listed}); a GPU missing "
                          f"from nvidia-smi cannot be reset: {ADVICE['reboot']}")
        return gpu, None
    candidates = [g for g in gpus if any(
        f["action"] == "reset"
        for f in _gpu_findings(found, state, xid.slot(g["pci_bus_id"]), handled))]
    if len(candidates) > 1:
        return None, ("several GPUs have findings that ask for a reset ("
                      + ", ".join(str(g["index"]) for g in candidates)
                      + "): recover one at a time with --gpu N")
    return (candidates[0] if candidates else None), None


def assess(name: str, state: Mapping[str, Any], probe: Mapping[str, Any],
           containers: list[Mapping[str, Any]], gpu: int | None = None, force: bool = False,
           marker: Mapping[str, Any] | None = None, today: Any = None,
           handled: Mapping[str, Any] | None = None, drain: bool = False,
           stop: Iterable[str] = STOP_SERVICES) -> dict[str, Any]:
    """What ``gpuhost recover`` does with host ``name``.

    Returns ``{"host", "action": "reset" | "resume" | "none", "gpu", "problems": [...],
    "findings": [...], "before": {...}, "note"}``. ``problems`` refuse the recovery before
    anything changes (each names what to do instead); ``action`` none: nothing asks for a
    reset (``note`` says why). ``handled``: HANDLED's content plus ``boot_id_now``, the
    host's boot id (Xid and ECC findings an earlier recovery of this boot reset for).
    ``drain``: a drain hook runs first, so users of the GPU are checked after it instead.
    ``stop``: the services stopped around the reset when they run (``services(config)``).
    """
    plan: dict[str, Any] = {"host": name, "action": "none", "gpu": None, "problems": [],
                            "findings": [], "before": None, "note": ""}
    driver = state.get("driver") or {}
    if driver.get("state") != "loaded":
        plan["problems"].append(f"the NVIDIA driver does not answer (state {driver.get('state')}"
                                f"): a GPU reset needs it; {ADVICE['reboot']} or run gpuhost's "
                                "deploy")
        return plan
    if marker:
        wanted = marker.get("gpu", {}).get("index")
        if gpu is not None and gpu != wanted:
            plan["problems"].append(f"a recovery of GPU {wanted} is under way ({MARKER}): finish "
                                    f"it first (gpuhost recover --gpu {wanted})")
            return plan
        plan.update(action="resume", gpu=marker["gpu"], before=marker["before"],
                    findings=marker.get("findings") or [])
        return plan
    found = health.findings(state, today=today)
    target, problem = _pick_gpu(state, found, gpu, handled)
    if problem:
        plan["problems"].append(problem)
        return plan
    if target is None:
        blockers = [{**f, "action": finding_action(f, state)} for f in found
                    if f["severity"] == "critical" and not _handled(f, state, handled)]
        blockers = [f for f in blockers if f["action"] in ADVICE]
        if blockers:  # a host that needs something else must not read as "nothing to do"
            plan["problems"].append(
                "no finding of this host asks for a GPU reset, but it has critical findings a "
                "reset does not fix: " + "; ".join(
                    (f"GPU {f['gpu']}: " if f["gpu"] else "") + _blocker(f) for f in blockers))
            return plan
        plan["note"] = "no finding of this host asks for a GPU reset"
        return plan
    slot = xid.slot(target["pci_bus_id"])
    mine = _gpu_findings(found, state, slot, handled)
    resets = [f for f in mine if f["action"] == "reset"]
    plan["gpu"] = {"index": target["index"], "bus_id": slot, "uuid": target.get("uuid"),
                   "name": target.get("name")}
    blockers = [f for f in mine if f["action"] in ADVICE]
    if blockers:
        plan["problems"].append(
            f"GPU {target['index']} ({slot}) has findings a reset does not fix: "
            + "; ".join(_blocker(f) for f in blockers))
        return plan
    if not resets:
        others = f" (its findings: {_describe(mine)})" if mine else ""
        plan["note"] = f"no finding of GPU {target['index']} asks for a reset{others}"
        return plan
    busy = [f"pid {p.get('pid')} {p.get('name') or ''}".rstrip()
            for p in target.get("processes") or []]
    holding = [c for c in containers if container_holds(c, target)]
    busy += [f"container {c['name']}" for c in holding]
    if busy and not force and not drain:
        plan["problems"].append(
            f"GPU {target['index']} is in use ({'; '.join(busy)}): drain it (stop its jobs, or "
            "configure upgrade_drain_command), or pass --force to stop its containers and try "
            "anyway")
        return plan
    if DRM_MODULE in (probe.get("modules") or ()):
        plan["problems"].append(
            f"{DRM_MODULE} is loaded: the driver refuses every GPU reset while it is ('In use "
            "by another client', NVIDIA/mig-parted#181); stop the display stack that uses it "
            f"and unload it (modprobe -r {DRM_MODULE}), or {ADVICE['reboot']}")
        return plan
    running = [s for s in stop if s not in KEEP_RUNNING
               and (probe.get("services") or {}).get(s) == "running"]
    dcgm = any(s in running for s in ("nvidia-dcgm", "dcgm"))
    health_now = target.get("health") or {}
    plan.update(action="reset", findings=[{k: f[k] for k in ("id", "gpu", "action", "message")}
                                          for f in resets])
    plan["before"] = {
        "persistence": target.get("persistence_mode"),
        "services": running,
        "hostengine": bool(probe.get("hostengine")) and not dcgm,
        "containers": [c["id"] for c in holding] if force else [],
        "mig": target.get("mig_current"),
        **xid.mark(_events(state), slot),
        # an NVSwitch fabric GPU re-registers after the reset (gpuStatePostLoad starts the
        # fabric probe again): recover waits for it before judging (T4-09)
        "fabric": str(health_now.get("fabric_state") or "n/a").strip().lower() != "n/a",
        "ecc_volatile": health_now.get("ecc_volatile_uncorrectable") or 0,
    }
    return plan


def parse_result(text: str | None) -> dict[str, Any] | None:
    """RESULT's content (``run=ID``, ``rc=N``, then nvidia-smi's words) as a dict."""
    if not text:
        return None
    head, output = {}, []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("run", "rc") and not output:
            head[key] = value.strip()
        else:
            output.append(line)
    try:
        rc = int(head.get("rc", ""))
    except ValueError:
        return None
    return {"run": head.get("run"), "rc": rc, "output": "\n".join(output).strip()}


def verify(plan: Mapping[str, Any], result: Mapping[str, Any] | None, state: Mapping[str, Any],
           rebooted: bool = False, today: Any = None) -> tuple[bool, str]:
    """``(passed, one line)`` after the reset (or the reboot that replaced it): the reset
    succeeded, the GPU is listed again, what it was for cleared, nothing new on it."""
    gpu = plan["gpu"]
    label = f"GPU {gpu['index']} ({gpu['bus_id']})"
    if not rebooted:
        if result is None:
            return False, (f"no result of the reset of {label} on the host ({RESULT}): run the "
                           "same gpuhost recover command again to resume")
        if result["rc"] != 0:
            said = " ".join(result["output"].split()) or "no output"
            if "In use by another client" in result["output"]:
                return False, (f"nvidia-smi -r -i {gpu['index']} failed (exit {result['rc']}: "
                               f"{said}); the GPU's clients and persistence mode are as before. "
                               "A client still holds it ('holders': the processes with an "
                               "NVIDIA device open; a loaded nvidia_drm holds every GPU): stop "
                               "it and run the same gpuhost recover command again, or "
                               f"{ADVICE['reboot']}")
            return False, (f"nvidia-smi -r -i {gpu['index']} failed (exit {result['rc']}: {said}); "
                           f"the GPU's clients and persistence mode are as before. The GPU "
                           f"still needs a reset: {ADVICE['reboot']} (or rerun with "
                           "--reboot-fallback where reboot_policy is when_needed)")
    listed = [g for g in smi_gpus(state) if xid.slot(g.get("pci_bus_id")) == gpu["bus_id"]]
    if not listed:
        return False, f"{label} is not listed by nvidia-smi after the reset: {ADVICE['reboot']}"
    found = [f for f in health.findings(state, today=today) if f["gpu"] == gpu["bus_id"]]
    left = [f for f in found if f["id"] in CLEARED_BY_RESET
            and f["id"] in {p["id"] for p in plan["findings"]}]
    problems = [f"{f['id']} is still there: {f['message']}" for f in left]
    before = plan["before"] or {}
    new = new_faults(state, gpu["bus_id"], before) if not rebooted else []
    if new:
        problems.append("new Xid lines for this GPU after the reset ("
                        + ", ".join(sorted({f"Xid {e['xid']}" for e in new}))
                        + "; gpuhost audit lists them)")
    volatile = (listed[0].get("health") or {}).get("ecc_volatile_uncorrectable") or 0
    if not rebooted and volatile > before.get("ecc_volatile", 0):
        problems.append(f"uncorrectable ECC errors grew to {volatile} after the reset")
    worse = [f for f in found if f["severity"] == "critical" and f["id"] not in CLEARED_BY_RESET
             and finding_action(f, state) != "reset"]
    problems += [f"{f['id']}: {f['message']}" for f in worse]
    if problems:
        return False, f"{label} is not healthy after the {'reboot' if rebooted else 'reset'}: " \
                      + "; ".join(problems)
    cleared = ", ".join(sorted({f["id"] for f in plan["findings"]}))
    return True, (f"{label} recovered by a {'reboot' if rebooted else 'GPU reset'}: {cleared} "
                  "handled, no new finding on it")
