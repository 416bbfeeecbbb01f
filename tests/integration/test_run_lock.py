"""Issue 36 item 7, "two operators at once": the run lock (gpuhost/runlock.py, docs/locking.md)
on a Debian 12 host (gpu-01) and an Oracle Linux 8 host (ol8-03) of the converged fleet.

* another live run's lock (written on both hosts as a second controller's run writes it)
  stops a run that would change them before any change, with one line naming that run;
* a stale lock is taken over: an expired lease (gpu-01), a dead pid of this controller
  (ol8-03); the run converges both and releases the lock;
* two real ``gpu_host`` runs started 3 s apart on both hosts, each with a change to make:
  whichever way they meet (the second waits and then finds the hosts converged, or its take
  is refused before any change), neither fails half-way, and the hosts end converged with
  no lock left.

"A change to make": the converged stamp removed (the run walks every role and records it
again). The fleet is test_health_audit's spec, so its converged snapshot is shared.
"""

from __future__ import annotations

import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpuhost import runlock

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="converged")]

HOSTS = ("gpu-01", "ol8-03")
LIMIT = ("--limit", HOSTS[0], "--limit", HOSTS[1])
STAMP = "/var/lib/gpuhost/converged"


def _write_lock(ssh, name: str, token: str, controller: str, pid: int, lease: int) -> None:
    """The owner file as roles/runlock.py's take writes it (gpuhost.runlock.TAKE)."""
    ssh(name, f"rm -rf {runlock.PATH}; mkdir -p {runlock.PATH}; now=$(date +%s); "
              f"printf '%s\\n' token={token} controller={controller} user=dave pid={pid} "
              "'started=2026-11-29 06:00:00 UTC' command=upgrade taken=$now "
              f"expires=$((now + {lease})) > {runlock.OWNER}")


def _owner(ssh, name: str) -> str:
    return ssh(name, f"cat {runlock.OWNER} 2>/dev/null || echo none").stdout


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture(scope="module")
def unstamped(fleet, ssh):
    for name in HOSTS:
        ssh(name, f"rm -f {STAMP}")
    yield


def test_a_live_lock_of_another_run_stops_a_changing_run_before_any_change(unstamped, ssh,
                                                                           pyinfra):
    for name in HOSTS:
        _write_lock(ssh, name, f"other-{name}", "ctl-other", 31337, lease=3600)
    run = pyinfra("-y", "deploys/gpu_host.py", *LIMIT, "--data", "lock_wait=0", check=False)
    # every host failed: pyinfra prints no --json results, only its log
    assert run.returncode != 0 and "No hosts remaining" in run.output, run.output[-3000:]
    for name in HOSTS:
        lines = [line for line in run.output.splitlines()
                 if f"{name}: gpuhost upgrade run by dave@ctl-other (pid 31337) holds" in line]
        assert len(lines) == 1, run.output[-3000:]
        assert "since 2026-11-29 06:00:00 UTC" in lines[0] and "lock_break=true" in lines[0]
        assert f"token=other-{name}" in _owner(ssh, name)  # still the other run's
        assert ssh(name, f"test -e {STAMP}", check=False).returncode != 0  # nothing recorded
    # only the composite fact was read before the hosts were left alone: no role walked
    started = [line for line in run.output.splitlines() if "--> Starting operation:" in line]
    assert len(started) == 1 and "another run holds its lock" in started[0], started


def test_stale_locks_are_taken_over_and_released_at_the_end(unstamped, ssh, pyinfra):
    _write_lock(ssh, "gpu-01", "expired", "ctl-other", 31337, lease=-60)
    _write_lock(ssh, "ol8-03", "dead-pid", socket.gethostname(), _dead_pid(), lease=3600)
    started = time.monotonic()
    run = pyinfra("-y", "deploys/gpu_host.py", *LIMIT, "--data", "lock_wait=0", timeout=900)
    assert "expired" in run.output and "is gone (no pid" in run.output, run.output[-3000:]
    for name in HOSTS:
        assert _owner(ssh, name).strip() == "none"  # released by the run's last operation
        assert ssh(name, f"test -e {STAMP}", check=False).returncode == 0
    print(f"walk and take over on {len(HOSTS)} hosts: {time.monotonic() - started:.1f} s")


def test_two_real_runs_at_once_neither_fails_half_way(unstamped, ssh, pyinfra):
    for name in HOSTS:
        ssh(name, f"rm -f {STAMP}")

    def deploy(delay: float):
        time.sleep(delay)
        return pyinfra("-y", "deploys/gpu_host.py", *LIMIT, "--data", "lock_wait=240",
                       check=False, timeout=900)

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(deploy, (0, 3))
    assert first.returncode == 0, first.output[-3000:]
    errors = [op["name"] for op in (second.results or {}).get("operations", []) if op["error"]]
    if second.returncode != 0:  # it planned before the first took the lock: refused at its take
        assert errors == ["Take the gpuhost run lock (/var/lib/gpuhost/run.lock)"], errors
        assert "took this host's lock" in second.output, second.output[-3000:]
        assert second.totals["changed"] == 0, second.changed()
        print("the second run was refused at its take, before any change")
    else:  # it waited for the first (then found the hosts as that run left them), or ran after
        assert not errors, second.output[-3000:]
        print("the second run " + ("waited" if "waiting for gpuhost gpu_host run"
                                   in second.output else "ran after the first"))
    third = pyinfra("-y", "deploys/gpu_host.py", *LIMIT)
    assert third.totals["operations"] == len(HOSTS) and third.totals["changed"] == 0, \
        third.totals
    for name in HOSTS:
        assert _owner(ssh, name).strip() == "none"
