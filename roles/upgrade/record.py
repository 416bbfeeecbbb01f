"""The controller-side event file of a driver upgrade (its format: ``gpuhost.upgrade.rollout``).

The wrapper (``gpuhost upgrade``) passes ``--data gpuhost_upgrade_record=PATH``
and ``--data gpuhost_upgrade_run=LABEL``; without them nothing is written. Events are
appended one JSON object per line, under an exclusive lock, so pyinfra's parallel hosts
never interleave a line.
"""

from __future__ import annotations

import collections
import fcntl
import json
import logging
import time
from typing import Any

from pyinfra import host, logger
from pyinfra.api import BaseStateCallback

from gpuhost.facts import pyinfra_api

from gpuhost.reports.text import strip_ansi

RECORD_KEY = "gpuhost_upgrade_record"
RUN_KEY = "gpuhost_upgrade_run"


def record_path(target_host: Any = None) -> str | None:
    data = (target_host if target_host is not None else host).data
    path = data.get(RECORD_KEY)
    return str(path) if path else None


def write_event(kind: str, target_host: Any = None, **fields: Any) -> None:
    """Append one event for ``target_host`` (default: the current host)."""
    target = target_host if target_host is not None else host
    path = record_path(target)
    if not path:
        return
    event = {"event": kind, "run": str(target.data.get(RUN_KEY) or "run"),
             "host": target.name, "time": round(time.time(), 3), **fields}
    line = json.dumps(event, sort_keys=True, default=str) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(line)
    except OSError as error:  # the upgrade goes on; the wrapper reports the missing events
        logger.warning(f"gpuhost: cannot append to the upgrade event file {path}: {error}")


class HostOutput(logging.Handler):
    """The last lines pyinfra reported for each host of one run.

    When a command fails, pyinfra logs its output (stdout and stderr) line by line through
    its logger, each line behind the host's ``print_prefix``, before it calls the
    ``operation_host_error`` callback; the operation's own output object is only filled in
    after that callback. This handler keeps those lines so the ``failed`` event can carry
    them (e.g. DKMS's "Bad return status for module build").
    """

    KEEP = 40

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: dict[str, collections.deque] = {}
        self.prefixes: dict[str, str] = {}

    def watch(self, target) -> None:
        self.prefixes[strip_ansi(target.print_prefix)] = target.name

    def emit(self, record: logging.LogRecord) -> None:
        if record.funcName == "log_error_or_warning":
            return  # pyinfra's own "Error: executed N commands", not the command's output
        try:
            text = strip_ansi(record.getMessage())
        except Exception:  # a record that cannot be formatted is not output of ours
            return
        for prefix, name in self.prefixes.items():
            if prefix and text.startswith(prefix):
                self.lines.setdefault(name, collections.deque(maxlen=self.KEEP)).append(
                    text[len(prefix):])
                return

    def take(self, name: str) -> list[str]:
        return list(self.lines.pop(name, ()))


class UpgradeEvents(BaseStateCallback):
    """pyinfra callbacks: the first operation started on a host, an operation that failed
    (with the output pyinfra reported for it)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.output = HostOutput()

    def operation_host_start(self, state, host, op_hash):  # type: ignore[override]
        self.output.watch(host)
        self.output.take(host.name)  # only the failing operation's lines count
        if host.name not in self.started:
            self.started[host.name] = time.time()
            write_event("start", host)

    def operation_host_error(self, state, host, op_hash, retry_count=0,  # type: ignore[override]
                             max_retries=0):
        names = sorted(state.get_op_meta(op_hash).names)
        write_event("failed", host, operation=", ".join(names) or op_hash,
                    output=self.output.take(host.name))


def events_for(state) -> UpgradeEvents:
    """The callback handler of this pyinfra state (registered with it once, gone with it)."""
    for handler in pyinfra_api.callback_handlers(state):
        if isinstance(handler, UpgradeEvents):
            return handler
    handler = UpgradeEvents()
    state.add_callback_handler(handler)
    if logger.hasHandlers():
        # pyinfra's CLI has set up its logging; without any handler (the bare API), adding
        # one would silence Python's last-resort output of pyinfra's errors
        logger.addHandler(handler.output)
    return handler


def seconds_since_start(state, name: str) -> float | None:
    started = events_for(state).started.get(name)
    return round(time.time() - started, 1) if started else None
