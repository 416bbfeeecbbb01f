"""Issue 23 item 12, the pure part: who holds a package manager's lock (read from
/proc/locks by the host's shell), the bounded wait, an interrupted dpkg. Run here with real
fcntl locks on temporary files, as apt and dpkg take them."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gpuhost import pkglock


@pytest.fixture
def held(tmp_path):
    """A lock file held (fcntl, like apt/dpkg) by a python3 process for 4 s."""
    lock = tmp_path / "lock-frontend"
    lock.touch()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.lockf(f, fcntl.LOCK_EX); "
        "print('locked', flush=True); time.sleep(4)"), str(lock)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    yield str(lock), holder.pid
    holder.kill()
    holder.wait()


def sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)


def test_the_holder_of_a_lock_is_named(held):
    path, pid = held
    out = sh(pkglock.state_command("rhel", paths=(path, path + ".absent"))).stdout
    state = pkglock.parse(out.splitlines())
    assert [(h["path"], h["pid"]) for h in state["held"]] == [(path, pid)]
    assert state["held"][0]["command"].startswith("python") and not state["interrupted"]
    assert pkglock.describe(state["held"]).startswith(f"{path} is held by process {pid} (")


def test_the_wait_ends_when_the_holder_does(held):
    path, pid = held
    started = time.monotonic()
    done = sh(pkglock.wait_command("debian", 30, paths=(path,)))
    assert done.returncode == 0, done.stderr
    assert 2 < time.monotonic() - started < 20
    assert f"waiting 0s for the package manager's lock: held {path} {pid}" in done.stdout


def test_the_wait_is_bounded_and_says_who_and_what_to_do(held):
    path, pid = held
    done = sh(pkglock.wait_command("debian", 1, paths=(path,)))
    assert done.returncode == 1
    assert f"held {path} {pid}" in done.stderr
    assert "still held after 1 s" in done.stderr and "then run gpuhost again" in done.stderr


def test_a_free_lock_and_a_whole_dpkg_read_as_nothing_to_do(tmp_path):
    (tmp_path / "lock").touch()
    assert pkglock.parse(sh(pkglock.state_command("rhel", paths=(str(tmp_path / "lock"),)))
                         .stdout.splitlines()) == {"held": [], "interrupted": False}
    assert pkglock.parse(["interrupted"])["interrupted"] is True


def test_apt_waits_for_the_dpkg_lock_by_its_own_setting_too():
    assert 'DPkg::Lock::Timeout "600";' in pkglock.APT_CONF_TEXT
    assert "dpkg --force-confdef --force-confold --configure -a" in pkglock.REPAIR_DPKG
