"""nvidia_fabric (issue 25): the setting, the packages per branch, the misfits, the drift."""
from __future__ import annotations

import pytest

from gpuhost import fabric, settings
from gpuhost.reports import audit

BASE = {"nvidia_driver_version": "580.95.05", "container_toolkit_version": "1.18.2",
        "nvidia_local_repo": {"debian12": {"path": "/x.deb", "sha256": "a" * 64}}}


@pytest.mark.parametrize(("setting", "fm", "switches", "want"), [
    ("auto", False, 4, "nvswitch"), ("auto", False, 0, "none"), ("auto", False, None, "none"),
    ("auto", True, 0, "nvswitch"), ("none", False, 4, "none"), ("nvl", False, 0, "nvl"),
    ("nvswitch", False, 6, "nvswitch")])
def test_resolve(setting, fm, switches, want):
    assert fabric.resolve(setting, fm, switches) == want


@pytest.mark.parametrize(("data", "says"), [
    ({"nvidia_fabric": "nvl"}, "nvidia_fabric: nvl needs nvidia_imex_peers"),
    ({"nvidia_fabric": "none", "nvidia_fabricmanager": True}, "contradicts nvidia_fabric: none"),
    ({"nvidia_imex_peers": ["10.0.0.1"]}, "nvidia_imex_peers: set, but nvidia_fabric is auto"),
    ({"nvidia_fabric": "nvl", "nvidia_imex_peers": ["10.0.0.1", "node-2"]},
     '[1] "node-2" is not an IP address'),
    ({"nvidia_fabric": "hgx"}, "nvidia_fabric:"),
])
def test_misfits_are_refused_before_any_host(data, says):
    problems = settings.validate({**BASE, **data})
    assert any(says in p for p in problems), problems


def test_valid_fabric_settings():
    assert settings.validate({**BASE, "nvidia_fabric": "nvl",
                              "nvidia_imex_peers": ["10.0.0.1", "fd00::2"]}) == []
    assert settings.validate({**BASE, "nvidia_fabricmanager": True}) == []
    assert settings.resolve(BASE).nvidia_fabric == "auto"


@pytest.mark.parametrize(("tag", "version", "kind", "want"), [
    ("debian12", "580.95.05", "nvswitch", ["libnvidia-nscq"]),
    ("rhel9", "595.71.05", "nvswitch", ["libnvidia-nscq"]),
    ("ubuntu2204", "570.172.08", "nvswitch", ["libnvidia-nscq-570"]),
    ("rhel8", "570.172.08", "nvswitch", ["libnvidia-nscq-570"]),
    ("debian12", "580.95.05", "nvl", ["nvidia-imex", "libnvsdm"]),
    ("debian12", "580.95.05", "none", []),
])
def test_companions_per_branch(tag, version, kind, want):
    assert fabric.fabric_packages(tag, version, kind) == want


def test_nvswitch_asked_on_a_pcie_host_is_refused_naming_the_gpus():
    gpus = [{"model": "L4"}, {"model": "L4"}]
    said = fabric.host_problem("nvswitch", False, 0, gpus)
    assert "no NVSwitch" in said and "L4" in said and "nvidia_fabric: auto or none" in said
    assert fabric.host_problem("auto", True, 0, gpus)  # the old spelling too
    assert fabric.host_problem("auto", False, 0, gpus) is None
    assert fabric.host_problem("nvswitch", False, 4, gpus) is None


def test_nvl_asked_on_a_board_with_its_own_nvswitches_is_refused():
    """Build 6: nvl installs no Fabric Manager; an HGX H100's own NVSwitches need it, or
    every GPU's fabric stays In Progress while the deploy exits 0."""
    said = fabric.host_problem("nvl", False, 4, [{"model": "H100-80GB-HBM3"}] * 8)
    assert said and "4 NVSwitch(es) on its own PCI bus" in said
    assert "nvidia_fabric: nvswitch or auto" in said
    assert fabric.host_problem("nvl", False, 0, [{"model": "GB200"}]) is None


def state(companions, services=None, switches=4, fabric_state="Completed"):
    return {"os": {"supported": True}, "driver": {
        "installed_version": "580.95.05", "loaded_version": "580.95.05", "state": "loaded",
        "reboot_required": False, "companion_versions": companions},
        "toolkit": {"consistent": True, "version": "1.18.2", "versions_seen": ["1.18.2"]},
        "docker": {"exists": False, "valid": True, "docker_installed": False},
        "mig": {"gpus": []}, "health": {"nvswitch_count": switches},
        "gpus": [{"pci_bus_id": "00000000:18:00.0", "health": {"fabric_state": fabric_state}}],
        "fabric": {"services": services or {}}}


def test_fabric_manager_at_another_version_is_drift_naming_both():
    found = fabric.drift(state({"nvidia-fabricmanager": "595.71.05",
                                "libnvidia-nscq": "580.95.05"},
                               {"nvidia-fabricmanager": {"enabled": "enabled",
                                                         "active": "failed"}}), "nvswitch")
    items = {item: message for item, _, _, message in found}
    assert set(items) == {"fabric_package", "fabric_manager_service"}
    assert "595.71.05" in items["fabric_package"] and "580.95.05" in items["fabric_package"]
    assert "enabled and failed" in items["fabric_manager_service"]


def test_the_audit_reports_fabric_drift_and_nothing_when_all_is_well():
    good = state({"nvidia-fabricmanager": "580.95.05", "libnvidia-nscq": "580.95.05"},
                 {"nvidia-fabricmanager": {"enabled": "enabled", "active": "active"}})
    desired = audit.desired_settings(BASE)
    assert [d for d in audit.host_drift(good, desired) if d["item"].startswith("fabric")] == []
    missing = state({})
    assert [d["item"] for d in audit.host_drift(missing, desired)] == ["fabric_manager"]
    # nvidia_fabric none on an NVSwitch host: no Fabric Manager wanted
    assert audit.host_drift(missing, audit.desired_settings({**BASE, "nvidia_fabric": "none"})) == []


def test_fabric_states_and_incomplete_gpus():
    s = state({}, fabric_state="In Progress")
    s["gpus"].append({"pci_bus_id": "x", "health": {"fabric_state": "N/A"}})
    assert fabric.fabric_states(s) == {"00000000:18:00.0": "In Progress"}
    assert fabric.incomplete(s) == {"00000000:18:00.0": "In Progress"}


def test_the_drop_in_orders_fabric_manager_before_cuda_clients():
    text = fabric.fm_drop_in()
    assert "[Unit]" in text and "Before=docker.service containerd.service" in text
    assert "kubelet.service" in text and "nvidia-dcgm.service" in text


FABRIC_Q = """GPU 00000000:18:00.0
    Fabric
        State                             : {state}
        Status                            : {status}
    Processes                             : None
GPU 00000000:2A:00.0
    Fabric
        State                             : Completed
        Status                            : Success
"""


@pytest.mark.parametrize(("state_now", "status", "rc", "seen"), [
    ("Completed", "Success", 0, ""), ("Completed", "N/A", 0, ""),
    ("In Progress", "N/A", 1, "state In Progress,status N/A,state Completed,status Success"),
    # T4-05: NVML checks the status once the state is Completed (NVIDIA/NVSentinel#883)
    ("Completed", "Insufficient Resources", 1,
     "state Completed,status Insufficient Resources,state Completed,status Success"),
])
def test_the_wait_reads_nvidia_smi_q_and_fails_with_fabric_managers_log(tmp_path, state_now,
                                                                        status, rc, seen):
    import subprocess

    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\ncat <<'X'\n" + FABRIC_Q.format(state=state_now, status=status) + "X\n")
    (tmp_path / "journalctl").write_text(
        "#!/bin/sh\necho 'fabric manager NVIDIA GPU driver interface version 595.71.05 "
        "don'\"'\"'t match with driver version 580.95.05.'\n")
    for tool in ("nvidia-smi", "journalctl"):
        (tmp_path / tool).chmod(0o755)
    proc = subprocess.run(["sh", "-c", fabric.wait_script(0)], capture_output=True, text=True,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=30)
    assert proc.returncode == rc, proc.stderr
    if rc:
        assert f"1 fabric state/status line(s) not Completed/Success (seen: {seen})" in \
            proc.stderr
        assert "  fabric manager NVIDIA GPU driver interface version 595.71.05" in proc.stderr


# --- NVLink 5 HGX (B200/B300): switches seen through SW_MNG, NVLSM beside Fabric Manager ---

def nvl5_state(nvlsm=None, fm_active="active", nics=None):
    s = state({"nvidia-fabricmanager": "580.95.05", "libnvidia-nscq": "580.95.05"},
              {"nvidia-fabricmanager": {"enabled": "enabled", "active": fm_active}}, switches=0)
    s["rdma"] = {"switches": {"0000:e4:00.0": None, "0000:e5:00.0": "mlx5_1"},
                 "nics": nics or {}}
    s["fabric"]["nvlsm"] = nvlsm or {"version": "2025.06.6-1", "running": True}
    return s


def test_nvlink5_switches_count_as_nvswitches_and_rdma_nics_do_not():
    s = nvl5_state(nics={"0000:0c:00.0": "mlx5_0"})
    assert fabric.nvlink5_switches(s) == ["0000:e4:00.0", "0000:e5:00.0"]
    assert fabric.switch_count(s) == 2
    assert fabric.resolve("auto", False, fabric.switch_count(s)) == "nvswitch"
    assert fabric.host_problem("nvswitch", False, fabric.switch_count(s), s["gpus"]) is None
    nic_only = {**s, "rdma": {"switches": {}, "nics": {"0000:0c:00.0": "mlx5_0"}}}
    assert fabric.switch_count(nic_only) == 0
    assert fabric.resolve("auto", False, fabric.switch_count(nic_only)) == "none"
    # an H100 board: its 0x0680 bridges, no rdma fact at all
    assert fabric.switch_count(state({})) == 4


@pytest.mark.parametrize(("version", "nvlink5", "want"), [
    ("580.95.05", True, ["libnvidia-nscq", "nvlsm", "infiniband-diags"]),
    ("570.172.08", True, ["libnvidia-nscq-570", "nvlsm", "infiniband-diags"]),
    ("580.95.05", False, ["libnvidia-nscq"])])
def test_nvlink5_adds_nvlsm_and_infiniband_diags_unversioned(version, nvlink5, want):
    assert fabric.fabric_packages("debian12", version, "nvswitch", nvlink5) == want
    assert fabric.fabric_packages("debian12", version, "none", nvlink5) == []


def test_nvlsm_not_in_the_drivers_pin_nor_in_the_upgrades_companions():
    import re

    from gpuhost.facts import assemble_driver
    from gpuhost import packages

    assert not re.match(packages.DRIVER_PACKAGE_REGEX, "nvlsm")
    assert not assemble_driver._COMPANION.match("nvlsm")


@pytest.mark.parametrize(("nvlsm", "fm_active", "want"), [
    ({"version": "2025.06.6-1", "running": True}, "active", set()),
    ({"version": None, "running": False}, "active", {"nvlsm"}),
    ({"version": "2025.06.6-1", "running": False}, "active", {"nvlsm_running"}),
    ({"version": "2025.06.6-1", "running": False}, "failed",
     {"fabric_manager_service"})])
def test_nvlsm_drift(nvlsm, fm_active, want):
    found = {item for item, *_ in fabric.drift(nvl5_state(nvlsm, fm_active), "nvswitch")}
    assert found == want
    # an H100 board never asks for NVLSM
    assert fabric.nvlsm_drift(state({}), True) == []


def test_the_nvlsm_section_is_read():
    from gpuhost.facts.assemble_fabric import nvlsm_state

    assert nvlsm_state({"nvlsm": {"rc": 0, "out": "version 2025.06.6-1\nrunning\n"}}) == {
        "version": "2025.06.6-1", "running": True}
    assert nvlsm_state({"nvlsm": {"rc": 0, "out": "version -\nstopped\n"}}) == {
        "version": None, "running": False}
    assert nvlsm_state({}) == {"version": None, "running": None}


def test_all_nvlinks_down_on_an_nvlink5_board_is_a_finding():
    from gpuhost import health

    down = {"links_total": 18, "links_active": 0, "links_inactive": list(range(18)),
            "all_inactive": True}
    s = nvl5_state()
    s["gpus"][0]["health"]["nvlink"] = down
    assert "nvlink-down" in {f["id"] for f in health.gpu_findings(s)}
    del s["rdma"]  # the same GPU on a host without any switch: links down by design
    s["health"]["nvswitch_count"] = 0
    assert "nvlink-down" not in {f["id"] for f in health.gpu_findings(s)}
