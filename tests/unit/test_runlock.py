"""The run lock (gpuhost/runlock.py, issue 36 item 7): its parser, the controller's decision,
and its shell (section, take, renew, release) run in this machine's own ``sh`` against a
temporary directory standing for /var/lib/gpuhost (real hosts: tests/integration/test_run_lock.py)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpuhost import runlock
from gpuhost.facts import parsers
from gpuhost.facts.assemble import host_state
from gpuhost.facts.script import SECTIONS, build_script

ME = runlock.Run(token="a" * 32, controller="ctl-1", user="alice", pid=4242,
                 started="2026-11-29 07:00:00 UTC", command="gpu_host")


def _lock(**values):
    lock = {"now": 1_000, "token": "b" * 32, "controller": "ctl-2", "user": "bob", "pid": 77,
            "started": "2026-11-29 06:55:00 UTC", "command": "upgrade", "taken": 900,
            "expires": 4_500}
    lock.update(values)
    return lock


# --- the parser ----------------------------------------------------------------------------

def test_the_section_is_parsed_into_the_owner_and_the_hosts_clock():
    text = ("now=1764400000\ntoken=abc\ncontroller=ctl-1\nuser=alice\npid=4242\n"
            "started=2026-11-29 07:00:00 UTC\ncommand=gpu_host\ntaken=1764399990\n"
            "expires=1764403590\n")
    assert parsers.parse_run_lock(text) == {
        "now": 1764400000, "token": "abc", "controller": "ctl-1", "user": "alice", "pid": 4242,
        "started": "2026-11-29 07:00:00 UTC", "command": "gpu_host", "taken": 1764399990,
        "expires": 1764403590}


def test_a_lock_without_owner_file_has_only_the_clock_and_junk_is_refused():
    assert parsers.parse_run_lock("now=5\n") == {
        "now": 5, "token": None, "controller": None, "user": None, "pid": None,
        "started": None, "command": None, "taken": None, "expires": None}
    assert parsers.parse_run_lock("now=5\npid=x\nexpires=\n")["pid"] is None
    with pytest.raises(ValueError, match="run lock"):
        parsers.parse_run_lock("token=abc\n")


def test_the_composite_fact_carries_the_lock_and_none_without_one():
    assert "run_lock" in SECTIONS and "run_lock" in build_script(tuple(SECTIONS))
    absent = host_state({"run_lock": {"rc": 3, "out": ""}})
    assert absent["run_lock"] is None
    found = host_state({"run_lock": {"rc": 0, "out": "now=9\ntoken=t\npid=1\nexpires=20\n"}})
    assert found["run_lock"]["token"] == "t" and found["run_lock"]["expires"] == 20


# --- the decision --------------------------------------------------------------------------

def test_no_lock_is_free():
    assert runlock.decide(None, ME).kind == "free"


def test_a_live_run_of_another_controller_holds_the_host_and_the_line_names_it():
    decision = runlock.decide(_lock(), ME, alive=lambda pid: False)
    assert decision.kind == "held"
    line = runlock.held_message("gpu-01", decision.lock, waited=0)
    assert "\n" not in line
    for part in ("gpu-01", "upgrade", "bob@ctl-2", "pid 77", "since 2026-11-29 06:55:00 UTC",
                 "lease until", "lock_break=true", "--break-lock", runlock.PATH):
        assert part in line, part


def test_an_expired_lease_is_taken_over():
    decision = runlock.decide(_lock(expires=999), ME)
    assert decision.kind == "takeover" and "expired" in decision.reason
    assert decision.stale_token == "=" + "b" * 32


def test_same_controller_dead_pid_is_taken_over_live_pid_holds():
    mine = _lock(controller="ctl-1", pid=77)
    assert runlock.decide(mine, ME, alive=lambda pid: False).kind == "takeover"
    assert runlock.decide(mine, ME, alive=lambda pid: True).kind == "held"
    assert runlock.decide(_lock(controller="ctl-1", pid=ME.pid), ME).kind == "takeover"


def test_broken_by_hand_is_taken_over_and_an_ownerless_lock_too():
    decision = runlock.decide(_lock(), ME, broken=True, alive=lambda pid: True)
    assert decision.kind == "takeover" and "by hand" in decision.reason
    ownerless = runlock.decide(_lock(token=None, expires=None), ME)
    assert ownerless.kind == "takeover" and ownerless.stale_token == "="


def test_this_controllers_pid_check_is_real():
    assert runlock.pid_alive(os.getpid())
    child = subprocess.Popen(["true"])
    child.wait()
    assert not runlock.pid_alive(child.pid)


# --- the shell, against a directory standing for /var/lib/gpuhost --------------------------

def _sh(tmp_path, script, name, *args):
    local = script.replace(runlock.DIR, str(tmp_path / "gpuhost"))
    out = subprocess.run(runlock.command(local, name, *args), shell=True, text=True,
                         capture_output=True, check=True).stdout
    return runlock.result(out.splitlines())


def _take(tmp_path, token, stale="-", lease=3600):
    return _sh(tmp_path, runlock.TAKE, "gpuhost-lock-take", lease, stale, token, "ctl-x",
               "carol", 99, "2026-11-29 07:01:00 UTC", "gpu_host")


def _read(tmp_path):
    section = SECTIONS["run_lock"].replace(runlock.DIR, str(tmp_path / "gpuhost"))
    run = subprocess.run(["sh", "-c", section], text=True, capture_output=True)
    return None if run.returncode == 3 else parsers.parse_run_lock(run.stdout)


def test_take_writes_the_owner_a_second_take_fails_with_one_line_naming_it(tmp_path):
    assert _read(tmp_path) is None
    assert _take(tmp_path, "t1") == (True, "")
    lock = _read(tmp_path)
    assert lock["token"] == "t1" and lock["user"] == "carol" and lock["pid"] == 99
    assert lock["expires"] - lock["taken"] == 3600 and abs(lock["now"] - lock["taken"]) < 5
    ok, line = _take(tmp_path, "t2")
    assert not ok and "took this host's lock" in line and "token=t1" in line
    assert "lock_break=true" in line and _read(tmp_path)["token"] == "t1"


def test_a_stale_lock_is_moved_aside_only_while_it_is_the_judged_one(tmp_path):
    _take(tmp_path, "dead")
    assert _take(tmp_path, "t3", stale="=other")[0] is False  # not the lock judged dead
    assert _take(tmp_path, "t3", stale="=dead") == (True, "")
    assert _read(tmp_path)["token"] == "t3"
    assert sorted(os.listdir(tmp_path / "gpuhost")) == ["run.lock"]


def test_renew_moves_the_expiry_and_fails_once_the_lock_is_not_this_runs(tmp_path):
    _take(tmp_path, "t4", lease=300)
    assert _sh(tmp_path, runlock.RENEW, "gpuhost-lock-renew", "t4", 7200)[0]
    lock = _read(tmp_path)
    assert lock["expires"] - lock["now"] > 7000
    ok, line = _sh(tmp_path, runlock.RENEW, "gpuhost-lock-renew", "other", 7200)
    assert not ok and "no longer holds" in line


def test_release_removes_only_this_runs_lock(tmp_path):
    _take(tmp_path, "t5")
    ok, note = _sh(tmp_path, runlock.RELEASE, "gpuhost-lock-release", "other")
    assert ok and "not this run's lock" in note and _read(tmp_path)["token"] == "t5"
    assert _sh(tmp_path, runlock.RELEASE, "gpuhost-lock-release", "t5") == (True, "")
    assert _read(tmp_path) is None


def test_of_many_takes_at_once_exactly_one_wins(tmp_path):
    (tmp_path / "gpuhost").mkdir()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: _take(tmp_path, f"r{i}"), range(8)))
    winners = [i for i, (ok, _) in enumerate(results) if ok]
    assert len(winners) == 1 and _read(tmp_path)["token"] == f"r{winners[0]}"
    assert sorted(os.listdir(tmp_path / "gpuhost")) == ["run.lock"]


@pytest.mark.parametrize("command", ["upgrade", "recover"])
def test_break_lock_on_the_cli_is_lock_break_data(monkeypatch, command):
    from gpuhost import cli
    from gpuhost.cli import recover, upgrade

    seen = {}
    for module in (recover, upgrade):
        monkeypatch.setattr(module, "run", lambda args: seen.setdefault("data", args.data) and 0)
    cli.main([command, "inv.py", "--limit", "gpu-01", "--data", "x=1", "--break-lock"])
    assert seen["data"] == ["x=1", "lock_break=true"]
    seen.clear()
    cli.main([command, "inv.py", "--limit", "gpu-01"])
    assert seen["data"] == []
