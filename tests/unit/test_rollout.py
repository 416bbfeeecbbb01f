"""Batch planning, the event file, per-host outcomes and the summary (gpuhost.upgrade.rollout), and
the per-host pre-checks of a driver upgrade (gpuhost.upgrade, pure)."""

from __future__ import annotations

import hashlib
import json

import pytest

from gpuhost import packages, upgrade
from gpuhost.upgrade import rollout

HOSTS = [f"gpu-{n:02d}" for n in range(1, 7)]


def labels(batches):
    return [(b.label, list(b.hosts)) for b in batches]


# --- batch planning -------------------------------------------------------------------------


def test_canary_then_fixed_batches_in_the_given_order():
    assert labels(rollout.plan_batches(HOSTS, 1, "2")) == [
        ("canary", ["gpu-01"]), ("batch 1", ["gpu-02", "gpu-03"]),
        ("batch 2", ["gpu-04", "gpu-05"]), ("batch 3", ["gpu-06"])]


def test_percentage_is_of_the_hosts_after_the_canary_rounded_up():
    # 5 hosts after the canary, 50% -> 3 per batch: canary + two batches
    assert labels(rollout.plan_batches(HOSTS, 1, "50%")) == [
        ("canary", ["gpu-01"]), ("batch 1", ["gpu-02", "gpu-03", "gpu-04"]),
        ("batch 2", ["gpu-05", "gpu-06"])]
    assert [len(b.hosts) for b in rollout.plan_batches(HOSTS, 0, "25%")] == [2, 2, 2]
    assert [len(b.hosts) for b in rollout.plan_batches(HOSTS, 2, "1%")] == [2, 1, 1, 1, 1]
    assert [len(b.hosts) for b in rollout.plan_batches(HOSTS, 1, "100%")] == [1, 5]


def test_order_is_kept_not_sorted():
    hosts = ["gpu-10", "gpu-2", "b", "a"]
    assert [h for b in rollout.plan_batches(hosts, 1, 2) for h in b.hosts] == hosts


def test_edge_cases():
    assert rollout.plan_batches([], 1, "2") == []
    assert labels(rollout.plan_batches(["a"], 3, "2")) == [("canary", ["a"])]
    assert labels(rollout.plan_batches(["a", "b"], 0, "5")) == [("batch 1", ["a", "b"])]


@pytest.mark.parametrize("size", ["0", "-1", "0%", "101%", "abc", "2.5", "", "%", "1e3"])
def test_bad_batch_sizes_are_refused_with_the_accepted_forms(size):
    with pytest.raises(rollout.RolloutError, match="host count .* percentage"):
        rollout.parse_batch_size(size)


def test_bad_canary_and_duplicates():
    with pytest.raises(rollout.RolloutError, match="canary"):
        rollout.plan_batches(HOSTS, -1, "2")
    with pytest.raises(rollout.RolloutError, match="listed twice: gpu-01"):
        rollout.plan_batches(["gpu-01", "gpu-02", "gpu-01"], 1, "2")


def test_limit_args_match_exactly_one_host_each():
    import fnmatch

    names = ["gpu-01", "rack[1]-gpu*", "odd?name"]
    args = rollout.limit_args(names)
    assert args[0::2] == ["--limit"] * 3  # pyinfra 3.10 does not split "a,b"
    patterns = args[1::2]
    for name, pattern in zip(names, patterns, strict=True):
        others = ["rack1-gpuX", "oddXname"]
        assert [n for n in names + others if fnmatch.fnmatch(n, pattern)] == [name]


# --- events and outcomes --------------------------------------------------------------------


def _write(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def ev(kind, host, t, run="r", **fields):
    return {"event": kind, "run": run, "host": host, "time": t, **fields}


def test_read_events_skips_a_torn_last_line_and_rejects_garbage(tmp_path):
    path = tmp_path / "e.jsonl"
    assert rollout.read_events(path) == []
    path.write_text(json.dumps(ev("start", "a", 1)) + "\n" + '{"event": "do')
    assert [e["host"] for e in rollout.read_events(path)] == ["a"]
    path.write_text("not json\n" + json.dumps(ev("start", "a", 1)) + "\n")
    with pytest.raises(rollout.RolloutError, match="e.jsonl:1 is not JSON"):
        rollout.read_events(path)
    path.write_text(json.dumps({"event": "party"}) + "\n\n")
    with pytest.raises(rollout.RolloutError, match="not a gpuhost upgrade event"):
        rollout.read_events(path)


def test_outcome_of_a_good_batch():
    batch = rollout.Batch("batch 1", ("a", "b"))
    events = [ev("plan", h, 0, **{"from": "550.163.01", "to": "570.172.08", "action": "upgrade"})
              for h in "ab"]
    events += [ev("start", h, 10) for h in "ab"]
    events += [ev("done", h, 70, **{"from": "550.163.01", "to": "570.172.08",
                                     "result": "upgraded", "seconds": 60.0}) for h in "ab"]
    outcome = rollout.batch_outcome(batch, events, 0)
    assert outcome.ok and not outcome.failures
    assert outcome.results["a"].as_dict() == {
        "host": "a", "from": "550.163.01", "to": "570.172.08", "result": "upgraded",
        "seconds": 60.0, "batch": "batch 1", "detail": ""}


def test_outcome_names_the_failed_host_and_operation_and_the_interrupted_one():
    batch = rollout.Batch("batch 2", ("a", "b", "c"))
    events = [ev("plan", h, 0, **{"from": "550.163.01", "to": "570.172.08", "action": "upgrade"})
              for h in "abc"]
    events += [ev("start", h, 10) for h in "ab"]
    output = ["Building module:", "Error! Bad return status for module build", "",
              "dpkg: error processing package nvidia-dkms-570-open (--configure):",
              "dependency problems - leaving unconfigured", " nvidia-open-570",
              "E: Sub-process /usr/bin/dpkg returned an error code (1)"]
    events.append(ev("failed", "b", 40.5, operation="Driver upgrade | Switch to the open driver",
                     output=output))
    outcome = rollout.batch_outcome(batch, events, 1, {"b"})
    assert not outcome.ok
    b = outcome.results["b"]
    assert b.result == "failed" and b.seconds == 30.5
    assert b.detail == ("failed at: Driver upgrade | Switch to the open driver | Error! Bad "
                        "return status for module build | dpkg: error processing package "
                        "nvidia-dkms-570-open (--configure): | E: Sub-process /usr/bin/dpkg "
                        "returned an error code (1)")
    assert outcome.results["a"].result == "interrupted"  # its batch was stopped by pyinfra
    assert outcome.results["c"].result == "interrupted"
    assert outcome.failures[1].startswith("b: failed: failed at: Driver upgrade")


def test_a_non_zero_exit_is_a_failure_even_when_every_host_says_done():
    batch = rollout.Batch("canary", ("a",))
    events = [ev("done", "a", 5, **{"from": "1", "to": "2", "result": "upgraded"})]
    outcome = rollout.batch_outcome(batch, events, 1)
    assert not outcome.ok and "exited with status 1" in outcome.failures[0]
    outcome = rollout.batch_outcome(batch, [], 2)
    assert outcome.results["a"].result == "not started"


def test_a_host_pyinfra_failed_before_it_started_is_failed_not_interrupted():
    batch = rollout.Batch("batch 1", ("a", "b"))
    events = [ev("start", "b", 1), ev("failed", "b", 2, operation="Switch")]
    outcome = rollout.batch_outcome(batch, events, 1, {"a", "b"})  # a: could not connect
    assert outcome.results["a"].result == "failed"
    assert "before its upgrade started" in outcome.results["a"].detail
    assert outcome.results["b"].detail == "failed at: Switch"  # no output recorded
    outcome = rollout.batch_outcome(batch, events, 1, None)  # pyinfra printed no results
    assert outcome.results["a"].result == "interrupted"


def test_summary_table_and_report():
    results = [rollout.HostResult("gpu-01", "550.163.01", "570.172.08", "upgraded", 75.2, "canary"),
               rollout.HostResult("gpu-02", "570.172.08", "570.172.08", "already at target", 0.0)]
    table = rollout.summary_table(results).splitlines()
    assert table[0].split() == ["host", "from", "to", "result", "time"]
    assert table[2].split() == ["gpu-01", "550.163.01", "570.172.08", "upgraded", "1m15s"]
    assert table[3].split()[-1] == "0s"
    data = rollout.report(results, [rollout.Batch("canary", ("gpu-01",))], target="570.172.08",
                          ok=True, started=100.0, finished=190.0, inventory="inv.py")
    assert data["schema"] == 1 and data["seconds"] == 90.0
    assert data["hosts"][0]["result"] == "upgraded" and data["batches"][0]["hosts"] == ["gpu-01"]
    json.dumps(data)


# --- pre-checks of one host (gpuhost.upgrade) ------------------------------------------------

FROM, TARGET = "550.163.01", "570.172.08"


def config(**overrides):
    base = {"nvidia_driver_version": TARGET, "nvidia_driver_flavor": "auto",
            "upgrade_allow_downgrade": False, "upgrade_force": False,
            "upgrade_drain_command": None, "upgrade_stop_services": ["slurmd"],
            "nvidia_fabricmanager": False}
    return {**base, **overrides}


def host_state(version=FROM, flavor="proprietary", processes=(), arch="ampere", loaded=True):
    branch = version.split(".")[0]
    meta = f"nvidia-open-{branch}" if flavor == "open" else f"cuda-drivers-{branch}"
    return {
        "os": {"distro_tag": "debian12", "pretty_name": "Debian 12", "error": None},
        "driver": {"state": "loaded" if loaded else "library_mismatch",
                   "loaded_version": version if loaded else FROM,
                   "installed_version": version, "installed_versions": [version],
                   "reboot_required": not loaded,
                   "installed_flavor": flavor, "packages": {meta: f"{version}-1"},
                   "local_repos": [{"package": f"nvidia-driver-local-repo-debian12-{version}",
                                    "distro": "debian12", "version": version}]},
        "gpus": [{"index": i, "name": "NVIDIA A100-SXM4-40GB", "architecture": arch,
                  "source": "nvidia-smi", "mig_current": "disabled",
                  "processes": list(processes) if i == 0 else []} for i in range(2)],
    }


def probe(version=FROM, marker=None, **overrides):
    base = {"init": "systemd",
            "services": {"nvidia-persistenced": "running", "slurmd": "running",
                         "nvidia-dcgm": "absent"},
            "hostengine": False, "modules": ["nvidia_uvm", "nvidia"], "containers": [],
            "daemon_json_sha256": "ab" * 32, "marker": marker, "marker_error": None,
            "apt_pin_sha256": hashlib.sha256(packages.apt_pin(version).encode()).hexdigest(),
            "dnf_stream": None, "dnf_state": None}
    return {**base, **overrides}


def test_a_550_host_is_planned_for_an_upgrade_with_its_before_state():
    plan = upgrade.assess("gpu-01", config(), host_state(), probe(), started="T")
    assert plan["problems"] == []
    assert (plan["action"], plan["from"], plan["target"], plan["flavor"]) == (
        "upgrade", FROM, TARGET, "open")
    assert plan["before"] == {"gpu_count": 2, "mig": {"0": "disabled", "1": "disabled"},
                              "daemon_json_sha256": "ab" * 32,
                              "services": ["nvidia-persistenced", "slurmd"], "hostengine": False,
                              "containers": [], "modules": ["nvidia_uvm", "nvidia"],
                              "critical": []}  # the health gate's reference: none before
    assert plan["new_marker"]["before"] == plan["before"] and plan["new_marker"]["from"] == FROM


def test_a_host_at_the_target_needs_nothing():
    plan = upgrade.assess("gpu-01", config(), host_state(TARGET, "open"), probe(TARGET))
    assert (plan["action"], plan["problems"], plan["new_marker"]) == ("none", [], None)
    # the same host with a stale apt pin, or with the old repo still there, is not done
    assert upgrade.assess("gpu-01", config(), host_state(TARGET, "open"),
                                 probe(FROM))["action"] == "upgrade"


def test_an_el10_host_at_the_target_needs_nothing_only_when_its_versionlock_says_so():
    # EL10 has no module stream: the dnf versionlock entries are the branch lock
    def el10(version):
        state = host_state(version, "open")
        state["os"]["distro_tag"] = "rhel10"
        state["driver"]["packages"] = {"nvidia-open": f"3:{version}-1.el10"}
        state["driver"]["local_repos"] = [{"package": f"nvidia-driver-local-repo-rhel10-{version}",
                                           "distro": "rhel10", "version": version}]
        return state

    def locks(version):
        return [f"nvidia-open-3:{version}-1.el10.*", f"kmod-nvidia-open-dkms-3:{version}-1.el10.*",
                "nvidia-container-toolkit-0:1.17.8-1.*"]  # the toolkit's lock: not the driver's

    at_target = probe(TARGET, apt_pin_sha256=None, dnf_locks=locks(TARGET))
    assert upgrade.assess("gpu-01", config(), el10(TARGET), at_target)["action"] == "none"
    for stale in ([], locks(FROM), locks(TARGET) + [f"nvidia-driver-3:{FROM}-1.el10.*"]):
        lagging = probe(TARGET, apt_pin_sha256=None, dnf_locks=stale)
        assert upgrade.assess("gpu-01", config(), el10(TARGET), lagging)["action"] == "upgrade"


def test_downgrade_is_refused_unless_allowed():
    plan = upgrade.assess("gpu-01", config(nvidia_driver_version=FROM),
                                 host_state(TARGET, "open"), probe(TARGET))
    assert plan["problems"] == [f"refusing to downgrade the driver from {TARGET} to {FROM}: set "
                                "upgrade_allow_downgrade: true to allow it (or fix "
                                "nvidia_driver_version)"]
    allowed = upgrade.assess("gpu-01", config(nvidia_driver_version=FROM,
                                                     upgrade_allow_downgrade=True),
                                    host_state(TARGET, "open"), probe(TARGET))
    assert allowed["problems"] == [] and allowed["action"] == "upgrade"


def test_gpu_processes_refuse_unless_forced_or_drained():
    busy = host_state(processes=[{"pid": 4242, "name": "python3"}])
    problems = upgrade.assess("gpu-01", config(), busy, probe())["problems"]
    assert problems == ["GPU clients run: GPU 0 (NVIDIA A100-SXM4-40GB) pid 4242 python3: stop "
                        "them, configure upgrade_drain_command, or set upgrade_force: true"]
    containers = probe(containers=[{"id": "c1", "name": "train", "runtime": "nvidia"}])
    problems = upgrade.assess("h", config(), host_state(), containers)["problems"]
    assert "container train" in problems[0]
    assert upgrade.assess("h", config(upgrade_force=True), busy, probe())["problems"] == []
    # the Slurm node's drain (roles.slurm) runs before the check, as a drain command does
    assert upgrade.assess("h", config(), busy, probe(), drains=True)["problems"] == []
    assert upgrade.assess("h", config(upgrade_drain_command="kubectl drain {host}"),
                                 busy, probe())["problems"] == []


def test_volta_cannot_go_past_r580_and_a_bare_host_is_not_upgraded():
    volta = host_state(arch="volta")
    problems = upgrade.assess("h", config(nvidia_driver_version="590.44.01"), volta,
                                     probe())["problems"]
    assert len(problems) == 1 and "R580 is the last driver branch for Volta" in problems[0]
    bare = host_state()
    bare["driver"].update(loaded_version=None, installed_version=None, installed_versions=[])
    assert upgrade.assess("h", config(), bare, probe())["problems"] == [
        "no NVIDIA driver is installed: provision the host with gpuhost's gpu_host deploy (pyinfra "
        "INVENTORY gpuhost.deploys.api.gpu_host), not with an "
        "upgrade"]


def test_a_host_that_did_not_boot_with_systemd_is_refused():
    for init in ("none", None):  # the probe saw no systemd / printed nothing
        problems = upgrade.assess("h", config(), host_state(), probe(init=init))["problems"]
        assert len(problems) == 1 and problems[0].startswith(
            "this host did not boot with systemd")


def test_a_half_done_host_resumes_from_its_marker():
    marker = {"schema": 1, "target": TARGET, "from": FROM, "started": "T",
              "before": {"gpu_count": 2, "mig": {}, "daemon_json_sha256": None,
                         "services": ["nvidia-persistenced"], "hostengine": False,
                         "containers": [], "modules": ["nvidia"]}}
    # packages switched, old module still loaded, persistenced stopped, nvidia-smi broken
    half = host_state(TARGET, "open", loaded=False)
    half["gpus"] = half["gpus"][:0]
    plan = upgrade.assess("h", config(), half, probe(TARGET, marker=marker,
                                 services={"nvidia-persistenced": "stopped"}))
    assert plan["problems"] == []
    assert (plan["action"], plan["from"], plan["new_marker"]) == ("resume", FROM, None)
    assert plan["before"] == marker["before"]  # not the half-changed host
    damaged = upgrade.assess("h", config(), half, probe(marker_error="x is not valid JSON"))
    assert "it is gpuhost's resume point" in damaged["problems"][0]


@pytest.fixture
def gate_state(with_health):
    """gate_state(**gpu health fields) -> a host state with the health fields (facts schema
    2) of one A100."""
    def make(**health):
        state = host_state()
        state["gpus"] = [{**state["gpus"][0], "pci_bus_id": "00000000:07:00.0",
                          "persistence_mode": "enabled"}]
        return with_health(state, gpu=health)
    return make


def test_the_health_gate_fails_a_host_with_a_new_critical_finding(gate_state):
    before = upgrade.critical_findings(gate_state())
    assert before == []
    passed, line = upgrade.health_gate(before, gate_state(remapped_rows_failure=True))
    assert not passed
    assert line.startswith("health gate: 1 new critical finding(s) after the upgrade: "
                           "row-remap-failure on 0000:07:00.0")
    assert "The rollout stops here" in line


def test_the_health_gate_passes_what_was_already_wrong_before(gate_state):
    broken = gate_state(remapped_rows_failure=True)
    before = upgrade.critical_findings(broken)
    assert [f["id"] for f in before] == ["row-remap-failure"]
    passed, line = upgrade.health_gate(before, broken)
    assert passed, line
    # a resume point written before the gate existed: nothing to compare with
    assert upgrade.health_gate(None, broken)[0]


def test_the_health_gate_reference_is_taken_before_the_host_is_touched(gate_state):
    plan = upgrade.assess("gpu-01", config(), gate_state(remapped_rows_failure=True), probe(),
                          started="T")
    assert [f["id"] for f in plan["before"]["critical"]] == ["row-remap-failure"]
    assert plan["new_marker"]["before"]["critical"] == plan["before"]["critical"]
