"""Supervisor of one sandbox host (a detached process, stdlib only, started by `sandbox up`).

It boots the host: `unshare --mount --time --boottime -<uptime> --fork --kill-child
sh boot.sh ...`: boot.sh mounts the overlay root, moves into the host's cgroup and execs
`systemd-nspawn --boot`, so the host's systemd is PID 1 of its own pid namespace and
/proc/uptime inside starts from ~0 at every boot. nspawn exits 133 when the host reboots
(`systemctl reboot`, `reboot`, pyinfra's `server.reboot`): the supervisor boots it again
(new namespaces, new boot id, same upper directory); 0 (poweroff) leaves it off; anything
else is a crash and the host is booted again after a back-off. SIGTERM/SIGINT of this
process, and `sandbox down`, kill every process of the host's cgroup (cgroup.kill).

Runtime files in RUNDIR/hosts/NAME/: supervisor.pid, unshare.pid, state (booting, running
is decided by the caller from sshd; halted; crashed), boots (count), console.log.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

EXIT_REBOOT = 133     # systemd-nspawn: "the container requested a reboot"
EXIT_HALT = 0         # systemd-nspawn: the container powered off
PR_SET_PDEATHSIG = 1


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _boottime_offset() -> int:
    """Negative offset that makes CLOCK_BOOTTIME (and /proc/uptime) start near 0."""
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return -int(up)


def cgroup_dirs(cgroup: str) -> list[str]:
    """The host's cgroup in every hierarchy boot.sh uses (cgroup2, name=systemd)."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            _dev, mnt, fstype, opts = line.split()[:4]
            if fstype == "cgroup2" or (fstype == "cgroup" and "name=systemd" in opts.split(",")):
                out.append(os.path.join(mnt, cgroup))
    return out


def _procs(path: str) -> list[int]:
    pids = []
    for dirpath, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(dirpath, "cgroup.procs")) as f:
                    pids += [int(x) for x in f.read().split()]
            except OSError:
                pass
    return pids


def kill_cgroup(cgroup: str, timeout: float = 10) -> None:
    """SIGKILL every process of the host (cgroup.kill where the kernel has it, else each
    pid), wait until they are gone and remove the host's cgroups (deepest first)."""
    dirs = [d for d in cgroup_dirs(cgroup) if os.path.isdir(d)]
    for d in dirs:
        try:
            with open(os.path.join(d, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for d in dirs for p in _procs(d)]
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    for d in dirs:
        for dirpath, _dirs, _files in sorted(os.walk(d), key=lambda w: -len(w[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def main() -> int:
    ap = argparse.ArgumentParser(prog="gpuhost-sandbox-supervisor")
    ap.add_argument("--name", required=True)
    ap.add_argument("--rundir", required=True, help="this host's runtime directory")
    ap.add_argument("--boot", required=True, help="boot.sh")
    ap.add_argument("--lower", required=True)
    ap.add_argument("--upper", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--docker-data", required=True)
    ap.add_argument("--cgroup", required=True, help="the host's cgroup, relative to each root")
    a = ap.parse_args()

    rd = a.rundir
    _write(os.path.join(rd, "supervisor.pid"), f"{os.getpid()}\n")
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: object) -> None:
        if child is not None and child.poll() is None:
            child.kill()          # unshare --fork ignores SIGTERM; --kill-child takes nspawn
            child.wait()
        kill_cgroup(a.cgroup)     # the host's systemd and everything under it
        _write(os.path.join(rd, "state"), "stopped\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    try:  # keep counting across supervisors (a halted host started again by `up`)
        with open(os.path.join(rd, "boots")) as f:
            boots = int(f.read())
    except (OSError, ValueError):
        boots = 0
    backoff = 1.0
    while True:
        boots += 1
        _write(os.path.join(rd, "boots"), f"{boots}\n")
        _write(os.path.join(rd, "state"), "booting\n")
        kill_cgroup(a.cgroup)     # leftovers of the previous boot, if any
        argv = ["unshare", "--mount", "--fork", "--kill-child", "--propagation", "private",
                "--time", "--boottime", str(_boottime_offset()),
                "sh", a.boot, a.name, a.lower, a.upper, a.work, a.root, a.docker_data,
                a.cgroup]
        print(f"supervisor: boot {boots} of {a.name}", flush=True)
        started = time.monotonic()
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        _write(os.path.join(rd, "unshare.pid"), f"{child.pid}\n")
        rc = child.wait()
        child = None
        os.unlink(os.path.join(rd, "unshare.pid"))
        if rc == EXIT_REBOOT:
            print(f"supervisor: {a.name} rebooted", flush=True)
            backoff = 1.0
            continue
        if rc == EXIT_HALT:
            print(f"supervisor: {a.name} powered off", flush=True)
            _write(os.path.join(rd, "state"), "halted\n")
            return 0
        lived = time.monotonic() - started
        print(f"supervisor: {a.name} init exited with {rc} after {lived:.1f}s; "
              f"booting again in {backoff:.0f}s", flush=True)
        _write(os.path.join(rd, "state"), f"crashed (exit {rc})\n")
        time.sleep(backoff)
        backoff = 1.0 if lived > 60 else min(backoff * 2, 30.0)


if __name__ == "__main__":
    sys.exit(main())
