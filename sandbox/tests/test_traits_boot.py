"""The boot traits (sandbox/traits/boot.py) are really in effect on booted hosts, before any
product behaviour is tested against them:

Bare hosts of BOOT_SPEC (below: each boot trait on a host of its own); a test whose trait no
host carries fails.
"""
from __future__ import annotations

import time

import pytest

# One fleet shape for the boot traits' tests (sandbox/tests/test_traits_boot.py and
# tests/integration/test_boot_safety.py use the same): every boot trait on a host of its own.
BOOT_SPEC = {"hosts": 4, "ol": 1, "docker_hosts": 0, "overrides": {
    "gpu-01": {"traits": ["secure-boot"]}, "gpu-02": {"traits": ["dkms-build-fails"]},
    "gpu-03": {"traits": ["next-kernel"]},
    "ol8-04": {"traits": ["next-kernel", "secure-boot-enrolled"]}}}


pytestmark = [pytest.mark.integration, pytest.mark.fleet(**BOOT_SPEC, state="bare")]

MODULE = ("m=/lib/modules/$(uname -r)/updates/dkms; mkdir -p $m && "
          "printf 'gpusim-module version=570.172.08 flavor=open kernel=%s\\n' $(uname -r) > $m/nvidia.ko")


def _with(fleet, trait):
    hosts = [h for h in fleet["hosts"] if trait in h.get("traits", [])]
    if not hosts:
        pytest.fail(f"no host of this fleet has the trait {trait} (BOOT_SPEC changed?)")
    return hosts


def test_secure_boot_refuses_an_unsigned_module_like_the_kernel(fleet, ssh):
    for h in _with(fleet, "secure-boot"):
        assert ssh(h["name"], "mokutil --sb-state").stdout.strip() == "SecureBoot enabled"
        assert "MokListRT is empty" in ssh(h["name"], "mokutil --list-enrolled", check=False).stdout
        ssh(h["name"], MODULE)
        try:
            proc = ssh(h["name"], "modprobe nvidia", check=False)
            assert proc.returncode == 1
            assert proc.stderr.strip() == \
                "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
        finally:
            ssh(h["name"], "rm -f /lib/modules/$(uname -r)/updates/dkms/nvidia.ko")


def test_secure_boot_enrolled_loads_a_module_signed_by_the_enrolled_key(fleet, ssh):
    from sandbox.traits import boot
    for h in _with(fleet, "secure-boot-enrolled"):
        fp = ssh(h["name"], "mokutil --list-enrolled").stdout
        assert "SHA1 Fingerprint:" in fp
        ssh(h["name"], MODULE)
        unsigned = ssh(h["name"], "modprobe nvidia", check=False)
        assert "Key was rejected by service" in unsigned.stderr
        key, cert = boot.MOK_KEY, boot.MOK_CERT
        ssh(h["name"], "mkdir -m 700 -p /root/mok && python3 -c \"open('/root/mok/k', 'wb')"
                       f".write(bytes.fromhex('{key.read_bytes().hex()}')); open('/root/mok/c', "
                       f"'wb').write(bytes.fromhex('{cert.read_bytes().hex()}'))\"")
        # what DKMS's sign step does (sign-file HASH KEY CERT MODULE), with gpusim's stand-in
        ssh(h["name"], "python3 -c \"import sys; sys.path.append('/usr/local/lib/gpusim'); "
                       "from gpusim import firmware; sys.exit(firmware.main('sign-file', "
                       "['sha512', '/root/mok/k', '/root/mok/c', sys.argv[1]]))\" "
                       "/lib/modules/$(uname -r)/updates/dkms/nvidia.ko")
        try:
            ssh(h["name"], "modprobe nvidia && grep -q 570.172.08 /proc/driver/nvidia/version")
        finally:
            ssh(h["name"], "modprobe -r nvidia; rm -rf /root/mok "
                           "/lib/modules/$(uname -r)/updates/dkms/nvidia.ko", check=False)


def test_next_kernel_is_the_default_entry_and_a_reboot_boots_it(fleet, ssh, sandbox_tools):
    from sandbox.traits import boot
    for h in _with(fleet, "next-kernel"):
        running = ssh(h["name"], "uname -r").stdout.strip()
        new = boot.next_kernel(h)
        assert running == h["kernel_release"] != new
        if h["os"] == "debian12":
            cfg = ssh(h["name"], "grep -m1 -E '^[[:space:]]*linux' /boot/grub/grub.cfg").stdout
            assert f"/boot/vmlinuz-{new} " in cfg
        else:
            assert ssh(h["name"], "grubby --default-kernel").stdout.strip() == f"/boot/vmlinuz-{new}"
        ssh(h["name"], f"test -e /boot/vmlinuz-{new} && test -d /lib/modules/{new}")
        boots = sandbox_tools.boots(h["name"])
        ssh(h["name"], "(sleep 1; systemctl reboot) >/dev/null 2>&1 </dev/null &")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(2)
            if sandbox_tools.boots(h["name"]) > boots:
                proc = ssh(h["name"], "timeout 30 systemctl is-system-running --wait; uname -r",
                           check=False)
                if proc.returncode == 0 or "running" in proc.stdout:
                    break
        assert ssh(h["name"], "uname -r").stdout.strip() == new


def test_dkms_build_fails_with_the_scriptlet_exiting_zero(fleet, ssh):
    for h in _with(fleet, "dkms-build-fails"):
        faults = ssh(h["name"], "cat /etc/gpusim/faults.json").stdout
        assert '"dkms_build_fail": true' in faults and '"scriptlet_ignores_dkms": true' in faults
        assert ssh(h["name"], "gpusim fault check dkms_build_fail", check=False).returncode == 0
