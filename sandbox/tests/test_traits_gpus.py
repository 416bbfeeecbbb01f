"""GPU traits and models of the sandbox (sandbox/traits/gpus.py, sandbox/pci.py): each shown in
effect on booted hosts before any product behaviour is tested against it."""
from __future__ import annotations

import pytest

from sandbox import pci, spec, traits

KERNEL = "6.1.0-99-amd64"
# gpu-01: V100 PCIe without pciutils, gpu-02: a B200 its pci.ids does not know, ol9-04: P100.
OVERRIDES = {"gpu-01": {"gpu_model": "V100-PCIE-16GB", "gpu_count": 2, "traits": ["no-pciutils"]},
             "gpu-02": {"gpu_model": "B200", "gpu_count": 1, "traits": ["unknown-pci-ids"]},
             "ol9-04": {"gpu_model": "P100-PCIE-16GB", "gpu_count": 1}}


def test_the_gpu_traits_are_registered_with_their_sources():
    for name in ("no-pciutils", "unknown-pci-ids"):
        assert traits.REGISTRY[name].source


def test_the_pci_tree_holds_sysfs_files_of_every_function(tmp_path):
    h = spec.plan(1, 0, 1, {"gpu-01": {"gpu_model": "V100-SXM2-16GB", "gpu_count": 8,
                                       "nvswitch": True}}, KERNEL)[0]
    pci.write_tree(h, tmp_path / "pci")
    entries = {d.name: {f.name: f.read_text() for f in d.iterdir()}
               for d in (tmp_path / "pci").iterdir()}
    gpus = [e for e in entries.values() if e["class"] == "0x030200\n"]
    switches = [e for e in entries.values() if e["class"] == "0x068000\n"]
    assert len(gpus) == 8 and {g["device"] for g in gpus} == {"0x1db1\n"}
    assert {g["vendor"] for g in gpus} == {"0x10de\n"} and gpus[0]["revision"] == "0xa1\n"
    assert len(switches) == 6  # V100 SXM2 HGX: six NVSwitches
    assert "0000:06:00.0" in entries and entries["0000:00:00.0"]["vendor"] == "0x8086\n"
    assert set(gpus[0]) == {"vendor", "device", "class", "subsystem_vendor",
                            "subsystem_device", "revision"}


# the integration tests below: bare hosts with the GPU traits
pytestmark = pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, overrides=OVERRIDES, state="bare")


@pytest.fixture(scope="module")
def gpu_fleet(fleet, ssh):
    return lambda name, command, **kw: ssh(name, command, **kw)


@pytest.mark.integration
def test_no_pciutils_host_has_no_lspci_but_the_kernels_pci_ids(gpu_fleet):
    assert gpu_fleet("gpu-01", "command -v lspci", check=False).returncode == 1
    out = gpu_fleet("gpu-01", "cd /sys/bus/pci/devices && for d in *; do "
                    'echo "$d $(cat $d/vendor) $(cat $d/device) $(cat $d/class)"; done').stdout
    assert out.count("0x10de 0x1db4 0x030200") == 2, out
    # read-only, as nspawn's /sys is
    assert gpu_fleet("gpu-01", "touch /sys/bus/pci/devices/x", check=False).returncode != 0
    # the other hosts keep the simulated pciutils
    assert gpu_fleet("ol9-04", "command -v lspci").stdout.strip() == "/usr/local/bin/lspci"


@pytest.mark.integration
def test_unknown_pci_ids_host_prints_pciutils_fallback_names(gpu_fleet):
    assert gpu_fleet("gpu-02", "lspci -nn -d 10de:").stdout.strip() == (
        "1b:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2901] (rev a1)")
    assert '"Device [2901]"' in gpu_fleet("gpu-02", "lspci -mm -nn -d 10de:").stdout
    assert "Device 2901" in gpu_fleet("gpu-02", "lspci -d 10de:").stdout


@pytest.mark.integration
def test_pre_turing_pcie_models_carry_their_real_pci_ids(gpu_fleet):
    out = gpu_fleet("ol9-04", "lspci -nn -d 10de:").stdout
    assert "GP100GL [Tesla P100 PCIe 16GB] [10de:15f8]" in out, out
    assert "0x15f8" in gpu_fleet("ol9-04", "cat /sys/bus/pci/devices/*/device").stdout
