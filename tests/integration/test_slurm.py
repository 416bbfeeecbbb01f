"""Issue 26 item 4, "done when": on a sandbox host with a real slurmd/slurmctld (Debian 12's
Slurm 22.05, sandbox/traits/slurm.py), gpuhost drains the node with a reason before touching
a GPU, waits for its job, resumes it only after the health gate passed, leaves it drained
with a reason saying so when the gate fails, keeps a drain someone else made, and the audit
flags a gres count that disagrees with the host.

Most cases use `gpuhost recover` (the same drain/resume steps as the rolling upgrade,
roles/slurm.py, in less time); the last test runs the rolling upgrade itself. The fleet is
test_recover.py's converged host, so a full run boots one snapshot for both modules.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.traits import slurm as slurm_trait

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=1, ol=0, docker_hosts=1,
                                overrides={"gpu-01": {"gpu_model": "A100-SXM4-40GB",
                                                      "gpu_count": 2}},
                                state="converged", why="a GPU reset needs the converged stack")]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
HOST = "gpu-01"
UPGRADE_TO = "595.71.05"  # the sandbox's next branch (test_upgrade_branches.py)
NODE = "scontrol show node -o gpu-01 | grep -o 'State=[^ ]*\\|Reason=.*'"
LOG = "grep -E 'update_node: node gpu-01 (reason|state) set' /var/log/slurm/slurmctld.log"
PENDING = "nvidia-smi -i 1 -q -x | grep -o '<remapped_row_pending>[A-Za-z]*' | head -n 1"
ENV = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}


def gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "gpuhost.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=600, env=ENV)


def recover() -> subprocess.CompletedProcess[str]:
    return gpuhost("recover", "inventories/sandbox.py", "--limit", HOST, "--gpu", "1")


@pytest.fixture(scope="module")
def cluster(fleet, ssh):
    """The converged host becomes its own Slurm cluster (the `slurm` trait's setup)."""
    h = next(h for h in fleet["hosts"] if h["name"] == HOST)
    ssh(HOST, slurm_trait.setup_script(h), timeout=900)
    yield
    ssh(HOST, "gpusim fault clear; scancel -u root; scontrol update nodename=gpu-01 "
              "state=resume", check=False)


def in_service(ssh) -> bool:
    """Not drained, no reason (a passing NOT_RESPONDING flag between slurmctld's pings of
    slurmd is Slurm's own business)."""
    node = ssh(HOST, NODE).stdout
    return node.startswith("State=IDLE") and "DRAIN" not in node and "Reason=" not in node


def log_lines(ssh) -> list[str]:
    return ssh(HOST, LOG, check=False).stdout.splitlines()


def test_drain_waits_for_the_job_and_resumes_after_the_gate(cluster, ssh):
    ssh(HOST, "gpusim fault set row_remap_pending --gpu 1")
    # the job looks at GPU 1 as it ends: the reset must not have happened yet
    ssh(HOST, "rm -f /tmp/job-saw; sbatch -Q --wrap "
              f"\"sleep 8; {PENDING} > /tmp/job-saw\"")
    ssh(HOST, "for i in $(seq 40); do squeue -h -t R | grep -q . && exit 0; sleep 0.5; done; "
              "exit 1")  # running, not pending
    before = len(log_lines(ssh))
    proc = recover()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "recovered by a GPU reset: row-remap-pending" in out, out[-3000:]
    assert ssh(HOST, "cat /tmp/job-saw").stdout.strip().endswith(">Yes")  # job ended first
    assert ssh(HOST, PENDING).stdout.strip().endswith(">No")
    new = [line.split("] ", 1)[1] for line in log_lines(ssh)[before:]]
    assert new == ["update_node: node gpu-01 reason set to: gpuhost: GPU 1 recovery (reset)",
                   "update_node: node gpu-01 state set to DRAINING",
                   "update_node: node gpu-01 state set to IDLE"], new  # drained, then resumed
    assert in_service(ssh), ssh(HOST, NODE).stdout


def test_a_failed_gate_leaves_the_node_drained_and_the_audit_says_so(cluster, ssh, tmp_path):
    ssh(HOST, "gpusim fault set gpu_reset_unsupported; gpusim fault set row_remap_pending --gpu 1")
    proc = recover()
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-4000:]
    node = ssh(HOST, NODE).stdout
    assert "State=IDLE+DRAIN" in node, node
    assert "Reason=gpuhost: GPU 1 recovery (reset) failed the health gate, left drained: " \
           "nvidia-smi -r -i 1 failed" in node, node
    out = tmp_path / "audit.json"
    gpuhost("audit", "inventories/sandbox.py", "--limit", HOST, "--json", str(out))
    found = {f["id"]: f for f in json.loads(out.read_text())["hosts"][0]["health"]["findings"]}
    assert "scontrol update nodename=gpu-01 state=resume" in \
        found["slurm-drained-by-gpuhost"]["message"]
    # fixed: the rerun resumes the node it drained
    ssh(HOST, "gpusim fault clear gpu_reset_unsupported")
    proc = recover()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert in_service(ssh), ssh(HOST, NODE).stdout


def test_a_drain_someone_else_made_is_kept(cluster, ssh):
    ssh(HOST, "gpusim fault set row_remap_pending --gpu 1; scontrol update nodename=gpu-01 "
              "state=drain reason='rack 4: PSU swap (ticket 123)'")
    try:
        proc = recover()
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        node = ssh(HOST, NODE).stdout
        assert "State=IDLE+DRAIN" in node and "Reason=rack 4: PSU swap (ticket 123) [" in node
    finally:
        ssh(HOST, "scontrol update nodename=gpu-01 state=resume")


def test_the_audit_flags_a_gres_count_that_disagrees(cluster, ssh, tmp_path):
    ssh(HOST, "cp /etc/slurm/gres.conf /tmp/gres.conf.ok && "
              "printf 'AutoDetect=off\\nName=gpu File=/dev/nvidia0\\n' > /etc/slurm/gres.conf")
    try:
        out = tmp_path / "audit.json"
        gpuhost("audit", "inventories/sandbox.py", "--limit", HOST, "--json", str(out))
        found = [f for f in json.loads(out.read_text())["hosts"][0]["health"]["findings"]
                 if f["id"].startswith("slurm-")]
        assert [(f["id"], f["severity"]) for f in found] == [("slurm-gres-mismatch", "warning")]
        assert "gres.conf gives 1 (slurmd -G)" in found[0]["message"], found
    finally:
        ssh(HOST, "cp /tmp/gres.conf.ok /etc/slurm/gres.conf")


def test_a_rolling_upgrade_drains_with_its_reason_and_resumes_after_the_gate(cluster, ssh,
                                                                             tmp_path):
    """Last: it moves the host to the next branch (595; about 30 s, a reboot included)."""
    before = len(log_lines(ssh))
    proc = subprocess.run([PYTHON, "-m", "gpuhost.cli", "upgrade", "inventories/sandbox.py",
                           "--limit", HOST, "--report", str(tmp_path / "upgrade.json")],
                          cwd=ROOT, text=True, capture_output=True, timeout=900,
                          env={**ENV, "GPUHOST_SANDBOX_DRIVER": UPGRADE_TO})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"upgraded to {UPGRADE_TO}" in out, out[-4000:]
    new = [line.split("] ", 1)[1] for line in log_lines(ssh)[before:]]
    assert new == [f"update_node: node gpu-01 reason set to: gpuhost: driver upgrade to "
                   f"{UPGRADE_TO}",
                   "update_node: node gpu-01 state set to DRAINED",
                   "update_node: node gpu-01 state set to IDLE"], new
    assert in_service(ssh), ssh(HOST, NODE).stdout
    assert UPGRADE_TO in ssh(HOST, "cat /proc/driver/nvidia/version").stdout
