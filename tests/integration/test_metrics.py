"""Issue 26 items 1 and 2, "done when": on a sandbox fleet with one injected fault per host,
`gpuhost audit --prom DIR` writes one textfile per host that passes `promtool check metrics`,
every finding id of docs/health.md has its series, and `promtool test rules` of the shipped
alerts/gpuhost.rules.yml on those very series fires the reboot alert for the host with an
injected Xid 79 (and the replace alert for the row remap failure) and stays quiet for the
clean host; still one remote command per host.

Faults from gpusim (sandbox/nvidia/README.md, "Health faults and the kernel log") on hosts
deploys/gpu_host.py converged; the fleet spec is test_health_audit.py's, so the session's
converged snapshot is shared and the fleet boots in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.reports import prom
from tests import prom_support as support

pytestmark = [pytest.mark.integration, pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1,
                                                         state="converged")]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
FAULTS = ("gpusim xid 79 --gpu 0", "gpusim fault set row_remap_failure --gpu 0",
          "gpusim fault set pcie_degraded 8 --gpu 0")  # the fourth host stays clean
CLEAR = "gpusim fault clear; dmesg -C"


@pytest.fixture(scope="module")
def faulted(fleet, ssh):
    names = [h["name"] for h in fleet["hosts"]]
    injected = dict(zip(names, FAULTS, strict=False))
    try:
        for name, command in injected.items():
            ssh(name, command)
        yield names
    finally:
        for name in injected:
            ssh(name, CLEAR, check=False)


def test_prom_files_pass_promtool_and_the_alerts_fire_where_the_faults_are(faulted, tmp_path):
    xid_host, remap_host, _, clean_host = faulted
    out, record = tmp_path / "metrics", tmp_path / "count.json"
    out.mkdir()
    counter = ROOT / "tests/integration/count_commands.py"
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    proc = subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", "inventories/sandbox.py",
                           "--pyinfra", f"{PYTHON} {counter} {record} --", "--prom", str(out)],
                          cwd=ROOT, text=True, capture_output=True, timeout=600, env=env)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # 4: unhealthy (critical findings)
    assert f"metrics written to {out} (4 files)" in proc.stdout
    counts = json.loads(record.read_text())
    counts = counts["hosts"] if isinstance(counts.get("hosts"), dict) else counts
    assert counts == {name: {"commands": 1, "uploads": 0} for name in faulted}

    texts = {name: (out / prom.file_name(name)).read_text() for name in faulted}
    documented = set(prom.FINDING_IDS)
    for name, text in texts.items():
        support.check_metrics(text)
        ids = {labels["id"] for metric, labels, _ in support.series(text)
               if metric == "gpuhost_health_findings"}
        assert documented <= ids, (name, documented - ids)
    fleet_text = "".join(texts.values())
    samples = support.series(fleet_text)
    reboot = [support.expected_alert("GpuHostXidRebootRequired", labels)
              for metric, labels, _ in samples
              if metric == "gpuhost_xid_events" and labels["action"] == "reboot"]
    assert [(e["exp_labels"]["host"], e["exp_labels"]["xid"]) for e in reboot] == [
        (xid_host, "79")]
    remap = [support.expected_alert("GpuHostGpuMemoryRowRemapFailed", labels)
             for metric, labels, _ in samples
             if metric == "gpuhost_health_finding" and labels["id"] == "row-remap-failure"]
    assert [e["exp_labels"]["host"] for e in remap] == [remap_host]
    assert not [labels for metric, labels, value in samples
                if labels.get("host") == clean_host and value and (
                    metric == "gpuhost_xid_events" or metric == "gpuhost_health_finding"
                    and labels["severity"] == "critical")]
    expectations = {"GpuHostXidRebootRequired": reboot, "GpuHostGpuMemoryRowRemapFailed": remap,
                    "GpuHostXidGpuResetRequired": [], "GpuHostGpuMissing": [],
                    "GpuHostNotRead": [], "GpuHostNextBootWithoutDriver": []}
    proc = support.test_rules(fleet_text, expectations, tmp_path / "rules_test.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
