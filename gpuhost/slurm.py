"""Slurm around gpuhost's disruptive steps, and Slurm's GPU count against the host's (issue 26).

Pure: reads the host state's ``slurm`` value (``facts.assemble_slurm``; None without
slurmd) and decides. docs/slurm.md.

- ``on(setting, slurm)``: does this host take part (the ``slurm`` setting: auto, true, false)
- ``drain_step`` / ``resume_step``: drain with gpuhost's reason, keep a drain someone else
  made (and never resume it), resume only a drain of gpuhost's own
- ``findings(state)``: ``slurm-gres-mismatch`` (Slurm's GPU count is not the host's) and
  ``slurm-drained-by-gpuhost`` (a drain gpuhost left behind: its run stopped before the end)

Slurm's own words (scontrol(1), slurm.conf(5), gres.conf(5), 22.05): ``scontrol update
NodeName=N State=DRAIN Reason=...`` stops new jobs while running ones finish (the node is
DRAINING, ``ALLOCATED+DRAIN``/``MIXED+DRAIN``, then DRAINED, ``IDLE+DRAIN``); ``State=RESUME``
returns it to service; a reason is required to drain. With MIG and ``AutoDetect=nvml`` every
MIG device is one ``gpu`` gres (Slurm's "Generic Resource (GRES) Scheduling" guide, MIG
Support).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREFIX = "gpuhost:"  # every reason gpuhost sets starts with it; the only drains it resumes
CHOICES = ("auto", True, False)
REASON_MAX = 200     # keep reasons readable in sinfo -R / scontrol show node


def check_setting(key: str, value: Any) -> list[str]:
    if value not in CHOICES or value in (0, 1) and not isinstance(value, bool):
        return [f"{value!r} is not allowed (want auto, true or false: true drains and resumes "
                "the host's Slurm node around upgrades and recoveries, auto does when slurmd "
                "is installed and enabled)"]
    return []


def on(setting: Any, slurm: Mapping[str, Any] | None) -> bool:
    """Whether gpuhost drains and resumes this host's Slurm node."""
    if setting is True or setting is False:
        return setting
    return bool(slurm) and (slurm.get("enabled") == "enabled" or slurm.get("active") == "active")


def node_name(slurm: Mapping[str, Any] | None) -> str | None:
    if not slurm:
        return None
    return (slurm.get("node") or {}).get("name") or slurm.get("node_name")


def reason(what: str) -> str:
    """gpuhost's drain reason: ``gpuhost: driver upgrade to 580.95.05``."""
    return _short(f"{PREFIX} {what}")


def failed_reason(what: str, why: str) -> str:
    """The reason a failed health gate leaves: what was done, that it failed, what to do."""
    return _short(f"{PREFIX} {what} failed the health gate, left drained: {why}")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3] + "..."


def ours(node: Mapping[str, Any] | None) -> bool:
    return bool(node) and (node.get("reason") or "").startswith(PREFIX)


def is_drained(node: Mapping[str, Any] | None) -> bool:
    return bool(node) and (node.get("state") == "DOWN" or any(
        flag in ("DRAIN", "DRAINING", "DRAINED") for flag in node.get("flags") or ()))


def _unreadable(slurm: Mapping[str, Any] | None) -> str | None:
    if not slurm:
        return ("slurmd is not installed, but the slurm setting is true: install and "
                "configure Slurm, or set slurm: auto")
    if not slurm.get("node"):
        return (f"cannot read Slurm's record of node {node_name(slurm) or '?'} "
                f"({slurm.get('node_error') or 'no answer'}): start slurmctld or fix the "
                "node's name in slurm.conf, or set slurm: false to go on without a drain")
    return None


def drain_step(slurm: Mapping[str, Any] | None) -> tuple[str, str]:
    """``("drain", why)``, ``("keep", why)`` (drained by someone else: left as it is, only
    its jobs are waited for) or ``("error", what to do)``."""
    problem = _unreadable(slurm)
    if problem:
        return "error", problem
    node = slurm["node"]
    if is_drained(node) and not ours(node):
        return "keep", (f"Slurm node {node['name']} was already {node['state'].lower()}"
                        f"{'+' + '+'.join(node['flags']).lower() if node['flags'] else ''} "
                        f"by someone else (reason: {node.get('reason') or 'none'}): "
                        "gpuhost keeps that drain and will not resume the node")
    return "drain", f"drain Slurm node {node['name']}"


def resume_step(slurm: Mapping[str, Any] | None) -> tuple[str, str]:
    """``("resume", why)`` for a drain of gpuhost's own, else ``("keep", why)``/
    ``("none", why)``; ``("error", ...)`` when slurmctld cannot be read."""
    problem = _unreadable(slurm)
    if problem:
        return "error", problem
    node = slurm["node"]
    if not is_drained(node):
        return "none", f"Slurm node {node['name']} is not drained"
    if not ours(node):
        return "keep", (f"Slurm node {node['name']} stays drained: someone else drained it "
                        f"(reason: {node.get('reason') or 'none'})")
    return "resume", f"resume Slurm node {node['name']} (was: {node['reason']})"


def host_gpus(state: Mapping[str, Any]) -> int | None:
    """The GPUs Slurm should count: one per GPU, one per MIG device on a MIG-enabled GPU;
    None when nvidia-smi gave no answer (the driver's own finding says why)."""
    health = state.get("health") or {}
    if not isinstance(health, Mapping) or health.get("gpus_missing") is None:
        return None
    mig = {g["index"]: g for g in (state.get("mig") or {}).get("gpus") or []}
    total = 0
    for gpu in state.get("gpus") or []:
        if gpu.get("source") not in (None, "nvidia-smi"):
            continue
        entry = mig.get(gpu.get("index")) or {}
        total += len(entry.get("devices") or []) if entry.get("mode_current") == "enabled" else 1
    return total


def findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``slurm-gres-mismatch`` and ``slurm-drained-by-gpuhost`` (docs/health.md), as
    ``gpuhost.health`` finding dicts (gpu None: they concern the host)."""
    slurm = state.get("slurm")
    if not isinstance(slurm, Mapping):
        return []
    found = []
    name = node_name(slurm) or "?"
    have = host_gpus(state)
    gres, node = slurm.get("gres") or {}, slurm.get("node")
    if have is not None:
        wrong = []
        if gres.get("gpus") is None and gres.get("error"):
            wrong.append(f"slurmd -G fails ({gres['error']})")
        elif gres.get("gpus") is not None and gres["gpus"] != have:
            wrong.append(f"gres.conf gives {gres['gpus']} (slurmd -G)")
        if node and node.get("gpus") is not None and node["gpus"] != have:
            wrong.append(f"slurm.conf configures {node['gpus']} (Gres={node.get('gres')})")
        if wrong:
            found.append(_finding("slurm-gres-mismatch", "warning", (
                f"Slurm's GPU count for node {name} is not the host's {have} GPU(s) or MIG "
                f"devices: {'; '.join(wrong)}: jobs get GPUs that do not exist or never get "
                "the ones that do; correct Gres= in slurm.conf and gres.conf (or use "
                "AutoDetect=nvml), then `scontrol reconfigure` and restart slurmd")))
    if node and is_drained(node) and ours(node):
        found.append(_finding("slurm-drained-by-gpuhost", "warning", (
            f"Slurm node {name} is {node['state'].lower()}"
            f"{'+' + '+'.join(node['flags']).lower() if node['flags'] else ''} with gpuhost's "
            f"reason \"{node['reason']}\": a gpuhost upgrade or recovery stopped before its "
            "health gate passed; fix what it says, then rerun the same `gpuhost upgrade` or "
            "`gpuhost recover` (it resumes the node when the gate passes), or return the node "
            f"by hand: scontrol update nodename={name} state=resume")))
    return found


def _finding(ident: str, severity: str, message: str) -> dict[str, Any]:
    return {"id": ident, "severity": severity, "gpu": None, "message": " ".join(message.split())}
