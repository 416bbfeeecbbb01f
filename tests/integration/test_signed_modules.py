"""Issue 39 over SSH: an Ubuntu 24.04 host with Secure Boot on and no MOK converges with
``nvidia_kernel_modules: distribution``: Canonical's signed modules (the sandbox's
stand-ins, sandbox/ubuntu_signed.py) from the Ubuntu archive, no DKMS; the module loads
after the reboot, a second run changes nothing, and the audit names the stand-in of
Canonical's key as the signer, read on the host with modinfo.

A bare host: the module comes with the packages, so the converge from bare is the point.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST = "u24-01"
SPEC = {"hosts": 1, "ol": 0, "ubuntu": 1, "docker_hosts": 0,
        "overrides": {HOST: {"traits": ["secure-boot"]}}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="the signed modules come with the driver's packages")]
DRIVER = "580.95.05"
DATA = ("--data", "nvidia_kernel_modules=distribution", "--data",
        f"nvidia_driver_version={DRIVER}", "--data", "verify_image=null",
        "--data", "verify_image_archive=null")


def _audit_inventory(tmp_path: Path, fleet: dict) -> Path:
    base = {"ssh_port": 2222, "ssh_user": "root", "ssh_key": fleet["ssh_key"],
            "ssh_known_hosts_file": fleet["known_hosts"], "ssh_connect_retries": 0,
            "nvidia_kernel_modules": "distribution", "nvidia_driver_version": DRIVER}
    hosts = [(h["name"], {**base, "ssh_hostname": h["address"], "ssh_port": h["port"]})
             for h in fleet["hosts"]]
    inventory = tmp_path / "signed_inventory.py"
    inventory.write_text(f"hosts = {hosts!r}\n")
    return inventory


def test_signed_modules_without_a_mok_converge_load_and_name_canonicals_key(
        fleet, ssh, pyinfra, sandbox_tools, tmp_path):
    from sandbox import ubuntu_signed
    assert [h["name"] for h in fleet["hosts"]] == [HOST]
    assert "MokListRT is empty" in ssh(HOST, "mokutil --list-enrolled", check=False).stdout
    boots = sandbox_tools.boots(HOST)
    first = pyinfra("-y", "deploys/gpu_host.py", *DATA, check=False, timeout=1800)
    assert first.returncode == 0, (first.stdout + first.stderr)[-5000:]
    assert sandbox_tools.boots(HOST) > boots, "the host was not rebooted"
    kernel = ssh(HOST, "uname -r").stdout.strip()
    installed = ssh(HOST, "dpkg-query -W -f '${Package} ${Version}\\n' 'linux-modules-nvidia-*' "
                          "'nvidia-headless-no-dkms-*' 'nvidia-utils-*' 'dkms' 2>/dev/null; true"
                    ).stdout
    assert f"linux-modules-nvidia-580-server-open-{kernel} " in installed, installed
    assert f"nvidia-utils-580-server {DRIVER}-0ubuntu0.24.04.1" in installed, installed
    assert not re.search(r"^dkms ", installed, re.M), "DKMS was installed"
    assert "Pin: version 580.95.05-0ubuntu0.24.04.*" in ssh(
        HOST, "cat /etc/apt/preferences.d/gpuhost-nvidia-driver").stdout
    version = ssh(HOST, "cat /proc/driver/nvidia/version").stdout
    assert re.search(rf"NVIDIA UNIX .*Kernel Module .*{re.escape(DRIVER)}", version), version
    assert ssh(HOST, "modinfo -F signer nvidia").stdout.strip() == ubuntu_signed.CN
    assert "MokListRT is empty" in ssh(HOST, "mokutil --list-enrolled", check=False).stdout

    second = pyinfra("-y", "deploys/gpu_host.py", *DATA, "--data", "full_check=true",
                     check=False, timeout=900)
    assert second.returncode == 0 and second.totals["changed"] == 0, \
        (second.stdout + second.stderr)[-3000:]

    out = tmp_path / "audit.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost.cli", "audit", str(_audit_inventory(tmp_path, fleet)),
         "--json", str(out)], cwd=ROOT, text=True, capture_output=True, timeout=300,
        env={**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"})
    assert out.is_file(), proc.stdout + proc.stderr
    host = json.loads(out.read_text())["hosts"][0]
    found = {f["id"]: f for f in host["health"]["findings"]}
    assert "secure-boot-module-signer" in found, found
    message = found["secure-boot-module-signer"]["message"]
    assert f'signed by "{ubuntu_signed.CN}": it is loaded, so the kernel trusts' in message
    assert "secure-boot-signer-not-enrolled" not in found
