"""GPUs by PCI id (issue 13 item 3, issue 22 item 1): NVIDIA's supported-gpus.json snapshot,
the sysfs ids the facts read without lspci, and flavour "auto" refusing a GPU nothing can
classify (the whole-table checks are in test_device_table.py)."""
from __future__ import annotations

import pytest

from gpuhost.facts import assemble
from gpuhost.facts.host_parsers import split_sections
from gpuhost import driver_rules, gpu_classes, gpu_models

TURING_FIRST_DEVICE_ID = 0x1E00  # NVIDIA's open-module table starts at 1E02 (TITAN RTX)
UNKNOWN = "12ff"  # below 0x1340 (the device-id rule claims nothing there) and in no table


def test_the_snapshot_names_its_source_driver_and_date():
    data = gpu_classes.SUPPORTED_GPUS
    assert "supported-gpus.json" in data["_source"] and data["_driver"] and data["_date"]
    assert "commit" in data["_source"] and data["_driver"].startswith("R590")
    assert len(data["devices"]) > 1000


def test_no_pre_turing_row_claims_the_open_modules():
    """The open modules need a GSP (Turing or newer), whatever a table row says."""
    offenders = [devid for devid, row in gpu_classes.SUPPORTED_GPUS["devices"].items()
                 if row["open"] and (int(devid, 16) < TURING_FIRST_DEVICE_ID
                                     or row["legacy_branch"] is not None)]
    assert offenders == []
    for key, model in gpu_models.GPU_MODELS.items():
        for devid in model["pci_device_ids"]:
            row = gpu_classes.SUPPORTED_GPUS["devices"].get(devid)
            if row is not None:
                assert row["open"] == driver_rules.open_module_supported(model["architecture"]), key


def test_classify_by_gpuhosts_table_then_nvidias_then_unknown():
    a100 = gpu_classes.classify_pci("0x20B0")
    assert (a100["known_by"], a100["architecture"], a100["open_modules"]) == (
        "gpu_models", "ampere", True)
    v100 = gpu_classes.classify_pci("1db4")  # V100 PCIe 16GB: not in gpuhost's own table
    assert (v100["known_by"], v100["name"], v100["generation"], v100["open_modules"]) == (
        "supported-gpus", "Tesla V100-PCIE-16GB", "pre-turing", False)
    b200 = gpu_classes.classify_pci("2901")  # gpuhost's table now has its id
    assert (b200["known_by"], b200["architecture"], b200["proprietary_modules"]) == (
        "gpu_models", "blackwell", False)
    newer = gpu_classes.classify_pci("3300")  # in no table yet: NVIDIA's device numbering
    assert (newer["known_by"], newer["generation"], newer["open_modules"]) == (
        "device-id-rule", "turing-or-newer", True)
    nobody = gpu_classes.classify_pci(UNKNOWN)
    assert nobody["known_by"] is None and nobody["generation"] is None
    kepler = gpu_classes.classify_pci("1023")  # Tesla K40m: 470.xx legacy
    assert kepler["legacy_branch"] == "470"


def gpu(pci, index=0):
    info = gpu_classes.classify_pci(pci)
    return {"index": index, "name": info["name"], "architecture": info["architecture"],
            "pci_device_id": info["device_id"], "generation": info["generation"],
            "legacy_branch": info["legacy_branch"]}


def test_auto_on_pre_turing_gpus_known_only_to_nvidia_gives_proprietary():
    assert gpu_classes.flavor_for_gpus("auto", [gpu("1db4"), gpu("15f8", 1)], "570.172.08") == \
        "proprietary"
    assert gpu_classes.flavor_for_gpus("auto", [gpu("20b0")], "570.172.08") == "open"


def test_open_on_a_pre_turing_gpu_is_refused_with_the_gpu_and_the_fix():
    with pytest.raises(ValueError, match=r"GPU 0 \(Tesla V100-PCIE-16GB, PCI id 10de:1db4\) "
                                         r"\(pre-Turing\) cannot run the open kernel modules"
                                         r".*'proprietary'"):
        gpu_classes.flavor_for_gpus("open", [gpu("1db4")], "570.172.08")
    with pytest.raises(ValueError, match="R580 is the last driver branch for pre-Turing GPUs"):
        gpu_classes.flavor_for_gpus("auto", [gpu("1db4")], "590.44.01")


def test_auto_refuses_a_gpu_nobody_knows_and_names_the_pci_id_and_setting():
    with pytest.raises(ValueError) as error:
        gpu_classes.flavor_for_gpus("auto", [gpu("20b0"), gpu(UNKNOWN, 1)], "570.172.08")
    message = str(error.value)
    assert f"GPU 1 (unknown model, PCI id 10de:{UNKNOWN})" in message
    assert "nvidia_driver_flavor" in message and "gpuhost.supported_gpus" in message
    # an explicit flavour is the operator's decision
    assert gpu_classes.flavor_for_gpus("open", [gpu(UNKNOWN)], "570.172.08") == "open"


def test_a_legacy_gpu_is_refused_whatever_the_flavour():
    for setting in ("auto", "proprietary", "open"):
        with pytest.raises(ValueError, match="470.xx legacy driver branch"):
            gpu_classes.flavor_for_gpus(setting, [gpu("1023")], "570.172.08")


def sections(**named):
    text = "".join(f"@@gpuhost@@ {name} rc={rc}\n{out}" for name, (rc, out) in named.items())
    return split_sections(text)


def test_facts_read_sysfs_ids_without_lspci():
    got = assemble.gpus_state(sections(
        lspci=(127, ""),
        pci_sysfs=(0, "0000:3b:00.0 0x1db4 0x030200 0x10de 0x1214 0xa1\n"
                      "0000:c4:00.0 0x22a3 0x068000 0x10de 0x1796 0xa1\n"
                      "0000:d8:00.0 0x2901 0x030200 0x10de 0x1999 0xa1\n"
                      f"0000:e1:00.0 0x{UNKNOWN} 0x030200 0x10de 0x1999 0xa1\n")))
    assert [(g["name"], g["pci_device_id"], g["generation"], g["classified_by"], g["source"])
            for g in got] == [
        ("Tesla V100-PCIE-16GB", "1db4", "pre-turing", "supported-gpus", "sysfs"),
        ("NVIDIA B200", "2901", "turing-or-newer", "gpu_models", "sysfs"),
        (f"NVIDIA device 10de:{UNKNOWN}", UNKNOWN, None, None, "sysfs"),  # shown, not dropped
    ]


def test_lspci_names_join_sysfs_ids_and_lspci_alone_still_works():
    lspci = ('3b:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" '
             f'"Device [{UNKNOWN}]" -ra1 "NVIDIA Corporation [10de]" "Device [1999]"\n')
    got = assemble.gpus_state(sections(lspci=(0, lspci), pci_sysfs=(3, "")))
    assert [(g["name"], g["pci_device_id"], g["source"]) for g in got] == [
        (f"NVIDIA device 10de:{UNKNOWN}", UNKNOWN, "lspci")]
    named = lspci.replace(f'"Device [{UNKNOWN}]"', f'"GK999 [Some GPU] [{UNKNOWN}]"')
    got = assemble.gpus_state(sections(
        lspci=(0, named),
        pci_sysfs=(0, f"0000:3b:00.0 0x{UNKNOWN} 0x030200 0x10de 0x1999 0xa1\n")))
    assert [(g["name"], g["source"]) for g in got] == [("GK999 [Some GPU]", "sysfs")]


def test_the_audit_shows_an_unknown_gpu_instead_of_dropping_it():
    from gpuhost.reports import audit

    state = assemble.host_state(sections(
        os_release=(0, 'ID=debian\nVERSION_ID="12"\n'), kernel=(0, "6.1.0-56-amd64 x86_64\n"),
        lspci=(127, ""),
        pci_sysfs=(0, f"0000:1b:00.0 0x{UNKNOWN} 0x030200 0x10de 0x1999 0xa1\n")))
    seen = audit.observed(state)
    assert seen["gpu_count"] == 1
    assert seen["gpus"] == [{"model": f"NVIDIA device 10de:{UNKNOWN}", "count": 1}]


def test_the_refusal_does_not_repeat_the_placeholder_name():
    unknown = {"index": 0, "name": f"NVIDIA device 10de:{UNKNOWN}", "pci_device_id": UNKNOWN,
               "architecture": None, "generation": None, "legacy_branch": None}
    with pytest.raises(ValueError, match=rf"^GPU 0 \(unknown model, PCI id 10de:{UNKNOWN}\) is in"):
        gpu_classes.flavor_for_gpus("auto", [unknown], "570.172.08")
