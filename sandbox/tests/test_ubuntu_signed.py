"""The stand-ins of Canonical's signed NVIDIA modules (sandbox/ubuntu_signed.py): names and
versions as Canonical's, the module signed by the stand-in key, which a Secure Boot host's
firmware db trusts (no MOK), and modinfo names as the signer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import ubuntu_signed
from sandbox.nvidia.gpusim import firmware
from sandbox.nvidia.pkg import deb

PKG_DIR = Path(__file__).resolve().parents[1] / "nvidia/machine/usr/local/lib/gpusim"


@pytest.fixture
def built(tmp_path, monkeypatch):
    monkeypatch.setattr(ubuntu_signed, "KEY_DIR", tmp_path / "key")
    monkeypatch.setattr(ubuntu_signed, "KEY", tmp_path / "key/k.key")
    monkeypatch.setattr(ubuntu_signed, "CERT", tmp_path / "key/k.der")
    monkeypatch.setattr(deb, "WORK_DIR", tmp_path / "work")
    out = tmp_path / "pool"
    debs = ubuntu_signed.build("noble", "24.04", "6.8.0-51-generic", "6.8.0-51.52", out)
    return tmp_path, {d.name: d for d in debs}


def _field(path: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(path), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_canonicals_names_and_versions(built):
    _tmp, debs = built
    assert sorted(debs) == sorted(
        f"{name}_amd64.deb" for br, v in (("580", "580.95.05"), ("595", "595.71.05")) for name in (
            f"linux-modules-nvidia-{br}-server-open-6.8.0-51-generic_6.8.0-51.52+1",
            f"nvidia-headless-no-dkms-{br}-server-open_{v}-0ubuntu0.24.04.1",
            f"nvidia-utils-{br}-server_{v}-0ubuntu0.24.04.1"))
    for path in debs.values():
        assert _field(path, "Section").startswith("restricted/")


def test_the_module_is_signed_by_the_stand_in_key_trusted_from_the_db_not_as_a_mok(built):
    tmp, debs = built
    module_deb = next(p for n, p in debs.items() if n.startswith("linux-modules"))
    root = tmp / "root"
    subprocess.run(["dpkg-deb", "-x", str(module_deb), str(root)], check=True)
    ko = root / "lib/modules/6.8.0-51-generic/kernel/nvidia-580srv/nvidia.ko"
    data = ko.read_bytes()
    assert data.startswith(b"gpusim-module version=580.95.05 flavor=open\n")
    issuer, serial = firmware.issuer_serial(ubuntu_signed.CERT.read_bytes())
    assert issuer in data and serial in data and data.endswith(firmware.MAGIC)
    fw = root / "etc/gpusim/firmware"
    fw.mkdir(parents=True)
    (fw / "secure-boot").write_text("enabled\n")
    (fw / "db").mkdir()
    (fw / "db" / ubuntu_signed.DB_NAME).write_bytes(ubuntu_signed.CERT.read_bytes())
    env = dict(os.environ, GPUSIM_ROOT=str(root), PYTHONPATH=str(PKG_DIR))
    code = ("from gpusim import firmware, modinfo; "
            f"print(firmware.signed_by_enrolled({str(ko)!r})); "
            f"print(modinfo.signature(open({str(ko)!r}, 'rb').read())[0])")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines() == ["None", ubuntu_signed.CN]
    (fw / "db" / ubuntu_signed.DB_NAME).unlink()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines()[0] == "Key was rejected by service"
