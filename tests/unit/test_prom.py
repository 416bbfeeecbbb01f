"""`gpuhost audit --prom` (gpuhost.reports.prom) and the shipped alert rules (gpuhost.reports.alerts,
alerts/gpuhost.rules.yml), checked by Prometheus' own promtool (Debian's prometheus package,
`make deps`, mk/metrics.mk): `check metrics` on the output, `check rules`, and `test rules`
on series gpuhost itself wrote. The hosts are states built by the real fact code
(tests/conftest.py), one with the Xids of a real captured kernel log (Xid 79 and 154)
through the real parser: the reboot alert fires for it and stays quiet for a clean host."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuhost.facts import parsers
from gpuhost import cli, health
from gpuhost.reports import alerts, audit
from gpuhost.health import lifecycle
from gpuhost.reports import prom
from gpuhost.health import xid
from tests import prom_support as support
from tests.prom_support import RULES, check_metrics, promtool, series

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/outputs"
STAMP = "2026-11-22T10:00:00Z"


def one(text: str, name: str, **labels: str) -> float:
    values = [v for n, got, v in series(text) if n == name and labels.items() <= got.items()]
    assert len(values) == 1, (name, labels, values)
    return values[0]


@pytest.fixture
def faulty_fleet(make_state, with_health, desired):
    """A clean R580 host, one with this boot's real Xid 79/154 log, one with a row remap
    failure, one unreachable."""
    events = parsers.parse_xid_lines(
        (FIXTURES / "kernel_log__dmesg__xid79-fallen-off-crash-dump.txt").read_text())

    def build() -> dict:
        results = {
            "clean": with_health(make_state(driver="580.95.05")),
            "xid79": with_health(make_state(driver="580.95.05"), host={"xid_events": events}),
            "remap": with_health(make_state(driver="580.95.05"),
                                 gpu={"remapped_rows_failure": True}),
            'odd "host"\\': audit.HostError("unreachable", "cannot connect"),
        }
        wants = {name: desired(nvidia_driver_version="580.95.05") for name in results}
        return audit.build(results, wants, generated_at=STAMP)
    return build


def test_the_fleet_passes_promtool_check_metrics(audit_fleet, faulty_fleet):
    for document in (audit_fleet(), faulty_fleet()):
        text = prom.render(document["hosts"], document["generated_at"])
        check_metrics(text)
        names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
        assert len(names) == len(set(names))  # each family once, its samples together
        assert all(name.startswith("gpuhost_") for name in names)


def test_the_series_of_an_injected_xid_79(faulty_fleet):
    text = prom.render(faulty_fleet()["hosts"], STAMP)
    assert one(text, "gpuhost_xid_events", host="xid79", xid="79") == 1
    labels = next(lab for n, lab, _ in series(text) if n == "gpuhost_xid_events" and lab["xid"] == "79")
    assert labels == {"host": "xid79", "xid": "79", "gpu": "0000:3b:00.0", "bucket": "RESTART_BM",
                      "action": "reboot", "severity": "critical",
                      "recovered": "false"}
    # Xid 154 names its recovery action in the line: Node Reboot Required
    assert one(text, "gpuhost_xid_events", host="xid79", xid="154", action="reboot") == 1
    assert one(text, "gpuhost_health_finding", host="xid79", id="xid-79",
               severity="critical") == 1
    assert one(text, "gpuhost_health_status", host="xid79", status="critical") == 1
    assert one(text, "gpuhost_health_findings", host="remap", id="row-remap-failure") == 1
    assert one(text, "gpuhost_health_findings", host="clean", id="row-remap-failure") == 0
    assert not [lab for n, lab, _ in series(text) if n == "gpuhost_xid_events" and lab["host"] == "clean"]
    assert one(text, "gpuhost_health_status", host="clean", status="healthy") == 1


def test_driver_drift_lifecycle_and_audit_time(audit_fleet):
    document = audit_fleet()
    text = prom.render(document["hosts"], document["generated_at"])
    info = [lab for n, lab, _ in series(text) if n == "gpuhost_driver_info" and lab["host"] == "gpu-02"]
    assert info == [{"host": "gpu-02", "loaded": "550.163.01", "installed": "570.172.08",
                     "branch": "R550", "flavor": "open", "state": "library_mismatch"}]
    assert one(text, "gpuhost_driver_reboot_required", host="gpu-02") == 1
    assert one(text, "gpuhost_drift", host="gpu-02", item="reboot_pending") == 1
    assert one(text, "gpuhost_drift_items", host="gpu-01") == 0
    # R535: end of life June 2026 (gpuhost/data/nvidia_driver_branches.json); R550: no date
    assert one(text, "gpuhost_driver_branch_end_of_life_timestamp_seconds",
               host="gpu-<07>") == 1780272000  # 2026-06-01T00:00:00Z
    assert one(text, "gpuhost_driver_branch_end_of_life_timestamp_seconds", host="gpu-02") == 0
    assert one(text, "gpuhost_audit_timestamp_seconds", host="gpu-06") == 1795341600
    assert one(text, "gpuhost_host_read", host="gpu-06") == 0
    assert one(text, "gpuhost_host_status", host="gpu-06", status="unreachable") == 1
    assert one(text, "gpuhost_cdi_spec_status", host="gpu-01", status="missing") == 1
    assert one(text, "gpuhost_toolkit_info", host="gpu-01", version="1.17.8") == 1


def health_doc_ids() -> set[str]:
    """The finding ids of docs/health.md's tables (a row starting with | `id` |)."""
    text = (ROOT / "docs/health.md").read_text()
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, re.M))


def test_every_finding_id_of_docs_health_has_its_series(audit_fleet):
    documented = health_doc_ids()
    assert documented == set(prom.FINDING_IDS), (
        "docs/health.md and gpuhost.reports.prom.FINDING_IDS differ: add the new id to both")
    # ... and every id the code can write (a literal id in gpuhost/health/)
    source = "".join((ROOT / "gpuhost" / f).read_text()
                     for f in ("health/gpu.py", "health/host.py", "health/lifecycle.py"))
    written = set(re.findall(r'(?:_finding|make)\(\s*"([a-z0-9-]+)"', source))
    assert written and written <= documented, written - documented
    text = prom.render(audit_fleet()["hosts"], STAMP)
    read = {h["name"] for h in audit_fleet()["hosts"] if h["observed"] is not None}
    for host in read:
        ids = {lab["id"] for n, lab, _ in series(text)
               if n == "gpuhost_health_findings" and lab["host"] == host}
        assert documented <= ids, host


def test_a_directory_gets_one_file_per_host_written_atomically(faulty_fleet, tmp_path):
    document = faulty_fleet()
    written = prom.write(document, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["gpuhost-clean.prom", "gpuhost-xid79.prom", "gpuhost-remap.prom",
         "gpuhost-odd__host__.prom"]) == sorted(p.name for p in written)
    for path in written:
        assert path.stat().st_mode & 0o777 == 0o644
        check_metrics(path.read_text())
    odd = (tmp_path / "gpuhost-odd__host__.prom").read_text()
    assert 'host="odd \\"host\\"\\\\"' in odd
    fleet_file = tmp_path / "sub" / "fleet.prom"
    fleet_file.parent.mkdir()
    prom.write(document, fleet_file)
    assert [p.name for p in fleet_file.parent.iterdir()] == ["fleet.prom"]  # no temp file left
    assert {lab["host"] for _, lab, _ in series(fleet_file.read_text())} == {
        h["name"] for h in document["hosts"]}


def test_report_merge_writes_the_metrics(faulty_fleet, tmp_path, capsys):
    shard = tmp_path / "shard.json"
    shard.write_text(json.dumps(faulty_fleet()))
    out = tmp_path / "metrics"
    out.mkdir()
    assert cli.main(["report", "merge", str(shard), "--prom", str(out)]) == 3
    assert f"metrics written to {out} (4 files)" in capsys.readouterr().out
    assert cli.main(["report", "merge", str(shard), "--prom", str(tmp_path / "no/f.prom")]) == 1
    assert "--prom" in capsys.readouterr().err




def test_the_shipped_file_is_what_gpuhost_alerts_generates():
    assert RULES.read_text() == alerts.render(), (
        "alerts/gpuhost.rules.yml is out of date: run make alerts")


def test_promtool_check_rules():
    proc = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "SUCCESS: 17 rules found" in proc.stdout, proc.stdout + proc.stderr


def test_the_alerts_say_what_the_audit_says(with_health, make_state):
    """Each alert's "what to do" is a part of the message the audit prints for it."""
    nvswitch = {"nvlink": {"links_total": 18, "links_active": 0, "links_inactive": list(range(18)),
                           "all_inactive": True, "replay_errors": None, "recovery_errors": None,
                           "crc_errors": None}}
    cases = {
        "row-remap-failure": with_health(make_state(), gpu={"remapped_rows_failure": True}),
        "gpu-missing": with_health(make_state(), host={"gpus_missing": ["0000:3b:00.0"]}),
        "fabric-not-completed": with_health(make_state(), gpu={"fabric_state": "In Progress"}),
        "nvlink-down": with_health(make_state(), gpu=nvswitch, host={"nvswitch_count": 4}),
    }
    for ident, state in cases.items():
        messages = [f["message"] for f in health.findings(state) if f["id"] == ident]
        assert messages and alerts.ADVICE[ident] in messages[0], ident
    fatal = xid.findings([{"sxid": 20034, "pci_bus_id": "0000:8a:00.0", "text": "Fatal, x"}])
    assert alerts.ADVICE["sxid-fatal"] in fatal[0]["message"]
    for ident, version, day in (("lifecycle-eol", "535.183.01", "2026-11-22"),
                                ("lifecycle-eol-soon", "570.172.08", "2026-01-01")):
        found = lifecycle.finding(version, dt.date.fromisoformat(day))
        assert found["id"] == ident and alerts.ADVICE[ident] in found["message"], ident
    # messages built from kernel and CDI facts: the advice is in gpuhost/health/host.py's text
    source = (ROOT / "gpuhost/health/host.py").read_text()
    flat = re.sub(r'"\s+f?"', "", source)
    for ident in ("next-boot-module-missing", "secure-boot-signer-not-enrolled",
                  "cdi-spec-stale"):
        assert alerts.ADVICE[ident] in flat, ident
    rules = {r["alert"]: r for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}
    assert rules["GpuHostXidRebootRequired"]["annotations"]["description"] == \
        xid.ACTIONS["RESTART_BM"]
    assert rules["GpuHostXidGpuResetRequired"]["annotations"]["description"] == \
        xid.ACTIONS["RESET_GPU"]
    assert rules["GpuHostDriftPersists"]["for"] == "6h"


def test_promtool_test_rules_fires_for_xid_79_and_not_for_a_clean_host(faulty_fleet, tmp_path):
    hosts = [h for h in faulty_fleet()["hosts"] if h["name"] in ("clean", "xid79")]
    text = prom.render(hosts, STAMP)
    reboot = [support.expected_alert("GpuHostXidRebootRequired", labels)
              for name, labels, _ in series(text)
              if name == "gpuhost_xid_events" and labels["action"] == "reboot"]
    assert {e["exp_labels"]["xid"] for e in reboot} == {"79", "154"}
    assert {e["exp_labels"]["host"] for e in reboot} == {"xid79"}
    quiet = ("GpuHostXidGpuResetRequired", "GpuHostGpuMemoryRowRemapFailed", "GpuHostGpuMissing",
             "GpuHostDriftPersists", "GpuHostNotRead", "GpuHostDriverBranchEndOfLife")
    expectations = {"GpuHostXidRebootRequired": reboot, **{name: [] for name in quiet}}
    proc = support.test_rules(text, expectations, tmp_path / "test.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the same test fails when the clean host is expected to fire too (the test can fail)
    wrong = [*reboot, {"exp_labels": {**reboot[0]["exp_labels"], "host": "clean"}}]
    proc = support.test_rules(text, {**expectations, "GpuHostXidRebootRequired": wrong},
                              tmp_path / "test.yml")
    assert proc.returncode != 0 and "GpuHostXidRebootRequired" in proc.stdout + proc.stderr
