"""The audit report: JSON against docs/audit.schema.json (the real jsonschema validator), the
terminal table, the HTML page. The fleet is tests/conftest.py's `audit_fleet`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

from gpuhost.reports import audit, text as report, html as report_html

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/audit.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def schema_errors(document: dict) -> list[tuple[str, str]]:
    """Every violation as (JSON path, failing keyword), in document order."""
    return sorted((error.json_path, error.validator) for error in VALIDATOR.iter_errors(document))


def test_schema_itself_is_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("cuda", ["12.4", None])
def test_json_output_matches_the_schema(cuda, audit_fleet):
    document = json.loads(report.render_json(audit_fleet(cuda)))
    assert schema_errors(document) == []
    assert document["schema"] == "gpuhost.audit/2"
    assert [h["status"] for h in document["hosts"]] == [
        "ok", "drift", "drift", "drift", "failed", "unreachable", "drift"]
    assert document["hosts"][1]["drift"][0]["item"] == "reboot_pending"


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d.update(schema="gpuhost.audit/1"), ("$.schema", "const")),
    (lambda d: d["hosts"][0].update(status="fine"), ("$.hosts[0].status", "enum")),
    (lambda d: d["hosts"][0].update(drift=[{"item": "driver"}]), ("$.hosts[0].drift[0]", "required")),
    (lambda d: d["hosts"][0].update(status="unreachable"), ("$.hosts[0].error", "type")),
    (lambda d: d["hosts"][1].update(drift=[]), ("$.hosts[1].drift", "minItems")),
    (lambda d: d["summary"].update(extra=1), ("$.summary", "additionalProperties")),
])
def test_the_schema_refuses_broken_documents(mutate, expected, audit_fleet):
    document = json.loads(report.render_json(audit_fleet()))
    mutate(document)
    assert expected in schema_errors(document)


def test_table_shows_every_host_the_problems_and_a_summary(audit_fleet):
    text = report.render_table(audit_fleet())
    assert "\033[" not in text
    for name in ("gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05", "gpu-06", "gpu-<07>"):
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), name
    assert "550.163.01/570.172.08" in text  # loaded/packages differ
    assert "A100-SXM4-40GB x2" in text and "L4 x4" in text
    assert "enabled: 3g.20gb+3g.20gb; 7g.40gb" in text
    assert "reboot pending: loaded 550.163.01, packages 570.172.08" in text
    assert "GPU 1: MIG layout 7g.40gb, want 3g.20gb + 3g.20gb" in text
    assert "cannot connect to 127.77.9.9 port 2222" in text
    assert re.search(r"^  forward-compat\s+1 host: gpu-<07>$", text, re.M)  # L4: data center
    assert re.search(r"^  native\s+3 hosts: gpu-01, gpu-02, gpu-03$", text, re.M)
    assert re.search(r"^  not audited\s+2 hosts: gpu-05, gpu-06$", text, re.M)
    assert text.rstrip().endswith(
        "7 hosts: 1 ok, 4 drift, 1 failed, 1 unreachable; health: 1 healthy, 4 warning, "
        "0 critical, 2 not read -> exit 3 (hosts failed or unreachable)")
    # the health column: the lifecycle warning of R570/R550/R535 (2026-11-22), ? unread
    assert re.search(r"^gpu-01 .* warning: lifecycle-eol  as wanted$", text, re.M)
    assert re.search(r"^gpu-04 .* ok +drift: driver$", text, re.M)  # no driver: no lifecycle
    assert re.search(r"^gpu-06 .* \? +unreachable$", text, re.M)
    assert "R535 (long-term support branch) reached end of life in June 2026" in text


def test_colour_only_on_a_terminal(monkeypatch, audit_fleet):
    assert "\033[32m" in report.render_table(audit_fleet(), colour=True)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert report.use_colour(Tty()) is True
    assert report.use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert report.use_colour(Tty()) is False


def test_html_is_self_contained_with_the_chart_and_every_host(audit_fleet):
    document = audit_fleet()
    page = report.render_html(document)
    assert page.startswith("<!DOCTYPE html>")
    assert '<svg id="driver-chart"' in page
    versions = re.findall(r'<g class="bar" data-version="([^"]+)"', page)
    assert versions == ["570.172.08", "550.163.01", "535.183.01", "not loaded", "failed",
                        "unreachable"]
    for host in document["hosts"]:
        name = report_html.escape(host["name"])
        assert f'data-host="{name}"' in page
    assert "gpu-&lt;07&gt;" in page and "gpu-<07>" not in page  # escaped
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=|url\(|@import""", page)  # nothing fetched
    assert "reboot pending: loaded 550.163.01, packages 570.172.08" in page


def test_chart_bar_lengths_follow_the_host_counts(audit_fleet):
    svg = report_html.driver_chart(audit_fleet())
    widths = dict(re.findall(r'data-version="([^"]+)">.*?<rect [^>]*width="(\d+)"', svg))
    # 570.172.08 on gpu-01 and gpu-03 (2 hosts) is the longest bar, one host is half of it
    assert int(widths["570.172.08"]) == 2 * int(widths["550.163.01"])


def test_a_fleet_without_problems(make_state, desired):
    document = audit.build({"a": make_state()}, {"a": desired()}, generated_at="2026-01-01T00:00:00Z")
    assert "Every host matches its settings" in report.render_html(document)
    table = report.render_table(document)
    # on 2026-01-01 R570 ends within 90 days (February 2026): a warning, not an unhealthy host
    assert table.rstrip().endswith(
        "health: 0 healthy, 1 warning, 0 critical -> exit 0 (all hosts as wanted, none unhealthy)")
    assert "R570 (production branch) reaches end of life in February 2026 (31 days" in table
