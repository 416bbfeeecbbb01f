"""The simulated firmware's db (keys trusted without a MOK, as shim trusts the distribution's
key) and ``modinfo``'s signer, run as subprocesses in a temporary GPUSIM_ROOT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG_DIR = ROOT / "sandbox/nvidia/machine/usr/local/lib/gpusim"
KVER = "6.8.0-51-generic"
CN = "Canonical Ltd. Kernel Module Signing (gpuhost sandbox stand-in)"


def _cert(tmp: Path, cn: str, name: str) -> Path:
    out = tmp / f"{name}.der"
    subprocess.run(["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-days", "2", "-subj", f"/CN={cn}", "-keyout", str(tmp / f"{name}.key"),
                    "-outform", "DER", "-out", str(out)], check=True, capture_output=True)
    return out


def _py(root: Path, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUSIM_ROOT=str(root), PYTHONPATH=str(PKG_DIR))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def host(tmp_path):
    root = tmp_path / "root"
    (root / "etc/gpusim/firmware").mkdir(parents=True)
    (root / "etc/gpusim/firmware/secure-boot").write_text("enabled\n")
    (root / "etc/gpusim/machine.json").write_text(json.dumps(
        {"kernel_release": KVER, "hostname": "sb", "os": "ubuntu2404", "gpu_model": "A100-SXM4-40GB",
         "gpu_count": 1}))
    mod = root / f"lib/modules/{KVER}/kernel/nvidia-580srv/nvidia.ko"
    mod.parent.mkdir(parents=True)
    mod.write_text("gpusim-module version=580.95.05 flavor=open\n")
    canonical = _cert(tmp_path, CN, "canonical")
    other = _cert(tmp_path, "someone else", "other")
    return root, mod, canonical, other


def _sign(root: Path, mod: Path, cert: Path) -> None:
    done = _py(root, "import sys; from gpusim import firmware; sys.exit(firmware.sign_file("
                     f"['sha512', {str(cert)!r}, {str(cert)!r}, {str(mod)!r}]))")
    assert done.returncode == 0, done.stderr


def _refused(root: Path, mod: Path) -> str | None:
    done = _py(root, "from gpusim import firmware; "
                     f"print(firmware.signed_by_enrolled({str(mod)!r}))")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_module_signed_by_a_db_key_loads_under_secure_boot_with_no_mok(host):
    root, mod, canonical, other = host
    _sign(root, mod, canonical)
    assert _refused(root, mod) == "Key was rejected by service"  # nothing trusts it yet
    db = root / "etc/gpusim/firmware/db"
    db.mkdir()
    (db / "canonical.der").write_bytes(canonical.read_bytes())
    assert _refused(root, mod) == "None"
    listed = _py(root, "import sys; from gpusim import firmware; "
                       "sys.exit(firmware.mokutil(['--list-enrolled']))")
    assert listed.returncode == 1 and "MokListRT is empty" in listed.stdout  # not a MOK


def test_a_db_key_does_not_make_another_signer_trusted(host):
    root, mod, canonical, other = host
    _sign(root, mod, other)
    (root / "etc/gpusim/firmware/db").mkdir()
    (root / "etc/gpusim/firmware/db/canonical.der").write_bytes(canonical.read_bytes())
    assert _refused(root, mod) == "Key was rejected by service"


def test_modinfo_names_the_signer_and_the_version_of_the_running_kernels_module(host):
    root, mod, canonical, _other = host
    unsigned = _py(root, "import sys; from gpusim import modinfo; "
                         "sys.exit(modinfo.main(['nvidia']))")
    assert unsigned.returncode == 0, unsigned.stderr
    assert "version:        580.95.05\n" in unsigned.stdout
    assert "signer" not in unsigned.stdout
    _sign(root, mod, canonical)
    signer = _py(root, "import sys; from gpusim import modinfo; "
                       "sys.exit(modinfo.main(['-F', 'signer', 'nvidia']))")
    assert signer.returncode == 0, signer.stderr
    assert signer.stdout == CN + "\n"
    missing = _py(root, "import sys; from gpusim import modinfo; "
                        "sys.exit(modinfo.main(['-k', '7.0.0-12-generic', 'nvidia']))")
    assert missing.returncode == 1 and "Module nvidia not found" in missing.stderr
