"""Identical answers across the hosts of an audit document as one entry each: health
findings, drift (and the errors of hosts that could not be read), CUDA answers. A fleet of
250 hosts with one shared problem reads as one line, with how many hosts and which
(``hosts_text``: the names, or for many hosts their hostlist, ``gpu-[1-250]``). Pure; the
terminal table (``gpuhost.reports.text``) and the HTML page (``gpuhost.reports.html``) render
them, and the JSON document keeps the drift groups (``summary.drift_groups``, written by
``gpuhost.reports.audit``, which imports this module)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost.health import NOT_READ
from gpuhost.reports.hostlist import compact

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
HOSTS_SHOWN = 6  # hosts a group lists by name (with their GPUs); more: their hostlist
STATUS_ORDER = {"failed": 0, "unreachable": 1, "drift": 2}


def _host_count(group: Mapping[str, Any]) -> int:
    return len({host if isinstance(host, str) else host[0] for host in group["hosts"]})


def finding_groups(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Identical findings across hosts as one group each: ``{"severity", "id", "message",
    "hosts": [(host, GPU or None), ...]}``, criticals first, then the most hosts. Findings
    are identical when id, severity and message are; info findings group by id alone (their
    message is an example), except ``gpus-not-read``, whose message says why and what to
    do."""
    groups: dict[tuple, dict[str, Any]] = {}
    for h in document["hosts"]:
        for f in h["health"]["findings"]:
            example = f["severity"] == "info" and f["id"] != NOT_READ
            key = (f["severity"], f["id"], None if example else f["message"])
            group = groups.setdefault(key, {"severity": f["severity"], "id": f["id"],
                                            "message": f["message"], "hosts": []})
            group["hosts"].append((h["name"], f["gpu"]))
    return sorted(groups.values(), key=lambda g: (SEVERITY_ORDER[g["severity"]],
                                                  -_host_count(g), g["id"], g["message"]))


def drift_groups(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Identical drift items across hosts as one group each, and the hosts that could not
    be read by their identical error: ``{"status": "drift" | "failed" | "unreachable",
    "item": drift item or None, "message", "count", "hosts": [host, ...], "hostlist"}``
    (``hostlist``: every host in hostlist notation, ``gpu-[1-250]``); failed and unreachable
    first, then the most hosts. Drift items are identical when item and message are (the
    message names what is there and what is wanted). Only ``document["hosts"]`` is read, in
    its order (natural order in a document)."""
    groups: dict[tuple, dict[str, Any]] = {}
    for h in document["hosts"]:
        entries = [("drift", i["item"], i["message"]) for i in h["drift"]]
        if h["status"] in ("failed", "unreachable"):
            entries.append((h["status"], None, h["error"] or h["status"]))
        for status, item, message in entries:
            group = groups.setdefault((status, item, message), {
                "status": status, "item": item, "message": message, "hosts": []})
            if not group["hosts"] or group["hosts"][-1] != h["name"]:  # an item twice
                group["hosts"].append(h["name"])
    for group in groups.values():
        group.update(count=len(group["hosts"]), hostlist=compact(group["hosts"]))
    return sorted(groups.values(), key=lambda g: (STATUS_ORDER[g["status"]], -g["count"],
                                                  g["item"] or "", g["message"]))


def cuda_groups(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Identical CUDA answers as one group each: ``{"verdict", "message", "hosts"}`` in the
    order of ``audit.VERDICTS``, then the most hosts; hosts without an answer (failed,
    unreachable) last, verdict "not audited" and no message. Every native answer is one
    group (its message only names the host's driver). [] without ``--cuda``."""
    if not (document["summary"].get("cuda") or document.get("cuda")):
        return []
    from gpuhost.reports import audit  # audit imports this module
    groups: dict[tuple, dict[str, Any]] = {}
    for h in document["hosts"]:
        answer = h["cuda"] or {"verdict": "not audited", "message": ""}
        key = (answer["verdict"], "" if answer["verdict"] == "native" else answer["message"])
        groups.setdefault(key, {"verdict": key[0], "message": key[1], "hosts": []})
        groups[key]["hosts"].append(h["name"])
    order = {verdict: index for index, verdict in enumerate(audit.VERDICTS)}
    return sorted(groups.values(), key=lambda g: (order.get(g["verdict"], len(order)),
                                                  -len(g["hosts"]), g["message"]))


def hosts_text(hosts: list[tuple[str, str | None]] | list[str],
               limit: int | None = HOSTS_SHOWN) -> str:
    """The hosts of a group: up to ``limit`` by name, each once with its GPUs ('a, b (GPU
    0000:07:00.0)'); more as their hostlist ('gpu-[1-250] (8 GPUs)', at most ``limit``
    ranges, then '+N more'). ``limit`` None: every host by name."""
    by_host: dict[str, list[str]] = {}
    for entry in hosts:
        name, gpu = (entry, None) if isinstance(entry, str) else entry
        by_host.setdefault(name, [])
        if gpu:
            by_host[name].append(gpu)
    if limit is None or len(by_host) <= limit:
        return ", ".join(f"{n} (GPU {', '.join(g)})" if g else n for n, g in by_host.items())
    gpus = sum(len(g) for g in by_host.values())
    return compact(by_host, limit) + (f" ({gpus} GPU{'s' if gpus != 1 else ''})" if gpus else "")
