"""Health findings (gpuhost.health, gpuhost.health.xid, gpuhost.health.lifecycle): every finding firing and
not firing, on host states in the shape of the health interface (state schema 2: per-GPU
``health`` dicts of parse_smi_xml, ``state["health"]`` with the kernel log's Xid events).
The states come from the real fact code (tests/conftest.py's make_state) with the health
fields set here, as facts.assemble will fill them."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from gpuhost import boot, health
from gpuhost.health import lifecycle, xid

TODAY = datetime.date(2026, 11, 24)
GPU = "0000:07:00.0"  # the first GPU of make_state's nvidia-smi XML (00000000:07:00.0)
IDLE = {"pcie_gen_current": 1, "throttle_reasons_active": ["gpu_idle"]}  # an idle GPU: quiet


@pytest.fixture
def state(make_state, with_health):
    """A host on a supported branch (580) whose one A100 and kernel log are quiet; ``sick``
    changes its fields."""
    def make(driver="580.95.05", gpu=None, host=None, gpus=None):
        return with_health(make_state(driver=driver, gpus=gpus), gpu={**IDLE, **(gpu or {})},
                           host=host)
    return make


def ids(state, **kw):
    return [(f["id"], f["severity"], f["gpu"]) for f in health.findings(state, today=TODAY, **kw)]


def only(state, ident, **kw):
    found = [f for f in health.findings(state, today=TODAY, **kw) if f["id"] == ident]
    assert len(found) == 1, found
    return found[0]


def test_a_quiet_host_on_a_supported_branch_has_only_the_lifecycle_info(state):
    found = health.findings(state(), today=TODAY)
    assert [(f["id"], f["severity"]) for f in found] == [("lifecycle-supported", "info")]
    assert "R580 (long-term support branch) is supported until June 2028" in found[0]["message"]
    assert health.status(found) == "healthy"


def test_a_state_without_health_fields_gives_no_health_finding(make_state):
    """Schema-1 states (no health section, GPUs without health): nothing is judged."""
    assert ids(make_state(driver="580.95.05")) == [("lifecycle-supported", "info", None)]


@pytest.mark.parametrize(("fields", "ident", "severity", "says"), [
    ({"ecc_volatile_uncorrectable": 2}, "ecc-volatile-uncorrectable", "warning",
     "2 uncorrectable ECC error(s) since the driver loaded: drain the GPU and reset it"),
    ({"ecc_aggregate_uncorrectable": 7}, "ecc-aggregate-uncorrectable", "info",
     "7 uncorrectable ECC error(s) over the GPU's lifetime"),
    ({"retired_pages_pending": True}, "retired-pages-pending", "warning",
     "waiting to be retired: reboot the host (or reload the driver)"),
    ({"remapped_rows_pending": True}, "row-remap-pending", "warning",
     "a row remap is pending: reset the GPU"),
    ({"remapped_rows_failure": True}, "row-remap-failure", "critical",
     "row remapping failed: the GPU cannot repair its memory any more"),
    ({"pcie_width_current": 8}, "pcie-width-degraded", "warning", "PCIe link x8 of x16"),
    ({"throttle_reasons_active": ["sw_power_cap"], "pcie_gen_current": 3},
     "pcie-gen-below-max", "info", "PCIe gen 3 of 4 while the GPU is not idle"),
    ({"throttle_reasons_active": ["hw_thermal_slowdown"]}, "throttle-thermal", "warning",
     "clocks slowed now (hw_thermal_slowdown): the GPU is too hot"),
    ({"throttle_reasons_active": ["sw_thermal_slowdown"]}, "throttle-thermal", "warning",
     "(sw_thermal_slowdown)"),
    ({"throttle_reasons_active": ["hw_slowdown"]}, "throttle-hw-slowdown", "warning",
     "hardware slowdown"),
    ({"throttle_reasons_active": ["hw_power_brake_slowdown"]}, "throttle-power-brake",
     "warning", "the power brake is asserted"),
    ({"throttle_reasons_active": ["sw_power_cap"]}, "throttle-power-cap", "info",
     "runs at its power limit"),
    ({"fabric_state": "In Progress"}, "fabric-not-completed", "critical",
     "NVLink fabric state 'In Progress' (8 NVSwitches on the bus)"),
    ({"fabric_state": "Not Started"}, "fabric-not-completed", "critical",
     "check nvidia-fabricmanager"),
    # T4-05: NVML: the status is checked once the state is Completed
    ({"fabric_state": "Completed", "fabric_status": "Insufficient Resources"},
     "fabric-probe-failed", "critical", "state 'Completed' with status 'Insufficient Resources'"),
    # T4-04: Xid catalog WORKFLOW_XID_48: RMA flow, field diagnostics
    ({"sram_threshold_exceeded": True}, "ecc-sram-threshold-exceeded", "critical",
     "run NVIDIA's field diagnostics"),
])
def test_each_gpu_finding_fires_with_its_severity_and_gpu(state, fields, ident, severity, says):
    finding = only(state(gpu=fields, host={"nvswitch_count": 8}), ident)
    assert (finding["severity"], finding["gpu"]) == (severity, GPU)
    assert says in finding["message"]
    assert "\n" not in finding["message"]


@pytest.mark.parametrize("fields", [
    {"ecc_volatile_uncorrectable": None, "ecc_aggregate_uncorrectable": None},  # ECC off
    {"retired_pages_pending": False}, {"remapped_rows_pending": None},
    {"remapped_rows_failure": None},
    {"pcie_width_current": None, "pcie_width_max": None},
    {"pcie_gen_current": 1, "throttle_reasons_active": ["gpu_idle"]},  # idle: gen 1 is normal
    {"pcie_gen_current": 1, "throttle_reasons_active": None},  # unknown whether idle
    {"pcie_gen_current": 4, "throttle_reasons_active": []},
    {"throttle_reasons_active": ["gpu_idle", "applications_clocks_setting",
                                 "display_clocks_setting", "sync_boost"]},
    {"fabric_state": "Completed"}, {"fabric_state": None}, {"fabric_state": "N/A"},
    {"fabric_state": "Completed", "fabric_status": "Success"},
    {"fabric_state": "N/A", "fabric_status": "N/A"}, {"sram_threshold_exceeded": False},
])
def test_quiet_or_unknown_fields_are_no_finding(state, fields):
    assert ids(state(gpu=fields)) == [("lifecycle-supported", "info", None)]


NVLINK_UP = {"links_total": 12, "links_active": 12, "links_inactive": [], "all_inactive": False,
             "replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}


@pytest.mark.parametrize(("nvlink", "nvswitches", "ident", "severity", "says"), [
    ({"links_active": 0, "links_inactive": list(range(12)), "all_inactive": True}, 6,
     "nvlink-down", "critical", "every NVLink of this GPU is inactive on a host with 6 NVSwitches"),
    ({"links_total": 0, "links_active": 0, "all_inactive": True}, 6, "nvlink-down", "critical",
     "cut off from the fabric"),  # NVML's "all links are inActive" and no link line
    ({"links_active": 10, "links_inactive": [3, 7]}, 6, "nvlink-link-inactive", "warning",
     "NVLink 3, 7 inactive (10 of 12 active)"),
    ({"links_active": 11, "links_inactive": [5]}, 0, "nvlink-link-inactive", "warning",
     "less GPU-to-GPU bandwidth"),
    ({"recovery_errors": 3}, 0, "nvlink-recovery-errors", "warning",
     "3 NVLink recovery error(s) since the driver loaded"),
    ({"crc_errors": 17, "replay_errors": 1}, 0, "nvlink-crc-replay-errors", "info",
     "17 NVLink CRC and 1 replay error(s)"),
])
def test_nvlink_findings(state, nvlink, nvswitches, ident, severity, says):
    found = only(state(gpu={"nvlink": {**NVLINK_UP, **nvlink}},
                       host={"nvswitch_count": nvswitches}), ident)
    assert (found["severity"], found["gpu"]) == (severity, GPU)
    assert says in found["message"]


@pytest.mark.parametrize(("nvlink", "nvswitches", "mig"), [
    ({}, 6, "disabled"),  # every link up, no error
    (None, 6, "disabled"),  # no NVLink (a PCIe card): nothing read, nothing judged
    # all links down without an NVSwitch: a PCIe card without an NVLink bridge
    ({"links_active": 0, "links_inactive": list(range(12)), "all_inactive": True}, 0, "disabled"),
    # counters not read (-e runs only when a link is up)
    ({"replay_errors": None, "recovery_errors": None, "crc_errors": None}, 6, "disabled"),
    # MIG mode: NVLink is not used, its link state is not judged
    ({"links_active": 0, "links_inactive": list(range(12)), "all_inactive": True}, 6, "enabled"),
])
def test_quiet_nvlink_is_no_finding(state, nvlink, nvswitches, mig):
    value = state(gpu={"nvlink": None if nvlink is None else {**NVLINK_UP, **nvlink}},
                  host={"nvswitch_count": nvswitches})
    value["gpus"][0]["mig_current"] = mig
    assert [f for f in ids(value) if f[0].startswith("nvlink")] == []


def test_row_remap_failure_and_pending_are_separate_findings(state):
    assert only(state(gpu={"remapped_rows_pending": True, "remapped_rows_failure": True}),
                "row-remap-failure")["severity"] == "critical"
    assert not [f for f in ids(state(gpu={"remapped_rows_failure": True}))
                if f[0] == "row-remap-pending"]


def test_persistence_mode_off_only_on_data_center_gpus(state):
    a100 = state()
    a100["gpus"][0]["persistence_mode"] = "disabled"
    finding = only(a100, "persistence-mode-off")
    assert finding["severity"] == "warning" and "nvidia-persistenced" in finding["message"]
    geforce = state(gpus=[("NVIDIA GeForce RTX 4090", "N/A", "N/A")])
    geforce["gpus"][0]["persistence_mode"] = "disabled"
    assert "persistence-mode-off" not in [i for i, _, _ in ids(geforce)]
    a100["gpus"][0]["persistence_mode"] = "enabled"
    assert "persistence-mode-off" not in [i for i, _, _ in ids(a100)]


def test_gpus_missing_from_nvidia_smi(state):
    finding = only(state(host={"gpus_missing": ["0000:08:00.0"]}), "gpu-missing")
    assert finding["severity"] == "critical" and finding["gpu"] == "0000:08:00.0"
    # None: nvidia-smi did not answer, the driver state says so; not a missing-GPU finding
    assert "gpu-missing" not in [i for i, _, _ in ids(state(host={"gpus_missing": None}))]


def xid_event(number, text="", bus="0000:07:00"):
    return {"pci_bus_id": bus, "xid": number, "gpu_instance_id": None, "text": text}


@pytest.mark.parametrize(("number", "severity", "says"), [
    (79, "critical", "drain the host and reboot it (NVIDIA: restart bare metal)"),
    (48, "critical", "an uncorrectable ECC error: drain the GPU, reset it"),
    (63, "info", "no action unless it repeats"),
    (64, "critical", "reset it (gpuhost recover INVENTORY --limit HOST --gpu N)"),
    (74, "critical", "an NVLink error: reset the GPU or reboot"),
    (92, "warning", "contact NVIDIA support"),
    (94, "warning", "reset the GPU when convenient"),
    (95, "critical", "drain the GPU and reset it"),
    (119, "critical", "drain the GPU and reset it"),
    (120, "critical", "drain the GPU and reset it"),
    (13, "info", "an application fault"),
    (31, "info", "illegal memory access"),
    (45, "info", "follow the other Xids"),
    # T4-07: several NETIR subcodes are IGNORE in the catalog's 144-150 decode
    (149, "warning", "decode its IntrInfo subcode"),
    # T4-06: the catalog's row 163 says "No GPU reset required"
    (163, "warning", "no GPU reset required"),
])
def test_xid_findings_follow_nvidias_catalog(state, number, severity, says):
    finding = only(state(host={"xid_events": [xid_event(number, "x")] * 2}), f"xid-{number}")
    assert (finding["severity"], finding["gpu"]) == (severity, GPU)
    assert f"Xid {number} (" in finding["message"] and "2x since boot on GPU 0000:07:00.0" in \
        finding["message"]
    assert says in finding["message"]


def test_xid_154_severity_comes_from_the_recovery_action_it_names(state):
    line = "GPU recovery action changed from 0x0 (None) to 0x{} ({})"
    for code, action, severity in ((2, "Node Reboot Required", "critical"),
                                   (1, "GPU Reset Required", "critical"),
                                   (3, "Drain P2P", "warning"), (0, "None", "info")):
        found = only(state(host={"xid_events": [xid_event(154, line.format(code, action))]}),
                     "xid-154")
        assert found["severity"] == severity and f"'{action}'" in found["message"], action


@pytest.mark.parametrize(("text", "says"), [
    # the six words of 595.45.04's _gpuRecoveryActionName: "Recover IMEX Domain" is new
    ("GPU recovery action changed from 0x0 (None) to 0x5 (Recover IMEX Domain)",
     "'Recover IMEX Domain': the IMEX domain needs recovery"),
    ("GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)",
     "'OS Reboot': drain the host and reboot it"),
    ("GPU recovery action changed from 0x0 (None) to 0x9 (Something New)",
     "'Something New': a recovery action gpuhost does not know"),
    ("GPU recovery action changed, see the log", "an action gpuhost cannot read"),
])
def test_an_xid_154_action_gpuhost_does_not_know_is_told_with_the_drivers_words(state, text,
                                                                                 says):
    """T4-02: an unknown action is never read as a reset."""
    found = only(state(host={"xid_events": [xid_event(154, text)]}), "xid-154")
    assert found["severity"] == "critical" and says in found["message"]
    assert "reset the GPU" not in found["message"] or "does not reset" in found["message"]


def test_unknown_xid_and_sxids(state):
    found = only(state(host={"xid_events": [xid_event(999, "new")]}), "xid-999")
    assert found["severity"] == "warning" and "not in gpuhost's Xid table" in found["message"]
    switch = "0000:05:00.0"
    events = [{"pci_bus_id": switch, "sxid": 12028, "text": "Non-fatal, Link 61 egress"},
              {"pci_bus_id": switch, "sxid": 12028, "text": "Severity 0 Engine instance 61"},
              {"pci_bus_id": switch, "sxid": 20034, "text": "Fatal, Link 02 LTSSM Fault Up"}]
    found = {f["id"]: f for f in health.findings(state(host={"xid_events": events}), today=TODAY)}
    assert found["sxid-12028"]["severity"] == "warning" and found["sxid-12028"]["gpu"] == switch
    assert "2 lines since boot" in found["sxid-12028"]["message"]
    assert found["sxid-20034"]["severity"] == "critical"


def test_xids_group_by_number_and_gpu_and_ignore_the_log_source(state):
    events = [xid_event(79, bus="0000:07:00"), xid_event(79, bus="0000:08:00"),
              xid_event(13, bus="0000:07:00")]
    found = ids(state(host={"xid_events": events}))
    assert ("xid-79", "critical", "0000:07:00.0") in found
    assert ("xid-79", "critical", "0000:08:00.0") in found
    assert ("xid-13", "info", "0000:07:00.0") in found
    unread = only(state(host={"xid_source": None}), "xid-log-unreadable")
    assert unread["severity"] == "info"
    assert "xid-log-unreadable" not in [i for i, _, _ in ids(state())]


def test_the_xid_catalog_is_dated_and_sourced():
    data = json.loads((Path(xid.__file__).parents[1] / "data/nvidia_xid_catalog.json").read_text())
    assert data["_source"].startswith("NVIDIA, Analyzing Xid Errors with the Xid Catalog")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["_date"])
    for number in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert str(number) in data["xids"], number
    assert data["xids"]["79"]["immediate"] == "RESTART_BM"
    assert data["xids"]["95"]["immediate"] == "RESET_GPU"
    for entry in data["xids"].values():  # every severity is one gpuhost knows
        assert entry["severity"] in ("critical", "warning", "info", "by-text")
    # the subcode tables carry their own source and date (149's NETIR, 154's actions, 48's SRAM)
    actions = data["xid_154_actions"]
    assert "gpu.c _gpuRecoveryActionName" in actions["_source"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", actions["_date"])
    assert "NETIR_BER_EVENT" in data["xids"]["149"]["severity_note"]


@pytest.mark.parametrize(("bus", "spelled"), [
    ("00000000:3B:00.0", "0000:3b:00.0"), ("0000:3b:00", "0000:3b:00.0"),
    ("3b:00.0", "0000:3b:00.0"), ("PCI:0018:01:00", "0018:01:00.0"), (None, None)])
def test_pci_addresses_have_one_spelling(bus, spelled):
    assert xid.slot(bus) == spelled


# --- next boot ---------------------------------------------------------------------------------

def dkms_host(state, *, next_kernel="6.1.0-56-amd64", modules=("580.95.05",), headers=True,
              secure_boot=None, mok=None, missing=()):
    value = state()
    kernel = value["kernel"]
    kernel["dkms"] = [{"module": "nvidia", "version": "580.95.05", "kernel": "6.1.0-56-amd64",
                       "arch": "x86_64", "status": "installed"}]
    kernel["next_boot"] = {"kernel_release": next_kernel, "source": "grub",
                           "differs": next_kernel != "6.1.0-56-amd64",
                           "headers_packages": [f"linux-headers-{next_kernel}"],
                           "headers_packages_missing": list(missing),
                           "headers_installed": headers, "nvidia_module": list(modules)}
    kernel["secure_boot"], kernel["mok_enrolled"] = secure_boot, mok
    return value


def test_module_built_for_the_next_kernel_is_no_finding(state):
    assert ids(dkms_host(state)) == [("lifecycle-supported", "info", None)]
    assert ids(dkms_host(state, next_kernel="6.1.0-57-amd64")) == [
        ("lifecycle-supported", "info", None)]


@pytest.mark.parametrize(("kw", "says"), [
    ({"next_kernel": "6.1.0-57-amd64", "modules": ()},
     "dkms install -m nvidia -v 580.95.05 -k 6.1.0-57-amd64"),
    ({"next_kernel": "6.1.0-57-amd64", "modules": (), "headers": False,
      "missing": ("linux-headers-6.1.0-57-amd64",)},
     "that kernel has no headers (linux-headers-6.1.0-57-amd64)"),
    ({"modules": ("570.172.08",)}, "/var/lib/dkms/nvidia/580.95.05/build/make.log"),
])
def test_module_not_built_for_the_next_kernel_is_critical(state, kw, says):
    finding = only(dkms_host(state, **kw), "next-boot-module-missing")
    assert finding["severity"] == "critical" and says in finding["message"]
    assert "the host would come up without its GPU driver" in finding["message"]


def test_next_kernel_without_dkms_is_only_an_info(state):
    value = dkms_host(state, next_kernel="6.1.0-57-amd64", modules=())
    value["kernel"]["dkms"] = []  # a packaged (precompiled) module
    assert only(value, "next-boot-module-unknown")["severity"] == "info"
    value["kernel"]["next_boot"]["differs"] = False
    assert ids(value) == [("lifecycle-supported", "info", None)]


def test_secure_boot_without_any_enrolled_key_is_critical(state):
    finding = only(dkms_host(state, secure_boot="enabled", mok=[]),
                   "secure-boot-signer-not-enrolled")
    assert finding["severity"] == "critical" and "Key was rejected" in finding["message"]
    for kw in ({"secure_boot": "disabled", "mok": []}, {"secure_boot": "enabled", "mok": None},
               {"secure_boot": "enabled", "mok": ["2f:01"]}):
        assert ids(dkms_host(state, **kw)) == [("lifecycle-supported", "info", None)], kw


def test_secure_boot_with_the_inventorys_certificate(state, tmp_path):
    cert = tmp_path / "mok.der"
    cert.write_bytes(b"a certificate")
    fp = boot.cert_fingerprint(str(cert))
    enrolled = dkms_host(state, secure_boot="enabled", mok=[fp])
    assert ids(enrolled, module_signing_cert=str(cert)) == [("lifecycle-supported", "info", None)]
    other = dkms_host(state, secure_boot="enabled", mok=["00:11"])
    finding = only(other, "secure-boot-signer-not-enrolled", module_signing_cert=str(cert))
    assert fp in finding["message"] and finding["severity"] == "critical"
    unreadable = only(other, "secure-boot-cert-unreadable",
                      module_signing_cert=str(tmp_path / "gone.der"))
    assert unreadable["severity"] == "warning"


# --- lifecycle ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "day", "ident", "severity", "says"), [
    ("535.261.03", TODAY, "lifecycle-eol", "warning",
     "R535 (long-term support branch) reached end of life in June 2026"),
    ("535.261.03", datetime.date(2026, 5, 31), "lifecycle-eol-soon", "warning",
     "reaches end of life in June 2026 (1 days"),
    ("580.95.05", TODAY, "lifecycle-supported", "info", "is supported until June 2028"),
    ("550.163.01", TODAY, "lifecycle-eol", "warning", "NVIDIA lists it without a date"),
    ("610.43.02", datetime.date(2026, 3, 1), "lifecycle-new-feature-branch", "warning",
     "R610 is a new feature branch, supported until August 2026"),
    ("590.48.01", TODAY, "lifecycle-unknown", "info",
     "branch R590 is not in gpuhost's lifecycle table (2026-11-24)"),
])
def test_lifecycle_findings(version, day, ident, severity, says):
    finding = lifecycle.finding(version, day)
    assert (finding["id"], finding["severity"]) == (ident, severity)
    assert says in finding["message"] and finding["message"].startswith(f"driver {version}: ")


def test_lifecycle_table_is_dated_and_the_loaded_driver_counts(state):
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", lifecycle.TABLE_DATE)
    assert lifecycle.BRANCHES["R580"] == {"designation": "long-term-support",
                                          "end_of_life": "2028-06",
                                          "source": "R615 and R620 editions"}
    assert lifecycle.finding(None, TODAY) is None
    assert lifecycle.supported_branches(TODAY)[0] == "R620 (long-term support, until September 2029)"
    no_driver = state(driver=None)
    no_driver["driver"]["installed_version"] = None
    assert ids(no_driver) == []


def test_findings_are_sorted_critical_first_and_new_ones_are_told_apart(state):
    before = health.findings(state(gpu={"pcie_width_current": 8}), today=TODAY)
    after = health.findings(state(gpu={"pcie_width_current": 8, "remapped_rows_failure": True},
                                  host={"xid_events": [xid_event(79)]}), today=TODAY)
    assert [f["severity"] for f in after] == ["critical", "critical", "warning", "info"]
    assert [f["id"] for f in after[:2]] == ["row-remap-failure", "xid-79"]
    assert health.status(after) == "critical" and health.status(before) == "warning"
    new = health.new_findings(before, after, ("critical",))
    assert [f["id"] for f in new] == ["row-remap-failure", "xid-79"]
    assert health.new_findings(after, after) == []
