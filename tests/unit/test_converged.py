"""gpuhost.converged: the one judgement of "converged" (issue 27 item 2), and that the four
places that used to judge it themselves ask it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost import converged
from gpuhost.reports import audit

ROOT = Path(__file__).resolve().parents[2]
WANT = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8"}


def test_a_converged_host_has_no_reason(make_state):
    verdict = converged.judge(make_state(), audit.desired_settings(WANT))
    assert verdict.converged and verdict.reasons == () and verdict.messages() == []


def test_reasons_name_the_item_and_what_to_do(make_state):
    verdict = converged.judge(make_state(driver="550.163.01"), WANT)
    assert not verdict.converged
    [reason] = verdict.only(converged.STACK).reasons
    assert reason["item"] == "driver" and reason["want"] == "570.172.08"
    assert reason["message"] == "driver 550.163.01, want 570.172.08"


def test_packages_newer_than_the_module_are_a_pending_reboot(make_state):
    state = make_state(driver="550.163.01", packages="570.172.08")
    assert [r["item"] for r in converged.judge(state, WANT).reasons] == ["reboot_pending"]


def test_the_running_daemon_without_the_nvidia_runtime_is_drift(make_state):
    state = make_state(running_default="runc")
    state["docker"]["daemon"]["runtimes"] = ["runc"]
    [reason] = converged.judge(state, WANT).reasons
    assert reason["item"] == "nvidia_runtime" and "restart Docker" in reason["message"]
    state["docker"]["daemon"]["runtimes"] = ["nvidia", "runc"]
    assert converged.judge(state, WANT).converged


def test_a_key_not_wanted_and_a_section_not_given_are_not_judged(make_state):
    state = make_state(driver="550.163.01")
    assert converged.judge(state, {}).converged
    assert converged.judge({"driver": state["driver"]}, WANT).only(converged.DRIVER).messages() == [
        "driver 550.163.01, want 570.172.08"]
    assert converged.judge({}, WANT).converged


def test_only_keeps_the_asked_items(make_state):
    state = make_state(driver="550.163.01", toolkit="1.17.7")
    verdict = converged.judge(state, WANT)
    assert {r["item"] for r in verdict.reasons} == {"driver", "toolkit"}
    assert [r["item"] for r in verdict.only(converged.DRIVER).reasons] == ["driver"]


@pytest.mark.parametrize("path", ["gpuhost/reports/audit.py", "roles/verify.py", "roles/upgrade/ops.py",
                                  "vagrant/run_pyinfra.py"])
def test_the_four_callers_ask_the_one_judgement(path):
    assert "converged.judge(" in (ROOT / path).read_text()

