"""Issue 39 over SSH: an Ubuntu 24.04 host and an Ubuntu 26.04 host, Secure Boot on and no
MOK, converge with ``nvidia_kernel_modules: distribution`` in one run: Canonical's signed
modules (the sandbox's stand-ins, sandbox/ubuntu_signed.py) from the Ubuntu archive, no
DKMS; the module loads after the reboot, a second run changes nothing, and the audit names
the stand-in of Canonical's key as the signer, read on each host with modinfo. In the same
run a third host (24.04) whose boot loader starts a newer kernel, for which the archive has
no signed module package, is held by the next-boot gate: one line, no reboot. Last, the
rolling upgrade moves the 24.04 host from branch 580 to 595, Canonical's packages together.

Bare hosts: the module comes with the packages, so the converge from bare is the point.
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
SPEC = {"hosts": 3, "docker_hosts": 0, "overrides": {
    "1": {"os": "ubuntu2404", "traits": ["secure-boot"]},
    "2": {"os": "ubuntu2604", "traits": ["secure-boot"]},
    "3": {"os": "ubuntu2404", "traits": ["secure-boot", "next-kernel"]}}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, ol=0, state="bare",
                                why="the signed modules come with the driver's packages")]
# host -> (driver, its Canonical package version)
HOSTS = {"u24-01": ("580.95.05", "580.95.05-0ubuntu0.24.04.1"),
         "u26-02": ("595.71.05", "595.71.05-0ubuntu0.26.04.1")}
HELD = "u24-03"  # its next kernel 6.8.0-52-generic has no signed module package
NO_VERIFY_IMAGE = ("--data", "verify_image=null", "--data", "verify_image_archive=null")
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

_OVERRIDES = {overrides!r}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""


def _wanted(name: str) -> dict:
    return {"nvidia_kernel_modules": "distribution",
            "nvidia_driver_version": HOSTS.get(name, HOSTS["u24-01"])[0], "nvidia_local_repo": {}}


def _audit_inventory(tmp_path: Path, fleet: dict) -> Path:
    base = {"ssh_port": 2222, "ssh_user": "root", "ssh_key": fleet["ssh_key"],
            "ssh_known_hosts_file": fleet["known_hosts"], "ssh_connect_retries": 0}
    hosts = [(h["name"], {**base, **_wanted(h["name"]), "ssh_hostname": h["address"],
                          "ssh_port": h["port"]}) for h in fleet["hosts"]]
    inventory = tmp_path / "signed_audit_inventory.py"
    inventory.write_text(f"hosts = {hosts!r}\n")
    return inventory


def test_signed_modules_without_a_mok_converge_load_and_name_canonicals_key(
        fleet, ssh, sandbox_tools, tmp_path):
    from sandbox import ubuntu_signed
    assert sorted(h["name"] for h in fleet["hosts"]) == sorted([*HOSTS, HELD])
    inventory = tmp_path / "signed_inventory.py"
    inventory.write_text(INVENTORY.format(root=str(sandbox_tools.root), overrides={
        name: _wanted(name) for name in [*HOSTS, HELD]}))
    boots = {}
    for name in [*HOSTS, HELD]:
        assert "MokListRT is empty" in ssh(name, "mokutil --list-enrolled", check=False).stdout
        boots[name] = sandbox_tools.boots(name)
    first = sandbox_tools.run_pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE,
                                      check=False, timeout=1800, inventory=str(inventory))
    gate = (f"{HELD}] gpuhost: the next boot starts kernel 6.8.0-52-generic, for which this "
            "host's repositories have no signed NVIDIA module package "
            "(linux-modules-nvidia-580-server-open-6.8.0-52-generic): not rebooting;")
    assert len([line for line in first.output.splitlines() if gate in line]) == 1, \
        first.output[-5000:]
    assert sandbox_tools.boots(HELD) == boots[HELD], f"{HELD} was rebooted"
    assert "linux-modules-nvidia-580-server-open-6.8.0-52-generic" not in ssh(
        HELD, "dpkg-query -W 'linux-modules-nvidia-*'", check=False).stdout
    failed = re.findall(r"\[(u\d\d-\d\d)\] Error", first.output)
    assert set(failed) <= {HELD}, first.output[-5000:]
    for name, (driver, package_version) in HOSTS.items():
        branch = driver.split(".")[0]
        assert sandbox_tools.boots(name) > boots[name], f"{name} was not rebooted"
        kernel = ssh(name, "uname -r").stdout.strip()
        installed = ssh(name, "dpkg-query -W -f '${Package} ${Version}\\n' 'linux-modules-nvidia-*'"
                              " 'nvidia-utils-*' 'dkms' 2>/dev/null; true").stdout
        assert f"linux-modules-nvidia-{branch}-server-open-{kernel} " in installed, installed
        assert f"nvidia-utils-{branch}-server {package_version}" in installed, installed
        assert not re.search(r"^dkms ", installed, re.M), f"{name}: DKMS was installed"
        assert f"Pin: version {driver}-0ubuntu0." in ssh(
            name, "cat /etc/apt/preferences.d/gpuhost-nvidia-driver").stdout
        version = ssh(name, "cat /proc/driver/nvidia/version").stdout
        assert re.search(rf"NVIDIA UNIX .*Kernel Module .*{re.escape(driver)}", version), version
        assert ssh(name, "modinfo -F signer nvidia").stdout.strip() == ubuntu_signed.CN
        assert "MokListRT is empty" in ssh(name, "mokutil --list-enrolled", check=False).stdout

    limit = [arg for name in HOSTS for arg in ("--limit", name)]
    second = sandbox_tools.run_pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE, *limit,
                                       "--data", "full_check=true", check=False, timeout=900,
                                       inventory=str(inventory))
    assert second.returncode == 0 and second.totals["changed"] == 0, second.output[-3000:]

    out = tmp_path / "audit.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost.cli", "audit", str(_audit_inventory(tmp_path, fleet)),
         "--json", str(out)], cwd=ROOT, text=True, capture_output=True, timeout=300,
        env={**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"})
    assert out.is_file(), proc.stdout + proc.stderr
    for host in json.loads(out.read_text())["hosts"]:
        if host["name"] == HELD:
            continue
        found = {f["id"]: f for f in host["health"]["findings"]}
        assert "secure-boot-module-signer" in found, (host["name"], found)
        message = found["secure-boot-module-signer"]["message"]
        assert f'signed by "{ubuntu_signed.CN}": it is loaded, so the kernel trusts' in message
        assert "secure-boot-signer-not-enrolled" not in found

    # the rolling upgrade moves u24-01 to branch 595: Canonical's packages move together
    upgraded = tmp_path / "signed_upgrade_inventory.py"
    upgraded.write_text(INVENTORY.format(root=str(sandbox_tools.root), overrides={
        "u24-01": {**_wanted("u24-01"), "nvidia_driver_version": "595.71.05"}}))
    boots = sandbox_tools.boots("u24-01")
    moved = sandbox_tools.run_pyinfra("-y", "deploys/upgrade_driver.py", "--limit", "u24-01",
                                      *NO_VERIFY_IMAGE, check=False, timeout=900,
                                      inventory=str(upgraded))
    assert moved.returncode == 0, moved.output[-5000:]
    assert sandbox_tools.boots("u24-01") > boots, "u24-01 was not rebooted into 595"
    installed = ssh("u24-01", "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' "
                              "'linux-modules-nvidia-*' 'nvidia-*' 2>/dev/null | grep ' installed$'"
                    ).stdout
    assert "linux-modules-nvidia-595-server-open-6.8.0-51-generic " in installed, installed
    assert "nvidia-utils-595-server 595.71.05-0ubuntu0.24.04.1 " in installed, installed
    assert "-580-" not in installed, installed  # the old branch's packages went with it
    assert "Pin: version 595.71.05-0ubuntu0.24.04.*" in ssh(
        "u24-01", "cat /etc/apt/preferences.d/gpuhost-nvidia-driver").stdout
    assert re.search(r"Kernel Module .*595\.71\.05", ssh(
        "u24-01", "cat /proc/driver/nvidia/version").stdout)
    assert ssh("u24-01", "modinfo -F signer nvidia").stdout.strip() == ubuntu_signed.CN
    again = sandbox_tools.run_pyinfra("-y", "deploys/upgrade_driver.py", "--limit", "u24-01",
                                      *NO_VERIFY_IMAGE, check=False, timeout=600,
                                      inventory=str(upgraded))
    assert again.returncode == 0 and again.totals["changed"] == 0, again.output[-3000:]
