"""Rolling driver upgrades, the pure half: batch planning, the event log, the summary.

No pyinfra here. ``gpuhost upgrade`` (``gpuhost.cli.upgrade``) runs pyinfra once per batch;
the upgrade deploy (inside pyinfra) appends one JSON object per line to an *event file* on
the controller; this module plans the batches and turns those events, pyinfra's exit status
and the failed hosts of its ``--json`` results into per-host results, a table and a JSON
report.

Events (one JSON object a line, every one with ``event``, ``run``, ``host`` and ``time``):

- ``plan``    (prepare) ``from``, ``to``, ``action``: ``upgrade`` | ``resume`` | ``none``
- ``refused`` (prepare) ``from``, ``to``, ``reason``: a pre-check refused the host; nothing
  was touched
- ``start``   (execute) the host's first operation started
- ``failed``  (execute) ``operation``: the operation that failed on the host; optional
  ``output``: its last output lines (a list of strings)
- ``done``    (execute) ``from``, ``to``, ``result``: ``upgraded`` | ``already at target``
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_KINDS = ("plan", "refused", "start", "failed", "done")
_COUNT = re.compile(r"^[1-9]\d*$")
_PERCENT = re.compile(r"^(\d{1,3}(?:\.\d+)?)%$")


class RolloutError(ValueError):
    """A wrong batch option or an unusable event file; the message says what to change."""


@dataclass(frozen=True)
class BatchSize:
    """A fixed number of hosts per batch, or a percentage of the hosts after the canary."""

    count: int | None = None
    percent: float | None = None

    def hosts_per_batch(self, remaining: int) -> int:
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, math.ceil(remaining * self.percent / 100))

    def __str__(self) -> str:
        return str(self.count) if self.count is not None else f"{self.percent:g}%"


def parse_batch_size(text: str | int) -> BatchSize:
    """``"2"`` -> 2 hosts per batch; ``"25%"`` -> a quarter of the hosts after the canary
    (rounded up, at least one host)."""
    value = str(text).strip()
    if _COUNT.fullmatch(value):
        return BatchSize(count=int(value))
    match = _PERCENT.fullmatch(value)
    if match and 0 < float(match.group(1)) <= 100:
        return BatchSize(percent=float(match.group(1)))
    raise RolloutError(
        f"batch size {value!r} is neither a host count (like 2) nor a percentage between "
        "0% and 100% (like 25%)"
    )


@dataclass(frozen=True)
class Batch:
    label: str  # "canary", "batch 1", ...
    hosts: tuple[str, ...]


def plan_batches(hosts: list[str], canary: int, size: BatchSize | str | int) -> list[Batch]:
    """Split ``hosts`` (kept in the given, deterministic order) into the canary batch (the
    first ``canary`` hosts) and then batches of ``size``. The last batch may be smaller."""
    if isinstance(size, (str, int)):
        size = parse_batch_size(size)
    if not isinstance(canary, int) or canary < 0:
        raise RolloutError(f"canary {canary!r} must be a whole number of hosts, 0 or more")
    duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
    if duplicates:
        raise RolloutError(f"hosts listed twice: {', '.join(duplicates)}")
    batches: list[Batch] = []
    if canary and hosts:
        batches.append(Batch("canary", tuple(hosts[:canary])))
    rest = hosts[canary:]
    per_batch = size.hosts_per_batch(len(rest)) if rest else 1
    for number, start in enumerate(range(0, len(rest), per_batch), 1):
        batches.append(Batch(f"batch {number}", tuple(rest[start:start + per_batch])))
    return batches


def limit_pattern(host: str) -> str:
    """A pyinfra ``--limit`` pattern matching exactly this host name (pyinfra matches with
    fnmatch, so ``*``, ``?`` and ``[`` are bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", host)


def limit_args(hosts: tuple[str, ...] | list[str]) -> list[str]:
    """``--limit`` once per host: pyinfra 3.10 does not split a comma-separated value."""
    args: list[str] = []
    for host in hosts:
        args += ["--limit", limit_pattern(host)]
    return args


# --- the event file -----------------------------------------------------------------------


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Every complete event in the file (a missing file has none). A torn last line (the
    writer was killed mid-line) is skipped; any other line that is not an event is an error."""
    file = Path(path)
    if not file.exists():
        return []
    lines = file.read_text(encoding="utf-8").splitlines()
    events = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as error:
            if number == len(lines):
                continue
            raise RolloutError(f"{file}:{number} is not JSON ({error}); the event file is "
                               "damaged: move it away and rerun") from error
        if not isinstance(event, dict) or event.get("event") not in EVENT_KINDS:
            raise RolloutError(f"{file}:{number} is not a gpuhost upgrade event: {line[:120]}")
        events.append(event)
    return events


def for_run(events: list[dict[str, Any]], run: str) -> list[dict[str, Any]]:
    return [event for event in events if event.get("run") == run]


def last(events: list[dict[str, Any]], kind: str, host: str) -> dict[str, Any] | None:
    found = [e for e in events if e["event"] == kind and e.get("host") == host]
    return found[-1] if found else None


# --- per-host results ---------------------------------------------------------------------


@dataclass
class HostResult:
    host: str
    from_version: str | None = None
    to_version: str | None = None
    # upgraded | already at target | failed | interrupted | refused | not started | pending
    result: str = "pending"
    seconds: float | None = None
    batch: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "from": self.from_version, "to": self.to_version,
                "result": self.result, "seconds": self.seconds, "batch": self.batch,
                "detail": self.detail}


@dataclass
class BatchOutcome:
    ok: bool
    results: dict[str, HostResult] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # one line per failed host


_ERROR = re.compile(r"error|fail|fatal|denied|not found|gpuhost:", re.IGNORECASE)


def error_lines(lines: list[str], keep: int = 3) -> list[str]:
    """What a failed operation printed that says why (the ``output`` of its ``failed``
    event): the first two error lines (the cause, e.g. DKMS's "Bad return status") and the
    last one (what gave up), else its last lines."""
    lines = [line.strip() for line in lines if line.strip()]
    errors = [line for line in lines if _ERROR.search(line)]
    if not errors:
        return lines[-keep:]
    picked = errors[:keep - 1] + errors[-1:]
    return list(dict.fromkeys(picked))


def batch_outcome(batch: Batch, run_events: list[dict[str, Any]], returncode: int,
                  failed_hosts: set[str] | None = None) -> BatchOutcome:
    """What happened to each host of ``batch``, from the events its pyinfra run wrote,
    pyinfra's exit status and the hosts its ``--json`` results name as failed (None: pyinfra
    printed no results). A host counts as done only with a ``done`` event."""
    outcome = BatchOutcome(ok=True)
    any_failed = any(e["event"] == "failed" for e in run_events)
    for host in batch.hosts:
        plan = last(run_events, "plan", host)
        start = last(run_events, "start", host)
        done = last(run_events, "done", host)
        failed = last(run_events, "failed", host)
        refused = last(run_events, "refused", host)
        result = HostResult(host, batch=batch.label,
                            from_version=(plan or {}).get("from"), to_version=None)
        if done and not failed:
            result.result = done["result"]
            result.from_version = done.get("from", result.from_version)
            result.to_version = done.get("to")
            result.seconds = done.get("seconds")
        elif failed:
            result.result = "failed"
            result.detail = f"failed at: {failed.get('operation') or 'an operation'}"
            output = failed.get("output")
            evidence = error_lines([str(line) for line in output]
                                   if isinstance(output, list) else [])
            if evidence:
                result.detail += " | " + " | ".join(evidence)
            if start:
                result.seconds = round(failed["time"] - start["time"], 1)
        elif refused:
            result.result = "refused"
            result.detail = refused.get("reason", "")
        elif failed_hosts is not None and host in failed_hosts and not start:
            result.result = "failed"
            result.detail = ("pyinfra failed this host before its upgrade started (e.g. it "
                             "could not connect); see its output above")
        elif start or any_failed:
            result.result = "interrupted"
            result.detail = ("another host of this batch failed, pyinfra stopped the batch "
                             "before this host finished; a rerun finishes it")
        else:
            result.result = "not started"
            result.detail = (f"pyinfra exited with status {returncode} before this host "
                             "started; see its output above")
        if result.result not in ("upgraded", "already at target"):
            outcome.ok = False
            outcome.failures.append(f"{host}: {result.result}: {result.detail}")
        outcome.results[host] = result
    if returncode != 0 and outcome.ok:
        outcome.ok = False
        outcome.failures.append(f"pyinfra exited with status {returncode} although every "
                                "host recorded success; see its output above")
    return outcome


# --- the summary ----------------------------------------------------------------------------


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def summary_table(results: list[HostResult]) -> str:
    """A plain-text table: host, from, to, result, time."""
    header = ("host", "from", "to", "result", "time")
    rows = [(r.host, r.from_version or "-", r.to_version or "-", r.result,
             format_seconds(r.seconds)) for r in results]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width)
                       for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


REPORT_SCHEMA = 1


def report(results: list[HostResult], batches: list[Batch], *, target: str | None,
           ok: bool, started: float, finished: float, inventory: str,
           message: str = "") -> dict[str, Any]:
    """The JSON record of one wrapper run (versioned)."""
    return {
        "schema": REPORT_SCHEMA,
        "kind": "gpuhost-driver-upgrade",
        "inventory": inventory,
        "target": target,
        "ok": ok,
        "message": message,
        "started": started,
        "finished": finished,
        "seconds": round(finished - started, 1),
        "batches": [{"label": b.label, "hosts": list(b.hosts)} for b in batches],
        "hosts": [r.as_dict() for r in results],
    }
