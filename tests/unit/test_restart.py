"""gpuhost.roles.restart.checked_restart, the one restart-and-roll-back of Docker and containerd
(issue 27 item 3), run by a real shell with stand-ins for systemctl and journalctl: the
error it reports is this restart's only, the undo runs, the unit is restarted again.
(The real daemons: tests/integration/test_containerd.py and test_docker_mig_safety.py.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pyinfra.api import QuoteString, StringCommand

from gpuhost.roles import containerd, daemon_json, restart

SYSTEMCTL = """#!/bin/sh
echo "systemctl $*" >> "$LOG"
case "$1" in restart) n=$(cat "$DIR/restarts" 2>/dev/null || echo 0); n=$((n+1));
  echo $n > "$DIR/restarts"; [ "$n" -gt "${FAILS:-1}" ] ;; *) exit 0 ;; esac
"""
# journalctl: an error of an earlier failure is in the journal; --since hides it
JOURNALCTL = """#!/bin/sh
case "$*" in *--since*) ;; *) echo "level=error msg=old failure from yesterday" ;; esac
echo "level=error msg=unknown key no-such-option"
"""


def run(command: StringCommand, tmp_path: Path, fails: int = 1) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("systemctl", SYSTEMCTL), ("journalctl", JOURNALCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path / "log"),
           "DIR": str(tmp_path), "FAILS": str(fails)}
    return subprocess.run(["sh", "-c", command.get_raw_value()], env=env, capture_output=True,
                          text=True, timeout=30)


def test_a_failed_restart_reports_this_restarts_errors_undoes_and_restarts(tmp_path):
    (tmp_path / "new").write_text("new")
    command = restart.checked_restart(
        "thing.service", "true", "gpuhost: thing did not start; thing said:",
        errors="grep -e 'level=error'",
        undo=[StringCommand("echo old >", QuoteString(str(tmp_path / "new"))), ";"])
    done = run(command, tmp_path)
    assert done.returncode == 1
    assert "gpuhost: thing did not start; thing said: level=error msg=unknown key" in done.stderr
    assert "old failure" not in done.stderr
    assert (tmp_path / "new").read_text() == "old\n"
    calls = (tmp_path / "log").read_text().splitlines()
    assert calls.count("systemctl restart thing.service") == 2


def test_a_restart_that_comes_back_exits_0_and_changes_nothing(tmp_path):
    (tmp_path / "new").write_text("new")
    command = restart.checked_restart(
        "thing.service", "true", "failed", errors="grep error",
        undo=[StringCommand("rm -f", QuoteString(str(tmp_path / "new"))), ";"])
    done = run(command, tmp_path, fails=0)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new").exists()


def test_nothing_to_undo_means_no_second_restart(tmp_path):
    done = run(restart.checked_restart("thing.service", "true", "failed", errors="grep error"),
               tmp_path)
    assert done.returncode == 1
    assert (tmp_path / "log").read_text().count("restart") == 1


def test_docker_and_containerd_use_it():
    for command in (daemon_json.checked_restart("/etc/docker/daemon.json", None),
                    daemon_json.checked_restart_only(), containerd.checked_restart(["true"])):
        text = command.get_raw_value()
        assert 'since=$(date' in text and '--since "$since"' in text and " -n 40 " not in text
