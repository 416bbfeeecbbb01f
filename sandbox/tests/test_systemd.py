"""The trait every sandbox host has: systemd is PID 1 (systemd-nspawn boots the host's
root), services are real units, and a reboot is a new boot (new boot id, uptime from 0)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare")]


def _run_dir() -> Path:
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


def _boots(name: str) -> int:
    return int((_run_dir() / "hosts" / name / "boots").read_text())


def test_pid1_is_systemd_and_the_system_is_running(fleet, ssh):
    for h in fleet["hosts"]:
        out = ssh(h["name"], "cat /proc/1/comm; readlink -f /sbin/init; "
                             "timeout 60 systemctl is-system-running --wait; "
                             "systemctl is-active ssh.service gpusim-boot.service; "
                             "systemd-detect-virt --container; test -d /run/systemd/system && "
                             "echo booted-with-systemd", check=False).stdout.split()
        assert out == ["systemd", "/usr/lib/systemd/systemd", "running", "active", "active",
                       "systemd-nspawn", "booted-with-systemd"], (h["name"], out)


def test_units_gpuhost_installs_run_under_systemd(fleet, ssh):
    """A unit written to /etc/systemd/system is started, supervised and restarted by the
    host's systemd (what gpuhost's roles rely on, e.g. docker.service)."""
    host = fleet["hosts"][-1]["name"]
    ssh(host, "printf '[Service]\\nExecStart=/bin/sleep 3600\\nRestart=always\\nRestartSec=0\\n' "
              "> /etc/systemd/system/sandbox-probe.service && systemctl daemon-reload && "
              "systemctl start sandbox-probe.service")
    try:
        pid = ssh(host, "systemctl show -P MainPID sandbox-probe.service").stdout.strip()
        assert int(pid) > 1
        ssh(host, f"kill {pid}")
        deadline = time.monotonic() + 10
        new = pid
        while new in (pid, "0") and time.monotonic() < deadline:
            time.sleep(0.2)
            new = ssh(host, "systemctl show -P MainPID sandbox-probe.service").stdout.strip()
        assert new not in (pid, "0"), "systemd did not restart the unit"
    finally:
        ssh(host, "systemctl stop sandbox-probe.service; rm -f "
                  "/etc/systemd/system/sandbox-probe.service; systemctl daemon-reload",
            check=False)


def test_systemctl_reboot_is_a_new_boot(fleet, ssh):
    host = fleet["hosts"][-1]["name"]
    boot_id = ssh(host, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    boots = _boots(host)
    deadline = time.monotonic() + 30          # uptime must be able to drop visibly
    while float(ssh(host, "cut -d' ' -f1 /proc/uptime").stdout) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    ssh(host, "touch /var/tmp/kept; (sleep 1; systemctl reboot) >/dev/null 2>&1 </dev/null &")
    deadline = time.monotonic() + 120
    out = None
    while time.monotonic() < deadline:
        time.sleep(1)
        proc = ssh(host, "cat /proc/sys/kernel/random/boot_id; cut -d' ' -f1 /proc/uptime; "
                         "timeout 30 systemctl is-system-running --wait; ls /var/tmp/kept",
                   check=False, timeout=60)
        out = proc.stdout.split()
        if proc.returncode == 0 and out[0] != boot_id:
            break
    else:
        pytest.fail(f"{host} did not come back with a new boot id: {out}")
    assert _boots(host) == boots + 1
    assert float(out[1]) < 60
    assert out[2:] == ["running", "/var/tmp/kept"]
    console = (_run_dir() / "hosts" / host / "console.log").read_text()
    assert "rebooted" in console
