"""container_runtime_mode in the command plan (issue 16): what cdi mode adds to a bare host's
deploy, and that legacy (the default) adds nothing (the golden plans stay as they were)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOLDEN = HERE / "golden"



def run_plan(scenario: str, extra: dict) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUHOST_PLAN_DATA=json.dumps(extra), PYINFRA_PROGRESS="off")
    return plan_runner.run([sys.executable, str(HERE / "harness.py"), scenario,
                            "deploys/gpu_host.py"], cwd=ROOT, env=env, timeout=120)


GENERATE = "mkdir -p /etc/cdi && nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"


def test_legacy_is_the_default_and_changes_no_plan():
    result = run_plan("debian12", {"container_runtime_mode": "legacy"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == (GOLDEN / "debian12.plan").read_text()
    assert "nvidia-ctk cdi generate" not in result.stdout


def test_cdi_mode_generates_the_spec_after_the_runtime_and_verifies_both_docker_runs():
    result = run_plan("debian12", {"container_runtime_mode": "cdi"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert not any(line.startswith("FAILED") for line in lines), result.stdout[-3000:]
    # toolkit 1.17.8 (the plans' pin) has no nvidia-cdi-refresh: the spec goes to /etc/cdi
    assert GENERATE in lines
    assert lines.index(GENERATE) > lines.index("mv -f /etc/docker/daemon.json.gpuhost-new "
                                               "/etc/docker/daemon.json")
    # then gpuhost's boot unit, written atomically and enabled (the spec before Docker at boot)
    unit = "/etc/systemd/system/gpuhost-cdi-spec.service"
    start = lines.index(f"upload {unit}.gpuhost-new")
    assert lines[start:start + 5] == [
        f"upload {unit}.gpuhost-new", f"chmod 644 {unit}.gpuhost-new",
        f"mv -f {unit}.gpuhost-new {unit}", "systemctl daemon-reload",
        "systemctl enable gpuhost-cdi-spec.service >/dev/null"]
    assert start > lines.index(GENERATE)
    # the verification read both runs (the fake host answered them) and passed
    assert "verification failed" not in result.stdout + result.stderr


def test_auto_with_toolkit_118_and_docker_28_is_cdi_with_the_refresh_services_path():
    result = run_plan("debian12", {"container_runtime_mode": "auto",
                                   "container_toolkit_version": "1.18.2",
                                   "docker_version": "28.3.3"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("mkdir -p /var/run/cdi && nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml"
            in result.stdout.splitlines())
    old = run_plan("debian12", {"container_runtime_mode": "auto", "docker_version": "28.3.3"})
    assert "nvidia-ctk cdi generate" not in old.stdout  # toolkit 1.17.8: legacy
