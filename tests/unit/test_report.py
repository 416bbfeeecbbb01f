"""The audit report: JSON against docs/audit.schema.json, the terminal table, the HTML page."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # any --import-mode
from test_audit_logic import desired, lgi_table, make_state  # noqa: E402

from gpuhost import audit, report, report_html  # noqa: E402

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/audit.schema.json").read_text())


# --- a tiny JSON Schema validator (the subset docs/audit.schema.json uses) --------------------

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is_type(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def schema_errors(value, schema, root=SCHEMA, path="$"):
    """Every violation as "path: problem"; supports the keywords the audit schema uses."""
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return schema_errors(value, target, root, path)
    errors = []
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is_type(value, t) for t in types):
            return [f"{path}: {value!r} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: too short")
    if isinstance(value, int) and not isinstance(value, bool) and value < schema.get("minimum", value):
        errors.append(f"{path}: {value} < {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            errors.append(f"{path}: {len(value)} items out of bounds")
        for i, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), root, f"{path}[{i}]")
    if isinstance(value, dict):
        errors += [f"{path}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], root, f"{path}.{key}")
            elif extra is False:
                errors.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                errors += schema_errors(item, extra, root, f"{path}.{key}")
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not schema_errors(value, s, root, path)]
        if len(matching) != 1:
            errors.append(f"{path}: matches {len(matching)} of oneOf, want exactly 1")
    for sub in schema.get("allOf", []):
        if "if" in sub:
            if not schema_errors(value, sub["if"], root, path):
                errors += schema_errors(value, sub["then"], root, path)
        else:
            errors += schema_errors(value, sub, root, path)
    return errors


# --- a fleet with every kind of host ------------------------------------------------------------

def fleet(cuda: str | None = "12.4") -> dict:
    a100_mig = [("NVIDIA A100-SXM4-40GB", "Enabled", "Enabled")] * 2
    results = {
        "gpu-01": make_state(),
        "gpu-02": make_state(driver="550.163.01", packages="570.172.08"),
        "gpu-03": make_state(gpus=a100_mig, lgi=lgi_table([(0, "3g.20gb", 9), (0, "3g.20gb", 9),
                                                            (1, "7g.40gb", 0)])),
        "gpu-04": make_state(driver=None, packages=""),
        "gpu-05": audit.HostError("failed", "could not load fact: facts.host.GpuHostState"),
        "gpu-06": audit.HostError("unreachable", "cannot connect to 127.77.9.9 port 2222"),
        "gpu-<07>": make_state(driver="535.183.01", gpus=[("NVIDIA L4", "N/A", "N/A")] * 4),
    }
    wants = {name: desired() for name in results}
    wants["gpu-03"] = desired(mig_mode="enabled", mig_layout=["3g.20gb", "3g.20gb"])
    return audit.build(results, wants, cuda=cuda, generated_at="2026-11-22T10:00:00Z")


def test_schema_itself_is_valid_json_schema():
    jsonschema = pytest.importorskip("jsonschema")  # installed with the test extra (molecule)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(report.render_json(fleet())))


@pytest.mark.parametrize("cuda", ["12.4", None])
def test_json_output_matches_the_schema(cuda):
    document = json.loads(report.render_json(fleet(cuda)))
    assert schema_errors(document, SCHEMA) == []
    assert document["schema"] == "gpuhost.audit/1"
    assert [h["status"] for h in document["hosts"]] == [
        "ok", "drift", "drift", "drift", "failed", "unreachable", "drift"]
    assert document["hosts"][1]["drift"][0]["item"] == "reboot_pending"


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d.update(schema="gpuhost.audit/2"), "gpuhost.audit/2"),
    (lambda d: d["hosts"][0].update(status="fine"), "not in"),
    (lambda d: d["hosts"][0].update(drift=[{"item": "driver"}]), "missing 'have'"),
    (lambda d: d["hosts"][0].update(status="unreachable"), "is not of type"),
    (lambda d: d["hosts"][1].update(drift=[]), "out of bounds"),
    (lambda d: d["summary"].update(extra=1), "unexpected key 'extra'"),
])
def test_the_validator_catches_broken_documents(mutate, expected):
    document = json.loads(report.render_json(fleet()))
    mutate(document)
    assert any(expected in error for error in schema_errors(document, SCHEMA))


def test_table_shows_every_host_the_problems_and_a_summary():
    text = report.render_table(fleet())
    assert "\033[" not in text
    for name in ("gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05", "gpu-06", "gpu-<07>"):
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), name
    assert "550.163.01/570.172.08" in text  # loaded/packages differ
    assert "A100-SXM4-40GB x2" in text and "L4 x4" in text
    assert "enabled: 3g.20gb+3g.20gb; 7g.40gb" in text
    assert "reboot pending: loaded 550.163.01, packages 570.172.08" in text
    assert "GPU 1: MIG layout 7g.40gb, want 3g.20gb + 3g.20gb" in text
    assert "cannot connect to 127.77.9.9 port 2222" in text
    assert re.search(r"^  forward-compat\s+gpu-<07>$", text, re.M)  # L4: data-center GPU
    assert re.search(r"^  native\s+gpu-01, gpu-02, gpu-03$", text, re.M)
    assert text.rstrip().endswith(
        "7 hosts: 1 ok, 4 drift, 1 failed, 1 unreachable -> exit 3 (hosts failed or unreachable)")


def test_colour_only_on_a_terminal(monkeypatch):
    assert "\033[32m" in report.render_table(fleet(), colour=True)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert report.use_colour(Tty()) is True
    assert report.use_colour(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert report.use_colour(Tty()) is False


def test_html_is_self_contained_with_the_chart_and_every_host():
    document = fleet()
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


def test_chart_bar_lengths_follow_the_host_counts():
    svg = report_html.driver_chart(fleet())
    widths = dict(re.findall(r'data-version="([^"]+)">.*?<rect [^>]*width="(\d+)"', svg))
    # 570.172.08 on gpu-01 and gpu-03 (2 hosts) is the longest bar, one host is half of it
    assert int(widths["570.172.08"]) == 2 * int(widths["550.163.01"])


def test_a_fleet_without_problems():
    document = audit.build({"a": make_state()}, {"a": desired()}, generated_at="2026-01-01T00:00:00Z")
    assert "Every host matches its settings" in report.render_html(document)
    assert report.render_table(document).rstrip().endswith("-> exit 0 (all hosts match)")
