"""One gpuhost run at a time on a host: the run lock (issue 36 item 7, docs/locking.md).

Pure (no pyinfra, no I/O but the controller's own process table in ``pid_alive``). Every run
that changes a host (``gpu_host``, ``gpuhost upgrade``, ``gpuhost recover``) holds
``/var/lib/gpuhost/run.lock``: a directory whose ``owner`` file names the run (a random
token, the controller's hostname, the user, the controller-side pid, when it started, the
command) and the lease's end, in the host's clock. The directory appears whole, by one
``rename`` (``mv -T`` of a directory prepared beside it), which fails when another run's
lock is there: two runs can never both hold it. It lives on disk, so it survives the reboots
a deploy does.

The composite fact reads the lock in its single read (section ``run_lock``); the controller
decides (``decide``) and a run takes the lock only when it will change the host. The rule for
a lock of another run:

- held while its lease has not expired, unless it comes from this controller and its pid is
  gone (or is this very process: an earlier run of it) - such a run is dead;
- taken over when its lease has expired (the holding run renews it at its long steps; pyinfra
  runs no code when a run dies, so a run that stopped renewing is taken as dead), when it has
  no owner file, or when ``lock_break`` (``--break-lock``) says so by hand.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DIR = "/var/lib/gpuhost"
PATH = f"{DIR}/run.lock"
OWNER = f"{PATH}/owner"
BREAK_HINT = ("break a dead run's lock with --data lock_break=true "
              "(gpuhost upgrade/recover: --break-lock)")

# The composite fact's section: the host's clock, then the owner file; exit 3 without a lock
SECTION = (f"test -d {PATH} || exit 3; echo \"now=$(date +%s)\"; "
           f"cat {OWNER} 2>/dev/null; true")

_TOKEN = "sed -n 's/^token=//p' \"$1\" 2>/dev/null"
# sh -c TAKE gpuhost-lock-take LEASE STALE TOKEN CONTROLLER USER PID STARTED COMMAND
TAKE = (
    f"d={DIR}; L={PATH}; mkdir -p \"$d\" || exit 1; "
    f"tok() {{ {_TOKEN}; }}; "
    # a stale lock (STALE: the token the controller judged dead, "-" none): moved aside by one
    # rename, removed only when the moved one is still that lock (else put back)
    'if [ "$2" != "-" ] && [ -d "$L" ] && [ "$(tok "$L/owner")" = "${2#=}" ]; then '
    'o="$d/.run.lock.old.$$"; if mv -T "$L" "$o" 2>/dev/null; then '
    'if [ "$(tok "$o/owner")" = "${2#=}" ]; then rm -rf "$o"; '
    'else mv -T "$o" "$L" 2>/dev/null || rm -rf "$o"; fi; fi; fi; '
    't="$d/.run.lock.new.$$"; rm -rf "$t"; mkdir -m 700 "$t" || exit 1; now=$(date +%s); '
    'printf "%s\\n" "token=$3" "controller=$4" "user=$5" "pid=$6" "started=$7" "command=$8" '
    '"taken=$now" "expires=$((now + $1))" > "$t/owner" || exit 1; '
    'if mv -T "$t" "$L" 2>/dev/null; then exit 0; fi; rm -rf "$t"; '
    'w=$(tr "\\n" " " < "$L/owner" 2>/dev/null); '
    'echo "gpuhost: another gpuhost run took this host\'s lock $L first (${w:-no owner file}): '
    f'nothing was changed here; wait for it to finish and run again, or {BREAK_HINT}" >&2; exit 1'
)
# sh -c RENEW gpuhost-lock-renew TOKEN LEASE
RENEW = (
    f"f={OWNER}; grep -qx \"token=$1\" \"$f\" 2>/dev/null || {{ echo \"gpuhost: this run no "
    f"longer holds {PATH} (its lease expired and another run took it over): stopping here; "
    "run again once that run is done\" >&2; exit 1; }; now=$(date +%s); "
    'sed -i "s/^expires=.*/expires=$((now + $2))/" "$f"'
)
# sh -c RELEASE gpuhost-lock-release TOKEN
RELEASE = (
    f"L={PATH}; if grep -qx \"token=$1\" \"$L/owner\" 2>/dev/null; then rm -rf \"$L\"; "
    f"else echo \"gpuhost: {PATH} is not this run's lock any more: left as it is\"; fi"
)


RC = "gpuhost-lock-rc="


def command(script: str, name: str, *args: Any) -> str:
    """``sh -c SCRIPT NAME ARGS...`` (every value quoted), its output and then its exit
    status on a last line ``gpuhost-lock-rc=N``: read by ``result``."""
    words = " ".join(shlex.quote(str(arg)) for arg in args)
    return f"sh -c {shlex.quote(script)} {name} {words} 2>&1; echo \"{RC}$?\""


def result(lines: list[str]) -> tuple[bool, str]:
    """(it succeeded, what it printed as one line) from ``command``'s output."""
    rc = next((line[len(RC):] for line in reversed(lines) if line.startswith(RC)), None)
    text = " ".join(line.strip() for line in lines if line.strip() and not line.startswith(RC))
    if rc is None:
        return False, text or "the lock command printed no exit status"
    return rc.strip() == "0", text


@dataclass(frozen=True)
class Run:
    """This run, as the lock names it."""

    token: str
    controller: str
    user: str
    pid: int
    started: str
    command: str


@dataclass(frozen=True)
class Decision:
    """``kind``: free (no lock), held (another live run's), takeover (a dead run's, or broken
    by hand); ``reason`` says why, ``lock`` is what was read (None: no lock)."""

    kind: str
    reason: str
    lock: Mapping[str, Any] | None = None

    @property
    def stale_token(self) -> str:
        """What the take command may move aside: "-" nothing; "=TOKEN" that lock."""
        if self.kind != "takeover" or self.lock is None:
            return "-"
        return "=" + str(self.lock.get("token") or "")


def clean(value: Any) -> str:
    """A value for the owner file: one line, no "=" surprises at the start, at most 80 chars."""
    return " ".join(str(value).split())[:80] or "?"


def pid_alive(pid: int) -> bool:
    """Is ``pid`` a live process on this controller (another user's counts)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def decide(lock: Mapping[str, Any] | None, me: Run, *, broken: bool = False,
           alive: Callable[[int], bool] = pid_alive) -> Decision:
    """The rule of the module docstring for the lock the composite fact read."""
    if lock is None:
        return Decision("free", "no run holds this host", None)
    if lock.get("token") == me.token:
        return Decision("free", "this run holds the lock", lock)
    if broken:
        return Decision("takeover", "broken by hand (lock_break)", lock)
    if not lock.get("token"):
        return Decision("takeover", f"{PATH} has no owner file", lock)
    expires, now = lock.get("expires"), lock["now"]
    if expires is None or expires <= now:
        return Decision("takeover", f"the lease of {who(lock)} expired "
                        f"{max(now - (expires or now), 0)} s ago", lock)
    pid = lock.get("pid")
    if lock.get("controller") == me.controller and pid is not None:
        if pid == me.pid:
            return Decision("takeover", f"{who(lock)} was an earlier run of this process", lock)
        if not alive(pid):
            return Decision("takeover", f"{who(lock)} is gone (no pid {pid} on this controller)",
                            lock)
    return Decision("held", f"{who(lock)} holds the lock", lock)


def who(lock: Mapping[str, Any]) -> str:
    return (f"gpuhost {lock.get('command') or '?'} run by {lock.get('user') or '?'}@"
            f"{lock.get('controller') or '?'} (pid {lock.get('pid') or '?'})")


def _utc(epoch: int | None) -> str:
    if epoch is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def held_message(host: str, lock: Mapping[str, Any], waited: int) -> str:
    """The one line of a host this run leaves alone because another run holds it."""
    since = lock.get("started") or _utc(lock.get("taken"))
    after = f" after waiting {waited} s (lock_wait)" if waited else ""
    return (f"{host}: {who(lock)} holds this host's lock {PATH} since {since} (lease until "
            f"{_utc(lock.get('expires'))}){after}: nothing was changed here; wait for that run "
            f"to finish and run again, or, if it is dead, {BREAK_HINT}")


def waiting_message(host: str, lock: Mapping[str, Any], waited: int, bound: int) -> str:
    return f"{host}: waiting for {who(lock)} to release {PATH} ({waited} of {bound} s)"
