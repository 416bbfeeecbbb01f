"""Unit tests for facts/parsers.py against hand-written fixtures in tests/fixtures/outputs/."""
import pathlib
import random

import pytest

from gpuhost.facts import parsers as p

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "outputs"


def fx(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


# --- /proc/driver/nvidia/version -------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("proc_version__proprietary__535.183.01.txt",
     {"version": "535.183.01", "flavor": "proprietary", "arch": "x86_64", "gcc": "12.2.0"}),
    ("proc_version__open__570.172.08.txt",
     {"version": "570.172.08", "flavor": "open", "arch": "x86_64", "gcc": "11.4.0"}),
    ("proc_version__proprietary__470.256.02__empty-date.txt",
     {"version": "470.256.02", "flavor": "proprietary", "arch": "x86_64", "gcc": "8.5.0"}),
    ("proc_version__proprietary__550.127.05__localised-date.txt",
     {"version": "550.127.05", "flavor": "proprietary", "arch": "x86_64", "gcc": "12.2.0"}),
    ("proc_version__jetson-aarch64__36.4.3.txt",
     {"version": "36.4.3", "flavor": "open", "arch": "aarch64", "gcc": "11.4.0"}),
])
def test_driver_version_file(name, expected):
    assert p.parse_driver_version_file(fx(name)) == expected


def test_driver_version_file_other_forms():
    assert p.parse_driver_version_file("") is None
    assert p.parse_driver_version_file("cat: /proc/driver/nvidia/version: No such file\n") is None
    arm = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.120  Fri Sep 13 11:01:10 UTC 2024\n"
    assert p.parse_driver_version_file(arm) == {
        "version": "550.120", "flavor": "proprietary", "arch": "aarch64", "gcc": None}
    with pytest.raises(ValueError, match="/proc/driver/nvidia/version"):
        p.parse_driver_version_file("NVRM version: something else entirely\n")


# --- nvidia-smi -q -x ------------------------------------------------------------------------

def test_smi_xml_v10_no_doctype_two_gpus_no_mig_mode():
    got = p.parse_smi_xml(fx("smi_qx__v10__2x-v100__440.64.00__no-doctype-spaces.xml"))
    assert (got["driver_version"], got["cuda_version"], got["attached_gpus"]) == ("440.64.00", "10.2", 2)
    first, second = got["gpus"]
    # this fixture prints none of the health fields (tests/unit/test_health_parsers.py)
    assert set(first.pop("health").values()) == {None}
    assert first == {
        "index": 0, "name": "Tesla V100-SXM2-16GB", "uuid": "GPU-0d6b3f5c-2e1a-4c7b-9f8e-1a2b3c4d5e6f",
        "pci_bus_id": "00000000:1A:00.0", "memory_total_mib": 16160, "persistence_mode": "enabled",
        "mig_current": None, "mig_pending": None, "mig_capable": None, "compute_capability": None,
        "architecture": None, "mig_devices": [],
        "processes": [{"pid": 18734, "name": "/usr/bin/python3.6", "type": "C", "used_memory_mib": 2700,
                       "gpu_instance_id": None, "compute_instance_id": None}]}
    assert (second["index"], second["pci_bus_id"], second["processes"]) == (1, "00000000:1C:00.0", [])


def test_smi_xml_v11_mig_devices_and_pending():
    got = p.parse_smi_xml(fx("smi_qx__v11__2x-a100-40gb__470.82.01__mig-spaces.xml"))
    assert (got["driver_version"], got["cuda_version"]) == ("470.82.01", "11.4")
    mig, pending = got["gpus"]
    # the GPU's own memory, not the first MIG device's <total>
    assert mig["memory_total_mib"] == 40536
    assert (mig["mig_current"], mig["mig_pending"], mig["mig_capable"]) == ("enabled", "enabled", True)
    assert mig["mig_devices"] == [
        {"index": 0, "gpu_instance_id": 1, "compute_instance_id": 0, "memory_total_mib": 19968},
        {"index": 1, "gpu_instance_id": 5, "compute_instance_id": 0, "memory_total_mib": 9856},
        {"index": 2, "gpu_instance_id": 13, "compute_instance_id": 0, "memory_total_mib": 4864}]
    assert mig["processes"] == [{"pid": 3311, "name": "python3", "type": "C", "used_memory_mib": 2048,
                                 "gpu_instance_id": 1, "compute_instance_id": 0}]
    assert (pending["mig_current"], pending["mig_pending"], pending["mig_capable"]) == (
        "disabled", "enabled", True)
    assert pending["mig_devices"] == [] and pending["persistence_mode"] == "disabled"


def test_smi_xml_v12_tabs_utf8_declaration_processes():
    got = p.parse_smi_xml(fx("smi_qx__v12__h100-80gb__550.54.15__utf8-decl-tabs.xml"))
    (gpu,) = got["gpus"]
    assert (got["driver_version"], gpu["name"], gpu["architecture"]) == (
        "550.54.15", "NVIDIA H100 80GB HBM3", "Hopper")
    assert (gpu["memory_total_mib"], gpu["persistence_mode"], gpu["mig_capable"]) == (81559, "enabled", True)
    assert [(x["pid"], x["type"], x["used_memory_mib"]) for x in gpu["processes"]] == [
        (20417, "C", 60980), (20533, "C+G", None)]


def test_smi_xml_610_kmd_version_and_deprecated_note():
    got = p.parse_smi_xml(fx("smi_qx__v13__l4__610.57.04__kmd-deprecated-tabs.xml"))
    (gpu,) = got["gpus"]
    assert (got["driver_version"], got["cuda_version"]) == ("610.57.04", "13.3")
    assert (gpu["mig_current"], gpu["mig_pending"], gpu["mig_capable"]) == (None, None, False)
    assert (gpu["compute_capability"], gpu["architecture"], gpu["memory_total_mib"]) == ("8.9", "Ada Lovelace", 23034)
    # without the kmd_version element the deprecated note is still cut off
    text = fx("smi_qx__v13__l4__610.57.04__kmd-deprecated-tabs.xml")
    text = text.replace("<kmd_version>610.57.04</kmd_version>", "")
    assert p.parse_smi_xml(text)["driver_version"] == "610.57.04"


def test_smi_xml_windows_line_endings_and_bytes():
    text = fx("smi_qx__v11__2x-a100-40gb__470.82.01__mig-spaces.xml")
    assert p.parse_smi_xml(text.replace("\n", "\r\n")) == p.parse_smi_xml(text)
    assert p.parse_smi_xml(text.encode("utf-8"))["gpus"][1]["uuid"].endswith("1001")
    # a lone surrogate (undecodable byte read with surrogateescape) is replaced, not fatal
    assert p.parse_smi_xml(text.replace("A100-SXM4", "A100\udcffSXM4", 1))["gpus"][0]["name"] == (
        "NVIDIA A100?SXM4-40GB")
    assert p.parse_smi_xml(text.encode("utf-8").replace(b"A100-SXM4", b"A100\xffSXM4", 1))[
        "gpus"][0]["name"] == "NVIDIA A100\ufffdSXM4-40GB"


@pytest.mark.parametrize("text, message", [
    ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]>\n<nvidia_smi_log>&a;</nvidia_smi_log>',
     "entity"),
    ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ELEMENT x ANY>]>\n<nvidia_smi_log/>', "DOCTYPE"),
    ('<?xml version="1.0"?>\n<nvidia_smi_log><gpu>', "malformed or truncated"),
    ('<?xml version="1.0"?>\n<other_log/>', "root element"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "nvidia_smi_log"),
])
def test_smi_xml_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        p.parse_smi_xml(text)


# --- nvidia-smi -L ---------------------------------------------------------------------------

def test_smi_list_old_unpadded():
    got = p.parse_smi_list(fx("smi_L__2x-a100-80gb__460.32.03__unpadded-old.txt"))
    assert [(g["index"], g["name"], len(g["mig_devices"])) for g in got] == [
        (0, "A100-SXM4-80GB", 3), (1, "A100-SXM4-80GB", 0)]
    assert got[0]["mig_devices"][2] == {
        "profile": "1g.10gb", "device": 2, "uuid": "MIG-GPU-3a1f9c20-7b44-11ee-9a01-0242ac120002/13/0"}


def test_smi_list_new_padded_and_ci_devices():
    got = p.parse_smi_list(fx("smi_L__2x-h100-nvl__570.172.08__padded.txt"))
    assert [d["profile"] for d in got[0]["mig_devices"]] == ["3g.47gb", "3g.47gb", "1g.12gb"]
    assert got[1] == {"index": 1, "name": "NVIDIA H100 NVL",
                      "uuid": "GPU-7a1f2e3d-4c5b-6a79-8b9c-0d1e2f3a4b5c", "mig_devices": []}
    (a30,) = p.parse_smi_list(fx("smi_L__a30__535.183.01__ci-devices.txt"))
    assert a30["mig_devices"] == [
        {"profile": "1c.4g.24gb", "device": 0, "uuid": "MIG-5d6e7f80-9a0b-5c1d-8e2f-3a4b5c6d7e8f"},
        {"profile": "3c.4g.24gb", "device": 1, "uuid": "MIG-6e7f8091-a0b1-5d2e-9f3a-4b5c6d7e8f90"}]
    plain = p.parse_smi_list(fx("smi_L__4x-l4__550.163.01__no-mig.txt"))
    assert [g["index"] for g in plain] == [0, 1, 2, 3] and plain[3]["uuid"].endswith("504")


@pytest.mark.parametrize("text", [
    "", "No devices were found\n", "GPU 0: NVIDIA L4 (UUID: GPU-1111",
    "  MIG 1g.5gb Device 0: (UUID: MIG-abc)\nGPU 0: A100 (UUID: GPU-x)\n"])
def test_smi_list_rejects(text):
    with pytest.raises(ValueError, match="nvidia-smi -L"):
        p.parse_smi_list(text)


# --- nvidia-smi --query-gpu csv --------------------------------------------------------------

def test_query_csv_header_with_units():
    rows = p.parse_query_csv(fx("query_csv__2x-a100-80gb__header-units.csv"))
    assert rows[1] == {"index": "1", "name": "NVIDIA A100-SXM4-80GB", "pci.bus_id": "00000000:31:00.0",
                       "memory.total": "81920 MiB", "mig.mode.current": "Disabled",
                       "mig.mode.pending": "Enabled", "compute_cap": "8.0"}


def test_query_csv_noheader_nounits_and_na_cells():
    fields = ["name", "pci.bus_id", "memory.total", "fan.speed", "compute_cap"]
    rows = p.parse_query_csv(fx("query_csv__2x-l4__noheader.csv"), fields=fields)
    assert [r["pci.bus_id"] for r in rows] == ["00000000:3B:00.0", "00000000:5E:00.0"]
    assert rows[0]["fan.speed"] is None and rows[0]["memory.total"] == "23034 MiB"
    (t4,) = p.parse_query_csv(fx("query_csv__t4__header-nounits.csv"))
    assert t4 == {"name": "Tesla T4", "memory.total": "15360", "memory.used": "3",
                  "power.draw": "27.34", "temperature.gpu": "44"}
    (gb10,) = p.parse_query_csv(fx("query_csv__gb10__na-cells.csv"))
    assert gb10 == {"name": "NVIDIA GB10", "memory.total": None, "fan.speed": None, "display_mode": None,
                    "serial": None, "inforom.pwr": None, "ecc.errors.corrected.volatile.total": None,
                    "pci.sub_device_id": ""}


def test_query_csv_compute_apps_and_edge_cases():
    rows = p.parse_query_csv(fx("query_csv__h100__compute-apps.csv"))
    assert rows == [{"pid": "4242", "process_name": "python3", "used_gpu_memory": "30208 MiB"},
                    {"pid": "5151", "process_name": "/opt/tritonserver/bin/tritonserver",
                     "used_gpu_memory": None}]
    assert p.parse_query_csv("", fields=["pid"]) == []  # noheader and no processes
    assert p.parse_query_csv("pid, used_gpu_memory [MiB]\n") == []
    # a header although fields were given is skipped
    assert p.parse_query_csv("pid\n17\n", fields=["pid"]) == [{"pid": "17"}]


@pytest.mark.parametrize("text, fields", [
    ("", None), ("NVIDIA L4, 23034 MiB\n", None), ("a, b\n1, 2, 3\n", None),
    ("NVIDIA L4, 8.9\n", ["name"]), ("x\n", "name"),
    ("@query_csv__470__invalid-field.txt", ["compute_cap"]),
])
def test_query_csv_rejects(text, fields):
    text = fx(text[1:]) if text.startswith("@") else text
    with pytest.raises(ValueError, match="--format=csv"):
        p.parse_query_csv(text, fields=fields)


# --- nvidia-smi mig tables -------------------------------------------------------------------

def test_mig_gpu_instances_54_57_59_columns():
    got = p.parse_mig_gpu_instances(fx("mig_lgi__2x-h100-80gb__54col.txt"))
    assert [(g["gpu"], g["profile"], g["profile_id"], g["instance_id"], g["placement"]) for g in got] == [
        (0, "3g.40gb", 9, 1, [4, 4]), (0, "1g.10gb", 19, 9, [0, 1]),
        (0, "1g.10gb", 19, 10, [1, 1]), (1, "7g.80gb", 0, 0, [0, 8])]
    got = p.parse_mig_gpu_instances(fx("mig_lgi__a30-24gb__57col.txt"))
    assert [(g["profile"], g["profile_id"], g["placement"]) for g in got] == [
        ("2g.12gb", 5, [0, 2]), ("1g.6gb", 14, [2, 1]), ("1g.6gb+me", 21, [3, 1])]
    got = p.parse_mig_gpu_instances(fx("mig_lgi__a100-80gb__59col.txt"))
    assert got[2] == {"gpu": 0, "profile": "1g.10gb+me", "profile_id": 20, "instance_id": 13,
                      "placement": [6, 1]}
    assert p.parse_mig_gpu_instances(fx("mig_lgi__none-found.txt")) == []


def test_mig_compute_instances_with_and_without_placement():
    got = p.parse_mig_compute_instances(fx("mig_lci__h100-80gb__with-placement.txt"))
    assert got[1] == {"gpu": 0, "gpu_instance_id": 1, "profile": "2c.3g.40gb", "profile_id": 1,
                      "instance_id": 1, "placement": [1, 2]}
    assert got[3] == {"gpu": 1, "gpu_instance_id": 0, "profile": "7g.80gb", "profile_id": 7,
                      "instance_id": 0, "placement": [0, 7]}  # '7*' marks the default profile
    got = p.parse_mig_compute_instances(fx("mig_lci__a100-80gb__no-placement.txt"))
    assert [(c["profile"], c["instance_id"], c["placement"]) for c in got] == [
        ("1c.7g.80gb", 0, None), ("2c.7g.80gb", 1, None)]
    assert p.parse_mig_compute_instances(fx("mig_lci__none-found.txt")) == []


def test_mig_gpu_instance_profiles_two_line_rows():
    got = p.parse_mig_gpu_instance_profiles(fx("mig_lgip__h100-80gb__81col.txt"))
    assert [(r["profile"], r["profile_id"], r["free"], r["total"], r["memory_gib"]) for r in got] == [
        ("1g.10gb", 19, 6, 7, 9.75), ("1g.10gb+me", 20, 1, 1, 9.75),
        ("1g.20gb", 15, 4, 4, 19.62), ("3g.40gb", 9, 1, 2, 39.5)]
    got = p.parse_mig_gpu_instance_profiles(fx("mig_lgip__2x-a100-80gb__79col.txt"))
    assert [(r["gpu"], r["profile"], r["free"]) for r in got] == [
        (0, "1g.10gb", 5), (0, "7g.80gb", 0), (1, "1g.10gb", 7), (1, "7g.80gb", 1)]
    got = p.parse_mig_gpu_instance_profiles(fx("mig_lgip__a100-40gb__r450__77col.txt"))
    assert got[2] == {"gpu": 0, "profile": "7g.40gb", "profile_id": 0, "free": 0, "total": 1,
                      "memory_gib": 39.59}


def test_mig_tables_reject_each_other_and_truncation():
    lci, lgi = fx("mig_lci__h100-80gb__with-placement.txt"), fx("mig_lgi__a30-24gb__57col.txt")
    with pytest.raises(ValueError, match="GPU instances:"):
        p.parse_mig_gpu_instances(lci)
    with pytest.raises(ValueError, match="Compute instances:"):
        p.parse_mig_compute_instances(lgi)
    with pytest.raises(ValueError, match="GPU instance profiles:"):
        p.parse_mig_gpu_instance_profiles(lgi)
    with pytest.raises(ValueError, match="truncated row"):
        p.parse_mig_gpu_instances(lgi[: lgi.index("1g.6gb+me") + 12])
    with pytest.raises(ValueError, match="GPU instances:"):
        p.parse_mig_gpu_instances("No MIG-enabled devices found.\n")


# --- dkms status -----------------------------------------------------------------------------

def test_dkms_old_and_new_formats():
    old = p.parse_dkms_status(fx("dkms__old-format.txt"))
    assert old[0] == {"module": "nvidia", "version": "390.157", "kernel": "5.4.0-150-generic",
                      "arch": "x86_64", "status": "installed", "note": None}
    assert [(e["kernel"], e["status"]) for e in old[1:]] == [("5.4.0-153-generic", "built"), (None, "added")]
    new = p.parse_dkms_status(fx("dkms__new-format.txt"))
    assert [(e["version"], e["kernel"], e["arch"], e["status"]) for e in new] == [
        ("570.172.08", "6.1.0-37-amd64", "x86_64", "installed"),
        ("570.172.08", "6.1.0-38-amd64", "x86_64", "built"), ("575.57.08", None, None, "added")]


def test_dkms_notes_and_error_lines_skipped():
    got = p.parse_dkms_status(fx("dkms__original-module-exists.txt"))
    assert [(e["module"], e["note"]) for e in got] == [
        ("nvidia", "original_module exists"), ("nvidia-fs", None)]
    got = p.parse_dkms_status(fx("dkms__errors-mixed.txt"))
    assert [(e["kernel"], e["status"], e["note"]) for e in got] == [
        ("5.14.0-503.14.1.el9_5.x86_64", "installed", "WARNING! Diff between built and installed module!"),
        ("5.14.0-503.15.1.el9_5.x86_64", "installed", None)]
    assert p.parse_dkms_status("") == [] and p.parse_dkms_status("nvidia, , , :") == []


# --- nvidia-smi errors, daemon.json, tool versions -------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("smi_error__driver-not-loaded.txt", "driver_not_loaded"),
    ("smi_error__library-mismatch__second-line.txt", "library_mismatch"),
    ("smi_error__library-mismatch__old.txt", "library_mismatch"),
    ("smi_error__no-devices.txt", "no_devices"),
    ("smi_L__4x-l4__550.163.01__no-mig.txt", None),
    ("smi_qx__v12__h100-80gb__550.54.15__utf8-decl-tabs.xml", None),
])
def test_classify_smi_error(name, expected):
    assert p.classify_smi_error(fx(name)) == expected


def test_daemon_json():
    got = p.parse_daemon_json(fx("daemon_json__ctk-args-and-logs.json"))
    assert got["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert got["log-opts"] == {"max-size": "50m"}
    assert p.parse_daemon_json("") == {} and p.parse_daemon_json(" \n\t\n") == {}
    # the trailing comma on line 3 is reported where JSON needs the next key: line 4, column 1
    with pytest.raises(ValueError, match=r"not valid JSON: .* at line 4 column 1"):
        p.parse_daemon_json(fx("daemon_json__invalid-trailing-comma.json"))
    with pytest.raises(ValueError, match=r"JSON object, found a list at line 2 column 3"):
        p.parse_daemon_json(fx("daemon_json__top-level-array.json"))
    with pytest.raises(ValueError, match="line 1 column 1"):
        p.parse_daemon_json("[" * 100000)


@pytest.mark.parametrize("name, expected", [
    ("tool_version__nvidia-ctk__1.17.8.txt", "1.17.8"),
    ("tool_version__nvidia-ctk__1.12.0-rc.2.txt", "1.12.0-rc.2"),
    ("tool_version__nvidia-container-cli__1.16.2.txt", "1.16.2"),
    ("tool_version__nvidia-container-cli__1.0.7-old.txt", "1.0.7"),
    ("tool_version__nvidia-container-runtime__1.17.8.txt", "1.17.8"),
    ("tool_version__nvidia-container-runtime__3.x-runc-fork.txt", None),
    ("tool_version__nvidia-container-runtime-hook__1.17.8.txt", "1.17.8"),
    ("smi_error__no-devices.txt", None),
])
def test_tool_version(name, expected):
    assert p.parse_tool_version(fx(name)) == expected


# --- host facts ------------------------------------------------------------------------------

def test_os_release():
    debian = p.parse_os_release(fx("os_release__debian12.txt"))
    assert (debian["ID"], debian["VERSION_ID"], debian["VERSION_CODENAME"]) == ("debian", "12", "bookworm")
    ol = p.parse_os_release(fx("os_release__oraclelinux9.txt"))
    assert (ol["ID"], ol["VERSION_ID"], ol["ID_LIKE"], ol["ORACLE_SUPPORT_PRODUCT_VERSION"]) == (
        "ol", "9.5", "fedora", "9.5")
    ubuntu = p.parse_os_release(fx("os_release__ubuntu2204.txt"))
    assert (ubuntu["PRETTY_NAME"], ubuntu["LOGO"]) == ("Ubuntu 22.04.5 LTS", "ubuntu-logo")
    assert p.parse_os_release('NAME="say \\"hi\\" \\$HOME"\n') == {"NAME": 'say "hi" $HOME'}
    with pytest.raises(ValueError, match="/etc/os-release"):
        p.parse_os_release("Debian GNU/Linux 12 \\n \\l\n")


def test_pci_sysfs():
    got = p.parse_pci_sysfs(fx("pci_sysfs__2x-v100-pcie-nvswitch-audio.txt"))
    assert [d["device_id"] for d in got] == ["1db4", "1db4", "22a3", "10f0"]
    assert got[0] == {"slot": "0000:3b:00.0", "device_id": "1db4", "class": "030200",
                      "subsystem_vendor_id": "10de", "subsystem_device_id": "1214",
                      "revision": "a1"}
    assert got[2]["class"] == "068000" and got[3]["revision"] is None
    assert p.parse_pci_sysfs("") == []
    with pytest.raises(ValueError, match="/sys/bus/pci/devices"):
        p.parse_pci_sysfs("0000:3b:00.0 0x1db4 0x030200\n")  # a field missing
    with pytest.raises(ValueError, match="4-digit device id"):
        p.parse_pci_sysfs("0000:3b:00.0 - 0x030200 0x10de 0x1214 0xa1\n")


def test_lspci_nvidia():
    got = p.parse_lspci_nvidia(fx("lspci__2x-h100-sxm5-and-nvswitch.txt"))
    assert got[0] == {"slot": "0000:18:00.0", "class": "3D controller", "class_id": "0302",
                      "vendor_id": "10de", "device_id": "2330", "device_name": "GH100 [H100 SXM5 80GB]",
                      "revision": "a1", "subsystem_vendor_id": "10de", "subsystem_device_id": "16c1"}
    assert [(d["class"], d["class_id"], d["device_id"]) for d in got] == [
        ("3D controller", "0302", "2330"), ("3D controller", "0302", "2330"),
        ("Bridge", "0680", "22a3")]
    (l4,) = p.parse_lspci_nvidia(fx("lspci__l4-no-domain-vga.txt"))
    assert (l4["slot"], l4["class"], l4["device_name"]) == ("01:00.0", "VGA compatible controller", "AD104GL [L4]")
    assert p.parse_lspci_nvidia("") == []
    with pytest.raises(ValueError, match="lspci -mm -nn"):
        p.parse_lspci_nvidia('07:00.0 "3D controller" "NVIDIA Corporation" "GA100"\n')  # no -nn ids


def test_rpm_and_dpkg_queries():
    rpm = p.parse_rpm_query(fx("rpm_query__ol9-nvidia.txt"))
    assert rpm["nvidia-driver"] == {"version": "3:570.172.08-1.el9", "held": False,
                                    "versions": ["3:570.172.08-1.el9"]}
    assert rpm["nvidia-container-toolkit"]["version"] == "1.17.8-1"
    assert rpm["kernel-uek-devel"]["versions"] == ["6.12.0-0.20.20.el9uek", "5.15.0-308.179.6.el9uek"]
    dpkg = p.parse_dpkg_query(fx("dpkg_query__debian12-nvidia.txt"))
    assert dpkg["nvidia-driver"] == {"version": "550.163.01-1", "held": True}
    assert dpkg["nvidia-container-toolkit"] == {"version": "1.17.8-1", "held": False}
    assert sorted(dpkg) == ["libnvidia-container1", "linux-headers-6.1.0-37-amd64", "nvidia-container-toolkit",
                            "nvidia-driver", "nvidia-kernel-dkms"]  # rc, un and iU rows are not installed
    with pytest.raises(ValueError, match="rpm -qa"):
        p.parse_rpm_query("nvidia-driver-570.172.08-1.el9.x86_64\n")
    with pytest.raises(ValueError, match="dpkg-query -W"):
        p.parse_dpkg_query("ii  nvidia-driver  550.163.01-1  amd64  NVIDIA metapackage\n")


def test_split_sections():
    got = p.split_sections(fx("composite__host-audit.txt"))
    assert list(got) == ["os_release", "proc_version", "smi_xml", "dkms", "ctk_version", "empty"]
    assert got["os_release"] == {"rc": 0, "out": 'ID=debian\nVERSION_ID="12"\n'}
    assert (got["smi_xml"]["rc"], got["dkms"]["rc"]) == (9, 127)
    assert p.classify_smi_error(got["smi_xml"]["out"]) == "driver_not_loaded"
    assert p.parse_driver_version_file(got["proc_version"]["out"])["flavor"] == "open"
    assert got["ctk_version"]["out"] == "NVIDIA Container Toolkit CLI version 1.17.8\n"
    assert got["empty"] == {"rc": 0, "out": ""}
    # a marker inside a line (a process list showing the script) is output, not a section
    mid = "@@gpuhost@@ ps rc=0\n  42 sh -c printf '@@gpuhost@@ %s rc=%d'\n"
    assert p.split_sections(mid) == {"ps": {"rc": 0, "out": mid.split("\n", 1)[1]}}
    assert p.split_sections("## a rc=1\nx\n", marker="## ") == {"a": {"rc": 1, "out": "x\n"}}
    for bad in ("no marker here\n", "@@gpuhost@@ a rc=x\n", "@@gpuhost@@ a\n",
                "@@gpuhost@@ a rc=0\n@@gpuhost@@ a rc=0\n"):
        with pytest.raises(ValueError, match="@@gpuhost@@"):
            p.split_sections(bad)


# --- robustness: only ValueError, whatever the input -----------------------------------------

FUNCTIONS = {  # function -> words every one of its error messages must contain
    "parse_driver_version_file": "/proc/driver/nvidia/version", "parse_smi_xml": "nvidia-smi -q -x",
    "parse_smi_list": "nvidia-smi -L", "parse_query_csv": "--format=csv",
    "parse_mig_gpu_instances": "GPU instances:", "parse_mig_compute_instances": "Compute instances:",
    "parse_mig_gpu_instance_profiles": "GPU instance profiles:", "parse_dkms_status": "dkms status",
    "classify_smi_error": "nvidia-smi", "parse_daemon_json": "daemon.json",
    "parse_tool_version": "--version", "parse_os_release": "/etc/os-release",
    "parse_lspci_nvidia": "lspci -mm -nn", "parse_rpm_query": "rpm -qa",
    "parse_dpkg_query": "dpkg-query -W", "split_sections": "@@gpuhost@@",
    "parse_pci_sysfs": "/sys/bus/pci/devices", "parse_xid_lines": "Xid",
    "parse_nvlink_status": "nvlink -s", "parse_nvlink_errors": "nvlink -e",
    "parse_run_lock": "run lock",
}


def _only_value_error(name, text):
    try:
        getattr(p, name)(text)
    except ValueError as error:
        message = str(error)
        assert "internal error" not in message, f"{name} fell through to the safety net: {message}"
        assert FUNCTIONS[name] in message, f"{name}: message does not name the format: {message}"
    except Exception as error:  # noqa: BLE001
        pytest.fail(f"{name} raised {type(error).__name__}: {error} for {text[:80]!r}")


def test_every_public_parser_is_covered():
    public = {n for n in dir(p) if n.startswith(("parse_", "classify_", "split_"))}
    assert public == set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_robust_against_truncations_of_every_fixture(name):
    rng = random.Random(20240601)
    for path in sorted(FIXTURES.iterdir()):
        text = path.read_text(encoding="utf-8")
        for cut in {0, 1, len(text) // 2, len(text) - 1} | {rng.randrange(len(text) + 1) for _ in range(8)}:
            _only_value_error(name, text[:cut])
            _only_value_error(name, text[cut:])


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_robust_against_random_bytes_and_non_text(name):
    rng = random.Random(1729)
    for _ in range(150):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
        _only_value_error(name, junk.decode("latin-1"))
        _only_value_error(name, junk.decode("utf-8", "surrogateescape"))
        _only_value_error(name, junk)  # bytes are decoded as UTF-8
    for not_text in (None, 42, ["GPU 0: x"], {"a": 1}):
        with pytest.raises(ValueError, match="as text"):
            getattr(p, name)(not_text)
