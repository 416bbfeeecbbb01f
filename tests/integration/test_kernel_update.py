"""Issue 38: `gpuhost kernel-update` on a converged fleet of Debian 12, Oracle Linux 8 (RHCK)
and Ubuntu 24.04 hosts once the sandbox's kernel repositories (sandbox/kernels.py,
kernels_ubuntu.py, kernels_debian.py) offer them newer kernels: the newest one, which the
installed driver does not build for (a kernel API change), and an older good one.

* ``--dry`` names the newest kernel of the OL and Ubuntu hosts, its headers available and the
  module to build; on the Debian 12 host beside them (its repository not there yet) the
  newest is the running one;
* the rollout onto the newest kernel stops at the canary (the OL host): DKMS's make.log lines
  in the report, the canary never rebooted and still boots its running kernel with the driver
  loaded, the Ubuntu host untouched, and the audit shows the canary holding the kernel back
  and each host's newest offered kernel (dnf's cache, apt's lists) with whether it is proven;
* ``--kernel rhel8=GOOD --kernel debian12=GOOD --kernel ubuntu2404=GOOD`` (the Debian host
  given its kernel repository), its controller killed once the OL host's kernel is installed,
  then run again, moves all three hosts to the good kernel with the module loaded after the
  reboot (Debian and Ubuntu through the same GRUB code: the saved default of the ``grub``
  trait); a third run has nothing to do.

Three hosts, one per family, in the same pyinfra runs: the Ubuntu host costs no run of its
own (it replaced a second OL8 host whose role, the host the stopped canary protects, it took).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import kernels, kernels_debian, kernels_ubuntu

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox.py"
HOSTS = ("ol8-02",)
DEBIAN = "gpu-01"  # its kernel repository arrives for the last test only
UBUNTU = "u24-03"  # its kernel repository arrives with the OL host's
TRAITS = {"traits": ["boot-entries"]}
GOOD, BROKEN = kernels.GOOD["ol8"], kernels.BROKEN["ol8"]

U_GOOD, U_BROKEN = kernels_ubuntu.GOOD[0], kernels_ubuntu.BROKEN[0]

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=3, ol=1, ubuntu=1, docker_hosts=0,
                                overrides={"1": {"traits": ["grub"]}, "2": TRAITS,
                                           "3": {"traits": ["grub"]}},
                                state="bare", why="no other module shares this fleet: its "
                                "own converge costs less than saving a converged snapshot")]


def kernel_update(report: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, "-m", "gpuhost.cli", "kernel-update", INVENTORY,
                           "--report", str(report), *args],
                          cwd=ROOT, env={**os.environ, "PYINFRA_PROGRESS": "off"}, text=True,
                          capture_output=True, timeout=1800)
    data = json.loads(report.read_text()) if report.exists() else {}
    return done, data


@pytest.fixture(scope="module")
def converged(fleet, pyinfra):
    """The fleet converged by deploys/gpu_host.py at the sandbox's default driver."""
    pyinfra("-y", "deploys/gpu_host.py", timeout=2400)
    return fleet


@pytest.fixture(scope="module")
def offered(converged, ssh):
    """The monthly kernel update arrives: the kernel repository on the OL and Ubuntu hosts
    (built first when missing or stale: about 10 s, after the NVIDIA artifacts whose key
    signs it)."""
    kernels.ensure()
    running = {}
    for name in HOSTS:
        ssh(name, kernels.enable_command("ol8"))
        running[name] = ssh(name, "uname -r").stdout.strip()
    ssh(UBUNTU, kernels_ubuntu.enable_command())
    running[UBUNTU] = ssh(UBUNTU, "uname -r").stdout.strip()
    return running


def test_dry_names_the_newest_kernel_and_changes_nothing(offered, ssh, tmp_path):
    done, _ = kernel_update(tmp_path / "dry.json", "--dry")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split()[0]: line for line in done.stdout.splitlines()
            if line.startswith((*HOSTS, DEBIAN, UBUNTU))}
    for name, broken in ((*HOSTS, BROKEN), (UBUNTU, U_BROKEN)):
        assert rows[name].split()[1:6] == [offered[name], broken, "available", "to", "build"]
    assert ssh(UBUNTU, f"dpkg -s linux-headers-{U_BROKEN}", check=False).returncode != 0
    for name in HOSTS:
        assert ssh(name, f"rpm -q kernel-devel-{BROKEN.removesuffix('.x86_64')}",
                   check=False).returncode != 0
    # the apt fact on a real Debian host: the headers meta's dependency is the running ABI
    debian = ssh(DEBIAN, "uname -r").stdout.strip()
    assert rows[DEBIAN].split()[1:3] == [debian, debian], rows[DEBIAN]
    assert f"nothing to do (runs {debian})" in rows[DEBIAN]

def test_a_kernel_the_driver_cannot_build_for_stops_at_the_canary(offered, ssh, tmp_path,
                                                                   sandbox_tools):
    boots = sandbox_tools.boots("ol8-02")
    done, report = kernel_update(tmp_path / "broken.json", "--canary", "1")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    results = {h["host"]: h for h in report["hosts"]}
    assert results["ol8-02"]["result"] == "failed"
    # DKMS's make.log lines: in the report and in the run's output
    assert "implicit declaration of function 'sys_close'" in results["ol8-02"]["detail"]
    assert "implicit declaration of function 'sys_close'" in done.stdout + done.stderr
    assert results[UBUNTU]["result"] == "not started"
    # the canary: not rebooted, its running kernel still the default, the driver loaded
    assert sandbox_tools.boots("ol8-02") == boots
    assert ssh("ol8-02", "grubby --default-kernel").stdout.strip() == \
        f"/boot/vmlinuz-{offered['ol8-02']}"
    assert ssh("ol8-02", "uname -r").stdout.strip() == offered["ol8-02"]
    assert ssh("ol8-02", "nvidia-smi -L", check=False).returncode == 0
    assert "UPDATEDEFAULT=yes" in ssh("ol8-02", "cat /etc/sysconfig/kernel").stdout
    # the other host: nothing installed
    assert ssh(UBUNTU, f"dpkg -s linux-image-{U_BROKEN}", check=False).returncode != 0
    # the audit shows the canary holding back that kernel, with the compiler's reason, and
    # the newest kernel each host's package manager offers (dnf's cache, apt's lists) as info
    out = tmp_path / "audit.json"
    audit = subprocess.run([sys.executable, "-m", "gpuhost.cli", "audit", INVENTORY, "--limit",
                            "ol8-02", "--limit", UBUNTU, "--json", str(out)], cwd=ROOT,
                           text=True, capture_output=True, timeout=600,
                           env={**os.environ, "PYINFRA_PROGRESS": "off"})
    assert out.exists(), audit.stdout[-2000:] + audit.stderr[-2000:]
    hosts = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    found = {name: {f["id"]: f for f in h["health"]["findings"]} for name, h in hosts.items()}
    held = found["ol8-02"].get("kernel-held-back")
    assert held and held["severity"] == "warning", found["ol8-02"]
    assert BROKEN in held["message"] and "'sys_close'" in held["message"]
    assert hosts["ol8-02"]["facts"]["kernel"]["offered"] == {
        "source": "dnf", "newest": BROKEN, "installed": True, "headers": None, "error": None,
        "newer": True, "proven": False, "held_back": True}
    newer = found["ol8-02"]["kernel-newer-offered"]
    assert newer["severity"] == "info" and f"{BROKEN} (installed; held back" in newer["message"]
    offered_u = hosts[UBUNTU]["facts"]["kernel"]["offered"]
    assert offered_u == {"source": "apt", "newest": U_BROKEN, "installed": False,
                         "headers": "available", "error": None, "newer": True,
                         "proven": False, "held_back": False}, offered_u
    assert "not installed; not proven" in found[UBUNTU]["kernel-newer-offered"]["message"]


def test_killed_midway_a_rerun_resumes_and_all_boot_the_good_kernel_with_the_driver(
        offered, ssh, tmp_path):
    """The controller killed once the canary's new kernel is installed (its module build
    next); the same command again finishes every host; a third run has nothing to do."""
    debian_running = ssh(DEBIAN, "uname -r").stdout.strip()
    deb_good, deb_broken = kernels_debian.releases(debian_running)
    ssh(DEBIAN, kernels_debian.enable_command())
    args = ["--kernel", f"rhel8={GOOD}", "--kernel", f"debian12={deb_good}",
            "--kernel", f"ubuntu2404={U_GOOD}", "--canary", "0", "--batch", "100%"]  # one run
    argv = [sys.executable, "-m", "gpuhost.cli", "kernel-update", INVENTORY,
            "--report", str(tmp_path / "killed.json"), *args]
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYINFRA_PROGRESS": "off"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    package = f"kernel-{GOOD.removesuffix('.x86_64')}"
    deadline = time.monotonic() + 600
    while ssh("ol8-02", f"rpm -q {package}", check=False).returncode != 0:
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended first"
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # killed before any reboot: the running kernel is still the one that boots
    assert ssh("ol8-02", "uname -r").stdout.strip() == offered["ol8-02"]
    done, report = kernel_update(tmp_path / "good.json", *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + ssh(
        DEBIAN, "tail -n 30 /var/lib/dkms/nvidia/*/build/make.log; dpkg --audit; "
        "ls -la /var/lib/dkms/nvidia/*/build/", check=False).stdout
    assert {h["host"]: h["result"] for h in report["hosts"]} == dict.fromkeys(
        (*HOSTS, DEBIAN, UBUNTU), "upgraded")
    for name in HOSTS:
        assert ssh(name, "uname -r").stdout.strip() == GOOD
        assert ssh(name, "nvidia-smi -L").stdout.count("GPU ") >= 1
        assert "UPDATEDEFAULT=yes" in ssh(name, "cat /etc/sysconfig/kernel").stdout
    # Debian: the new kernel booted through GRUB's saved entry, DKMS's module loaded on it,
    # the newest (broken) kernel of its repository not installed
    assert ssh(DEBIAN, "uname -r").stdout.strip() == deb_good
    assert ssh(DEBIAN, "nvidia-smi -L").stdout.count("GPU ") >= 1
    assert f">gnulinux-{deb_good}-advanced-" in ssh(
        DEBIAN, "grub-editenv /boot/grub/grubenv list").stdout
    assert "GRUB_DEFAULT=saved" in ssh(DEBIAN, "cat /etc/default/grub").stdout
    assert ssh(DEBIAN, f"dpkg -s linux-image-{deb_broken}", check=False).returncode != 0
    # Ubuntu: the same GRUB code, the good noble kernel booted with the module loaded
    assert ssh(UBUNTU, "uname -r").stdout.strip() == U_GOOD
    assert ssh(UBUNTU, "nvidia-smi -L").stdout.count("GPU ") >= 1
    assert f">gnulinux-{U_GOOD}-advanced-" in ssh(
        UBUNTU, "grub-editenv /boot/grub/grubenv list").stdout
    assert ssh(UBUNTU, f"dpkg -s linux-image-{U_BROKEN}", check=False).returncode != 0
    again, report = kernel_update(tmp_path / "again.json", *args)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "nothing to do" in again.stdout
