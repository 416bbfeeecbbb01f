"""gpuhost recover's decisions (gpuhost.health.recover) and its fact's parser (facts.recover), on
host states from the real fact code (tests/conftest.py make_state) with health fields set
here. The sandbox run is tests/integration/test_recover.py."""

from __future__ import annotations

import datetime
import json

import pytest

from gpuhost.facts import recover as recover_fact
from gpuhost.health import recover, xid

TODAY = datetime.date(2026, 11, 24)
A100 = ("NVIDIA A100-SXM4-40GB", "Disabled", "Disabled")
PROBE = {"services": {"nvidia-dcgm": "running", "nvidia-persistenced": "running",
                      "nvidia-fabricmanager": "running"}, "hostengine": False}


@pytest.fixture
def host(make_state, with_health):
    """A 2-GPU A100 host on 580; ``gpu1`` sets GPU 1's health fields, ``xids`` the log."""
    def make(gpu1=None, xids=(), gpu0=None):
        state = with_health(make_state(driver="580.95.05", gpus=[A100, A100]),
                            host={"xid_events": list(xids)})
        for entry, fields in zip(state["gpus"], (gpu0, gpu1), strict=True):
            entry["health"].update(fields or {})
            entry["persistence_mode"] = "enabled"
        return state
    return make


def slot(state, index):
    return xid.slot(state["gpus"][index]["pci_bus_id"])


def event(state, index, number, text="x"):
    return {"pci_bus_id": slot(state, index)[5:-2], "xid": number, "gpu_instance_id": None,
            "text": text}


def assess(state, containers=(), **kw):
    return recover.assess("gpu-01", state, PROBE, list(containers), today=TODAY, **kw)


def test_a_pending_row_remap_picks_its_gpu_and_keeps_what_ran_before(host):
    state = host(gpu1={"remapped_rows_pending": True})
    plan = assess(state)
    assert plan["problems"] == [] and plan["action"] == "reset"
    assert plan["gpu"]["index"] == 1 and plan["gpu"]["bus_id"] == slot(state, 1)
    assert [f["id"] for f in plan["findings"]] == ["row-remap-pending"]
    # DCGM is stopped around the reset; persistenced and Fabric Manager keep running
    assert plan["before"]["services"] == ["nvidia-dcgm"]
    assert plan["before"]["persistence"] == "enabled" and plan["before"]["containers"] == []


@pytest.mark.parametrize(("number", "text", "action"), [
    (48, "x", "reset"), (95, "x", "reset"), (94, "x", "reset"), (119, "x", "reset"),
    (79, "x", "reboot"), (63, "x", "none"), (13, "x", "restart_app"),
    (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset"),
    (154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "reboot"),
    # T4-02: an action gpuhost does not know, or cannot read, is never a reset
    (154, "GPU recovery action changed from 0x0 (None) to 0x5 (Recover IMEX Domain)",
     "recover_imex"),
    (154, "GPU recovery action changed from 0x0 (None) to 0x7 (Bus Reset)", "unknown"),
    (154, "GPU recovery action changed", "unknown"),
    (154, "GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)", "reboot"),
    # T4-06: the catalog's row 163 says "No GPU reset required"
    (163, "x", "check_thermal"),
])
def test_xid_actions_follow_the_catalog(host, number, text, action):
    state = host()
    state["health"]["xid_events"] = [event(state, 1, number, text)]
    finding = {"id": f"xid-{number}", "gpu": slot(state, 1)}
    assert recover.finding_action(finding, state) == action


def test_findings_that_ask_for_a_reboot_or_a_replacement_refuse_with_what_to_do(host):
    state = host(gpu1={"remapped_rows_failure": True})
    plan = assess(state, gpu=1)
    assert plan["action"] == "none" and len(plan["problems"]) == 1
    assert "row-remap-failure: drain the GPU, run NVIDIA's field diagnostics and follow NVIDIA's RMA process" in plan["problems"][0]
    lost = host()
    lost["health"]["xid_events"] = [event(lost, 1, 48), event(lost, 1, 79)]
    problem = assess(lost, gpu=1)["problems"][0]
    assert "xid-79: drain the host and reboot it" in problem


def test_nothing_to_do_is_no_refusal(host):
    plan = assess(host())
    assert plan["problems"] == [] and plan["action"] == "none"
    assert plan["note"] == "no finding of this host asks for a GPU reset"
    plan = assess(host(gpu1={"pcie_width_current": 8}), gpu=1)
    assert plan["action"] == "none" and "pcie-width-degraded (none)" in plan["note"]


def test_two_gpus_to_reset_need_gpu_n_and_a_missing_index_is_named(host):
    state = host(gpu0={"remapped_rows_pending": True}, gpu1={"remapped_rows_pending": True})
    assert "recover one at a time with --gpu N" in assess(state)["problems"][0]
    assert assess(state, gpu=0)["gpu"]["index"] == 0
    assert "nvidia-smi lists no GPU 5 (it lists 0, 1)" in assess(state, gpu=5)["problems"][0]


def container(requests=None, env=(), runtime="runc", name="job"):
    return {"id": "c" * 64, "name": name, "runtime": runtime,
            "device_requests": requests or [], "env": list(env)}


GPU_REQ = {"Driver": "", "Capabilities": [["gpu"]]}


@pytest.mark.parametrize(("made", "holds"), [
    (container([{**GPU_REQ, "Count": -1, "DeviceIDs": None}]), (True, True)),      # --gpus all
    (container([{**GPU_REQ, "Count": 0, "DeviceIDs": ["0"]}]), (True, False)),      # device=0
    (container([{**GPU_REQ, "Count": 1, "DeviceIDs": None}]), (True, False)),       # --gpus 1
    (container([{"Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=1"]}]), (False, True)),
    (container(env=["NVIDIA_VISIBLE_DEVICES=all"], runtime="nvidia"), (True, True)),
    (container(env=["NVIDIA_VISIBLE_DEVICES=void"], runtime="nvidia"), (False, False)),
    (container(env=["NVIDIA_VISIBLE_DEVICES=1:0"], runtime="nvidia"), (False, True)),  # MIG 1:0
    (container(env=["NVIDIA_VISIBLE_DEVICES=all"]), (False, False)),              # runc: no GPU
])
def test_which_containers_hold_which_gpu(host, made, holds):
    gpus = host()["gpus"]
    assert (recover.container_holds(made, gpus[0]), recover.container_holds(made, gpus[1])) \
        == holds


def test_a_container_or_process_on_the_gpu_refuses_unless_forced(host):
    state = host(gpu1={"remapped_rows_pending": True})
    other = container([{**GPU_REQ, "Count": 0, "DeviceIDs": ["0"]}], name="other")
    assert assess(state, [other])["problems"] == []  # GPU 0's container does not count
    mine = container([{**GPU_REQ, "Count": 0, "DeviceIDs": [state["gpus"][1]["uuid"]]}])
    problem = assess(state, [mine])["problems"][0]
    assert problem.startswith("GPU 1 is in use (container job): drain it")
    forced = assess(state, [mine, other], force=True)
    assert forced["problems"] == [] and forced["before"]["containers"] == ["c" * 64]
    assert assess(state, [mine], drain=True)["problems"] == []  # checked after the drain hook
    state["gpus"][1]["processes"] = [{"pid": 4242, "name": "python3"}]
    assert "GPU 1 is in use (pid 4242 python3)" in assess(state)["problems"][0]


def test_a_driver_that_does_not_answer_and_a_resume_point(host, make_state):
    plan = assess(make_state(driver=None, packages="580.95.05"))
    assert "the NVIDIA driver does not answer" in plan["problems"][0]
    state = host()
    marker = {"gpu": {"index": 1, "bus_id": slot(state, 1)}, "before": {"services": []},
              "findings": [{"id": "row-remap-pending"}]}
    assert assess(state, marker=marker)["action"] == "resume"
    assert "a recovery of GPU 1 is under way" in assess(state, gpu=0, marker=marker)["problems"][0]


def planned(state):
    return assess(state)


def test_verify_passes_when_the_finding_cleared_and_fails_with_the_reason(host):
    plan = planned(host(gpu1={"remapped_rows_pending": True}))
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, host(), today=TODAY)
    assert ok and "recovered by a GPU reset: row-remap-pending handled" in line
    ok, line = recover.verify(plan, {"run": "r", "rc": 3, "output": "Resetting GPU 00000000:0F:00.0"
                                     " is not supported.\n"}, host(), today=TODAY)
    assert not ok and line.startswith("nvidia-smi -r -i 1 failed (exit 3: Resetting GPU "
                                      "00000000:0F:00.0 is not supported.); the GPU's clients "
                                      "and persistence mode are as before")
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""},
                              host(gpu1={"remapped_rows_pending": True}), today=TODAY)
    assert not ok and "row-remap-pending is still there" in line
    grown = host()
    grown["health"]["xid_events"] = [event(grown, 1, 48)]
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, grown, today=TODAY)
    assert not ok and "new Xid lines for this GPU after the reset" in line
    ok, _ = recover.verify(plan, {"run": "r", "rc": 3, "output": ""}, host(), rebooted=True,
                           today=TODAY)
    assert ok  # the reboot fallback replaced the failed reset


def test_an_xid_that_asked_for_the_reset_stays_in_the_log_but_must_not_grow(host):
    state = host()
    state["health"]["xid_events"] = [event(state, 1, 48)]
    plan = planned(state)
    assert [f["id"] for f in plan["findings"]] == ["xid-48"] and plan["before"]["xid_count"] == 1
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, state, today=TODAY)
    assert ok, line


def test_the_probe_parses_containers_marker_and_result():
    requests = [{"Driver": "", "Count": 0, "DeviceIDs": ["1"], "Capabilities": [["gpu"]]}]
    lines = [f'container "{"a" * 64}" "/job one" "nvidia" {json.dumps(requests)} '
             '["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=1"]',
             'container "b" "/web" "runc" null null',
             'marker {"gpu": {"index": 1}}', "result run=2026-11-27T15:00:00Z", "result rc=3",
             "result Resetting GPU 00000000:0F:00.0 is not supported.", "boot 1234"]
    probe = recover_fact.parse(lines)
    assert probe["containers"][0] == {"id": "a" * 64, "name": "job one", "runtime": "nvidia",
                                      "device_requests": requests,
                                      "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=1"]}
    assert probe["containers"][1]["device_requests"] == []
    assert probe["marker"] == {"gpu": {"index": 1}} and probe["boot_id"] == "1234"
    assert probe["result"] == {"run": "2026-11-27T15:00:00Z", "rc": 3,
                               "output": "Resetting GPU 00000000:0F:00.0 is not supported."}
    assert recover_fact.parse(["marker {nope"])["marker_error"].startswith(
        "/var/lib/gpuhost/gpu-recover.json is not valid JSON")
    assert recover_fact.parse([])["result"] is None


def test_stopped_services_never_include_persistenced_or_fabric_manager():
    assert "nvidia-dcgm" in recover.STOP_SERVICES and "nvsm" in recover.STOP_SERVICES
    assert not set(recover.KEEP_RUNNING) & set(recover.STOP_SERVICES)


def test_a_rerun_does_not_reset_again_for_the_xids_it_already_reset_for(host):
    state = host()
    state["health"]["xid_events"] = [event(state, 1, 48)]
    plan = planned(state)
    handled = recover.handled_after({"0000:99:00.0": {"boot_id": "old"}}, "b1", plan)
    assert handled == {slot(state, 1): {"boot_id": "b1", "xid_count": 1, "xid_time": None,
                                        "ecc_volatile": 0}}
    again = assess(state, handled={**handled, "boot_id_now": "b1"})
    assert again["action"] == "none" and again["problems"] == []
    # a new Xid after the reset asks again; another boot forgets the record
    state["health"]["xid_events"].append(event(state, 1, 48))
    assert assess(state, handled={**handled, "boot_id_now": "b1"})["action"] == "reset"
    assert assess(host(gpu1={"ecc_volatile_uncorrectable": 2}),
                  handled={**handled, "boot_id_now": "b2"})["action"] == "reset"


def test_the_probe_reads_the_handled_record():
    probe = recover_fact.parse(['handled {"0000:0f:00.0": {"boot_id": "b1", "xid_count": 1}}'])
    assert probe["handled"] == {"0000:0f:00.0": {"boot_id": "b1", "xid_count": 1}}
    assert recover_fact.parse(["handled {bad"])["handled"] == {}


def test_the_cli_exit_status_comes_from_the_deploys_last_event():
    from gpuhost.cli import recover as cli_recover

    ev = [{"host": "gpu-01", "event": "plan"}]
    assert cli_recover.outcome(ev + [{"host": "gpu-01", "event": "done", "reason": "ok"}], 0,
                               "gpu-01") == (0, "done: ok")
    assert cli_recover.outcome(ev + [{"host": "gpu-01", "event": "failed", "reason": "why"}], 1,
                               "gpu-01") == (1, "gpuhost recover: FAILED on gpu-01: why")
    assert cli_recover.outcome([{"host": "gpu-01", "event": "refused", "reason": "busy"}], 1,
                               "gpu-01")[0] == 2
    assert cli_recover.outcome([{"host": "gpu-01", "event": "nothing", "reason": "n"}], 0,
                               "gpu-01") == (0, "nothing to recover on gpu-01: n")
    code, line = cli_recover.outcome(ev, 1, "gpu-01")  # pyinfra died before the verdict
    assert code == 1 and "run the same command again to resume" in line


def test_the_cli_wants_exactly_one_host(tmp_path, capsys):
    from gpuhost import cli

    assert cli.main(["recover", str(tmp_path / "missing.py"), "--limit", "gpu-01"]) == 2
    assert "no inventory file" in capsys.readouterr().err
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = []\n")
    assert cli.main(["recover", str(inventory)]) == 2
    assert "--limit HOST is required" in capsys.readouterr().err


def test_imex_fabric_manager_and_display_managers_keep_running_around_a_reset(host):
    """T4-01: SIGTERM ends IMEX's exports on the importing nodes (NVIDIA IMEX guide, Signal
    handling); NVIDIA's one-GPU reset flow stops DCGM and its clients only."""
    probe = {"services": {"nvidia-dcgm": "running", "nvidia-imex": "running", "gdm3": "running",
                          "nvsm": "running", "nvidia-fabricmanager": "running"},
             "hostengine": False, "modules": ["nvidia", "nvidia_uvm", "nvidia_modeset"]}
    plan = recover.assess("gpu-01", host(gpu1={"remapped_rows_pending": True}), probe, [],
                          today=TODAY)
    assert plan["problems"] == [] and plan["before"]["services"] == ["nvsm", "nvidia-dcgm"]
    assert "nvidia-imex" not in recover.STOP_SERVICES and "gdm" not in recover.STOP_SERVICES


def test_upgrade_stop_services_are_stopped_too_but_never_imex(host):
    """T4-10: a native exporter the site lists in upgrade_stop_services holds the GPU too."""
    stop = recover.services({"upgrade_stop_services": ("dcgm-exporter", "nvidia-imex")})
    assert stop[-1] == "dcgm-exporter" and "nvidia-imex" not in stop
    probe = {"services": {"dcgm-exporter": "running", "nvidia-dcgm": "running"},
             "hostengine": False, "modules": []}
    plan = recover.assess("gpu-01", host(gpu1={"remapped_rows_pending": True}), probe, [],
                          today=TODAY, stop=stop)
    assert plan["before"]["services"] == ["nvidia-dcgm", "dcgm-exporter"]


def test_a_loaded_nvidia_drm_refuses_the_reset_and_is_named(host):
    """T4-10: with nvidia_drm loaded every reset fails 'In use by another client'
    (NVIDIA/mig-parted#181)."""
    probe = {**PROBE, "modules": ["nvidia_drm", "nvidia_modeset", "nvidia"]}
    plan = recover.assess("gpu-01", host(gpu1={"remapped_rows_pending": True}), probe, [],
                          today=TODAY)
    assert plan["action"] == "none" and plan["problems"][0].startswith("nvidia_drm is loaded")
    assert "modprobe -r nvidia_drm" in plan["problems"][0]


def test_an_xid_154_action_gpuhost_does_not_know_refuses_the_recovery(host):
    """T4-02: the driver's words are named, nothing is reset."""
    state = host()
    state["health"]["xid_events"] = [
        event(state, 1, 154, "GPU recovery action changed from 0x0 (None) to 0x9 (Fix Me)")]
    plan = assess(state)
    assert plan["action"] == "none" and len(plan["problems"]) == 1
    assert "'Fix Me': a recovery action gpuhost does not know" in plan["problems"][0]
    state["health"]["xid_events"].append(event(state, 1, 48))  # with a reset-Xid too
    problem = assess(state, gpu=1)["problems"][0]
    assert "findings a reset does not fix: xid-154: " in problem and "'Fix Me'" in problem


def test_a_host_whose_findings_a_reset_does_not_fix_is_refused_with_what_to_do(host):
    """Build 5: a failed row remap asks for a replacement: named, not 'nothing to do'."""
    plan = assess(host(gpu1={"remapped_rows_failure": True}))
    assert plan["action"] == "none" and len(plan["problems"]) == 1
    assert plan["problems"][0].startswith("no finding of this host asks for a GPU reset, but it "
                                          "has critical findings a reset does not fix: GPU ")
    assert "row-remap-failure: drain the GPU, run NVIDIA's field diagnostics and follow NVIDIA's RMA process" in \
        plan["problems"][0]


def test_an_xid_48_on_a_gpu_past_its_sram_threshold_is_refused_not_reset(host):
    """T4-04: NVIDIA's WORKFLOW_XID_48: SRAM threshold exceeded -> field diagnostics, RMA."""
    state = host(gpu1={"sram_threshold_exceeded": True})
    state["health"]["xid_events"] = [event(state, 1, 48)]
    plan = assess(state)
    assert plan["action"] == "none" and len(plan["problems"]) == 1, plan
    assert "ecc-sram-threshold-exceeded: drain the GPU, run NVIDIA's field diagnostics" in \
        plan["problems"][0]


def test_a_fabric_completed_with_a_failed_status_is_no_reset(host):
    """T4-05: the fabric's probe failed; Fabric Manager, not a GPU reset."""
    state = host(gpu1={"fabric_state": "Completed", "fabric_status": "Unknown Error"})
    plan = assess(state)
    assert "fabric-probe-failed: restart nvidia-fabricmanager" in plan["problems"][0]


def timed(state, index, number, at, text="x"):
    """An Xid event with the kernel's monotonic time of its line (facts.assemble_health)."""
    return {**event(state, index, number, text), "time": at}


def test_a_new_xid_is_known_by_its_time_even_when_the_window_keeps_the_count(host):
    """T4-11: the host's last lines are a window; an old line dropping out while a new one
    comes keeps the count, not the times."""
    state = host()
    state["health"]["xid_events"] = [timed(state, 1, 48, t) for t in (10.5, 11.5, 12.5)]
    plan = planned(state)
    assert plan["before"]["xid_count"] == 3 and plan["before"]["xid_time"] == 12.5
    after = host()
    after["health"]["xid_events"] = [timed(after, 1, 48, t) for t in (11.5, 12.5, 90.25)]
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, after, today=TODAY)
    assert not ok and "new Xid lines for this GPU after the reset (Xid 48;" in line
    # the rerun's record: the old lines handled, the new one asks again
    handled = recover.handled_after({}, "b1", plan)
    assert handled[slot(state, 1)]["xid_time"] == 12.5
    assert assess(after, handled={**handled, "boot_id_now": "b1"})["action"] == "reset"
    state["health"]["xid_events"] = state["health"]["xid_events"][1:]  # one dropped out
    assert assess(state, handled={**handled, "boot_id_now": "b1"})["action"] == "none"


def test_xids_the_reset_procedure_itself_causes_do_not_fail_the_verification(host):
    """T4-08: Xid 45 when --force stops the GPU's containers (NVIDIA's catalog: "Control-C,
    GPU resets, sigkill are all examples"), an application fault: not new faults."""
    state = host(gpu1={"remapped_rows_pending": True})
    state["health"]["xid_events"] = [timed(state, 0, 13, 5.0)]
    plan = planned(state)
    after = host()
    after["health"]["xid_events"] = [timed(after, 0, 13, 5.0), timed(after, 1, 45, 20.0),
                                     timed(after, 1, 13, 21.0)]
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, after, today=TODAY)
    assert ok, line
    after["health"]["xid_events"].append(timed(after, 1, 95, 22.0))
    ok, line = recover.verify(plan, {"run": "r", "rc": 0, "output": ""}, after, today=TODAY)
    assert not ok and "(Xid 95;" in line


def test_a_gpu_on_an_nvlink_fabric_is_waited_for_after_its_reset(host):
    """T4-09: the driver starts the fabric probe again when it re-initialises a GPU
    (gpu.c gpuStatePostLoad): recover waits for the fabric before judging the GPU."""
    fabric = assess(host(gpu1={"remapped_rows_pending": True, "fabric_state": "Completed",
                               "fabric_status": "Success"}))
    assert fabric["before"]["fabric"] is True
    plain = assess(host(gpu1={"remapped_rows_pending": True}))
    assert plain["before"]["fabric"] is False


def test_a_reset_a_client_blocks_names_the_holders_and_what_to_do(host):
    """Build 4: nvidia-smi -r refuses while any client holds the GPU (nvidia-smi(1)); the
    failed reset's result carries the processes holding an NVIDIA device."""
    plan = planned(host(gpu1={"remapped_rows_pending": True}))
    text = ("run=r\nrc=255\nThe following GPUs could not be reset:\n  GPU 00000000:0F:00.0: In use "
            "by another client\nholders: 812 dcgm-exporter; ")
    ok, line = recover.verify(plan, recover.parse_result(text), host(), today=TODAY)
    assert not ok and "holders: 812 dcgm-exporter" in line
    assert "A client still holds it" in line and "run the same gpuhost recover command" in line


@pytest.mark.parametrize(("said", "named"), [
    ("  GPU 00000000:0F:00.0: In use by another client", True),
    ("Resetting GPU 00000000:0F:00.0 is not supported.", False)])
def test_the_reset_step_lists_the_holders_only_when_a_client_blocked_it(said, named):
    import subprocess

    from gpuhost.roles import recover as role

    script = f"rc=255; out='{said}'; {role.HOLDERS} printf '%s\\n' \"$out\""
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                         timeout=30).stdout
    assert out.startswith(said) and ("\nholders: " in out) == named
