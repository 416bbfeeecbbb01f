"""Issue 22 item 2: mig-parted's profile grammar, its zero-count rule, and gpuhost's MIG
profile tables (gpuhost/data/mig_profiles.json) for every MIG GPU NVIDIA documents."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuhost.mig import config as mig_config, plan as mig_plan, tables as mig_tables
from gpuhost.mig.config import MigConfigError, parse
from gpuhost.mig.grammar import parse_profile
from gpuhost.mig.tables import gpu_table, table_problems

DATA = json.loads((Path(mig_config.__file__).parents[1] / "data" / "mig_profiles.json").read_text())


def _config(devices: dict) -> dict:
    return {"version": "v1", "mig-configs": {"c": [
        {"devices": "all", "mig-enabled": True, "mig-devices": devices}]}}


# --- grammar ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, shown, gi, c", [
    ("1g.10gb", "1g.10gb", "1g.10gb", 1),
    ("7g.80gb", "7g.80gb", "7g.80gb", 7),
    ("1g.10gb+me", "1g.10gb+me", "1g.10gb+me", 1),
    ("1g.24gb+me.all", "1g.24gb+me.all", "1g.24gb+me.all", 1),
    ("1g.24gb-me", "1g.24gb-me", "1g.24gb-me", 1),
    ("2g.48gb+gfx", "2g.48gb+gfx", "2g.48gb+gfx", 2),
    ("1c.2g.10gb", "1c.2g.10gb", "2g.10gb", 1),
    ("1c.1g.24gb+gfx", "1g.24gb+gfx", "1g.24gb+gfx", 1),  # C == G: the GPU instance itself
    ("2c.2g.10gb", "2g.10gb", "2g.10gb", 2),
    ("1c.3g.40gb+me", "1c.3g.40gb+me", "3g.40gb+me", 1),
    ("1g.5gb+me,gfx", "1g.5gb+me,gfx", "1g.5gb+me,gfx", 1),
    ("3G.20GB", "3g.20gb", "3g.20gb", 3),                   # gpuhost reads any case
])
def test_each_grammar_form_parses(text, shown, gi, c):
    profile, why = parse_profile(text)
    assert why is None and str(profile) == shown
    assert profile.gpu_instance == gi and profile.c == c


@pytest.mark.parametrize("text, why", [
    ("3g", "not a MIG profile name"),
    ("1g.10gb+", "attribute ''"),
    ("1g.10gb+me-gfx", "both '+' and '-'"),
    ("1g.10gb+me,me", "listed twice"),
    ("1g.10gb+1me", "attribute '1me'"),
    ("1g.10gb+me.", "attribute 'me.'"),
    ("1g.10gb+.me", "attribute '.me'"),
    ("1c.10gb", "not a MIG profile name"),
    ("1x.2g.10gb", "not a MIG profile name"),
    ("", "empty string"),
])
def test_malformed_profiles_are_refused_with_why(text, why):
    profile, problem = parse_profile(text)
    assert profile is None and why in problem


def test_every_attribute_form_loads_from_a_file():
    configs = parse(_config({"1g.24gb+me.all": 1, "1g.24gb-me": 2, "1c.2g.48gb+gfx": 1}))
    assert configs["c"][0].profiles == ["1g.24gb+me.all", "1g.24gb-me", "1g.24gb-me",
                                        "1c.2g.48gb+gfx"]


# --- zero counts, as mig-parted (pkg/types/mig_config.go AssertValidFormat) ---------------------

def test_a_mig_devices_map_whose_counts_are_all_zero_is_refused():
    with pytest.raises(MigConfigError, match="all counts are 0"):
        parse(_config({"1g.5gb": 0}))
    with pytest.raises(MigConfigError, match="all counts are 0"):
        parse(_config({"1g.5gb": 0, "2g.10gb": 0}))


def test_a_zero_beside_other_counts_is_ignored_and_an_empty_map_is_mig_without_instances():
    assert parse(_config({"1g.5gb": 0, "2g.10gb": 1}))["c"][0].profiles == ["2g.10gb"]
    assert parse(_config({}))["c"][0].profiles == []


def test_a_negative_count_is_refused():
    with pytest.raises(MigConfigError, match="count -1 is not a whole number"):
        parse(_config({"1g.5gb": -1}))


# --- the tables ---------------------------------------------------------------------------

DOCUMENTED = [  # the MIG User Guide's list (issue 22), as product names nvidia-smi prints
    "A30", "A100-PCIE-40GB", "A100-SXM4-40GB", "A100 80GB PCIe", "A100-SXM4-80GB",
    "H100 PCIe", "H100 80GB HBM3", "H100 NVL", "H800", "H20", "H200", "H200 NVL",
    "GH200 480GB", "GH200 144G HBM3e", "B200", "B300 SXM6 AC", "GB200", "GB300",
    "RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Workstation Edition",
    "RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 5000 Blackwell",
]


def test_every_documented_mig_gpu_has_a_table_with_source_and_date():
    for name in DOCUMENTED:
        gpu = gpu_table(name=f"NVIDIA {name}")
        assert gpu is not None, name
        source = DATA["table_sources"][gpu.table]
        assert source["source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", source["date"]), name
    assert set(DATA["table_sources"]) == set(DATA["tables"])
    for table, profiles in DATA["tables"].items():
        for profile, spec in profiles.items():
            parsed, why = parse_profile(profile)
            assert why is None and str(parsed) == profile, (table, profile)
            assert spec["max"] >= 1 and len(spec["starts"]) >= spec["max"], (table, profile)


def test_gpus_are_found_by_gpu_models_key_too():
    assert gpu_table("RTX-PRO-6000-BLACKWELL").slices == 4
    assert gpu_table("H100-NVL").table == "H100-94GB"
    assert gpu_table("A100-SXM4-40GB").name == "A100-SXM4-40GB"
    assert gpu_table(name="GeForce RTX 4090") is None


@pytest.mark.parametrize("gpu, profile, count, slots, starts", [
    # instance counts and placements per table, a sample
    ("A100-SXM4-40GB", "1g.10gb", 4, 2, [0, 2, 4, 6]),
    ("A30", "2g.12gb+me", 1, 2, [0, 2]),
    ("H100 80GB HBM3", "3g.40gb", 2, 4, [0, 4]),
    ("H100 NVL", "1g.12gb", 7, 1, [0, 1, 2, 3, 4, 5, 6]),
    ("H20", "2g.24gb", 3, 2, [0, 2, 4]),
    ("GH200 144G HBM3e", "1g.36gb", 4, 2, [0, 2, 4, 6]),
    ("B200", "1g.23gb+me", 1, 1, [0, 1, 2, 3, 4, 5, 6]),
    ("GB200", "7g.186gb", 1, 8, [0]),
    ("B300 SXM6 AC", "3g.135gb", 2, 4, [0, 4]),
    ("GB300", "1g.70gb", 4, 2, [0, 2, 4, 6]),
    ("RTX PRO 6000 Blackwell Server Edition", "1g.24gb+gfx", 4, 3, [0, 3, 6, 9]),
    ("RTX PRO 6000 Blackwell Max-Q Workstation Edition", "2g.48gb+me.all", 1, 6, [0, 6]),
    ("RTX PRO 5000 Blackwell", "1g.12gb-me", 3, 3, [0, 3, 6, 9]),
])
def test_instance_counts_and_placements(gpu, profile, count, slots, starts):
    spec = gpu_table(name=gpu).profiles[profile]
    assert (spec["max"], spec["size"], spec["starts"]) == (count, slots, starts)
    assert table_problems(gpu_table(name=gpu), [profile] * count) == []
    assert f"{profile} x{count + 1}: " in table_problems(gpu_table(name=gpu), [profile] * (count + 1))[0]


@pytest.mark.parametrize("gpu, layout, why", [
    # a count the GPU cannot hold: the GPU, the profile and why
    ("RTX-PRO-6000-BLACKWELL", ["1g.24gb"] * 5, "1g.24gb x5: RTX-PRO-6000-BLACKWELL allows at most 4"),
    ("RTX-PRO-6000-BLACKWELL", ["2g.48gb", "2g.48gb", "1g.24gb"],
     "layout uses 5 compute slices, RTX-PRO-6000-BLACKWELL has 4"),
    ("RTX PRO 5000 Blackwell", ["1g.12gb", "1g.12gb"], "1g.12gb x2: RTX-PRO-5000-BLACKWELL allows at most 1"),
    ("B200", ["1g.23gb+me", "1g.23gb+me"], "1g.23gb+me x2: B200 allows at most 1"),
    # 7 compute slices fit, the 4 + 4 + 1 memory slices of 8 do not
    ("B200", ["3g.90gb", "3g.90gb", "1g.23gb"], "no placement of the memory slices works"),
    ("GB300", ["7g.278gb", "1g.35gb"], "layout uses 8 compute slices, GB300 has 7"),
    ("A30", ["2g.12gb", "2g.12gb", "1g.6gb"], "layout uses 5 compute slices, A30 has 4"),
    ("H100-NVL", ["1g.10gb"], "unknown MIG profile '1g.10gb' for H100-NVL"),
    ("GH200 144G HBM3e", ["3g.48gb"], "unknown MIG profile '3g.48gb' for GH200 144G HBM3e"),
    ("H200", ["1g.24gb-me"], "unknown MIG profile '1g.24gb-me' for H200"),
])
def test_a_layout_the_gpu_cannot_hold_is_refused_naming_gpu_profile_and_why(gpu, layout, why):
    problems = mig_tables.layout_problems(None, layout, name=gpu)
    assert any(why in p for p in problems), problems


def test_placement_on_the_rtx_pro_6000_grid():
    gpu = gpu_table("RTX-PRO-6000-BLACKWELL")
    assert table_problems(gpu, ["2g.48gb", "1g.24gb", "1g.24gb-me"]) == []
    assert table_problems(gpu, ["4g.96gb+gfx"]) == []
    assert "x2" in table_problems(gpu, ["4g.96gb", "4g.96gb"])[0]


def test_compute_instance_forms_count_the_gpu_instances_they_need():
    a100 = gpu_table("A100-SXM4-40GB")
    # 3x 1c.3g.20gb share one 3g.20gb GPU instance; 6 need two, 7 need three (max 2)
    assert table_problems(a100, ["1c.3g.20gb"] * 6) == []
    assert "3g.20gb x3: A100-SXM4-40GB allows at most 2" in table_problems(a100, ["1c.3g.20gb"] * 7)[0]
    assert "does not fit a 2-slice GPU instance" in table_problems(a100, ["3c.2g.10gb"])[0]


def test_the_host_check_refuses_compute_instance_forms_gpuhost_does_not_create():
    entry = parse(_config({"1c.3g.20gb": 3}))["c"][0]
    gpus = [{"index": 0, "model": "A100-SXM4-40GB", "name": "NVIDIA A100-SXM4-40GB",
             "pci_device_id": "20b0", "mig_capable": True}]
    wants = mig_plan.wanted([entry], gpus)
    problems = mig_plan.host_problems("c", wants, gpus)
    assert len(problems) == 1 and "1c.3g.20gb: compute-instance profiles are checked but not created" \
        in problems[0]


def test_a_gpu_only_known_by_its_product_name_is_checked_on_the_host():
    entry = parse(_config({"1g.35gb": 8}))["c"][0]
    gpus = [{"index": 0, "model": None, "name": "NVIDIA GB300", "pci_device_id": "31c2",
             "mig_capable": True}]
    problems = mig_plan.host_problems("c", mig_plan.wanted([entry], gpus), gpus)
    assert problems and "GPU 0 (NVIDIA GB300)" in problems[0] and "1g.35gb x8: GB300 allows at most 7" \
        in problems[0]


def test_a_pci_id_picks_the_product_where_one_model_key_holds_two_tables():
    assert gpu_table(pci_device_id="0x234810DE").table == "GH200-144GB"
    assert gpu_table(pci_device_id="2342").table == "H100-96GB"
    assert gpu_table(pci_device_id="2bb5").slices == 4


def test_the_model_table_gives_rtx_pro_6000_its_four_compute_slices():
    # mig_mode/mig_layout's check (gpuhost.mig.tables) reads gpu_models.json, which said 7
    assert mig_tables.mig_layout_valid("RTX-PRO-6000-BLACKWELL", ["1g.24gb"] * 4) == []
    problems = mig_tables.mig_layout_valid("RTX-PRO-6000-BLACKWELL", ["1g.24gb"] * 5)
    assert problems == ["1g.24gb x5: RTX-PRO-6000-BLACKWELL allows at most 4",
                        "layout uses 5 compute slices, RTX-PRO-6000-BLACKWELL has 4"], problems
