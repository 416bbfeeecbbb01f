"""The audit document gpuhost.audit/2 with health: the JSON schema (real jsonschema), exit
statuses, the table's health column, the HTML health chart, --baseline (against /2 and /1
documents) and `gpuhost report merge` (pure merge and the CLI)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from gpuhost import cli
from gpuhost.reports import audit, baseline, merge, text as report, html as report_html

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/audit.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
STAMP = "2026-11-24T08:00:00Z"

def errors(document: dict) -> list[tuple[str, str]]:
    return sorted((e.json_path, e.validator) for e in VALIDATOR.iter_errors(document))


@pytest.fixture
def host(make_state, with_health):
    """host(gpu={...}, xids=[...], driver=...) -> a schema-2 host state on R580."""
    def make(gpu=None, xids=(), driver="580.95.05"):
        return with_health(make_state(driver=driver), gpu=gpu,
                           host={"xid_events": [dict(e) for e in xids]})
    return make


def xid(number, text="x"):
    return {"pci_bus_id": "0000:07:00", "xid": number, "gpu_instance_id": None, "text": text}


@pytest.fixture
def fleet(host, desired):
    """fleet(**results) -> document; default hosts: healthy, warning, critical, drift."""
    def make(fail_on="critical", **results):
        hosts = {"a-healthy": host(), "b-warning": host(gpu={"pcie_width_current": 8}),
                 "c-critical": host(xids=[xid(79)]),
                 "d-drift": host(driver="580.82.07")}
        hosts.update(results)
        wants = {name: desired(nvidia_driver_version="580.95.05") for name in hosts}
        return audit.build(hosts, wants, generated_at=STAMP, fail_on=fail_on)
    return make


def test_health_is_apart_from_drift_and_the_document_matches_the_schema(fleet):
    document = json.loads(report.render_json(fleet()))
    assert errors(document) == []
    by = {h["name"]: h for h in document["hosts"]}
    assert [h["status"] for h in document["hosts"]] == ["ok", "ok", "ok", "drift"]
    assert [h["health"]["status"] for h in document["hosts"]] == [
        "healthy", "warning", "critical", "healthy"]
    assert by["c-critical"]["health"]["counts"] == {"critical": 1, "warning": 0, "info": 1}
    assert by["c-critical"]["health"]["findings"][0]["id"] == "xid-79"
    health = document["summary"]["health"]
    assert (health["healthy"], health["warning"], health["critical"], health["not_read"]) == \
        (2, 1, 1, 0)
    assert health["finding_ids"] == {"lifecycle-supported": 4, "pcie-width-degraded": 1,
                                     "xid-79": 1}
    assert document["baseline"] is None and document["shards"] is None


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["hosts"][2]["health"]["findings"][0].update(severity="fatal"),
     ("$.hosts[2].health.findings[0].severity", "enum")),
    (lambda d: d["hosts"][2]["health"]["findings"][0].update(id="Xid 79"),
     ("$.hosts[2].health.findings[0].id", "pattern")),
    (lambda d: d["hosts"][2]["health"]["findings"][0].update(gpu="00000000:07:00.0"),
     ("$.hosts[2].health.findings[0].gpu", "pattern")),
    (lambda d: d["hosts"][2]["health"]["findings"][0].update(message="two\nlines"),
     ("$.hosts[2].health.findings[0].message", "pattern")),
    (lambda d: d["hosts"][0].pop("health"), ("$.hosts[0]", "required")),
    (lambda d: d["summary"].update(exit_code=1), ("$.summary.exit_code", "enum")),
    (lambda d: d["summary"]["health"].update(fail_on="always"),
     ("$.summary.health.fail_on", "enum")),
    (lambda d: d.pop("baseline"), ("$", "required")),
])
def test_the_schema_refuses_broken_health(fleet, mutate, expected):
    document = json.loads(report.render_json(fleet()))
    mutate(document)
    assert expected in errors(document)


def test_exit_statuses_tell_drift_unhealthy_and_unreachable_apart(fleet, host):
    assert audit.exit_code(fleet()) == audit.EXIT_UNHEALTHY == 4  # critical wins over drift
    calm = fleet(**{"c-critical": host()})
    assert audit.exit_code(calm) == audit.EXIT_DRIFT  # a warning is not unhealthy ...
    assert audit.exit_code(fleet(fail_on="warning", **{"c-critical": host()})) == 4  # ... unless
    assert audit.exit_code(fleet(fail_on="never")) == audit.EXIT_DRIFT
    assert audit.exit_code(fleet(**{"e-down": audit.HostError("unreachable", "refused")})) == 3
    only_ok = fleet(**{"b-warning": host(), "c-critical": host(), "d-drift": host()})
    assert audit.exit_code(only_ok) == audit.EXIT_OK
    with pytest.raises(audit.AuditError):
        fleet(fail_on="sometimes")


def test_table_health_column_and_findings(fleet):
    text = report.render_table(fleet())
    # two judgements, two columns: HEALTH (worst finding) and SETTINGS (drift), never "ok"
    # beside a critical host
    assert re.search(r"^HOST .* HEALTH +SETTINGS$", text, re.M)
    assert re.search(r"^a-healthy .* ok +as wanted$", text, re.M)
    assert re.search(r"^b-warning .* warning: pcie-width-degraded +as wanted$", text, re.M)
    assert re.search(r"^c-critical .* CRITICAL: xid-79 +as wanted$", text, re.M)
    # grouped: one entry per identical finding, criticals first
    assert re.search(r"^  CRITICAL \[xid-79\] 1 host: c-critical \(GPU 0000:07:00\.0\)\n"
                     r" +Xid 79 \(GPU has fallen off the bus\)", text, re.M)
    assert text.index("[xid-79]") < text.index("[pcie-width-degraded]")
    assert text.rstrip().endswith("health: 2 healthy, 1 warning, 1 critical -> exit 4 "
                                  "(unhealthy hosts or GPUs not read)")
    # info findings: one entry per id, not one per host
    assert re.search(r"^  INFO +\[lifecycle-supported\] 4 hosts: a-healthy, b-warning, "
                     r"c-critical, d-drift\n +e\.g\. driver 580\.95\.05: R580 \(long-term "
                     r"support branch\) is supported until June 2028", text, re.M)
    assert text.count("[lifecycle-supported]") == 1
    # --details: the per-host lines
    detail = report.render_table(fleet(), details=True)
    assert re.search(r"^  c-critical +CRITICAL \[xid-79\] GPU 0000:07:00\.0: Xid 79 \(GPU has "
                     r"fallen off the bus\)", detail, re.M)
    painted = report.render_table(fleet(), colour=True)
    assert "\033[31mCRITICAL: xid-79" in painted and "\033[33mwarning: pcie" in painted


def test_html_health_chart_and_findings(fleet):
    page = report.render_html(fleet())
    assert '<svg id="health-chart"' in page and "<script" not in page.lower()
    segments = dict(re.findall(r'data-health="(\w+)"><title>(\d+) host', page))
    assert segments == {"healthy": "2", "warning": "1", "critical": "1"}
    bars = re.findall(r'<g class="finding" data-finding="([^"]+)">', page)
    assert bars == ["lifecycle-supported", "pcie-width-degraded", "xid-79"]
    assert ('<tr class="group" data-finding="xid-79" data-hosts="1"><td class="sev-critical">'
            in page)
    assert '<details id="info-findings"><summary>4 info finding(s)</summary>' in page
    # the per-host list one click away
    assert '<tr data-finding="xid-79"><td>c-critical</td><td class="sev-critical">' in page
    assert page.index('<details id="findings-by-host">') > page.index('data-hosts="1"')
    assert 'class="health critical">CRITICAL: xid-79</td>' in page
    widths = dict(re.findall(r'data-finding="([^"]+)">.*?<rect [^>]*width="(\d+)"',
                             report_html.health_chart(fleet())))
    assert int(widths["lifecycle-supported"]) == 4 * int(widths["xid-79"])


def as_audit1(document: dict) -> dict:
    """What gpuhost before health wrote: no health, no baseline/shards, schema /1."""
    old = copy.deepcopy(document)
    old["schema"] = "gpuhost.audit/1"
    for key in ("baseline", "shards"):
        old.pop(key)
    old["summary"].pop("health")
    for h in old["hosts"]:
        h.pop("health")
        h["desired"].pop("nvidia_module_signing_cert")
        if h["facts"]:
            h["facts"].pop("health", None)
            h["facts"]["schema"] = 1
    return old


def test_baseline_shows_what_changed(fleet, host):
    before = fleet(**{"e-gone": host()})
    after = fleet(**{"a-healthy": host(gpu={"remapped_rows_failure": True}),
                     "b-warning": host(),
                     "c-critical": host(xids=[xid(79), xid(79), xid(13)]),
                     "d-drift": host(), "f-new": host()})
    after["baseline"] = changes = baseline.compare(before, after)
    assert errors(json.loads(report.render_json(after))) == []
    assert changes["hosts_new"] == ["f-new"] and changes["hosts_gone"] == ["e-gone"]
    by = {c["name"]: c for c in changes["hosts"]}
    assert sorted(by) == ["a-healthy", "b-warning", "c-critical", "d-drift"]
    assert by["a-healthy"]["health_status"] == {"was": "healthy", "now": "critical"}
    assert [f["id"] for f in by["a-healthy"]["findings_new"]] == ["row-remap-failure"]
    assert [f["id"] for f in by["b-warning"]["findings_resolved"]] == ["pcie-width-degraded"]
    assert [e["xid"] for e in by["c-critical"]["xids_new"]] == [79, 13]  # one 79 was known
    assert by["d-drift"]["status"] == {"was": "drift", "now": "ok"}
    assert [i["item"] for i in by["d-drift"]["drift_resolved"]] == ["driver"]
    text = report.render_table(after)
    assert f"Since {STAMP} (gpuhost.audit/2):" in text
    for line in ("  + new host f-new", "  - host gone e-gone", "    health: healthy -> critical",
                 "    - drift resolved: driver 580.82.07, want 580.95.05",
                 "    + new Xid 79 (0000:07:00): x", "    status: drift -> ok"):
        assert line in text.splitlines(), line
    page = report.render_html(after)
    assert '<section id="baseline">' in page and "<li>new host <b>f-new</b></li>" in page
    assert ('<li data-host="a-healthy"><b>a-healthy</b><ul><li><code>health: healthy -&gt; '
            "critical</code></li>") in page
    assert baseline.compare(after, after)["hosts"] == []


def test_an_audit1_baseline_compares_hosts_and_drift_only(fleet, host):
    before = as_audit1(fleet())
    after = fleet(**{"d-drift": host(), "a-healthy": host(xids=[xid(79)])})
    after["baseline"] = changes = baseline.compare(before, after)
    assert errors(json.loads(report.render_json(after))) == []
    assert changes["schema"] == "gpuhost.audit/1" and changes["health_compared"] is False
    assert [c["name"] for c in changes["hosts"]] == ["d-drift"]
    assert "it has no health, so health and Xids are not compared" in report.render_table(after)
    for broken in ({"schema": "gpuhost.audit/9", "hosts": []}, {"schema": audit.SCHEMA}, []):
        with pytest.raises(audit.AuditError):
            baseline.check(broken)


def test_merge_joins_shards_into_one_report(fleet, host, tmp_path):
    one = fleet()
    two = audit.build({"x-1": host(), "x-2": audit.HostError("unreachable", "refused")},
                      {"x-1": audit.desired_settings({}), "x-2": audit.desired_settings({})},
                      generated_at="2026-11-24T09:00:00Z")
    merged = merge.merge([("one.json", one), ("two.json", two)])
    assert errors(json.loads(report.render_json(merged))) == []
    assert [h["name"] for h in merged["hosts"]] == [
        "a-healthy", "b-warning", "c-critical", "d-drift", "x-1", "x-2"]
    assert merged["summary"]["hosts"] == 6 and merged["summary"]["unreachable"] == 1
    assert merged["summary"]["health"]["critical"] == 1 and audit.exit_code(merged) == 3
    assert merged["generated_at"] == "2026-11-24T09:00:00Z"
    assert merged["shards"] == [
        {"source": "one.json", "generated_at": STAMP, "hosts": 4, "exit_code": 4},
        {"source": "two.json", "generated_at": "2026-11-24T09:00:00Z", "hosts": 2, "exit_code": 3}]
    assert audit.exit_code(merge.merge([("one.json", one)], fail_on="never")) == 2


@pytest.mark.parametrize(("second", "says"), [
    (lambda d: d, "host a-healthy is in two shards, one.json and two.json"),
    (as_audit1, "two.json: schema 'gpuhost.audit/1'; merge reads gpuhost.audit/2"),
    (lambda d: {"schema": audit.SCHEMA}, "two.json: not a gpuhost audit document"),
])
def test_merge_refuses_overlapping_or_old_shards(fleet, second, says):
    with pytest.raises(merge.MergeError, match=re.escape(says)):
        merge.merge([("one.json", fleet()), ("two.json", second(fleet()))])


def test_merge_refuses_shards_that_answered_different_cuda_versions(host):
    docs = [(f"{n}.json", audit.build({n: host()}, {n: audit.desired_settings({})}, cuda=cuda,
                                      generated_at=STAMP)) for n, cuda in (("a", "12.4"),
                                                                           ("b", "12.8"))]
    with pytest.raises(merge.MergeError, match="different CUDA versions"):
        merge.merge(docs)
    assert merge.merge(docs[:1])["cuda"] == "12.4"


def test_report_merge_command(fleet, host, desired, tmp_path, capsys):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text(report.render_json(fleet()))
    two.write_text(report.render_json(audit.build(
        {"x-1": host()}, {"x-1": desired(nvidia_driver_version=None)}, generated_at=STAMP)))
    out, page, prev = tmp_path / "fleet.json", tmp_path / "fleet.html", tmp_path / "prev.json"
    prev.write_text(report.render_json(fleet(**{"old": host()})))
    code = cli.main(["report", "merge", str(one), str(two), "--json", str(out),
                     "--html", str(page), "--baseline", str(prev)])
    assert code == 4
    stdout = capsys.readouterr().out
    assert "5 hosts: 4 ok, 1 drift, 0 failed, 0 unreachable" in stdout
    assert "  + new host x-1" in stdout and "  - host gone old" in stdout
    merged = json.loads(out.read_text())
    assert errors(merged) == [] and len(merged["shards"]) == 2
    assert '<svg id="health-chart"' in page.read_text()
    assert cli.main(["report", "merge", str(one), str(one)]) == 1
    assert f"host a-healthy is in two shards, {one} and {one}" in capsys.readouterr().err
    assert cli.main(["report", "merge", str(tmp_path / "missing.json")]) == 1
    assert "shard " in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other", "hosts": []}')
    assert cli.main(["report", "merge", str(one), "--baseline", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"--baseline {bad}: schema 'other'" in err


def test_large_documents_are_written_one_host_per_line(fleet, monkeypatch):
    document = fleet()
    indented = report.render_json(document)
    monkeypatch.setattr(report, "INDENTED_UP_TO", 3)  # 4 hosts: the large layout
    compact = report.render_json(document)
    assert json.loads(compact) == json.loads(indented) and len(compact) < len(indented)
    lines = compact.splitlines()
    start = lines.index('  "hosts": [')
    assert [json.loads(line.strip().rstrip(","))["name"] for line in lines[start + 1:-2]] == [
        "a-healthy", "b-warning", "c-critical", "d-drift"]
    assert lines[-2:] == ["  ]", "}"] and errors(json.loads(compact)) == []


OS_RELEASES = {  # as the vendors write /etc/os-release (sandbox/elrelease.py, the releases' own)
    "ol10": ('NAME="Oracle Linux Server"\nVERSION="10.0"\nID="ol"\nVERSION_ID="10.0"\n'
             'PRETTY_NAME="Oracle Linux Server 10.0"\n', "Oracle Linux 10.0"),
    "rocky10": ('NAME="Rocky Linux"\nVERSION="10.0 (Red Quartz)"\nID="rocky"\nVERSION_ID="10.0"\n'
                'PRETTY_NAME="Rocky Linux 10.0 (Red Quartz)"\n', "Rocky Linux 10.0"),
    "d13": ('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nNAME="Debian GNU/Linux"\n'
            'VERSION_ID="13"\nID=debian\n', "Debian 13"),
    "u26": ('PRETTY_NAME="Ubuntu Resolute Raccoon"\nNAME="Ubuntu"\nVERSION_ID="26.04"\n'
            'ID=ubuntu\n', "Ubuntu 26.04"),
    "fedora": ('NAME="Fedora Linux"\nVERSION_ID=41\nID=fedora\n'
               'PRETTY_NAME="Fedora Linux 41 (Server Edition)"\n',
               "Fedora Linux 41 (Server Edition) (unsupported)"),
}


def test_the_report_names_each_release_as_a_person_would(make_state, with_health, desired):
    """The OS column of the table and the HTML page, and observed.os.release in the JSON:
    "Oracle Linux 10.0", not os-release's ID and VERSION_ID ("ol 10.0")."""
    hosts = {name: with_health(make_state(driver="580.95.05", os_release=text))
             for name, (text, _) in OS_RELEASES.items()}
    document = audit.build(hosts, {name: desired(nvidia_driver_version="580.95.05")
                                   for name in hosts}, generated_at=STAMP)
    parsed = json.loads(report.render_json(document))
    assert errors(parsed) == []
    releases = {h["name"]: h["observed"]["os"]["release"] for h in parsed["hosts"]}
    assert releases == {name: label.removesuffix(" (unsupported)")
                        for name, (_, label) in OS_RELEASES.items()}
    table, page = report.render_table(document), report_html.render(document)
    for name, (_, label) in OS_RELEASES.items():
        row = next(line for line in table.splitlines() if line.startswith(name + " "))
        assert f" {label} " in row, row
        assert f"<td>{label}</td>" in page, label
    assert " ol 10.0 " not in table
    # a report written before the field: the OS column falls back to ID VERSION_ID
    old = json.loads(report.render_json(document))
    ol10 = next(h for h in old["hosts"] if h["name"] == "ol10")
    del ol10["observed"]["os"]["release"]
    assert errors(old) == []
    assert report.row(ol10)[1] == "ol 10.0"
