"""Restart a daemon gpuhost reconfigured, checked, and put things back when it does not come
back (issue 14 item 4; one helper for Docker's daemon.json and containerd's drop-in, issue 27
item 3).

``checked_restart`` is one remote command: note the time, restart the unit, wait (bounded)
until the daemon answers, run the caller's checks (each ends with ``exit 0`` when the daemon
is as wanted). When the restart, the wait or a check fails: collect the daemon's errors
*logged since this restart* (``journalctl --since``, so an error from an earlier failure is
never reported as this one's), run the caller's ``undo`` (put gpuhost's previous files
back), restart the unit again (when there was something to undo), and fail the host with
the caller's message followed by the daemon's own words.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra.api import QuoteString, StringCommand

from gpuhost.facts.pyinfra_api import joined

READY_TIMEOUT_S = 60


def checked_restart(unit: str, ready: str, failure: str, *, errors: str,
                    verify: Sequence[str | StringCommand | QuoteString] = ("exit 0;",),
                    undo: Sequence[str | StringCommand | QuoteString] = ()) -> StringCommand:
    """The restart command of ``unit``.

    + unit: the systemd unit (``docker.service``)
    + ready: a shell test that succeeds once the daemon answers (``docker info >/dev/null 2>&1``)
    + failure: the first words of the error (the daemon's log lines follow)
    + errors: the grep pipeline (``grep ...``) that picks the daemon's error lines
    + verify: shell parts run once it answers; they ``exit 0`` when all is well, fall
      through to the undo otherwise (or ``exit 1`` with a message of their own)
    + undo: shell parts that put gpuhost's previous files back; empty: nothing to put back,
      the unit is not restarted a second time
    """
    again = (["systemctl reset-failed", QuoteString(unit), ">/dev/null 2>&1; systemctl restart",
              joined(QuoteString(unit), ";")] if undo else [])
    return StringCommand(
        "systemctl reset-failed", QuoteString(unit), ">/dev/null 2>&1;",
        "since=$(date '+%Y-%m-%d %H:%M:%S');",
        "if systemctl restart", QuoteString(unit), "&& timeout", str(READY_TIMEOUT_S), "sh -c",
        QuoteString(f"until {ready}; do sleep 1; done"), "; then", *verify, "fi;",
        "err=$(journalctl -u", QuoteString(unit), '--since "$since" --no-pager -o cat 2>/dev/null |',
        errors, "| tail -n 4);",
        *undo, *again,
        "echo", QuoteString(failure), '"$err" >&2;',
        "exit 1",
    )
