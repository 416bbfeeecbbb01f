"""Is this GPU host healthy, will it survive its next boot, is its driver branch supported?

Pure: ``findings(state)`` reads one host's ``gpuhost.facts.host.GpuHostState`` value (the per-GPU
``health`` dicts, ``state["health"]``, the kernel fact, the driver) and returns findings::

    {"id": "row-remap-failure", "severity": "critical" | "warning" | "info",
     "gpu": "0000:07:00.0" | None, "message": "one line: what is wrong and what to do"}

sorted critical first. Every id, its severity and what it reads are in docs/health.md.
A state without the health fields (read by a gpuhost before them, or a GPU seen only on the
PCI bus) gives no finding for what it lacks; a host whose GPUs nvidia-smi could not read at
all gets ``gpus-not-read`` and the status ``not_read``, never ``healthy`` (``gpus_read``,
``status``). Also used by the upgrade's health gate:
``new_findings(before, after)`` is what appeared between two reads of a host.

The findings live by subject: ``gpuhost.health.gpu`` (per GPU), ``gpuhost.health.host``
(host-wide: missing or unread GPUs, Xids, CDI, RDMA, next boot), ``gpuhost.health.finding`` (a
finding's shape and order); this module joins them and judges hosts and fleets.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost import slurm
from gpuhost.health import lifecycle
from gpuhost.health.finding import HEALTH_STATUSES, SEVERITIES, sort_key
from gpuhost.health.gpu import THROTTLE, THROTTLE_ADVICE, gpu_findings
from gpuhost.health.host import (NOT_READ, cdi_findings, gpus_not_read, gpus_read, host_findings,
                                  kernel_offered_findings, next_boot_findings, rdma_findings)

__all__ = ["HEALTH_STATUSES", "NOT_READ", "SEVERITIES", "THROTTLE", "THROTTLE_ADVICE",
           "block", "cdi_findings", "findings", "fleet_summary", "gpu_findings", "gpus_not_read",
           "gpus_read", "host_findings", "kernel_offered_findings", "key", "new_findings",
           "next_boot_findings", "rdma_findings", "sort_key", "status", "unhealthy"]


def findings(state: Mapping[str, Any], *, today: _dt.date | None = None,
             module_signing_cert: str | None = None) -> list[dict[str, Any]]:
    """Every finding of one host, critical first (docs/health.md).

    + state: the host's ``gpuhost.facts.host.GpuHostState`` value
    + today: the date the driver branch lifecycle is judged on (default: today, UTC)
    + module_signing_cert: the inventory's ``nvidia_module_signing_cert`` (a path on this
      controller), to tell whether its key is enrolled on a Secure Boot host
    """
    today = today or _dt.datetime.now(_dt.timezone.utc).date()
    driver = state.get("driver") or {}
    found = gpu_findings(state) + host_findings(state) + gpus_not_read(state)
    found += cdi_findings(state)
    found += rdma_findings(state)
    found += next_boot_findings(state, module_signing_cert)
    found += kernel_offered_findings(state)
    found += slurm.findings(state)  # issue 26 item 4 (gpuhost/slurm.py)
    branch = lifecycle.finding(driver.get("loaded_version") or driver.get("installed_version"),
                               today)
    if branch:
        found.append(branch)
    return sorted(found, key=sort_key)


def status(found: Iterable[Mapping[str, Any]]) -> str:
    """'critical', 'not_read', 'warning' or 'healthy' (info findings do not count).

    'not_read': no critical finding, and the host's GPUs could not be read (the finding
    ``gpus-not-read``, ``gpus_read``): whatever their health is, it is unknown, so it ranks
    above a known warning and never reads as healthy."""
    found = list(found)
    severities = {f["severity"] for f in found}
    if "critical" in severities:
        return "critical"
    if any(f["id"] == NOT_READ for f in found):
        return "not_read"
    return "warning" if "warning" in severities else "healthy"


def key(finding: Mapping[str, Any]) -> tuple[str, str]:
    """What makes a finding the same one in two audits: its id and its GPU."""
    return (finding["id"], finding["gpu"] or "")


def new_findings(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
                 severities: Iterable[str] = SEVERITIES) -> list[dict[str, Any]]:
    """Findings of ``after`` (of the given severities) that ``before`` did not have: e.g. the
    upgrade's gate, ``new_findings(findings(old), findings(new), ("critical",))``."""
    seen = {key(f) for f in before}
    wanted = set(severities)
    return [dict(f) for f in after if f["severity"] in wanted and key(f) not in seen]


# --- the audit document's health blocks (gpuhost.reports.audit) --------------------------------------

def block(found: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A host's ``health`` block: its findings, their counts and its status (None: the host
    produced no state, nothing was judged)."""
    if found is None:
        return {"status": None, "counts": {s: 0 for s in SEVERITIES}, "findings": []}
    counts = Counter(f["severity"] for f in found)
    return {"status": status(found),
            "counts": {s: counts.get(s, 0) for s in SEVERITIES}, "findings": found}


# Drift items that say why a host's GPUs could not be read, and what to do: the wanted
# driver is not installed, another one is, or it is installed but not loaded (converge,
# reboot). Such a host fails the audit as drift (2); without one, GPUs not read count as
# unhealthy (4).
NOT_READ_EXPLAINED_BY = ("driver", "reboot_pending")


def unhealthy(host: Mapping[str, Any], fail_on: str) -> bool:
    """Whether an audit document's ``host`` counts as unhealthy for the exit status
    (``fail_on``: critical, warning or never): a finding at or above ``fail_on``, or its
    GPUs could not be read (``not_read``) and no driver drift item says why (the driver is
    as wanted, or none is wanted, and still nvidia-smi read no GPU)."""
    block = host["health"]
    counts = block["counts"]
    if fail_on == "never" or block["status"] is None:
        return False
    if counts["critical"] or (fail_on == "warning" and counts["warning"]):
        return True
    return block["status"] == "not_read" and not any(
        item["item"] in NOT_READ_EXPLAINED_BY for item in host.get("drift") or ())


def fleet_summary(hosts: list[Mapping[str, Any]], fail_on: str) -> dict[str, Any]:
    """Hosts per health status (``not_read``: failed or unreachable, or its GPUs could not be
    read), how many count as unhealthy (``unhealthy``) and, per finding id, on how many
    hosts it was found."""
    statuses = Counter(h["health"]["status"] or "not_read" for h in hosts)
    ids = Counter(i for h in hosts for i in {f["id"] for f in h["health"]["findings"]})
    severities = Counter(f["severity"] for h in hosts for f in h["health"]["findings"])
    return {**{s: statuses.get(s, 0) for s in HEALTH_STATUSES},
            "fail_on": fail_on, "unhealthy": sum(unhealthy(h, fail_on) for h in hosts),
            "findings": {s: severities.get(s, 0) for s in SEVERITIES},
            "finding_ids": dict(sorted(ids.items()))}
