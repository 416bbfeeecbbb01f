"""The audit document as Prometheus metrics: node_exporter's textfile format (docs/metrics.md).

Pure apart from ``write()``: the series come from the same document ``gpuhost.reports.audit.build``
makes from the one remote command per host (its ``observed``, ``drift``, ``health`` and the
kept ``facts``); nothing is read from any host again.

Names follow Prometheus' naming conventions (https://prometheus.io/docs/practices/naming/,
read 2026-11-27): the ``gpuhost_`` prefix, base units (seconds: an end of life is a Unix
timestamp, ``gpuhost_driver_branch_end_of_life_timestamp_seconds``; PromQL's ``time()`` gives
the days left), text in ``_info`` gauges of value 1, states as one series per state with
value 1 for the current one. Every series has a ``host`` label: the textfile collector runs
on the controller, so its ``instance`` is the controller, not the GPU host.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuhost.reports import audit
from gpuhost.runtime import cdi
from gpuhost.health import lifecycle, xid

# Every finding id of docs/health.md (a unit test holds the two equal): each host read gets
# a gpuhost_health_findings series per id, 0 when it does not have it. Xid and SXid
# findings (xid-<n>, sxid-<n>) are added as they occur.
FINDING_IDS = (
    "ecc-volatile-uncorrectable", "ecc-aggregate-uncorrectable", "ecc-sram-threshold-exceeded",
    "retired-pages-pending",
    "row-remap-pending", "row-remap-failure", "pcie-width-degraded", "pcie-gen-below-max",
    "throttle-thermal", "throttle-hw-slowdown", "throttle-power-brake", "throttle-power-cap",
    "fabric-not-completed", "fabric-probe-failed", "persistence-mode-off", "gpu-missing", "xid-log-unreadable",
    "nvlink-down", "nvlink-link-inactive", "nvlink-recovery-errors", "nvlink-crc-replay-errors",
    "next-boot-module-missing", "next-boot-module-unknown", "secure-boot-signer-not-enrolled",
    "secure-boot-cert-unreadable", "secure-boot-module-signer", "kernel-held-back",
    "kernel-newer-offered",
    "cdi-spec-stale", "cdi-refresh-failed", "cdi-spec-podman-unreadable",
    "docker-gpus-assumed",
    "lifecycle-eol", "lifecycle-eol-soon",
    "lifecycle-new-feature-branch", "lifecycle-supported", "lifecycle-unknown",
    "rdma-peermem-missing", "rdma-peermem-unusable", "rdma-acs-redirect", "rdma-nic-across-cpu",
    "slurm-gres-mismatch", "slurm-drained-by-gpuhost", "gpus-not-read",
)
NEXT_BOOT_BLOCKERS = ("next-boot-module-missing", "secure-boot-signer-not-enrolled")

# What an Xid asks for, in three words the alert rules key on (alerts/gpuhost.rules.yml):
# NVIDIA's immediate-action bucket (gpuhost/data/nvidia_xid_catalog.json) -> action.
BUCKET_ACTION = {
    "RESTART_BM": "reboot", "RESET_GPU": "reset", "WORKFLOW_XID_48": "reset",
    "WORKFLOW_NVLINK_ERR": "reset", "WORKFLOW_NVLINK5_ERR": "decode",
    "CHECK_MECHANICALS": "check_hardware", "UPDATE_SWFW": "update_software",
    "RESTART_VM": "restart_vm", "CHECK_UVM": "check_uvm", "CONTACT_SUPPORT": "contact_support",
    "RESTART_APP": "restart_app", "IGNORE": "none", "WORKFLOW_XID_13": "debug_app",
    "WORKFLOW_XID_31": "debug_app", "WORKFLOW_XID_45": "follow_other_xids",
}
# Xid 154 names its recovery action in the line (xid.recovery_action); the words and their
# actions are data (gpuhost/data/nvidia_xid_catalog.json xid_154_actions, with its source). A
# word gpuhost does not know, or a line it cannot read, is "unknown": never a reset.
XID_154_ACTION = {words: entry["action"] for words, entry in xid.XID_154_ACTIONS.items()}
# Catalog rows without a bucket: gpuhost's reading of their text (xid.NO_BUCKET)
NO_BUCKET_ACTION = {162: "none", 163: "check_thermal", 164: "replace", 165: "replace", 166: "other",
                    167: "reboot", 168: "other", 169: "reset", 170: "contact_support",
                    171: "reset", 172: "reset"}

# (name, type, help) of every family, in output order
FAMILIES = (
    ("gpuhost_audit_timestamp_seconds", "gauge",
     "When gpuhost audit read this host (Unix time of the audit document)."),
    ("gpuhost_host_status", "gauge",
     "The audit's drift status of the host: 1 for the current one of ok, drift, failed, "
     "unreachable."),
    ("gpuhost_host_read", "gauge", "1 when the audit read the host's state, 0 when it failed or "
                                   "was unreachable."),
    ("gpuhost_driver_info", "gauge",
     "The NVIDIA driver: loaded and installed version, branch, flavor, state (value 1)."),
    ("gpuhost_driver_reboot_required", "gauge",
     "1 when the loaded NVIDIA module is not the installed one (a reboot is pending)."),
    ("gpuhost_driver_branch_end_of_life_timestamp_seconds", "gauge",
     "When NVIDIA ends the driver branch's support (Unix time of the first day of its "
     "end-of-life month; 0 when NVIDIA lists it as end of life without a date)."),
    ("gpuhost_gpus", "gauge", "NVIDIA GPUs the host has (nvidia-smi, else the PCI bus)."),
    ("gpuhost_toolkit_info", "gauge",
     "The NVIDIA Container Toolkit: version, whether its packages agree (value 1)."),
    ("gpuhost_cdi_spec_status", "gauge",
     "The NVIDIA CDI spec against the host: 1 for the current one of fresh, stale, missing, "
     "unknown, unread."),
    ("gpuhost_drift", "gauge", "1 per drift item of the host (what differs from the inventory)."),
    ("gpuhost_drift_items", "gauge", "How many drift items the host has (0: as wanted)."),
    ("gpuhost_health_status", "gauge",
     "The host's health: 1 for the current one of healthy, warning, critical, not_read (its "
     "GPUs could not be read)."),
    ("gpuhost_health_findings", "gauge",
     "How many findings of this id the host has now (per GPU or host-wide); 0 when none."),
    ("gpuhost_health_finding", "gauge",
     "1 per health finding of the host: id, severity, GPU (PCI address, empty: host-wide)."),
    ("gpuhost_xid_events", "gauge",
     "Xid lines of this boot's kernel log by Xid code and GPU, with NVIDIA's catalogued "
     "immediate action (bucket) and what it asks for (action: reboot, reset, replace, ...); "
     "recovered=\"true\" once gpuhost recover reset the GPU this boot and no Xid came since."),
    ("gpuhost_next_boot_ready", "gauge",
     "1 when the NVIDIA module will load after the next boot as far as gpuhost can tell, 0 "
     "when next-boot-module-missing or secure-boot-signer-not-enrolled says it will not."),
)
CDI_STATUSES = ("fresh", "stale", "missing", "unknown", "unread")
_NAME = re.compile(r"[^A-Za-z0-9._-]")

Sample = tuple[str, dict[str, str], float]


def escape(value: Any) -> str:
    """A label value as the text format wants it (backslash, quote, newline escaped)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def timestamp(stamp: str) -> float:
    """'2026-11-22T10:00:00Z' -> Unix time."""
    when = _dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return when.replace(tzinfo=when.tzinfo or _dt.timezone.utc).timestamp()


def xid_action(number: int, events: list[Mapping[str, Any]]) -> tuple[str, str]:
    """(NVIDIA's bucket, action word) of an Xid code; ('', 'unknown') for one not catalogued."""
    entry = xid.CATALOG.get(number)
    if entry is None:
        return "", "unknown"
    if number == 154:
        said = xid.recovery_action(str(events[-1].get("text", ""))) or ""
        return "XID_154", XID_154_ACTION.get(said, "unknown")
    bucket = entry.get("immediate") or ""
    if not bucket:
        return "", NO_BUCKET_ACTION.get(number, "other")
    return bucket, BUCKET_ACTION.get(bucket, "other")


def _xid_samples(name: str, facts: Mapping[str, Any]) -> list[Sample]:
    events = ((facts.get("health") or {}).get("xid_events")) or []
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
    for event in events:
        if "xid" in event and isinstance(event.get("xid"), int):
            groups.setdefault((event["xid"], xid.slot(event.get("pci_bus_id")) or ""),
                              []).append(event)
    recovered = ((facts.get("health") or {}).get("recovered")) or {}
    samples = []
    for (number, gpu), group in sorted(groups.items()):
        bucket, action = xid_action(number, group)
        severity = (xid.CATALOG.get(number) or {}).get("severity", "warning")
        done = recovered.get(gpu)
        handled = bool(done) and not xid.new_since(events, gpu, done)
        samples.append(("gpuhost_xid_events", {"host": name, "xid": str(number), "gpu": gpu,
                                               "bucket": bucket, "action": action,
                                               "severity": severity,
                                               "recovered": "true" if handled else "false"},
                        float(len(group))))
    return samples


def _driver_samples(name: str, observed: Mapping[str, Any], today: _dt.date) -> list[Sample]:
    driver = observed["driver"]
    version = driver["loaded_version"] or driver["installed_version"]
    info = {"host": name, "loaded": driver["loaded_version"] or "",
            "installed": driver["installed_version"] or "",
            "branch": lifecycle.branch_of(version) or "", "flavor": driver["flavor"] or "",
            "state": driver["state"]}
    samples = [("gpuhost_driver_info", info, 1.0),
               ("gpuhost_driver_reboot_required", {"host": name},
                float(bool(driver["reboot_required"])))]
    if version:
        life = lifecycle.status(version, today)
        if life["state"] != "unknown":
            end = life["end_of_life"]
            when = timestamp(f"{end}-01T00:00:00Z") if end else 0.0
            samples.append(("gpuhost_driver_branch_end_of_life_timestamp_seconds",
                            {"host": name, "branch": life["branch"],
                             "designation": life["designation"] or ""}, when))
    return samples


def host_samples(host: Mapping[str, Any], when: float, today: _dt.date) -> list[Sample]:
    """The series of one host of an audit document."""
    name = host["name"]
    samples: list[Sample] = [("gpuhost_audit_timestamp_seconds", {"host": name}, when)]
    samples += [("gpuhost_host_status", {"host": name, "status": s}, float(host["status"] == s))
                for s in audit.STATUSES]
    observed = host["observed"]
    samples.append(("gpuhost_host_read", {"host": name}, float(observed is not None)))
    if observed is None:
        return samples
    samples += _driver_samples(name, observed, today)
    samples.append(("gpuhost_gpus", {"host": name}, float(observed["gpu_count"])))
    toolkit = observed["toolkit"]
    if toolkit["installed"]:
        samples.append(("gpuhost_toolkit_info", {"host": name, "version": toolkit["version"] or "",
                                                 "consistent": str(toolkit["consistent"]).lower()},
                        1.0))
    facts = host.get("facts") or {}
    if facts:
        judged = cdi.judge(facts)["status"]
        samples += [("gpuhost_cdi_spec_status", {"host": name, "status": s}, float(judged == s))
                    for s in CDI_STATUSES]
    items = sorted({item["item"] for item in host["drift"]})
    samples += [("gpuhost_drift", {"host": name, "item": item}, 1.0) for item in items]
    samples.append(("gpuhost_drift_items", {"host": name}, float(len(host["drift"]))))
    found = host["health"]["findings"]
    samples += [("gpuhost_health_status", {"host": name, "status": s},
                 float(host["health"]["status"] == s))
                for s in ("healthy", "warning", "critical", "not_read")]
    counts = {ident: 0 for ident in FINDING_IDS}
    for f in found:
        counts[f["id"]] = counts.get(f["id"], 0) + 1
    samples += [("gpuhost_health_findings", {"host": name, "id": ident}, float(count))
                for ident, count in counts.items()]
    seen = set()
    for f in found:
        labels = {"host": name, "id": f["id"], "severity": f["severity"], "gpu": f["gpu"] or ""}
        if (f["id"], labels["gpu"]) not in seen:
            seen.add((f["id"], labels["gpu"]))
            samples.append(("gpuhost_health_finding", labels, 1.0))
    samples += _xid_samples(name, facts)
    if "next_boot" in (facts.get("kernel") or {}):
        blocked = any(f["id"] in NEXT_BOOT_BLOCKERS for f in found)
        samples.append(("gpuhost_next_boot_ready", {"host": name}, float(not blocked)))
    return samples


def _value(number: float) -> str:
    return str(int(number)) if number == int(number) else repr(number)


def render(hosts: Iterable[Mapping[str, Any]], generated_at: str) -> str:
    """The text format of these hosts' series: each family once (HELP, TYPE, its samples)."""
    when = timestamp(generated_at)
    today = _dt.date.fromisoformat(generated_at[:10])
    by_family: dict[str, list[str]] = {name: [] for name, _, _ in FAMILIES}
    for host in hosts:
        for name, labels, value in host_samples(host, when, today):
            text = ",".join(f'{key}="{escape(val)}"' for key, val in labels.items())
            by_family[name].append(f"{name}{{{text}}} {_value(value)}")
    lines = []
    for name, kind, help_text in FAMILIES:
        if by_family[name]:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *by_family[name]]
    return "\n".join(lines) + "\n"


def file_name(host: str) -> str:
    """The per-host file of a --prom directory: gpuhost-<host>.prom (odd characters as _)."""
    return f"gpuhost-{_NAME.sub('_', host)}.prom"


def _atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file in the same directory, then rename: node_exporter
    never reads half a file. The temporary name does not end in .prom (the collector reads
    only *.prom files)."""
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temp, 0o644)  # node_exporter usually runs as another user
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write(document: Mapping[str, Any], path: Path) -> list[Path]:
    """``path`` a directory: one file per host of the document; otherwise one file for the
    fleet. Returns the files written."""
    if path.is_dir():
        written = []
        for host in document["hosts"]:
            target = path / file_name(host["name"])
            _atomic_write(target, render([host], document["generated_at"]))
            written.append(target)
        return written
    _atomic_write(path, render(document["hosts"], document["generated_at"]))
    return [path]
