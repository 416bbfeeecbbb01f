"""One gpuhost run at a time on a host (issue 36 item 7): the run lock's operations.

``guard(command)``, before a run decides anything (before the fast path too): reads the lock
the composite fact read (``host_state()["run_lock"]``) and decides on the controller
(``gpuhost.runlock.decide``). Another live run's lock: this host waits for it while the
plan is prepared, up to ``lock_wait`` seconds, reading only the lock (``facts.runlock``)
every few seconds and saying so; released in time, the host is read again and planned as it
is now; else one operation fails this host with one line naming the other run, and nothing
else is planned for it. ``take()`` is the first operation of a run that changes the host (a
converged host's run takes no lock: it stays one read); ``renew()`` after its long steps;
``release()`` its last operation (a failed run leaves its lock: see gpuhost/runlock.py for
how the next run recognises a dead one).
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from typing import Any

import gevent
from pyinfra import host, logger
from pyinfra.api import operation
from pyinfra.operations import server

from gpuhost import runlock
from gpuhost.facts.runlock import RunLock, RunLockAction
from gpuhost.roles.common import executing, fail_command, host_settings, host_state, run_cache

POLL_S = 5  # while waiting: one read of the lock every POLL_S seconds
SAY_S = 30  # and one line of progress every SAY_S seconds


def this_run(command: str) -> runlock.Run:
    """This run (one per pyinfra State): a random token, controller, user, pid, start."""
    cache = run_cache("run_lock_me")
    if "run" not in cache:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        cache["run"] = runlock.Run(
            token=uuid.uuid4().hex, controller=runlock.clean(socket.gethostname()),
            user=runlock.clean(user), pid=os.getpid(),
            started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            command=runlock.clean(command))
    return cache["run"]


def guard(command: str, lock: Any = (), wait: bool = True) -> bool:
    """Plan time, first: False when another live run holds this host (one operation then
    fails the host with the one line, nothing else may be planned for it). ``lock``: the
    lock as already read (default: ``host_state()``'s); ``wait``: False for runs that planned
    every host before this (an upgrade, a recovery): they stop at once."""
    me = this_run(command)
    config = host_settings()
    found = host_state().get("run_lock") if lock == () else lock
    decision = runlock.decide(found, me, broken=config.lock_break)
    bound = config.lock_wait if wait else 0
    waited, said = 0, 0
    started = time.monotonic()
    while decision.kind == "held" and waited < bound:
        if waited >= said:
            logger.warning(runlock.waiting_message(host.name, decision.lock, waited, bound))
            said = waited + SAY_S
        gevent.sleep(min(POLL_S, bound - waited))
        waited = int(time.monotonic() - started)
        decision = runlock.decide(host.get_fact(RunLock), me, broken=config.lock_break)
        if decision.kind != "held":  # the other run is over: plan from the host as it is now
            run_cache("state").pop(host.name, None)
            decision = runlock.decide(host_state().get("run_lock"), me, broken=config.lock_break)
    run_cache("run_lock")[host.name] = decision
    if decision.kind == "held":
        server.shell(name="gpuhost leaves this host alone: another run holds its lock",
                     commands=[fail_command(runlock.held_message(host.name, decision.lock,
                                                                 waited))])
        return False
    if decision.kind == "takeover":
        logger.warning(f"{host.print_prefix}gpuhost takes over {runlock.PATH} if it changes "
                       f"this host: {decision.reason}")
    return True


def _act(script: str, name: str, *args: Any) -> tuple[bool, str]:
    return host.get_fact(RunLockAction, script=script, label=name, args=args)


@operation()
def _take(lease: int, stale: str, run: runlock.Run):
    """
    Take the host's run lock (atomic: one rename of a prepared directory), moving a dead
    run's lock aside first; fails the host, changing nothing, when another run took it.
    The lock is the run's bookkeeping, not a change of the host (facts/runlock.py).

    + lease: seconds until the lock expires unless renewed
    + stale: "-" or "=TOKEN" of the dead run's lock the controller decided to take over
    + run: this run (``gpuhost.runlock.Run``)
    """
    if not executing():
        host.noop(f"this run takes {runlock.PATH} before its first change")
        return
    ok, text = _act(runlock.TAKE, "gpuhost-lock-take", int(lease), stale, run.token,
                    run.controller, run.user, run.pid, run.started, run.command)
    if ok:
        host.noop(f"this run holds {runlock.PATH} (lease {lease} s)")
        return
    yield fail_command(f"{host.name}: " + (text.removeprefix("gpuhost: ") or
                                          f"cannot take {runlock.PATH}"))


@operation()
def _renew(lease: int, token: str):
    """
    Renew this run's lease on the host's run lock; fails the host when the lock is no longer
    this run's (its lease expired and another run took it over).

    + lease: seconds from now
    + token: this run's token
    """
    if not executing():
        host.noop(f"the lease of {runlock.PATH} is renewed here")
        return
    ok, text = _act(runlock.RENEW, "gpuhost-lock-renew", token, int(lease))
    if ok:
        host.noop(f"{runlock.PATH}: lease renewed for {lease} s")
        return
    yield fail_command(f"{host.name}: " + text.removeprefix("gpuhost: "))


@operation()
def _release(token: str):
    """
    Release the host's run lock when it is still this run's.

    + token: this run's token
    """
    if not executing():
        host.noop(f"{runlock.PATH} is released at the end of the run")
        return
    ok, text = _act(runlock.RELEASE, "gpuhost-lock-release", token)
    if text:
        logger.warning(f"{host.print_prefix}{text}")
    host.noop(f"{runlock.PATH} released")
    yield from ()


def _me() -> runlock.Run:
    return run_cache("run_lock_me")["run"]


def take() -> None:
    """The first operation of a run that changes this host (after ``guard``)."""
    decision = run_cache("run_lock").get(host.name) or runlock.Decision("free", "", None)
    _take(name=f"Take the gpuhost run lock ({runlock.PATH})", lease=host_settings().lock_lease,
          stale=decision.stale_token, run=_me())


def renew() -> None:
    """After a long step (a driver install, a reboot): the lease starts again."""
    _renew(name=f"Renew the gpuhost run lock ({host_settings().lock_lease} s)",
           lease=host_settings().lock_lease, token=_me().token)


def release() -> None:
    """The last operation of a run that took the lock."""
    _release(name=f"Release the gpuhost run lock ({runlock.PATH})", token=_me().token)
