"""gpusim's NVLink 5 HGX (issue 25): an 8x B200 board's two switches show as InfiniBand
functions whose VPD says SW_MNG (not as NVIDIA 0x0680 bridges), and every GPU's fabric
stays In Progress until Fabric Manager of the driver's version AND the NVLink Subnet
Manager run (sandbox/nvidia/README.md, "NVLink 5")."""

import subprocess

import pytest

from sandbox import pci
from sandbox.tests.test_gpusim import Sim, healths, start_fabric_manager

DRIVER = "570.172.08"


def start_nvlsm(sim):
    proc = subprocess.Popen(["bash", "-c", "exec -a /opt/nvidia/nvlsm/sbin/nvlsm sleep 300"])
    sim.write("run/nvidia-fabricmanager/nvlsm.pid", f"{proc.pid}\n")
    return proc


def stop(proc):
    proc.kill()
    proc.wait()


@pytest.fixture
def hgx_b200(tmp_path):
    sim = Sim(tmp_path).machine("B200", 8, nvswitch=True).install(DRIVER)
    sim.boot()
    return sim


def test_the_switches_are_infiniband_functions_with_sw_mng_in_their_vpd(hgx_b200, tmp_path):
    out = hgx_b200.tool("lspci", "-n").stdout
    assert out.count(" 0207: 15b3:1021") == 2 and " 0680: " not in out
    h = {"name": "gpu-01", "os": "debian12", "kernel_release": "6.1.0-0-amd64",
         "gpu_model": "B200", "gpu_count": 8, "nvswitch": True, "traits": []}
    pci.write_tree(h, tmp_path / "pci")
    vpds = sorted((tmp_path / "pci").glob("*/vpd"))
    assert [p.parent.name for p in vpds] == ["0000:e4:00.0", "0000:e5:00.0"]
    assert all(b"SW_MNG" in p.read_bytes() for p in vpds)
    assert (tmp_path / "pci/0000:e4:00.0/vendor").read_text() == "0x15b3\n"
    # a PCIe B200 host (no switches) has neither
    pci.write_tree({**h, "nvswitch": False}, tmp_path / "pcie")
    assert not list((tmp_path / "pcie").glob("*/vpd"))


def test_the_fabric_needs_fabric_manager_and_nvlsm(hgx_b200):
    assert {h["fabric_state"] for h in healths(hgx_b200).values()} == {"In Progress"}
    fm = start_fabric_manager(hgx_b200, DRIVER)
    try:
        # Fabric Manager alone: NVLink 5 switches are trained by NVLSM
        assert {h["fabric_state"] for h in healths(hgx_b200).values()} == {"In Progress"}
        sm = start_nvlsm(hgx_b200)
        try:
            states = [h["fabric_state"] for h in healths(hgx_b200).values()]
            assert states == ["Completed"] * 8
        finally:
            stop(sm)
        assert {h["fabric_state"] for h in healths(hgx_b200).values()} == {"In Progress"}
    finally:
        stop(fm)
