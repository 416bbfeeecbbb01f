"""What changed since a previous audit (``gpuhost audit ... --baseline PREVIOUS.json``).

Pure: ``compare(previous, current)`` takes two audit documents (the previous one
``gpuhost.audit/1`` or ``/2``, the current one ``/2``) and returns the ``baseline`` block of
the current document (docs/audit-schema.md): hosts new and gone, and per host that changed
its status, drift items and health findings that appeared or went away, and the kernel
log's Xid/SXid events that are new. A ``gpuhost.audit/1`` baseline has no health, so health
and Xids are not compared against it (``health_compared`` false).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from gpuhost import health
from gpuhost.reports.audit import SCHEMAS_READ, AuditError
from gpuhost.reports.hostlist import natural_sorted


def check(previous: Any, source: str = "the baseline") -> Mapping[str, Any]:
    """``previous`` if it is an audit document gpuhost can compare with, else AuditError."""
    if not isinstance(previous, Mapping) or not isinstance(previous.get("hosts"), list):
        raise AuditError(f"{source} is not a gpuhost audit document (no hosts list)")
    if previous.get("schema") not in SCHEMAS_READ:
        raise AuditError(f"{source}: schema {previous.get('schema')!r}; --baseline reads "
                         f"{' and '.join(SCHEMAS_READ)}")
    return previous


def _drift_key(item: Mapping[str, Any]) -> tuple:
    return (item["item"], str(item.get("have")), str(item.get("want")))


def xid_events(host: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Xid/SXid events a host entry's facts carry ([] without health facts)."""
    facts = host.get("facts") or {}
    return list(((facts.get("health") or {}).get("xid_events")) or [])


def _event_key(event: Mapping[str, Any]) -> tuple:
    kind = "sxid" if "sxid" in event else "xid"
    return (kind, event.get(kind), event.get("pci_bus_id"), event.get("text"))


def _new_events(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of ``after`` beyond those ``before`` had (counted: the same line logged again
    is new)."""
    left = Counter(_event_key(e) for e in before)
    new = []
    for event in after:
        k = _event_key(event)
        if left[k]:
            left[k] -= 1
        else:
            new.append(event)
    return new


def host_changes(was: Mapping[str, Any], now: Mapping[str, Any], health_compared: bool,
                 ) -> dict[str, Any] | None:
    """What changed on one host between two audits; None when nothing did."""
    was_drift = {_drift_key(i): i for i in was.get("drift") or []}
    now_drift = {_drift_key(i): i for i in now.get("drift") or []}
    change: dict[str, Any] = {
        "name": now["name"],
        "status": ({"was": was["status"], "now": now["status"]}
                   if was["status"] != now["status"] else None),
        "health_status": None,
        "drift_new": [i for k, i in now_drift.items() if k not in was_drift],
        "drift_resolved": [i for k, i in was_drift.items() if k not in now_drift],
        "findings_new": [], "findings_resolved": [], "xids_new": []}
    was_health, now_health = was.get("health") or {}, now["health"]
    if health_compared and was_health.get("status") and now_health["status"]:
        if was_health["status"] != now_health["status"]:
            change["health_status"] = {"was": was_health["status"], "now": now_health["status"]}
        before, after = was_health.get("findings") or [], now_health["findings"]
        change["findings_new"] = health.new_findings(before, after)
        resolved = health.new_findings(after, before)
        if now_health["status"] == "not_read":  # a GPU not read now: its findings are unknown
            resolved = [f for f in resolved if not f["gpu"]]
        change["findings_resolved"] = resolved
        change["xids_new"] = _new_events(xid_events(was), xid_events(now))
    if any(value for key, value in change.items() if key != "name"):
        return change
    return None


def compare(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The ``baseline`` block of ``current`` against ``previous`` (see the module docstring)."""
    previous = check(previous)
    health_compared = previous["schema"] != "gpuhost.audit/1"
    was = {h["name"]: h for h in previous["hosts"]}
    now = {h["name"]: h for h in current["hosts"]}
    hosts = [c for name in natural_sorted(now) if name in was
             for c in [host_changes(was[name], now[name], health_compared)] if c]
    return {"schema": previous["schema"], "generated_at": previous.get("generated_at"),
            "health_compared": health_compared,
            "hosts_new": natural_sorted(set(now) - set(was)),
            "hosts_gone": natural_sorted(set(was) - set(now)),
            "hosts": hosts}
