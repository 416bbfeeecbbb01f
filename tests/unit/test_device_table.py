"""Issue 22 item 1: every chip of NVIDIA's current device table (R590-era supported-gpus.json)
gets its generation and a module flavour that loads on a bare host (GPU read from PCI, no
driver); the device-id rule agrees with the whole table wherever it claims an id; every model
of gpuhost's table has its PCI ids in NVIDIA's."""
from __future__ import annotations

import pytest

from gpuhost.facts import assemble
from gpuhost.facts.host_parsers import split_sections
from gpuhost import driver_rules, gpu_classes, gpu_models

ROWS = gpu_classes.SUPPORTED_GPUS["devices"]
# current chips: no legacy branch, or R580 as their last one (Maxwell, Pascal, Volta)
CURRENT = {devid: row for devid, row in ROWS.items() if row["legacy_branch"] in (None, "580")}


def bare_host_gpus(ids):
    """The facts of a bare host (no driver, no lspci) whose GPUs have these PCI ids."""
    lines = "".join(f"0000:{n // 256:02x}:{n % 256:02x}.0 0x{devid} 0x030200 0x10de 0x0000 0xa1\n"
                    for n, devid in enumerate(ids))
    text = ("@@gpuhost@@ lspci rc=127\n"
            f"@@gpuhost@@ pci_sysfs rc=0\n{lines}")
    return assemble.gpus_state(split_sections(text))


GPUS = {gpu["pci_device_id"]: gpu for gpu in bare_host_gpus(sorted(CURRENT))}


def test_the_table_is_current_and_whole():
    assert len(CURRENT) > 440 and len(GPUS) == len(CURRENT)
    assert {"2901", "2941", "3182", "31c2", "2bb5", "2bb1", "2b85", "233b", "2324"} <= set(CURRENT)


def test_the_device_id_rule_agrees_with_the_whole_table_where_it_claims_an_id():
    claimed = 0
    for devid, row in ROWS.items():
        rule = gpu_classes.device_id_rule(devid)
        if rule is None:
            assert int(devid, 16) < 0x1340 and row["legacy_branch"] not in (None, "580"), devid
            continue
        claimed += 1
        for field in ("generation", "open", "proprietary", "legacy_branch"):
            if rule[field] is not None:
                assert rule[field] == row[field], (devid, field, rule, row)
        if rule["architecture"] == "blackwell":
            assert row["proprietary"] is False, devid
    assert claimed == len(CURRENT)  # every current chip lies where the rule decides it


def test_the_rule_classifies_ids_newer_than_the_table():
    assert gpu_classes.device_id_rule("0x31c5")["architecture"] == "blackwell"  # GB110 block
    assert gpu_classes.device_id_rule("3300")["generation"] == "turing-or-newer"
    assert gpu_classes.device_id_rule("1dff")["legacy_branch"] == "580"
    assert gpu_classes.device_id_rule("133f") is None and gpu_classes.device_id_rule("zz") is None


@pytest.mark.parametrize("driver", ["550.163.01", "580.105.08", "595.58.03", "620.10.01"])
def test_every_current_chip_gets_a_generation_and_a_flavour_that_loads(driver):
    branch = int(driver.split(".")[0])
    for devid, row in CURRENT.items():
        gpu = GPUS[devid]
        assert gpu["generation"] == row["generation"], devid
        legacy = row["legacy_branch"] == "580"
        if legacy and branch > 580:
            with pytest.raises(ValueError, match="R580 is the last driver branch|branch <= 580"):
                gpu_classes.flavor_for_gpus("auto", [gpu], driver)
            continue
        flavour = gpu_classes.flavor_for_gpus("auto", [gpu], driver)
        assert row[flavour], (devid, row["name"], driver, flavour)  # that flavour drives it
        assert flavour == ("proprietary" if legacy or (branch < 560 and row["proprietary"])
                           else "open"), (devid, driver)


def test_the_turing_mining_cards_are_turing():
    for devid, name in (("2189", "CMP 30HX"), ("1f0b", "CMP 40HX"), ("1e09", "CMP 50HX")):
        assert name in ROWS[devid]["name"] and GPUS[devid]["generation"] == "turing-or-newer"


def test_r580_last_gpus_are_proprietary_whatever_kernelopen_says():
    tagged = [d for d, row in CURRENT.items() if row["legacy_branch"] == "580"]
    assert len(tagged) == 162 and all(ROWS[d]["kernelopen"] for d in tagged)
    assert not any(ROWS[d]["open"] for d in tagged)
    v100 = GPUS["1db4"]
    assert gpu_classes.flavor_for_gpus("auto", [v100], "580.105.08") == "proprietary"
    with pytest.raises(ValueError, match="cannot run the open kernel modules"):
        gpu_classes.flavor_for_gpus("open", [v100], "580.105.08")


def test_open_only_gpus_refuse_proprietary():
    for devid in ("2901", "2342", "2e12"):  # B200, GH200 (hopper), GB10 (table only)
        with pytest.raises(ValueError, match="open kernel modules"):
            gpu_classes.flavor_for_gpus("proprietary", [GPUS[devid]], "580.105.08")
    assert gpu_classes.flavor_for_gpus("proprietary", [GPUS["2330"]], "580.105.08") == "proprietary"


def test_gpu_models_have_pci_ids_that_nvidias_table_names_alike():
    for key, model in gpu_models.GPU_MODELS.items():
        assert model["pci_device_ids"], key
        for devid in model["pci_device_ids"]:
            row = ROWS[devid]
            assert row["open"] == driver_rules.open_module_supported(model["architecture"]), key
            printed = gpu_models._norm_name(row["name"])
            assert any(gpu_models._norm_name(n) in printed or printed in gpu_models._norm_name(n)
                       for n in model["names"]) or key.startswith("GH200"), (key, row["name"])
    assert gpu_models.lookup_model(pci_device_id="31c2")["key"] == "GB300"
    assert gpu_models.lookup_model(pci_device_id="2bb3")["key"] == "RTX-PRO-5000-BLACKWELL"


def test_a_legacy_gpu_older_than_r580_is_still_refused():
    with pytest.raises(ValueError, match="470.xx legacy driver branch"):
        gpu_classes.flavor_for_gpus("auto", bare_host_gpus(["1023"]), "580.105.08")
