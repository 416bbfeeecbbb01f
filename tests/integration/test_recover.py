"""Issue 26 item 3, "done when": on a converged 2-GPU Docker host of the sandbox, a
`row_remap_pending` fault on GPU 1 clears after `gpuhost recover`; a container on GPU 0 keeps
running throughout (same process); persistence mode is as before; a reset that fails leaves
the services as they were and exits non-zero; a container on the target GPU refuses it.

The container's CUDA process is modelled with `gpusim process add` on its pid (the sandbox's
container runtime gives the container the GPU's files, not an NVML process of its own).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=1, ol=0, docker_hosts=1,
                                overrides={"gpu-01": {"gpu_model": "A100-SXM4-40GB",
                                                      "gpu_count": 2}},
                                state="converged", why="a GPU reset needs the converged stack")]

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
HOST = "gpu-01"
PM = "nvidia-smi --query-gpu=index,persistence_mode --format=csv,noheader"
CONTAINER = "docker inspect -f '{{.State.Running}} {{.State.Pid}}' on-gpu0"
DAEMON = "systemctl show -p ActiveState,MainPID --value nvidia-persistenced"
PENDING = "nvidia-smi -i 1 -q -x | grep -o '<remapped_row_pending>[A-Za-z]*'"


def recover(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    return subprocess.run([PYTHON, "-m", "gpuhost.cli", "recover", "inventories/sandbox.py",
                           "--limit", HOST, *args], cwd=ROOT, text=True, capture_output=True,
                          timeout=600, env=env)


@pytest.fixture(scope="module")
def busy_gpu0(fleet, ssh):
    """A container on GPU 0 with its (simulated) CUDA process; persistenced running."""
    ssh(HOST, "systemctl is-active -q nvidia-persistenced || systemctl start nvidia-persistenced")
    ssh(HOST, "docker image inspect sleeper:1 >/dev/null 2>&1 || tar -C / -ch usr/bin/sleep "
              "usr/lib/x86_64-linux-gnu/libc.so.6 lib64/ld-linux-x86-64.so.2 2>/dev/null | "
              "docker import - sleeper:1 >/dev/null; docker rm -f on-gpu0 >/dev/null 2>&1; "
              "docker run -d --name on-gpu0 --network=none --gpus device=0 sleeper:1 "
              "/usr/bin/sleep infinity >/dev/null")
    pid = ssh(HOST, CONTAINER).stdout.split()[1]
    ssh(HOST, f"gpusim process add --gpu 0 --pid {pid} --name sleep")
    before = {"pm": ssh(HOST, PM).stdout, "container": ssh(HOST, CONTAINER).stdout,
              "daemon": ssh(HOST, DAEMON).stdout}
    assert before["pm"] == "0, Enabled\n1, Enabled\n", before
    yield before
    ssh(HOST, "gpusim fault clear; gpusim process clear; docker rm -f on-gpu0", check=False)


def assert_as_before(ssh, before):
    assert ssh(HOST, PM).stdout == before["pm"]
    assert ssh(HOST, CONTAINER).stdout == before["container"]  # same process: never stopped
    assert ssh(HOST, DAEMON).stdout == before["daemon"]        # persistenced never restarted
    apps = ssh(HOST, "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout
    assert before["container"].split()[1] in apps.split(), apps


def test_a_pending_row_remap_on_gpu1_clears_and_gpu0_keeps_running(busy_gpu0, ssh):
    ssh(HOST, "gpusim fault set row_remap_pending --gpu 1")
    assert ssh(HOST, PENDING).stdout.split("\n")[0].endswith("Yes")
    proc = recover()  # no --gpu: GPU 1 is the one whose finding asks for a reset
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "GPU 1 (0000:0f:00.0) recovered by a GPU reset: row-remap-pending" in out, out[-3000:]
    assert ssh(HOST, PENDING).stdout.split("\n")[0].endswith("No")
    assert_as_before(ssh, busy_gpu0)
    assert ssh(HOST, "test -e /var/lib/gpuhost/gpu-recover.json", check=False).returncode == 1


def test_a_container_on_the_target_gpu_refuses_the_reset(busy_gpu0, ssh):
    ssh(HOST, "gpusim fault set row_remap_pending --gpu 0")
    try:
        proc = recover("--gpu", "0")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out[-4000:]
        assert "GPU 0 is in use (pid" in out and "container on-gpu0" in out, out[-3000:]
        assert_as_before(ssh, busy_gpu0)
    finally:
        ssh(HOST, "gpusim fault clear row_remap_pending --gpu 0")


def test_a_failed_reset_leaves_everything_as_it_was_and_exits_non_zero(busy_gpu0, ssh):
    ssh(HOST, "gpusim fault set gpu_reset_unsupported; gpusim fault set row_remap_pending --gpu 1")
    try:
        proc = recover("--gpu", "1")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out[-4000:]
        assert "FAILED on gpu-01: nvidia-smi -r -i 1 failed (exit 3: Resetting GPU " \
               "00000000:0F:00.0 is not supported.)" in out, out[-3000:]
        assert ssh(HOST, PENDING).stdout.split("\n")[0].endswith("Yes")  # still pending
        assert_as_before(ssh, busy_gpu0)
    finally:
        ssh(HOST, "gpusim fault clear gpu_reset_unsupported; gpusim fault clear")


def test_a_rerun_after_an_interruption_resumes_from_the_hosts_resume_point(busy_gpu0, ssh):
    """As if a run died after `-pm 0`: the resume point says persistence was on before."""
    marker = {"schema": 1, "started": "2026-11-27T15:00:00Z",
              "gpu": {"index": 1, "bus_id": "0000:0f:00.0", "uuid": None, "name": None},
              "before": {"persistence": "enabled", "services": [], "hostengine": False,
                         "containers": [], "mig": "disabled", "xid_count": 0, "ecc_volatile": 0},
              "findings": [{"id": "row-remap-pending", "gpu": "0000:0f:00.0", "action": "reset",
                            "message": "a row remap is pending"}]}
    ssh(HOST, "gpusim fault set row_remap_pending --gpu 1 && nvidia-smi -i 1 -pm 0 >/dev/null && "
              f"echo {shlex.quote(json.dumps(marker))} > /var/lib/gpuhost/gpu-recover.json")
    assert "--gpu 1" in recover("--gpu", "0").stdout  # another GPU waits for this one
    proc = recover()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "recovered by a GPU reset: row-remap-pending" in out, \
        out[-3000:]
    assert ssh(HOST, PENDING).stdout.split("\n")[0].endswith("No")
    assert_as_before(ssh, busy_gpu0)  # persistence of GPU 1 back on, as the marker said


IMEX_PID = "systemctl show -p MainPID --value nvidia-imex"


def test_imex_keeps_running_and_an_xid_154_action_gpuhost_does_not_know_is_refused(busy_gpu0,
                                                                                    ssh):
    """Issue 36 (T4-01, T4-02): an IMEX daemon (a stand-in unit of that name: SIGTERM would
    end the exports other nodes imported, NVIDIA IMEX guide) runs on through a one-GPU
    recovery; an Xid 154 whose action gpuhost does not know refuses the next one, naming
    the driver's words, with nothing changed."""
    ssh(HOST, "systemd-run --quiet --unit=nvidia-imex sleep infinity")
    try:
        pid = ssh(HOST, IMEX_PID).stdout.strip()
        ssh(HOST, "gpusim fault set row_remap_pending --gpu 1")
        proc = recover()
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert ssh(HOST, IMEX_PID).stdout.strip() == pid != "0"  # never stopped
        ssh(HOST, "gpusim xid 154 --gpu 1 --text 'GPU recovery action changed from 0x0 (None) "
                  "to 0x5 (Recover IMEX Domain)'")
        proc = recover()
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out[-4000:]
        assert "refused, nothing was changed on gpu-01" in out and \
            "'Recover IMEX Domain'" in out, out[-3000:]
        assert_as_before(ssh, busy_gpu0)
    finally:
        ssh(HOST, "systemctl stop nvidia-imex; gpusim fault clear; dmesg -C", check=False)


def test_force_stops_the_gpus_container_its_xid_45_is_no_new_fault(busy_gpu0, ssh):
    """Issue 36 (T4-08): --force stops the container of GPU 1; the driver logs Xid 45 for its
    killed CUDA process (gpusim, as NVIDIA's catalog says), which is not a fault of the GPU."""
    ssh(HOST, "docker rm -f on-gpu1 >/dev/null 2>&1; docker run -d --name on-gpu1 "
              "--network=none --gpus device=1 sleeper:1 /usr/bin/sleep infinity >/dev/null")
    pid = ssh(HOST, "docker inspect -f '{{.State.Pid}}' on-gpu1").stdout.strip()
    ssh(HOST, f"gpusim process add --gpu 1 --pid {pid} --name sleep; "
              "gpusim fault set row_remap_pending --gpu 1")
    try:
        proc = recover("--force")
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert "recovered by a GPU reset: row-remap-pending" in out, out[-3000:]
        assert f": 45, pid={pid}, name=sleep" in ssh(HOST, "dmesg").stdout
        assert_as_before(ssh, busy_gpu0)  # GPU 0's container never stopped
    finally:
        ssh(HOST, "docker rm -f on-gpu1; gpusim fault clear; dmesg -C", check=False)
