"""Issue 23 item 3 over SSH: a Secure Boot host given an enrolled key ends with the NVIDIA
module signed by that key (read from the module) and loaded after the reboot, on each dkms
line: Ubuntu 22.04 (dkms 2.8: kmodsign and /var/lib/shim-signed/mok only), Ubuntu 24.04 and
Debian 12 (dkms 3.0: framework.conf.d). Before the fix the 22.04 host's module was signed by
shim-signed's own unenrolled MOK and refused after the reboot.

Bare hosts: the module is built and signed while the driver's packages install, so the
converge from bare is the point.
"""
from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import pytest

SPEC = {"hosts": 3, "ol": 0, "ubuntu": 2, "docker_hosts": 0, "overrides": {
    name: {"traits": ["secure-boot-enrolled"]} for name in ("gpu-01", "u22-02", "u24-03")}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="DKMS signs the module while the driver installs")]

DKMS_LINE = {"debian12": "3.0", "ubuntu2204": "2.8", "ubuntu2404": "3.0"}
NO_VERIFY_IMAGE = ("--data", "verify_image=null", "--data", "verify_image_archive=null")
MAGIC = b"~Module signature appended~\n"


def _issuer_serial(der: bytes) -> tuple[bytes, bytes]:
    pkg = str(Path(__file__).resolve().parents[2] / "sandbox/nvidia/machine/usr/local/lib/gpusim")
    sys.path.insert(0, pkg)
    try:
        from gpusim import firmware
    finally:
        sys.path.remove(pkg)
    return firmware.issuer_serial(der)


def _last_signature(module: bytes) -> bytes:
    """The PKCS#7 the kernel checks: the last one appended (struct module_signature: 12
    bytes, sig_len big-endian at its end, then the magic string)."""
    assert module.endswith(MAGIC), "the module carries no appended signature"
    end = len(module) - len(MAGIC) - 12
    return module[end - int.from_bytes(module[end + 8:end + 12], "big"):end]


def test_each_dkms_line_signs_with_the_enrolled_key_and_the_module_loads_after_reboot(
        fleet, ssh, pyinfra, sandbox_tools):
    from sandbox.traits import boot
    issuer, serial = _issuer_serial(boot.MOK_CERT.read_bytes())
    hosts = [h for h in fleet["hosts"] if "secure-boot-enrolled" in h.get("traits", [])]
    assert sorted(h["os"] for h in hosts) == sorted(DKMS_LINE), hosts
    boots = {h["name"]: sandbox_tools.boots(h["name"]) for h in hosts}
    first = pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE, check=False, timeout=2400)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-5000:]
    for h in hosts:
        name = h["name"]
        line = re.search(r"(\d+\.\d+)", ssh(name, "dkms --version").stdout)  # dkms:2.8, dkms-3.0.10
        assert line and line.group(1) == DKMS_LINE[h["os"]], name   # the dkms line of its release
        assert sandbox_tools.boots(name) > boots[name], f"{name} was not rebooted"
        module = base64.b64decode(ssh(
            name, "base64 -w0 /lib/modules/$(uname -r)/updates/dkms/nvidia.ko").stdout)
        signature = _last_signature(module)
        assert issuer in signature and serial in signature, \
            f"{name}: the module is not signed by the enrolled key"
        version = ssh(name, "cat /proc/driver/nvidia/version").stdout
        assert re.search(r"NVIDIA UNIX .*Kernel Module", version), f"{name}: driver not loaded"
    second = pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE, "--data", "full_check=true", check=False, timeout=900)
    assert second.returncode == 0 and second.totals["changed"] == 0, \
        (second.stdout + second.stderr)[-3000:]
