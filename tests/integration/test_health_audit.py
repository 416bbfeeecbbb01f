"""Issue 15, "done when": `gpuhost audit` on a sandbox fleet with one injected fault per host
names each fault on the right host with the right severity; a host without a fault has no
health finding (the driver branch's lifecycle aside: the sandbox's 570 branch is past its end
of life, a fact about the branch, not a fault) — still one remote command per host.

Faults come from gpusim (sandbox/nvidia/README.md, "faults"), on hosts that
deploys/gpu_host.py converged (the simulated driver must be loaded; the fleet boots from the
session's converged snapshot of the default spec): a row remap failure,
a PCIe link narrower than the slot, an Xid 48 (uncorrectable ECC) in this boot's kernel log,
an NVLink that did not train (`nvidia-smi nvlink -s`, read in the same single command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1,
                                                         state="converged")]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable

# per faulted host: fault commands -> the findings (id, severity) the audit must report. The
# second host needs GPUs with NVLink (the SXM models): link 3 of its GPU 0 did not train.
FAULTS = [
    {"gpusim fault set row_remap_failure --gpu 0": ("row-remap-failure", "critical")},
    {"gpusim fault set pcie_degraded 8 --gpu 0": ("pcie-width-degraded", "warning"),
     "gpusim fault set nvlink_inactive 3 --gpu 0": ("nvlink-link-inactive", "warning")},
    {"gpusim xid 48 --gpu 0 --text 'An uncorrectable double bit error (DBE) has been detected "
     "on GPU in the framebuffer at partition 0, subpartition 0.'": ("xid-48", "critical")},
]
NVLINK_MODELS = ("A100-SXM4-40GB", "H100-80GB-HBM3", "V100-SXM2-16GB")
CLEAR = "gpusim fault clear; dmesg -C"  # dmesg -C: the Xid leaves the (simulated) ring buffer
SEVERITY = {"critical": 0, "warning": 1}


@pytest.fixture(scope="module")
def faulted(fleet, ssh):
    names = [h["name"] for h in fleet["hosts"]]
    if len(names) < len(FAULTS) + 1:
        pytest.fail(f"needs {len(FAULTS) + 1} hosts, the fleet has {len(names)}")
    models = {h["name"]: h.get("gpu_model") for h in fleet["hosts"]}
    injected, free = {}, list(names)
    for faults in FAULTS:
        nvlink = any("nvlink" in command for command in faults)
        fits = [n for n in free if not nvlink or models[n] in NVLINK_MODELS]
        if not fits:
            pytest.fail(f"no host of the fleet for {list(faults)} (models: {models})")
        injected[fits[0]] = faults
        free.remove(fits[0])
    try:
        for name, faults in injected.items():
            ssh(name, "; ".join(faults))
        yield injected, free
    finally:
        for name in injected:
            ssh(name, CLEAR, check=False)


def test_each_injected_fault_is_named_on_its_host_with_its_severity(faulted, tmp_path):
    injected, healthy = faulted
    out = tmp_path / "audit.json"
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    proc = subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", "inventories/sandbox.py",
                           "--json", str(out)], cwd=ROOT, text=True, capture_output=True,
                          timeout=600, env=env)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # 4: unhealthy
    hosts = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    for name, faults in injected.items():
        findings = hosts[name]["health"]["findings"]
        found = sorted((f["id"], f["severity"]) for f in findings
                       if not f["id"].startswith("lifecycle-"))
        assert found == sorted(faults.values()), (name, faults, hosts[name]["health"])
        assert hosts[name]["health"]["status"] == min(
            (severity for _, severity in faults.values()), key=SEVERITY.__getitem__)
        for ident, _ in faults.values():
            gpu = next(f["gpu"] for f in findings if f["id"] == ident)
            assert gpu and gpu.endswith(":00.0"), gpu  # the GPU, not the host
            assert ident in proc.stdout, proc.stdout
    for name in healthy:
        found = hosts[name]["health"]["findings"]
        assert [f for f in found if not f["id"].startswith("lifecycle-")] == [], (name, found)


def test_the_faults_are_gone_after_clearing_them(faulted, ssh):
    injected, _ = faulted
    for name in injected:
        ssh(name, CLEAR)
        assert "Xid" not in ssh(name, "dmesg").stdout
