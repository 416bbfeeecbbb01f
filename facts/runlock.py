"""gpuhost's run lock as a fact of its own (issue 36 item 7; gpuhost/runlock.py).

``pyinfra INVENTORY fact gpuhost.facts.runlock.RunLock``
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase

from gpuhost import runlock
from gpuhost.facts import parsers
from gpuhost.facts.base import SectionFact
from gpuhost.facts.sections import Sections, section


def run_lock_state(sections: Sections) -> dict[str, Any] | None:
    """``facts.parsers.parse_run_lock`` of the section ``run_lock``; None without a lock."""
    rc, out = section(sections, "run_lock")
    if rc != 0:
        return None
    return parsers.parse_run_lock(out)


class RunLock(SectionFact):
    """
    The lock on this host and the host's clock (``parse_run_lock``), None without a lock.
    The composite fact carries the same section; ``roles/runlock.py`` reads this one again
    while it waits for another run to release the host.
    """

    sections = ("run_lock",)
    assemble = staticmethod(run_lock_state)


class RunLockAction(FactBase):
    """
    Not a read: takes, renews or releases this run's lock (``gpuhost.runlock.TAKE``,
    ``RENEW``, ``RELEASE``), called only by ``roles/runlock.py``'s operations while pyinfra
    executes. pyinfra counts every command an operation sends as a change of the host; the
    lock is the run's own bookkeeping (a run that changes nothing takes and releases it and
    must still report 0 changes, docs/converged.md), so its commands go through pyinfra's
    fact channel, under the operation's ``_sudo``.

    + script: ``TAKE``, ``RENEW`` or ``RELEASE``
    + label: the command's $0 (``gpuhost-lock-take``, ...)
    + args: its arguments

    ``(ok, text)``: whether it succeeded and what it printed, on one line.
    """

    def command(self, script: str, label: str, args: tuple[Any, ...] = ()) -> str:
        return runlock.command(script, label, *args)

    def process(self, output: list[str]) -> tuple[bool, str]:
        return runlock.result(output)

    def default(self) -> tuple[bool, str]:  # type: ignore[override]
        return False, "the lock command printed nothing"
