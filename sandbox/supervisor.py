"""Supervisor of one sandbox host (a detached process, stdlib only, started by `sandbox up`).

It boots the host: `unshare --mount --pid --uts --time --boottime -<uptime> --fork
--kill-child sh stage1.sh ...`, so /proc/uptime inside starts from ~0 at every boot.
When the host's init exits with 100 (`reboot` inside the host) it boots it again with new
namespaces on the same upper directory; 101 (`poweroff`) leaves it off; anything else is
a crash and the host is booted again after a back-off. SIGKILL of this process kills the
host too (the unshare child has PR_SET_PDEATHSIG=SIGKILL, and --kill-child does the rest).

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

EXIT_REBOOT = 100
EXIT_HALT = 101
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


def main() -> int:
    ap = argparse.ArgumentParser(prog="gpuhost-sandbox-supervisor")
    ap.add_argument("--name", required=True)
    ap.add_argument("--rundir", required=True, help="this host's runtime directory")
    ap.add_argument("--stage1", required=True)
    ap.add_argument("--lower", required=True)
    ap.add_argument("--upper", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--docker-data", required=True)
    a = ap.parse_args()

    rd = a.rundir
    _write(os.path.join(rd, "supervisor.pid"), f"{os.getpid()}\n")
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: object) -> None:
        if child is not None and child.poll() is None:
            child.kill()          # unshare --fork ignores SIGTERM; --kill-child takes the rest
            child.wait()
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
        argv = ["unshare", "--mount", "--pid", "--uts", "--fork", "--kill-child",
                "--propagation", "private", "--time", "--boottime", str(_boottime_offset()),
                "sh", a.stage1, a.name, a.lower, a.upper, a.work, a.root, a.docker_data]
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
