"""GPUDirect RDMA readiness (gpuhost.rdma, facts.assemble_rdma, health's rdma findings,
the setting; docs/rdma.md). Fixtures: tests/fixtures/rdma/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.facts import assemble_rdma, script
from gpuhost import health, rdma, settings
from gpuhost.reports import audit, prom

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rdma"
TOPO = (FIXTURES / "topo_4x-h100__nic-legend.txt").read_text()
OLD_TOPO = (FIXTURES / "topo_2x-v100__old-device-columns.txt").read_text()

# Two GPUs and a NIC behind one PCIe switch (root port 00:01.0, switch ports 01:00.0 up,
# 02:08.0 / 02:10.0 down), a GPU and a NIC under another root port, an NVLink 5 switch port
SECTION = """gpu 0000:05:00.0
gpu 0000:45:00.0
nic 0000:06:00.0
nic 0000:46:00.0
switch 0000:c1:00.0
ib mlx5_0 0000:06:00.0 nic
ib mlx5_1 0000:46:00.0 nic
ib mlx5_4 0000:c1:00.0 switch
path 0000:05:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0
path 0000:06:00.0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:06:00.0
path 0000:45:00.0 /sys/devices/pci0000:40/0000:40:01.0/0000:45:00.0
path 0000:46:00.0 /sys/devices/pci0000:40/0000:40:03.0/0000:46:00.0
acs 0000:02:08.0 ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
acs 0000:02:10.0 ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-
acs 0000:40:01.0 ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
peermem not_loaded
"""


def _sections(rdma_out: str = SECTION, topo: str | None = TOPO) -> dict:
    found = {"rdma": {"rc": 0, "out": rdma_out}}
    if topo is not None:
        found["rdma_topo"] = {"rc": 0, "out": topo}
    return found


def _state(flavor: str = "proprietary", kernel: str = "6.8.0-45-generic", **rdma_out) -> dict:
    return {"os": {"kernel_release": kernel},
            "driver": {"state": "loaded", "loaded": {"version": "580.95.05", "flavor": flavor}},
            "gpus": [{"index": i, "pci_bus_id": f"00000000:{b}:00.0"}
                     for i, b in enumerate(("05", "45", "85", "C5"))],
            "rdma": assemble_rdma.rdma_state(_sections(**rdma_out))}


def test_the_section_reads_gpus_nics_and_tells_nvlink_switch_ports_apart():
    state = rdma.parse_section(SECTION)
    assert state["gpus"] == ["0000:05:00.0", "0000:45:00.0"]
    assert state["nics"] == {"0000:06:00.0": "mlx5_0", "0000:46:00.0": "mlx5_1"}
    assert state["switches"] == {"0000:c1:00.0": "mlx5_4"}
    assert state["paths"]["0000:05:00.0"] == ["0000:00:01.0", "0000:01:00.0", "0000:02:08.0"]
    assert state["acs"]["0000:02:10.0"][2] == "ReqRedir-"
    assert state["peermem_loaded"] is False and state["persisted_in"] == []


def test_an_ib_entry_marked_switch_is_no_nic_even_when_pci_listed_it_as_one():
    state = rdma.parse_section("nic 0000:c1:00.0\nib mlx5_4 0000:c1:00.0 switch\n")
    assert state["nics"] == {} and state["switches"] == {"0000:c1:00.0": "mlx5_4"}


def test_topo_with_a_nic_legend_maps_columns_to_devices():
    topo = rdma.parse_topo(TOPO)
    assert topo["columns"] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_4"}
    assert topo["matrix"]["GPU2"]["NIC1"] == "PXB"
    assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "NODE"),
                                              "GPU2": ("mlx5_1", "PXB"), "GPU3": ("mlx5_1", "NODE")}
    # mlx5_4 is an NVLink 5 switch port: never a GPU's "nearest NIC"
    assert rdma.nearest_nics(topo, {"mlx5_1"})["GPU2"] == ("mlx5_4", "NODE")


def test_topo_of_older_drivers_names_nic_columns_by_device():
    topo = rdma.parse_topo(OLD_TOPO)
    assert topo["columns"] == ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]
    assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "SYS")}


def topo_fixture(name):
    return rdma.parse_topo((FIXTURES / name).read_text())


@pytest.mark.parametrize("name", ["topo_2x-a100__ansi-underlined-header.txt",
                                  "topo_1x-l40s__ansi-underlined-header-one-nic.txt"])
def test_a_header_underlined_with_ansi_escapes_is_the_header(name):
    """nvidia-smi prints the header between ESC[4m and ESC[0m, also into a pipe: the first
    data row was taken for the header and legend lines for rows (a wrong matrix, silently)."""
    topo = topo_fixture(name)
    assert topo["columns"][0] == "GPU0" and topo["columns"][-1].startswith("NIC")
    assert set(topo["matrix"]) == set(topo["columns"])
    if name.startswith("topo_2x"):
        assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx5_0", "PIX"),
                                                  "GPU1": ("mlx5_1", "PXB")}
    else:
        assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx5_2", "PIX")}


def test_the_soc_era_pasted_with_spaces_ranks_soc_as_sys():
    """Drivers before the NODE/SYS split print SOC ("the SMP link between CPU sockets"):
    GPU0/GPU1 had no nearest NIC at all, so no finding."""
    topo = topo_fixture("topo_4x-k80__soc-era-pasted.txt")
    assert topo["matrix"]["GPU0"]["mlx4_0"] == "SOC"  # as printed
    assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx4_0", "SYS"), "GPU1": ("mlx4_0", "SYS"),
                                              "GPU2": ("mlx4_0", "PHB"), "GPU3": ("mlx4_0", "PHB")}


def test_a_terminal_paste_of_the_nic_legend_layout():
    topo = topo_fixture("topo_4x-a6000__terminal-paste-spaces.txt")
    assert topo["columns"] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_bond_0"}
    assert rdma.nearest_nics(topo, set())["GPU3"] == ("mlx5_bond_0", "PHB")


def test_a_misread_matrix_is_an_error_never_a_result():
    with pytest.raises(ValueError, match="no X in its own column"):
        rdma.parse_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV4\t X \t0-7\n")


def test_topo_without_header_is_an_error_in_the_fact_not_a_crash():
    with pytest.raises(ValueError):
        rdma.parse_topo("NVML: Unable to determine the device handle\n")
    state = assemble_rdma.rdma_state(_sections(topo="garbage\n"))
    assert state["topo"] is None and "no header" in state["topo_error"]


def test_acs_redirect_counts_only_below_the_root_port_a_gpu_and_nic_share():
    hits = rdma.acs_redirects(rdma.parse_section(SECTION))
    # 02:08.0 (above GPU 05:00.0, beside NIC 06:00.0) redirects; 40:01.0 is the root port of
    # GPU 45:00.0 while NIC 46:00.0 sits under another root port: no PCIe shortcut to lose
    assert [(h["bridge"], h["gpu"], h["nic"]) for h in hits] == [
        ("0000:02:08.0", "0000:05:00.0", "0000:06:00.0")]


def test_health_findings_name_the_bridge_the_gpu_and_what_to_do():
    found = health.findings(_state())
    ids = sorted((f["id"], f["severity"], f["gpu"]) for f in found if f["id"].startswith("rdma"))
    # GPU1 and GPU3 are NODE from their nearest NIC, but NVLinked to a GPU with a PIX/PXB
    # NIC: NCCL's PXN uses that one (T4-12)
    assert ids == [("rdma-acs-redirect", "warning", "0000:05:00.0"),
                   ("rdma-peermem-missing", "warning", None)]
    acs = next(f for f in found if f["id"] == "rdma-acs-redirect")
    assert "0000:02:08.0" in acs["message"] and "setpci" in acs["message"]


def test_open_module_on_a_new_kernel_needs_no_peermem_finding():
    found = {f["id"] for f in health.findings(_state(flavor="open"))}
    assert "rdma-peermem-missing" not in found
    found = {f["id"] for f in health.findings(_state(flavor="open", kernel="5.4.0-200-generic"))}
    assert "rdma-peermem-missing" in found


def test_a_host_without_rdma_nic_has_no_rdma_finding_and_runs_no_topo():
    state = _state(rdma_out="gpu 0000:05:00.0\n", topo=None)
    assert not [f for f in health.findings(state) if f["id"].startswith("rdma")]
    assert rdma.wanted("auto", state["rdma"]) == "none"
    assert rdma.wanted("peermem", state["rdma"]) == "refuse"


@pytest.mark.parametrize("link", ["PHB", "NODE", "SYS"])
def test_a_nearest_nic_beyond_pxb_without_an_nvlink_peer_is_a_warning(link):
    """T4-12: NCCL's default netGdrLevel is PATH_PXB (ncclTopoCheckGdr)."""
    topo = (TOPO.replace("GPU1\tNV18\t X \tNV18\tNV18\tNODE", f"GPU1\tSYS\t X \tSYS\tSYS\t{link}")
            .replace("GPU0\t X \tNV18", "GPU0\t X \tSYS").replace("GPU2\tNV18\tNV18",
                                                                  "GPU2\tNV18\tSYS")
            .replace("GPU3\tNV18\tNV18", "GPU3\tNV18\tSYS"))
    found = [f for f in health.findings(_state(topo=topo)) if f["id"] == "rdma-nic-across-cpu"]
    assert [(f["severity"], f["gpu"]) for f in found] == [("warning", "0000:45:00.0")]
    assert f"({link})" in found[0]["message"] and "beyond PXB" in found[0]["message"]


def test_a_far_nic_is_no_finding_where_an_nvlink_peer_has_a_near_one():
    """NCCL's PXN: GPU0 reaches GPU2's PXB NIC over NVLink (ncclTopoCheckGdr)."""
    topo = TOPO.replace("GPU0\t X \tNV18\tNV18\tNV18\tPIX", "GPU0\t X \tNV18\tNV18\tNV18\tSYS")
    found = [f for f in health.findings(_state(topo=topo)) if f["id"] == "rdma-nic-across-cpu"]
    assert found == []


def test_drift_wants_the_module_loaded_and_at_boot_only_where_asked_and_a_nic_is_seen():
    state = _state()
    assert rdma.drift(state, "off") == [] and rdma.drift(state, "dmabuf") == []
    assert [i[0] for i in rdma.drift(state, "auto")] == ["gpudirect_rdma", "gpudirect_rdma_boot"]
    done = _state(rdma_out=SECTION.replace("peermem not_loaded", "peermem loaded\n"
                                           "persist /etc/modules-load.d/nvidia-peermem.conf"))
    assert rdma.drift(done, "auto") == []
    assert "nvidia_gpudirect_rdma" in audit.AUDITED


def test_the_setting_refuses_dmabuf_with_the_proprietary_module_before_any_host():
    assert settings.BY_NAME["nvidia_gpudirect_rdma"].default == "off"
    base = {"nvidia_driver_version": "580.95.05",
            "nvidia_local_repo": {"debian12": {"url": "https://example.com/r.deb",
                                               "sha256": "0" * 64}}}
    problems = settings.validate({**base, "nvidia_gpudirect_rdma": "dmabuf",
                                  "nvidia_driver_flavor": "proprietary"})
    assert any("dmabuf needs NVIDIA's open kernel modules" in p for p in problems), problems
    assert settings.validate({**base, "nvidia_gpudirect_rdma": "sometimes"})
    assert not [p for p in settings.validate({**base, "nvidia_gpudirect_rdma": "auto"})
                if "gpudirect" in p]


def test_finding_ids_are_known_to_the_metrics():
    assert {"rdma-peermem-missing", "rdma-peermem-unusable", "rdma-acs-redirect",
            "rdma-nic-across-cpu"} <= set(prom.FINDING_IDS)


INBOX = SECTION + "peer_api absent\n"


def test_an_inbox_rdma_stack_loads_no_peermem_and_the_audit_names_dma_buf():
    """T4-03: ib_core loaded without ib_register_peer_memory_client (/proc/kallsyms): an
    inbox stack, where nvidia_peermem fails with -EINVAL (nvidia-peermem.c)."""
    state = _state(flavor="open", rdma_out=INBOX)
    assert state["rdma"]["peer_api"] == "absent"
    assert rdma.wanted("auto", state["rdma"]) == "inbox"
    assert rdma.wanted("peermem", state["rdma"]) == "inbox"  # converges, not refused
    assert rdma.drift(state, "auto") == [] and rdma.drift(state, "peermem") == []
    found = {f["id"]: f for f in health.findings(state)}
    assert "rdma-peermem-missing" not in found
    assert found["rdma-peermem-unusable"]["severity"] == "info"
    assert "DMA-BUF" in found["rdma-peermem-unusable"]["message"]
    assert "ib_register_peer_memory_client" in found["rdma-peermem-unusable"]["message"]
    old = {f["id"]: f for f in health.findings(_state(rdma_out=INBOX))}  # proprietary module
    assert old["rdma-peermem-unusable"]["severity"] == "warning"
    assert "MLNX_OFED/DOCA-OFED" in old["rdma-peermem-unusable"]["message"]
    mofed = _state(rdma_out=SECTION + "peer_api exported\n")
    assert rdma.wanted("auto", mofed["rdma"]) == "peermem"


def test_the_section_asks_kallsyms_for_the_peer_memory_api():
    section = script.SECTIONS["rdma"]
    assert "/ ib_register_peer_memory_client/" in section and "' /proc/kallsyms" in section


def test_the_sections_are_constant_shell_and_topo_runs_only_after_a_nic():
    assert script.SECTIONS["rdma_topo"].startswith('case "$_gh_rdma" in *"nic "*)')
    order = list(script.SECTIONS)
    assert order.index("rdma") < order.index("rdma_topo")
    assert "topo -m" in script.build_script(["rdma", "rdma_topo"])


def test_modules_load_file_names_the_module_once():
    lines = [line for line in rdma.modules_load_conf().splitlines() if not line.startswith("#")]
    assert lines == ["nvidia_peermem"]
