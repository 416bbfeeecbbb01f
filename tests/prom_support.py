"""Prometheus' own promtool for the tests of `gpuhost audit --prom` and the shipped alert
rules (tests/unit/test_prom.py, tests/integration/test_metrics.py): Debian's prometheus
package has it (`make deps`, mk/metrics.mk). A missing promtool fails the test, it never
skips it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuhost.reports import alerts

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "alerts/gpuhost.rules.yml"
_SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is not installed: run `make deps` (mk/metrics.mk adds Debian's "
                    "prometheus package, which has it)")
    return tool


def run(*args: str, text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], input=text, capture_output=True, text=True,
                          timeout=120)


def check_metrics(text: str) -> None:
    proc = run("check", "metrics", text=text)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def series(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line (label values unescaped)."""
    found = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, labels, value = _SAMPLE.match(line).groups()
        pairs = re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels)
        found.append((name, {k: re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], v)
                             for k, v in pairs}, float(value)))
    return found


def _expand(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), template)


def expected_alert(alert: str, labels: dict[str, str]) -> dict[str, Any]:
    """promtool's exp_alerts entry of ``alert`` firing for a series with ``labels``."""
    rule = next(r for r in alerts.rules() if r["alert"] == alert)
    return {"exp_labels": {**{k: v for k, v in labels.items() if v}, **rule["labels"]},
            "exp_annotations": {key: _expand(value, labels)
                                for key, value in rule["annotations"].items()}}


def test_rules(text: str, expectations: dict[str, list[dict[str, Any]]], path: Path,
               eval_time: str = "10m") -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of the shipped rules on ``text`` (gpuhost --prom output) held
    constant for 30 minutes: alert name -> the exp_alerts at ``eval_time``."""
    inputs = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            metric, value = line.rsplit(" ", 1)
            inputs.append({"series": metric, "values": f"{value}+0x30"})
    case = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs, "alert_rule_test": [
            {"eval_time": eval_time, "alertname": name, "exp_alerts": expected}
            for name, expected in expectations.items()]}]}
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    return run("test", "rules", str(path))


test_rules.__test__ = False  # a helper, not a test
