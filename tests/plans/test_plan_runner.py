"""The session's plan worker (tests/plans/zygote.py) against a fresh process: the same
exit status, stdout and stderr (a traceback included), and a plan that hangs fails its test
with subprocess.TimeoutExpired while the worker goes on serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def worker():
    if plan_runner.WORKER is None:
        pytest.skip("GPUHOST_TEST_SUBPROCESS=1: no plan worker")
    return plan_runner.WORKER


def test_a_forked_plan_answers_as_a_fresh_process(worker):
    env = dict(os.environ, PYINFRA_PROGRESS="off",
               GPUHOST_PLAN_DATA=json.dumps({"reboot_policy": "sometimes"}))
    args = [sys.executable, str(HERE / "harness.py"), "debian12", "deploys/gpu_host.py"]
    forked = plan_runner.run(args, cwd=ROOT, env=env, timeout=120)
    fresh = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)
    assert fresh.returncode == 1 and "Traceback" in fresh.stderr, fresh.stderr[-2000:]
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_plan_that_hangs_times_out_and_the_worker_goes_on(worker):
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(subprocess.TimeoutExpired):
        plan_runner.run(hang, cwd=ROOT, env=dict(os.environ), timeout=0.5)
    done = plan_runner.run([sys.executable, "-c", "import sys; sys.exit(3)"], cwd=ROOT,
                           env=dict(os.environ), timeout=30)
    assert done.returncode == 3
