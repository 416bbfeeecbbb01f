"""The package manager's locks: who holds them, waiting for them, an interrupted dpkg.

Pure: shell text for the host and the parser of its answer (roles/pkglock.py runs them).

Why (issue 23 item 12): a controller killed in the middle of an install leaves the host's
apt-get running with the lock held (or, killed too, dpkg interrupted); unattended-upgrades
and cloud-init hold the same lock on freshly booted Ubuntu hosts. apt-get then fails at once:
``E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 222 (apt-get)``,
or ``E: dpkg was interrupted, you must manually run 'dpkg --configure -a'``.

Vendor facts (read 2026-11-27):
- apt takes ``/var/lib/dpkg/lock-frontend`` then ``/var/lib/dpkg/lock`` for installs,
  ``/var/lib/apt/lists/lock`` for ``update`` and ``/var/cache/apt/archives/lock`` for
  downloads, all ``fcntl`` locks; ``DPkg::Lock::Timeout`` (apt 1.9.11 and later, so every
  supported distribution) makes it wait that many seconds for the dpkg lock instead of
  failing (apt-get(8), apt.conf(5); apt's NEWS for 1.9.11).
- dpkg records an unfinished run in ``/var/lib/dpkg/updates/`` and leaves packages
  half-installed/half-configured; apt refuses to work until ``dpkg --configure -a`` finished
  it; ``dpkg --audit`` lists such packages (dpkg(1)).
- dnf waits for another dnf by itself ("Waiting for process with pid N to finish.", dnf's
  ``dnf/lock.py`` ProcessLock), and rpm for its transaction lock
  ``/var/lib/rpm/.rpm.lock``; dnf 4 keeps its locks in ``/var/cache/dnf/*_lock.pid`` and
  ``/var/lib/dnf/rpmdb_lock.pid``.
- Linux lists every held file lock in ``/proc/locks``: ``N: POSIX|FLOCK ADVISORY WRITE PID
  MAJ:MIN:INODE START END`` (a waiter's line has ``->`` after ``N:``) (proc(5)).
"""

from __future__ import annotations

import shlex

APT_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock",
             "/var/cache/apt/archives/lock")
DNF_LOCKS = ("/var/lib/rpm/.rpm.lock", "/var/lib/dnf/rpmdb_lock.pid",
             "/var/cache/dnf/metadata_lock.pid", "/var/cache/dnf/download_lock.pid")
WAIT_SECONDS = 600  # also apt's DPkg::Lock::Timeout in APT_CONF
APT_CONF = "/etc/apt/apt.conf.d/90gpuhost-lock-timeout"
APT_CONF_TEXT = (
    "// Managed by gpuhost: wait for the dpkg lock (unattended-upgrades, cloud-init, an\n"
    "// earlier interrupted run) instead of failing at once (apt.conf(5)).\n"
    f'DPkg::Lock::Timeout "{WAIT_SECONDS}";\n'
)


def locks(family: str) -> tuple[str, ...]:
    return APT_LOCKS if family == "debian" else DNF_LOCKS


# held PATH PID COMM, for each lock of $LOCKS some process holds (not a waiter)
_HOLDERS = (
    'for f in $LOCKS; do test -e "$f" || continue; i=$(stat -L -c %i "$f") || continue; '
    "for p in $(awk -v i=\"$i\" '$2 != \"->\" { n = split($6, a, \":\"); "
    "if (a[n] == i) print $5 }' /proc/locks | sort -u); do "
    'c=$(cat "/proc/$p/comm" 2>/dev/null || echo unknown); echo "held $f $p $c"; done; done'
)
_DPKG_UNFINISHED = ('test -n "$(dpkg --audit 2>/dev/null)" || ls /var/lib/dpkg/updates '
                    "2>/dev/null | grep -q '^[0-9]'")
_INTERRUPTED = f"if {_DPKG_UNFINISHED}; then echo interrupted; fi"


def state_command(family: str, paths: tuple[str, ...] | None = None) -> str:
    """Prints ``held PATH PID COMM`` per held lock (``paths``: other lock files than the
    family's), then ``interrupted`` when dpkg is."""
    script = f"LOCKS={shlex.quote(' '.join(paths or locks(family)))}; {_HOLDERS}"
    if family == "debian":
        script += f"; {_INTERRUPTED}"
    return script + "; true"


def parse(lines: list[str]) -> dict:
    """``{"held": [{"path", "pid", "command"}], "interrupted": bool}``."""
    held, interrupted = [], False
    for line in lines:
        words = line.split(None, 3)
        if words[:1] == ["held"] and len(words) >= 3 and words[2].isdigit():
            held.append({"path": words[1], "pid": int(words[2]),
                         "command": words[3].strip() if len(words) > 3 else "unknown"})
        elif line.strip() == "interrupted":
            interrupted = True
    return {"held": held, "interrupted": interrupted}


def describe(held: list[dict]) -> str:
    """``/var/lib/dpkg/lock-frontend is held by process 222 (apt-get)``, joined by ``; ``."""
    return "; ".join(f"{h['path']} is held by process {h['pid']} ({h['command']})"
                     for h in held)


def wait_command(family: str, seconds: int = WAIT_SECONDS,
                 paths: tuple[str, ...] | None = None) -> str:
    """Waits up to ``seconds`` for the locks (``paths``: other lock files than the family's),
    saying who holds them every 10 s; exit 1 naming the holder when time is up."""
    give_up = (f"gpuhost: the package manager's lock is still held after {seconds} s "
               "(above: by whom). Wait for that process to finish, or stop it if it hangs, "
               "then run gpuhost again.")
    return (
        f"LOCKS={shlex.quote(' '.join(paths or locks(family)))}; waited=0; "
        f"while h=$({_HOLDERS}); test -n \"$h\"; do "
        f"if test $waited -ge {int(seconds)}; then echo \"$h\" >&2; "
        f"echo {shlex.quote(give_up)} >&2; exit 1; fi; "
        "if test $((waited % 10)) -eq 0; then "
        "echo \"gpuhost: waiting ${waited}s for the package manager's lock: $h\"; fi; "
        "sleep 1; waited=$((waited + 1)); done"
    )


# finish what an interrupted dpkg left (keeping the admin's config files, as apt-get does
# with gpuhost's options), only when dpkg says something is unfinished
REPAIR_DPKG = (
    f"if {_DPKG_UNFINISHED}; then "
    "echo 'gpuhost: dpkg was interrupted: running dpkg --configure -a'; "
    "DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a; fi"
)
