"""The fast path in the command plan (issue 27 item 7): a converged host whose stamp shows
it unchanged since gpuhost's last run gets no command at all; the same host with one file
changed by hand is walked role by role, and the run ends by recording a new stamp."""

from __future__ import annotations

import pytest

from tests.plans.test_plans import run_plan

RECORD = "record the converged stamp /var/lib/gpuhost/converged (roles/stamp.py)"
RELEASE = "gpuhost run lock: release (roles/runlock.py)"  # after the stamp, last


@pytest.mark.parametrize("scenario", ["debian12", "ol9-uek8"])
def test_an_unchanged_converged_host_gets_no_command(scenario):
    result = run_plan(scenario, {"plan_stamp": "valid"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "", result.stdout[-3000:]


def test_full_check_walks_every_role_of_the_same_host():
    """(This harness answers the roles' own facts as a bare host would, so the walk plans
    commands; on a real converged host it changes nothing: tests/integration/test_gpu_host.py.)"""
    result = run_plan("debian12", {"plan_stamp": "valid", "full_check": True})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) > 20 and lines[-2:] == [RECORD, RELEASE], result.stdout[-2000:]


def test_a_hand_edited_file_walks_every_role_and_records_a_new_stamp():
    result = run_plan("debian12", {"plan_stamp": "stale"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) > 20 and lines[-2:] == [RECORD, RELEASE], result.stdout[-2000:]
    assert not any(line.startswith("FAILED") for line in lines)
