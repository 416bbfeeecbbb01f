"""Slurm (issue 26 item 4): the section's parsers on real 22.05 output, the drain/resume
decisions, the audit's findings, the setting (facts/assemble_slurm.py, gpuhost/slurm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.facts import assemble_slurm as A
from gpuhost.facts.parsers import split_sections
from gpuhost.facts.script import ALL_SECTIONS, CHAINS, build_script
from gpuhost import health, settings, slurm

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def state_of(name: str) -> dict:
    return A.slurm_state(split_sections((FIXTURES / f"section__{name}.txt").read_text()))


def host(slurm_value, gpus=2, mig=None, answered=True) -> dict:
    """A host state with ``gpus`` nvidia-smi GPUs; ``mig``: {index: MIG device count}."""
    mig = mig or {}
    return {"gpus": [{"index": i, "source": "nvidia-smi"} for i in range(gpus)],
            "mig": {"gpus": [{"index": i, "mode_current": "enabled" if i in mig else "disabled",
                              "devices": [{}] * mig.get(i, 0)} for i in range(gpus)]},
            "health": {"gpus_missing": [] if answered else None}, "slurm": slurm_value}


def test_the_idle_node_of_debian_slurm_22_05():
    got = state_of("idle")
    assert got["node_name"] == "gpu-01" and got["enabled"] == "enabled"
    assert got["gres"] == {"gpus": 2, "error": None, "lines": [
        {"name": "gpu", "type": None, "count": 2, "file": "/dev/nvidia[0-1]"}]}
    assert got["node"] == {"name": "gpu-01", "state": "IDLE", "flags": [], "reason": None,
                           "gres": "gpu:2", "gpus": 2}


def test_reasons_keep_their_spaces_and_lose_the_user_stamp():
    ours = state_of("drained-by-gpuhost")["node"]
    assert (ours["state"], ours["flags"]) == ("UNKNOWN", ["DRAIN"])
    assert ours["reason"] == "gpuhost: driver upgrade to 580.95.05"
    foreign = state_of("draining-foreign-reason")["node"]
    assert (foreign["state"], foreign["flags"]) == ("ALLOCATED", ["DRAIN"])
    assert foreign["reason"] == "rack 4: PSU swap (ticket 123)"
    assert A.busy(foreign) and A.drained(foreign) and not A.busy(ours)


@pytest.mark.parametrize("after", [
    " ReservationName=maint", " Comment=rack4 Extra=x InstanceId=i-1 InstanceType=p5"])
def test_fields_newer_slurm_prints_after_the_reason_are_not_the_reason(after):
    """T4-13: node_info.c slurm_sprint_node_table prints Comment=, Extra=, InstanceId=,
    InstanceType=, ReservationName= after "Reason=... [user@time]" in -o mode."""
    base = ("NodeName=gpu-01 Arch=x86_64 CoresPerSocket=8 State=IDLE+DRAIN Gres=gpu:2 "
            "Reason=gpuhost: GPU 1 recovery (reset)")
    stamped = A.parse_node_line(f"{base} [root@2026-11-29T03:00:00]{after}")
    assert stamped["reason"] == "gpuhost: GPU 1 recovery (reset)"
    assert (stamped["state"], stamped["flags"], stamped["gpus"]) == ("IDLE", ["DRAIN"], 2)
    bare = A.parse_node_line(f"{base}{after}")  # no stamp: cut at the first known key
    assert bare["reason"] == "gpuhost: GPU 1 recovery (reset)"


def test_a_stopped_slurmctld_is_an_error_not_a_node():
    got = state_of("slurmctld-stopped")
    assert got["node"] is None and "Unable to contact slurm controller" in got["node_error"]
    assert got["gres"]["gpus"] == 2  # slurmd -G reads the files: no controller needed
    assert slurm.drain_step(got)[0] == "error"
    assert "start slurmctld" in slurm.drain_step(got)[1]


def test_slurmd_G_typed_lines_and_a_fatal_error():
    typed = A.parse_slurmd_gres((FIXTURES / "slurmd-G__two-typed-lines.txt").read_text())
    assert typed["gpus"] == 2 and [g["file"] for g in typed["lines"]] == [
        "/dev/nvidia0", "/dev/nvidia1"]
    fatal = A.parse_slurmd_gres((FIXTURES / "slurmd-G__missing-device-file.txt").read_text())
    assert fatal["gpus"] is None and "can't stat gres.conf file /dev/nvidia2" in fatal["error"]


@pytest.mark.parametrize("gres, count", [
    ("gpu:2", 2), ("gpu:a100:4(S:0-1)", 4), ("gpu:a100:2,gpu:v100:1,mps:200", 3),
    ("gpu:a100_3g.20gb:2(S:0),gpu:a100_1g.5gb:1(S:1)", 3), ("(null)", 0), ("gpu", 1),
    ("mps:100", 0)])
def test_gres_gpu_count(gres, count):
    assert A.gres_gpu_count(gres) == count


def test_the_section_runs_in_a_chain_of_its_own_bounded_by_timeouts():
    assert "slurm" in ALL_SECTIONS and ("slurm",) in CHAINS
    script = build_script(["slurm", "kernel"])
    assert "timeout 10 slurmd -G" in script and "timeout 10 scontrol show node -o" in script
    assert A.slurm_state({}) is None
    assert A.slurm_state({"slurm": {"rc": 127, "out": ""}}) is None


def test_drain_and_resume_decisions_keep_someone_elses_drain():
    assert slurm.drain_step(state_of("idle"))[0] == "drain"
    assert slurm.drain_step(state_of("drained-by-gpuhost"))[0] == "drain"  # a rerun
    step, why = slurm.drain_step(state_of("draining-foreign-reason"))
    assert step == "keep" and "rack 4: PSU swap" in why and "will not resume" in why
    assert slurm.resume_step(state_of("drained-by-gpuhost"))[0] == "resume"
    assert slurm.resume_step(state_of("draining-foreign-reason"))[0] == "keep"
    assert slurm.resume_step(state_of("idle"))[0] == "none"
    assert slurm.drain_step(None)[0] == "error"  # slurm: true without slurmd


def test_reasons_start_with_gpuhost_and_stay_short():
    assert slurm.reason("driver upgrade to 580.95.05") == "gpuhost: driver upgrade to 580.95.05"
    failed = slurm.failed_reason("GPU 1 recovery (reset)", "x " * 300)
    assert failed.startswith("gpuhost: GPU 1 recovery (reset) failed the health gate")
    assert len(failed) <= slurm.REASON_MAX


def test_on_follows_the_setting_and_for_auto_the_enabled_unit():
    idle = state_of("idle")
    assert slurm.on("auto", idle) and not slurm.on("auto", None)
    assert not slurm.on(False, idle) and slurm.on(True, None)
    assert not slurm.on("auto", {**idle, "enabled": "disabled", "active": "inactive"})


def test_setting_values():
    assert settings.Settings.__dataclass_fields__["slurm"].default == "auto"
    for good in ("auto", True, False):
        assert slurm.check_setting("slurm", good) == []
    for bad in ("yes", 1, 0, None):
        assert slurm.check_setting("slurm", bad), bad


def ids(state) -> list[str]:
    return [f["id"] for f in slurm.findings(state)]


def test_gres_mismatch_from_real_output():
    found = slurm.findings(host(state_of("gres-conf-one-of-two")))
    assert [f["id"] for f in found] == ["slurm-gres-mismatch"]
    assert "gres.conf gives 1 (slurmd -G)" in found[0]["message"]
    assert "host's 2 GPU(s)" in found[0]["message"]
    assert ids(host(state_of("idle"))) == []
    # slurm.conf and gres.conf both say 2, the host lost one
    assert "slurm.conf configures 2" in slurm.findings(host(state_of("idle"), gpus=1))[0][
        "message"]


def test_mig_devices_count_as_gpus_and_no_answer_is_no_finding():
    idle = state_of("idle")
    assert ids(host(idle, gpus=1, mig={0: 2})) == []  # one GPU, two MIG devices
    assert ids(host(idle, gpus=2, mig={0: 3})) == ["slurm-gres-mismatch"]  # 3 + 1
    assert ids(host(idle, answered=False)) == []
    assert ids(host(None)) == []


def test_a_drain_left_by_gpuhost_is_a_finding_someone_elses_is_not():
    found = slurm.findings(host(state_of("drained-by-gpuhost")))
    assert [f["id"] for f in found] == ["slurm-drained-by-gpuhost"]
    assert "scontrol update nodename=gpu-01 state=resume" in found[0]["message"]
    assert ids(host(state_of("draining-foreign-reason"))) == []
    # and the audit's findings include them
    assert "slurm-drained-by-gpuhost" in [f["id"] for f in health.findings(
        {**host(state_of("drained-by-gpuhost")), "driver": {}})]


def test_node_names_and_reasons_reach_the_shell_quoted():
    from gpuhost.roles import slurm as roles_slurm
    from pyinfra.api import QuoteString

    node = "gpu-01; touch /tmp/x"
    update = str(roles_slurm._update(node, "state=drain",
                                     QuoteString("reason=gpuhost: it's \"quoted\"")))
    assert update == ("timeout 30 scontrol update 'nodename=gpu-01; touch /tmp/x' state=drain "
                      "'reason=gpuhost: it'\"'\"'s \"quoted\"'")
    wait = str(roles_slurm._wait(node, 60))
    assert wait.startswith("n='gpu-01; touch /tmp/x'; t=60; ")
    assert 'scontrol show node -o "$n"' in wait

