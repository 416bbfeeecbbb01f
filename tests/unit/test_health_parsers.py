"""The health fields of ``parse_smi_xml`` and ``parse_xid_lines`` (parser-contract.md, "Health
fields") against hand-written fixtures in tests/fixtures/outputs/: one per XML layout and
driver era, one kernel log per prefix style."""
import pathlib

import pytest

from gpuhost.facts import parsers as p

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "outputs"
HEALTH_KEYS = ("ecc_mode_current", "ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable",
               "retired_pages_double_bit", "retired_pages_pending", "remapped_rows_uncorrectable",
               "remapped_rows_pending", "remapped_rows_failure", "pcie_gen_current", "pcie_gen_max",
               "pcie_width_current", "pcie_width_max", "throttle_reasons_active", "fabric_state",
               "fabric_status", "sram_threshold_exceeded")


def fx(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def health(name):
    return [gpu["health"] for gpu in p.parse_smi_xml(fx(name))["gpus"]]


def test_every_gpu_has_exactly_the_contract_keys():
    for path in ("smi_qx__v10__2x-v100__440.64.00__no-doctype-spaces.xml",
                 "smi_qx__health__2x-h100-hgx__570.133.20__split-sram-fabric.xml"):
        for entry in health(path):
            assert tuple(entry) == HEALTH_KEYS


# --- ECC, page retirement, row remapping per layout ------------------------------------------

def test_double_bit_layout_reads_the_total_only_and_pending_retirement():
    """Pascal on r390: <double_bit><total>, never the sum of its parts; <pending_retirement>
    alone (r384-r418); no <remapped_rows> at all."""
    ecc_on, ecc_off = health("smi_qx__health__2x-p100__390.116__double-bit-pending-retirement.xml")
    assert ecc_on["ecc_mode_current"] == "enabled"
    # device_memory 2 + total 2 would be 4 if the parts were added
    assert (ecc_on["ecc_volatile_uncorrectable"], ecc_on["ecc_aggregate_uncorrectable"]) == (2, 5)
    assert ecc_on["retired_pages_double_bit"] == 3
    assert ecc_on["retired_pages_pending"] is True
    assert (ecc_on["remapped_rows_uncorrectable"], ecc_on["remapped_rows_pending"],
            ecc_on["remapped_rows_failure"]) == (None, None, None)
    assert ecc_on["throttle_reasons_active"] == ["hw_slowdown", "sw_power_cap"]
    # ECC off: the counters are N/A, so None (not 0)
    assert ecc_off["ecc_mode_current"] == "disabled"
    assert (ecc_off["ecc_volatile_uncorrectable"], ecc_off["ecc_aggregate_uncorrectable"]) == (
        None, None)
    assert (ecc_off["retired_pages_double_bit"], ecc_off["retired_pages_pending"]) == (None, None)
    assert (ecc_off["pcie_gen_current"], ecc_off["pcie_gen_max"]) == (1, 3)
    assert ecc_off["throttle_reasons_active"] == ["gpu_idle"]


def test_r430_pending_blacklist_only():
    (gpu,) = health("smi_qx__health__v100__430.64__pending-blacklist-no-remap.xml")
    assert gpu["retired_pages_pending"] is False  # <pending_blacklist>No</...>, no Yes anywhere
    assert gpu["retired_pages_double_bit"] == 1
    assert (gpu["ecc_volatile_uncorrectable"], gpu["ecc_aggregate_uncorrectable"]) == (0, 1)
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (8, 16)
    assert gpu["remapped_rows_pending"] is None and gpu["fabric_state"] is None


def test_sram_dram_layout_sums_only_numbers_and_either_pending_field_says_yes():
    """Turing on r460: sram_uncorrectable + dram_uncorrectable; an N/A counter is left out
    of the sum; <pending_blacklist>Yes with <pending_retirement>No is pending."""
    (gpu,) = health("smi_qx__health__t4__460.106.00__sram-dram-both-pending.xml")
    assert gpu["ecc_volatile_uncorrectable"] == 1 + 2
    assert gpu["ecc_aggregate_uncorrectable"] == 4  # sram N/A, dram 4
    assert gpu["retired_pages_pending"] is True
    assert gpu["retired_pages_double_bit"] == 2
    # <remapped_rows>N/A</remapped_rows>: a GPU that retires pages instead
    assert (gpu["remapped_rows_uncorrectable"], gpu["remapped_rows_pending"],
            gpu["remapped_rows_failure"]) == (None, None, None)
    assert gpu["throttle_reasons_active"] == []  # a block of reasons, none Active


def test_ampere_row_remapping_and_mig_volatile_na():
    remap, mig = health("smi_qx__health__2x-a100-80gb__535.161.08__remap-pending-and-mig.xml")
    assert (remap["remapped_rows_uncorrectable"], remap["remapped_rows_pending"],
            remap["remapped_rows_failure"]) == (2, True, False)
    assert (remap["retired_pages_double_bit"], remap["retired_pages_pending"]) == (None, None)
    assert (remap["ecc_volatile_uncorrectable"], remap["ecc_aggregate_uncorrectable"]) == (1, 2)
    # <clocks_event_reasons> (r535+), prefix dropped, sorted
    assert remap["throttle_reasons_active"] == [
        "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown"]
    assert remap["fabric_state"] is None  # <fabric><state>N/A on a GPU without NVSwitch
    # MIG on: volatile N/A but aggregate still counts; the MIG device's own
    # <ecc_error_count> (7) is not the GPU's; <remapped_rows> is a bare N/A
    assert (mig["ecc_volatile_uncorrectable"], mig["ecc_aggregate_uncorrectable"]) == (None, 0)
    assert mig["remapped_rows_pending"] is None and mig["remapped_rows_uncorrectable"] is None


def test_split_sram_layout_fabric_states_and_threshold_not_counted():
    failing, healthy = health("smi_qx__health__2x-h100-hgx__570.133.20__split-sram-fabric.xml")
    assert failing["ecc_volatile_uncorrectable"] == 1 + 2 + 3  # parity + secded + dram
    # parity 1, secded N/A, dram 8; <sram_threshold_exceeded>Yes and the
    # <aggregate_uncorrectable_sram_sources> block are not counters of the sum
    assert failing["ecc_aggregate_uncorrectable"] == 9
    assert (failing["remapped_rows_uncorrectable"], failing["remapped_rows_pending"],
            failing["remapped_rows_failure"]) == (512, False, True)
    assert failing["fabric_state"] == "In Progress"
    assert failing["throttle_reasons_active"] == ["sw_power_cap"]
    assert (failing["pcie_gen_current"], failing["pcie_gen_max"]) == (5, 5)
    assert healthy["fabric_state"] == "Completed"
    # T4-05: the probe's status beside the state; T4-04: the SRAM threshold flag is read
    assert (failing["fabric_status"], healthy["fabric_status"]) == (None, "Success")
    assert (failing["sram_threshold_exceeded"], healthy["sram_threshold_exceeded"]) == (True,
                                                                                       False)
    assert (healthy["ecc_volatile_uncorrectable"], healthy["ecc_aggregate_uncorrectable"]) == (0, 0)


def test_vgpu_prints_everything_as_na():
    (gpu,) = health("smi_qx__health__grid-t4-vgpu__510.85.02__all-na.xml")
    assert gpu == dict.fromkeys(HEALTH_KEYS)  # bare N/A throttle block: None, not []


def test_v13_reads_max_link_gen_not_the_device_and_skips_new_counters():
    (gpu,) = health("smi_qx__health__v13__rtx-pro-6000__595.45.04__degraded-width.xml")
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (2, 5)
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (8, 16)
    # <remapped_row_unc_inactive> (6) is not read; ECC currently off (pending on)
    assert gpu["remapped_rows_uncorrectable"] == 1
    assert gpu["ecc_mode_current"] == "disabled"
    assert gpu["throttle_reasons_active"] == ["gpu_idle"]  # not the _counters block


@pytest.mark.parametrize(("fragment", "key", "expected"), [
    ("<ecc_mode><current_ecc>[Not Supported]</current_ecc></ecc_mode>", "ecc_mode_current", None),
    ("<remapped_rows><remapped_row_unc>N/A</remapped_row_unc><remapped_row_pending>Maybe"
     "</remapped_row_pending></remapped_rows>", "remapped_rows_pending", None),
    ("<pci><pci_gpu_link_info><link_widths><current_link_width>4x</current_link_width>"
     "</link_widths></pci_gpu_link_info></pci>", "pcie_width_current", 4),
    ("<pci><pci_gpu_link_info><link_widths><current_link_width>Unknown</current_link_width>"
     "</link_widths></pci_gpu_link_info></pci>", "pcie_width_current", None),
    ("<fabric><state>Not Started</state></fabric>", "fabric_state", "Not Started"),
    ("<fabric><state>Completed</state><status>Insufficient Resources</status></fabric>",
     "fabric_status", "Insufficient Resources"),
    ("<ecc_errors><aggregate><sram_threshold_exceeded>No</sram_threshold_exceeded></aggregate>"
     "</ecc_errors>", "sram_threshold_exceeded", False),
    ("<retired_pages><pending_retirement>No</pending_retirement><pending_blacklist>N/A"
     "</pending_blacklist></retired_pages>", "retired_pages_pending", False),
    ("<ecc_errors><volatile>N/A</volatile></ecc_errors>", "ecc_volatile_uncorrectable", None),
])
def test_odd_values(fragment, key, expected):
    text = (f"<nvidia_smi_log><gpu id=\"00000000:01:00.0\"><product_name>x</product_name>"
            f"{fragment}</gpu></nvidia_smi_log>")
    assert p.parse_smi_xml(text)["gpus"][0]["health"][key] == expected


# --- parse_xid_lines -------------------------------------------------------------------------

def test_dmesg_xid79_and_the_lines_that_are_not_xids():
    got = p.parse_xid_lines(fx("kernel_log__dmesg__xid79-fallen-off-crash-dump.txt"))
    assert got == [
        {"pci_bus_id": "0000:3b:00", "xid": 79, "gpu_instance_id": None,
         "text": "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
        {"pci_bus_id": "0000:3b:00", "xid": 154, "gpu_instance_id": None,
         "text": "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"}]


def test_journal_mig_instances_root_cause_text_and_elided_bus():
    got = p.parse_xid_lines(fx("kernel_log__journal__mig-gpu-instance-and-root-cause.txt"))
    assert [(e["xid"], e["gpu_instance_id"]) for e in got] == [(43, 3), (94, 11), (45, None)]
    assert {e["pci_bus_id"] for e in got} == {"0000:b7:00"}
    assert got[1]["text"] == ("pid=55121, name=vllm, Contained: CE User Channel (0x9). "
                              "RST: No, D-RST: No")
    assert got[2]["text"].endswith("caused by previous Xid 149")  # text, not a second entry


def test_iso_timestamps_arm_domains_and_a_line_ending_at_the_number():
    got = p.parse_xid_lines(fx("kernel_log__dmesg-iso__arm-grace-domains.txt"))
    assert [(e["pci_bus_id"], e["xid"], e["text"][:12]) for e in got] == [
        ("0009:01:00", 48, "pid=3301, na"), ("0019:01:00", 63, "pid=3301, na"),
        ("000f:01:00", 154, "")]


def test_sxid_multiline_event_old_xid_without_pci_and_r570_fallen_off_message():
    got = p.parse_xid_lines(fx("kernel_log__dmesg-x__nvswitch-sxid-and-old-xid.txt"))
    assert got[:3] == [
        {"pci_bus_id": "0000:c4:00.0", "sxid": 20034, "text": "Fatal, Link 17 LTSSM Fault Up"},
        {"pci_bus_id": "0000:c4:00.0", "sxid": 20034,
         "text": "Severity 5 Engine instance 17 Sub-engine instance 00"},
        {"pci_bus_id": "0000:c4:00.0", "sxid": 20034,
         "text": "Data {0x00000000, 0x20000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, "
                 "0x00000000, 0x00000000, 0x00000000}"}]
    assert got[3] == {"pci_bus_id": "0000:03:00", "xid": 8, "gpu_instance_id": None,
                      "text": "Channel 0000000a"}
    assert len(got) == 4  # the r570 "fallen off the bus" lines carry no Xid


LINE = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."


@pytest.mark.parametrize("prefix", [
    "", "[12345.678901] ", "[ 130.456250] [ T1946] ", "[Wed Jan 27 23:04:35 2021] ",
    "2026-04-07T10:11:08,080132-04:00 ", "kern  :err   : ",
    "Dec  2 10:43:35 host kernel: [240314.528856] ", "Mar 27 17:40:36 kernel: ", "kernel: ",
    "<3>[ 4.2] ",
])
def test_every_prefix_style(prefix):
    assert p.parse_xid_lines(f"{prefix}{LINE}\n") == [
        {"pci_bus_id": "0000:3b:00", "xid": 79, "gpu_instance_id": None,
         "text": "pid=1, name=x, GPU has fallen off the bus."}]


@pytest.mark.parametrize("text", [
    "", "\n\n", "NVRM: Xid (PCI:", "NVRM: Xid (PCI:0000:3b:00): ", "NVRM: Xid (PCI:0000:3b:00): x, y",
    "NVRM: Xid (PCI:zzzz:3b:00): 79, hex only", "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): x,",
    "NVRM: GPU at PCI:0000:01:00: GPU-00000000-0000-0000-0000-000000000000",
    "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.172.08",
])
def test_lines_that_are_not_events(text):
    assert p.parse_xid_lines(text) == []


def test_windows_line_endings_and_bytes():
    text = f"[1.0] {LINE}\r\n[2.0] {LINE.replace('79', '48')}\r\n"
    assert [e["xid"] for e in p.parse_xid_lines(text)] == [79, 48]
    assert [e["xid"] for e in p.parse_xid_lines(text.encode())] == [79, 48]


@pytest.mark.parametrize("value", [None, 79, [LINE], {"text": LINE}])
def test_only_a_value_that_is_not_text_is_an_error(value):
    with pytest.raises(ValueError, match="Xid"):
        p.parse_xid_lines(value)


# --- nvidia-smi nvlink -s / -e ---------------------------------------------------------------

def test_nvlink_status_reads_each_link_speed_and_the_inactive_ones():
    gpus = p.parse_nvlink_status(fx("nvlink_status__a100-sxm4-40gb__r535__link-5-of-gpu-1-inactive.txt"))
    assert [(g["index"], g["name"], g["uuid"]) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-40GB", "GPU-5a1c0de0-7e57-4b1d-9c0f-000000000000"),
        (1, "NVIDIA A100-SXM4-40GB", "GPU-5a1c0de1-7e57-4b1d-9c0f-000000000001")]
    assert [len(g["links"]) for g in gpus] == [12, 12]
    assert {link["speed_gbps"] for link in gpus[0]["links"]} == {25.0}
    assert [link["link"] for link in gpus[1]["links"] if link["state"] == "inactive"] == [5]
    assert gpus[1]["links"][5] == {"link": 5, "state": "inactive", "speed_gbps": None}
    assert {g["note"] for g in gpus} == {None}


def test_nvlink_status_of_old_drivers_without_uuid():
    gpus = p.parse_nvlink_status(fx("nvlink_status__v100-sxm2-32gb__old-driver-no-uuid.txt"))
    assert [(g["name"], g["uuid"], len(g["links"])) for g in gpus] == [
        ("Tesla V100-SXM2-32GB", None, 6)] * 2
    assert gpus[0]["links"][0]["speed_gbps"] == 25.781


def test_nvlink_status_of_cards_without_nvlink():
    gpus = p.parse_nvlink_status(fx("nvlink_status__pcie-cards-without-nvlink.txt"))
    assert [(g["links"], g["note"]) for g in gpus] == [
        ([], "not_supported"), ([], "all_inactive"), ([], None)]


def test_nvlink_status_unknown_link_text_is_not_called_active():
    gpus = p.parse_nvlink_status("GPU 0: NVIDIA X (UUID: GPU-1)\n\t Link 0: Degraded\n")
    assert gpus[0]["links"] == [{"link": 0, "state": "unknown", "speed_gbps": None}]


def test_nvlink_errors_per_link_counters():
    gpus = p.parse_nvlink_errors(fx("nvlink_errors__a100-sxm4-40gb__r535__errors-on-two-links.txt"))
    assert len(gpus) == 2 and all(len(g["links"]) == 12 for g in gpus)
    assert gpus[1]["links"][5] == {"Replay Errors": 1, "Recovery Errors": 3, "CRC Errors": 17}
    assert gpus[0]["links"][0]["CRC Errors"] == 2
    assert gpus[0]["links"][1] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def test_nvlink_errors_keep_any_counter_name_and_na():
    gpus = p.parse_nvlink_errors("GPU 0: NVIDIA B200 (UUID: GPU-2)\n"
                                 "\t Link 0: Link recovery failed events: 1\n"
                                 "\t Link 0: Effective BER: 1.5e-15\n\t Link 0: CRC Errors: N/A\n")
    assert gpus[0]["links"][0] == {"Link recovery failed events": 1, "Effective BER": 1.5e-15,
                                   "CRC Errors": None}
