"""The `gpuhost` front door (gpuhost.cli, cli_audit, cli_upgrade): arguments, how pyinfra is
called, and how what it wrote becomes an exit status. pyinfra itself is replaced by fakes
here, except in the two @fake-connector runs at the end (a few seconds each)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.script import ALL_SECTIONS, MARKER
from gpuhost import cli
from gpuhost.cli import audit as cli_audit, upgrade as cli_upgrade
from gpuhost.upgrade import rollout
from gpuhost.roles import audit as audit_role

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable

# --- arguments ------------------------------------------------------------------------------


def test_a_command_is_required_and_unknown_ones_are_refused(capsys):
    for argv in ([], ["provision", "inv.py"]):
        with pytest.raises(SystemExit) as stop:
            cli.parser().parse_args(argv)
        assert stop.value.code == 2


def test_audit_arguments():
    args = cli.parser().parse_args(["audit", "inv.py", "--json", "a.json", "--html", "a.html",
                                    "--cuda", "12.4", "--limit", "gpu-0*", "--limit", "ol_hosts",
                                    "--data", "x=1"])
    assert (args.command, args.inventory, args.json_out, args.html_out, args.cuda) == (
        "audit", "inv.py", "a.json", "a.html", "12.4")
    assert args.limit == ["gpu-0*", "ol_hosts"] and args.data == ["x=1"]


def test_upgrade_arguments_and_defaults():
    args = cli.parser().parse_args(["upgrade", "inv.py"])
    assert (args.canary, args.batch, args.limit, args.data, args.report) == (1, "1", [], [], None)
    args = cli.parser().parse_args(["upgrade", "inv.py", "--canary", "2", "--batch", "25%"])
    assert (args.canary, args.batch) == (2, "25%")
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["upgrade", "inv.py", "--canary", "one"])


def test_pyinfra_command_data_and_limit_args():
    assert cli.pyinfra_command(None) == [sys.executable, "-m", "pyinfra"]
    assert cli.pyinfra_command("python3 wrap.py rec --") == ["python3", "wrap.py", "rec", "--"]
    assert cli.data_args(["a=1", "b=x=y"]) == ["--data", "a=1", "--data", "b=x=y"]
    for bad in ("novalue", "=1"):
        with pytest.raises(cli.CliError, match="KEY=VALUE"):
            cli.data_args([bad])
    assert cli.limit_args(["a", "b*"]) == ["--limit", "a", "--limit", "b*"]


HOSTS = [{"name": "gpu-01", "groups": ["debian_hosts"], "data": {}},
         {"name": "gpu-02", "groups": ["ol_hosts"], "data": {}},
         {"name": "ol_hosts", "groups": [], "data": {}},  # a host named like a group
         {"name": "gpu-10", "groups": ["debian_hosts"], "data": {}}]


def test_limit_selects_like_pyinfra_groups_first_then_host_globs_in_inventory_order():
    names = lambda patterns: [h["name"] for h in cli.select_hosts(HOSTS, patterns)]  # noqa: E731
    assert names([]) == ["gpu-01", "gpu-02", "ol_hosts", "gpu-10"]
    assert names(["ol_hosts"]) == ["gpu-02"]  # the group, not the host of that name
    assert names(["gpu-1*", "gpu-01"]) == ["gpu-01", "gpu-10"]
    assert names(["debian_hosts", "nohost"]) == ["gpu-01", "gpu-10"]
    assert names(["nohost"]) == []


def test_read_inventory_reports_pyinfra_errors(monkeypatch):
    def fake_run(argv, **kwargs):
        assert argv[1:] == ["inv.py", "debug-inventory", "--json", "--data", "a=1"]
        return subprocess.CompletedProcess(argv, 1, "", "sandbox is not running")

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    with pytest.raises(cli.CliError, match="sandbox is not running"):
        cli.read_inventory(["pyinfra"], "inv.py", ["a=1"])
    monkeypatch.setattr(cli.subprocess, "run",
                        lambda argv, **k: subprocess.CompletedProcess(argv, 0, "not json", ""))
    with pytest.raises(cli.CliError, match="no JSON"):
        cli.read_inventory(["pyinfra"], "inv.py")


# --- gpuhost audit: exit statuses ------------------------------------------------------------

def sections_output(**sections: tuple[int, str]) -> str:
    """What the GpuHostState script prints; tools absent unless given."""
    values = {name: (127, "") for name in ALL_SECTIONS}
    values.update(os_release=(0, 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"'),
                  kernel=(0, "6.1.0-56-amd64\nx86_64"), dpkg=(0, ""), proc_version=(3, ""))
    values.update(sections)
    return "".join(f"{MARKER}{name} rc={rc}\n{out}\n" for name, (rc, out) in values.items())


MODULE = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release "
          "Build  (b@h)  Tue Jul  8 18:44:13 UTC 2025")
# the toolkit at gpuhost's default (container_toolkit_version 1.20.0), which the audit judges
TOOLKIT_PKGS = "".join(f"{name}\t1.20.0-1\tii \n" for name in (
    "nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
    "libnvidia-container1"))
INSTALLED = sections_output(dpkg=(0, "nvidia-open\t570.172.08-1\tii \n" + TOOLKIT_PKGS),
                            proc_version=(0, MODULE))
STATE_OK = GpuHostState().process(INSTALLED.splitlines())  # driver 570.172.08 loaded


class FakeAuditPyinfra:
    """Stands in for pyinfra (run_pyinfra, and read_inventory: the fallback's second
    process): writes what deploys/audit.py would write into --data gpuhost_audit_dir=DIR,
    the run's fleet.json (``roles.audit.fleet_record`` of the --limit hosts) once any of
    them is ``connected``, then the per-host records."""

    def __init__(self, hosts, records, connected=None):
        self.hosts, self.records, self.calls = hosts, records, []
        self.connected = ({r["host"] for r in records} if connected is None
                          else set(connected))

    def read_inventory(self, pyinfra, inventory, data=()):
        self.calls.append(("inventory", list(data)))
        return self.hosts

    def run_pyinfra(self, argv, out=None, capture_json=False, lines=None):
        self.calls.append(("run", argv))
        directory = next(a.split("=", 1)[1] for a in argv if a.startswith("gpuhost_audit_dir="))
        limits = [argv[i + 1] for i, a in enumerate(argv) if a == "--limit"]
        selected = cli.select_hosts(self.hosts, limits)
        if any(entry["name"] in self.connected for entry in selected):  # the deploy runs
            fleet = audit_role.fleet_record([(h["name"], h["groups"], h["data"])
                                             for h in selected])
            Path(directory, audit_role.FLEET_FILE).write_text(json.dumps(fleet))
            if fleet["problems"]:
                return 1, None  # no host is read
        for number, record in enumerate(self.records):
            Path(directory, f"{number}.json").write_text(json.dumps(record))
        for entry in selected:  # pyinfra's line for a host it could not connect to
            if entry["name"] not in self.connected and lines is not None:
                lines.append(f"    [{entry['name']}] Could not connect ([Errno None] Unable "
                             "to connect to port 2222)")
        return 1, None


def use_fake(monkeypatch, hosts, records, connected=None):
    fake = FakeAuditPyinfra(hosts, records, connected)
    monkeypatch.setattr(cli_audit, "read_inventory", fake.read_inventory)
    monkeypatch.setattr(cli_audit, "run_pyinfra", fake.run_pyinfra)

    return fake


def audit(tmp_path, *args):
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = []\n")
    return cli.main(["audit", str(inventory), *args])


def two_hosts(**data):
    return [{"name": "a", "groups": [], "data": dict(data)},
            {"name": "b", "groups": [], "data": {"ssh_hostname": "10.0.0.2", "ssh_port": 2222}}]


def test_audit_every_host_matches_exit_0(monkeypatch, tmp_path, capsys):
    fake = use_fake(monkeypatch, two_hosts(), [{"host": "a", "state": STATE_OK},
                                               {"host": "b", "state": STATE_OK}])
    assert audit(tmp_path, "--limit", "a", "--limit", "b", "--data", "k=v") == 0
    assert [call[0] for call in fake.calls] == ["run"]  # one pyinfra process, nothing else
    run = fake.calls[0][1]
    assert run[-6:-4] == ["--limit", "b"] and run[-2:] == ["--data", "k=v"]
    assert str(ROOT / "deploys" / "audit.py") in run and "-y" in run  # the deploy by its path


def test_audit_reports_the_hosts_of_the_deploys_fleet_file(monkeypatch, tmp_path, capsys):
    fake = use_fake(monkeypatch, two_hosts(), [{"host": "b", "state": STATE_OK}])
    out = tmp_path / "r.json"
    assert audit(tmp_path, "--limit", "b", "--json", str(out)) == 0
    assert [call[0] for call in fake.calls] == ["run"]
    assert [h["name"] for h in json.loads(out.read_text())["hosts"]] == ["b"]


def test_audit_drift_exit_2_and_files_written(monkeypatch, tmp_path, capsys):
    use_fake(monkeypatch, two_hosts(nvidia_driver_version="550.163.01"),
             [{"host": "a", "state": STATE_OK}, {"host": "b", "state": STATE_OK}])
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    assert audit(tmp_path, "--json", str(out), "--html", str(html)) == 2
    document = json.loads(out.read_text())
    assert [h["status"] for h in document["hosts"]] == ["drift", "ok"]
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert f"report written to {out}" in capsys.readouterr().out


def test_audit_failed_and_unreachable_exit_3(monkeypatch, tmp_path, capsys):
    use_fake(monkeypatch, two_hosts(), [{"host": "a", "error": "XML is malformed"}])
    assert audit(tmp_path) == 3
    text = " ".join(capsys.readouterr().out.split())
    assert "failed 1 host: a XML is malformed" in text
    assert "unreachable 1 host: b cannot connect to 10.0.0.2 port 2222" in text


def test_a_started_host_without_result_is_failed(monkeypatch, tmp_path, capsys):
    use_fake(monkeypatch, two_hosts(), [{"host": "a"}, {"host": "b", "state": STATE_OK}])
    assert audit(tmp_path) == 3
    assert "failed 1 host: a the audit did not finish" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args, message", [
    (["--cuda", "11.9"], "unknown CUDA version"),
    (["--json", "/nonexistent/dir/a.json"], "does not exist"),
    (["--data", "novalue"], "KEY=VALUE"),
])
def test_audit_usage_errors_exit_1_before_pyinfra_runs(monkeypatch, tmp_path, capsys, args,
                                                       message):
    fake = use_fake(monkeypatch, two_hosts(), [])
    assert audit(tmp_path, *args) == 1
    err = capsys.readouterr().err
    assert message in err and "Nothing was read from any host" in err
    assert not fake.calls


def test_audit_limit_matching_no_host_exit_1(monkeypatch, tmp_path, capsys):
    # pyinfra runs (and contacts no host: its limit is empty), no deploy writes fleet.json,
    # so the fallback reads the inventory to say so
    fake = use_fake(monkeypatch, two_hosts(), [])
    assert audit(tmp_path, "--limit", "nohost") == 1
    err = capsys.readouterr().err
    assert "matches --limit nohost" in err and "Nothing was read from any host" in err
    assert [call[0] for call in fake.calls] == ["run", "inventory"]


def test_audit_every_host_unreachable_falls_back_to_reading_the_inventory(
        monkeypatch, tmp_path, capsys):
    fake = use_fake(monkeypatch, two_hosts(nvidia_driver_version="550.163.01"), [])
    out = tmp_path / "r.json"
    assert audit(tmp_path, "--json", str(out)) == 3
    text = " ".join(capsys.readouterr().out.split())
    assert "unreachable 1 host: b cannot connect to 10.0.0.2 port 2222" in text
    assert [call[0] for call in fake.calls] == ["run", "inventory"]
    hosts = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    assert hosts["a"]["desired"]["nvidia_driver_version"] == "550.163.01"


def test_audit_invalid_settings_of_every_host_exit_1(monkeypatch, tmp_path, capsys):
    hosts = [{"name": "a", "groups": [], "data": {"nvidia_driver_version": 570}},
             {"name": "b", "groups": [], "data": {"mig_mode": "sometimes"}},
             {"name": "c", "groups": [], "data": {"mig_mode": "never-checked"}}]
    fake = use_fake(monkeypatch, hosts, [], connected={"a", "b"})
    assert audit(tmp_path, "--limit", "a", "--limit", "b") == 1  # c: not in this run
    err = capsys.readouterr().err
    assert "a: nvidia_driver_version" in err and "b: mig_mode" in err and "c:" not in err
    assert "Nothing was read from any host" in err
    assert [call[0] for call in fake.calls] == ["run"]  # the deploy stopped before any read


def test_fleet_record_lists_every_invalid_setting_and_each_hosts_settings():
    fleet = audit_role.fleet_record([
        ("a", ["gpu"], {"nvidia_driver_version": "570.172.08", "ssh_hostname": "10.0.0.1"}),
        ("b", [], {"mig_mode": "sometimes"})])
    assert [h["name"] for h in fleet["hosts"]] == ["a", "b"]
    first = fleet["hosts"][0]
    assert first["groups"] == ["gpu"] and first["data"] == {"ssh_hostname": "10.0.0.1",
                                                            "ssh_port": None}
    assert first["desired"]["nvidia_driver_version"] == "570.172.08"
    assert fleet["hosts"][1]["desired"] is None
    assert len(fleet["problems"]) == 1 and "b: mig_mode" in fleet["problems"][0]
    json.dumps(fleet)  # what write_fleet writes


def test_missing_inventory_file_exit_1(capsys):
    assert cli.main(["audit", "/nonexistent/inventory.py"]) == 1
    assert "no inventory file" in capsys.readouterr().err


# --- gpuhost upgrade: exit statuses ------------------------------------------------------


class FakeUpgradePyinfra:
    """Stands in for pyinfra: appends the events the upgrade deploy would write."""

    def __init__(self, hosts, plan, fail=None, interrupt=False):
        self.hosts, self.plan, self.fail, self.interrupt = hosts, plan, fail, interrupt
        self.runs: list[list[str]] = []

    def read_inventory(self, pyinfra, inventory, data=()):
        return [{"name": name, "groups": [], "data": {}} for name in self.hosts]

    def run_pyinfra(self, argv, out=None, capture_json=False):
        self.runs.append(argv)
        assert capture_json and "--json" in argv
        values = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--data")
        record, run = values["gpuhost_upgrade_record"], values["gpuhost_upgrade_run"]
        limited = [argv[i + 1] for i, a in enumerate(argv) if a == "--limit"]
        events, failed = [], []
        if "--dry" in argv:
            for name in limited:
                action = self.plan.get(name, "upgrade")
                kind = "refused" if action == "refused" else "plan"
                events.append({"event": kind, "host": name, "from": "550", "to": "570",
                               "action": action, "reason": "downgrade"})
        else:
            if self.interrupt:
                raise KeyboardInterrupt
            for name in limited:
                events.append({"event": "start", "host": name})
                if name == self.fail:
                    events.append({"event": "failed", "host": name, "operation": "Switch",
                                   "output": ["E: dpkg returned an error code (1)"]})
                    failed.append(name)
                else:
                    events.append({"event": "done", "host": name, "from": "550", "to": "570",
                                   "result": "upgraded", "seconds": 1.0})
        with open(record, "a") as handle:
            for event in events:
                handle.write(json.dumps({"run": run, "time": 1.0, **event}) + "\n")
        refused = any(e["event"] == "refused" for e in events)
        code = 1 if failed or refused else 0
        return code, {"plan": [], "results": {"failed_hosts": failed}}


def upgrade(monkeypatch, tmp_path, fake, *args):
    monkeypatch.setattr(cli_upgrade, "read_inventory", fake.read_inventory)
    monkeypatch.setattr(cli_upgrade, "run_pyinfra", fake.run_pyinfra)
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = []\n")
    report = tmp_path / "report.json"
    code = cli.main(["upgrade", str(inventory), "--report", str(report), *args])
    return code, (json.loads(report.read_text()) if report.exists() else None)


def test_upgrade_canary_then_batches_exit_0(monkeypatch, tmp_path, capsys):
    fake = FakeUpgradePyinfra(["h1", "h2", "h3", "h4"], {"h2": "none"})
    code, report = upgrade(monkeypatch, tmp_path, fake, "--batch", "2")
    assert code == 0 and report["ok"]
    assert [b["hosts"] for b in report["batches"]] == [["h1"], ["h3", "h4"]]
    assert {h["host"]: h["result"] for h in report["hosts"]} == {
        "h1": "upgraded", "h2": "already at target", "h3": "upgraded", "h4": "upgraded"}
    assert "--fail-percent" in fake.runs[1] and "--dry" in fake.runs[0]
    assert "done: 3 host(s) upgraded to 570" in capsys.readouterr().out


def test_upgrade_a_failed_host_stops_later_batches_exit_1(monkeypatch, tmp_path, capsys):
    fake = FakeUpgradePyinfra(["h1", "h2", "h3"], {}, fail="h1")
    code, report = upgrade(monkeypatch, tmp_path, fake)
    assert code == 1 and not report["ok"]
    results = {h["host"]: h for h in report["hosts"]}
    assert results["h1"]["result"] == "failed"
    assert results["h1"]["detail"] == "failed at: Switch | E: dpkg returned an error code (1)"
    assert results["h2"]["result"] == results["h3"]["result"] == "not started"
    assert len(fake.runs) == 2  # pre-flight and the canary, nothing after it
    assert "h1" in capsys.readouterr().out.strip().splitlines()[-1]


def test_upgrade_refused_by_the_preflight_exit_2(monkeypatch, tmp_path, capsys):
    fake = FakeUpgradePyinfra(["h1", "h2"], {"h2": "refused"})
    code, report = upgrade(monkeypatch, tmp_path, fake)
    assert code == 2 and len(fake.runs) == 1
    assert "pre-flight refused the upgrade, no host was touched (refused: h2)" in \
        capsys.readouterr().out


def test_upgrade_nothing_to_do_exit_0(monkeypatch, tmp_path, capsys):
    fake = FakeUpgradePyinfra(["h1"], {"h1": "none"})
    code, report = upgrade(monkeypatch, tmp_path, fake)
    assert code == 0 and len(fake.runs) == 1 and report["ok"]


def test_upgrade_interrupted_exit_130(monkeypatch, tmp_path, capsys):
    fake = FakeUpgradePyinfra(["h1"], {}, interrupt=True)
    code, report = upgrade(monkeypatch, tmp_path, fake)
    assert code == 130 and "interrupted" in report["message"]


@pytest.mark.parametrize("args, message", [
    (["--batch", "0"], "batch size"),
    (["--canary", "-1"], "--canary must be 0 or more"),
    (["--data", "novalue"], "KEY=VALUE"),
    (["--limit", "nohost"], "matches --limit nohost"),
])
def test_upgrade_usage_errors_exit_2_before_pyinfra_runs(monkeypatch, tmp_path, capsys, args,
                                                         message):
    fake = FakeUpgradePyinfra(["h1"], {})
    code, _ = upgrade(monkeypatch, tmp_path, fake, *args)
    assert code == 2 and not fake.runs
    assert message in capsys.readouterr().err


def test_failed_hosts_from_pyinfra_json_results():
    assert cli_upgrade.failed_hosts({"plan": [], "results": {"failed_hosts": ["b"]}}) == {"b"}
    assert cli_upgrade.failed_hosts({"plan": [], "results": None}) is None  # --dry
    assert cli_upgrade.failed_hosts(None) is None  # pyinfra printed no JSON


def test_cli_upgrade_module_is_an_alias(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "main", lambda argv: seen.append(argv) or 0)
    assert cli_upgrade.main(["inv.py", "--canary", "0"]) == 0
    assert seen == [["upgrade", "inv.py", "--canary", "0"]]


def test_rollout_limit_args_are_used_for_batches():
    assert rollout.limit_args(["h[1]"]) == ["--limit", "h[[]1]"]


# --- real pyinfra, @fake connector ---------------------------------------------------------------


@pytest.fixture
def fake_fleet(tmp_path):
    installed = INSTALLED
    broken = sections_output(smi_xml=(0, "<nvidia_smi_log><gpu>"))
    inventory = tmp_path / "fake_inventory.py"
    inventory.write_text(textwrap.dedent(f"""\
        _want = {{"nvidia_driver_version": "570.172.08", "fake_delay": 0, "fake_delay_jitter": 0}}
        hosts = [
            ("@fake/ok", {{**_want, "fake_responses": {{"_gh()": {installed!r}}}}}),
            ("@fake/drifts", {{**_want, "nvidia_driver_version": "550.163.01",
                               "fake_responses": {{"_gh()": {installed!r}}}}}),
            ("@fake/broken", {{**_want, "fake_responses": {{"_gh()": {broken!r}}}}}),
        ]
    """))
    return inventory


ENV = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}


def test_gpuhost_audit_on_fake_hosts(fake_fleet, tmp_path):
    out = tmp_path / "audit.json"
    done = subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", str(fake_fleet), "--cuda",
                           "12.4", "--json", str(out)], cwd=ROOT, env=ENV, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    status = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    assert status["@fake/ok"]["status"] == "ok"
    assert [i["item"] for i in status["@fake/drifts"]["drift"]] == ["driver"]
    assert status["@fake/broken"]["status"] == "failed"
    assert "XML is malformed" in status["@fake/broken"]["error"]
    assert "-> exit 3" in done.stdout and "Grand total" in done.stderr
    done = subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", str(fake_fleet), "--limit",
                           "@fake/ok"], cwd=ROOT, env=ENV, text=True, capture_output=True,
                          timeout=300)
    assert done.returncode == 0 and "1 host: 1 ok" in done.stdout, done.stdout + done.stderr


def test_pyinfra_entry_point_fails_the_hosts_that_drift(fake_fleet):
    done = subprocess.run([PYTHON, "-m", "pyinfra", "-y", str(fake_fleet), "deploys/audit.py"],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split(":")[0]: line for line in done.stdout.splitlines() if line[:1] == "@"}
    assert rows["@fake/ok"].startswith("@fake/ok: OK ")
    assert rows["@fake/drifts"].startswith("@fake/drifts: DRIFT ")
    assert rows["@fake/broken"].startswith("@fake/broken: FAILED ")
    assert "want 550.163.01" in done.stdout and "XML is malformed" in done.stdout
    assert "AuditProblem" in done.stderr  # the failing operation on the controller


# --- health: exit 4, --fail-on-health, --baseline ------------------------------------------------

# DKMS built the NVIDIA module 550 only, the packages are 570: the next boot has no 570 module
UNBOOTABLE = sections_output(dpkg=(0, "nvidia-open\t570.172.08-1\tii \n" + TOOLKIT_PKGS),
                             proc_version=(0, MODULE),
                             dkms=(0, "nvidia/550.163.01, 6.1.0-56-amd64, x86_64: installed"))
STATE_UNBOOTABLE = GpuHostState().process(UNBOOTABLE.splitlines())


def test_audit_unhealthy_exit_4_and_fail_on_health(monkeypatch, tmp_path, capsys):
    records = [{"host": "a", "state": STATE_OK}, {"host": "b", "state": STATE_UNBOOTABLE}]
    use_fake(monkeypatch, two_hosts(), records)
    out = tmp_path / "r.json"
    assert audit(tmp_path, "--json", str(out)) == 4
    text = capsys.readouterr().out
    assert re.search(r"^b .* CRITICAL: next-boot-module-missing +as wanted$", text, re.M)
    assert "-> exit 4 (unhealthy hosts or GPUs not read)" in text
    document = json.loads(out.read_text())
    assert document["summary"]["health"]["unhealthy"] == 1
    use_fake(monkeypatch, two_hosts(), records)
    assert audit(tmp_path, "--fail-on-health", "never") == 0
    use_fake(monkeypatch, two_hosts(), records[:1] + [{"host": "b", "state": STATE_OK}])
    assert audit(tmp_path) == 0  # R570's end-of-life warning does not fail the audit ...
    use_fake(monkeypatch, two_hosts(), records[:1] + [{"host": "b", "state": STATE_OK}])
    assert audit(tmp_path, "--fail-on-health", "warning") == 4  # ... unless asked to


def test_audit_baseline_from_an_older_audit(monkeypatch, tmp_path, capsys):
    previous = tmp_path / "before.json"
    use_fake(monkeypatch, two_hosts(), [{"host": "a", "state": STATE_OK}])
    assert audit(tmp_path, "--json", str(previous)) == 3  # b unreachable then
    capsys.readouterr()
    use_fake(monkeypatch, two_hosts(), [{"host": "a", "state": STATE_OK},
                                        {"host": "b", "state": STATE_UNBOOTABLE}])
    assert audit(tmp_path, "--baseline", str(previous)) == 4
    text = capsys.readouterr().out
    assert "Since " in text and "    status: unreachable -> ok" in text
    assert audit(tmp_path, "--baseline", str(tmp_path / "none.json")) == 1
    assert "--baseline" in capsys.readouterr().err


def test_pyinfra_entry_point_fails_unhealthy_hosts(tmp_path):
    inventory = tmp_path / "inventory.py"
    inventory.write_text(textwrap.dedent(f"""\
        hosts = [("@fake/unbootable", {{"fake_delay": 0, "fake_delay_jitter": 0,
                                        "fake_responses": {{"_gh()": {UNBOOTABLE!r}}}}})]
    """))
    done = subprocess.run([PYTHON, "-m", "pyinfra", "-y", str(inventory), "deploys/audit.py"],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "@fake/unbootable: OK " in done.stdout  # as wanted (nothing set), but unhealthy:
    assert "critical [next-boot-module-missing]" in done.stdout
    assert "AuditProblem" in done.stderr and "unhealthy" in done.stderr


# an A100 on the PCI bus and no NVIDIA driver: nvidia-smi can read no GPU
BARE = sections_output(lspci=(0, '07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" '
                                 '"GA100 [A100 SXM4 40GB] [20b0]" -ra1 "NVIDIA Corporation '
                                 '[10de]" "Device [134f]"'))


def test_pyinfra_entry_point_fails_hosts_whose_gpus_were_not_read(tmp_path):
    """GPUs not read fail the host: as drift when a driver is wanted (the drift says why),
    as unhealthy when none is (nothing says why), never as OK."""
    inventory = tmp_path / "inventory.py"
    inventory.write_text(textwrap.dedent(f"""\
        _fake = {{"fake_delay": 0, "fake_delay_jitter": 0, "fake_responses": {{"_gh()": {BARE!r}}}}}
        hosts = [("@fake/wanted", {{**_fake, "nvidia_driver_version": "570.172.08"}}),
                 ("@fake/unwanted", _fake)]
    """))
    done = subprocess.run([PYTHON, "-m", "pyinfra", "-y", str(inventory), "deploys/audit.py"],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^@fake/wanted: DRIFT .* HEALTH not read$", done.stdout, re.M), done.stdout
    # its only drift is the toolkit's default (1.20.0), which does not say why no GPU was read
    assert re.search(r"^@fake/unwanted: DRIFT .* HEALTH not read$", done.stdout, re.M), done.stdout
    assert "driver not installed" not in done.stdout.split("@fake/wanted: DRIFT")[0]
    said = done.stdout + done.stderr
    assert re.search(r"@fake/wanted drift: driver not installed, want 570\.172\.08\b", said, re.M)
    assert re.search(r"@fake/unwanted (unhealthy|drift: container toolkit not installed, want "
                     r"1\.20\.0;) gpus-not-read: NVIDIA GPUs on the PCI bus that "
                     r"nvidia-smi could not read \(no NVIDIA driver is installed\)", said), said
