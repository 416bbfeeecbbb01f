"""Issue 22: mig_mode/mig_layout are judged by the same grammar and per-GPU tables as a named
configuration (gpuhost.mig.tables): one judgement, not two."""

from __future__ import annotations

import pytest

from gpuhost.mig import tables as mig_tables
from gpuhost.checks import check_mig_layout


@pytest.mark.parametrize("layout", [
    ["1g.24gb+me.all", "1g.24gb-me", "2g.48gb+gfx"],
    ["MIG 1g.10gb+me", "3g.40gb", 19, 67],
    ["1G.10GB"],   # nvidia-smi prints lower case; gpuhost reads any case
])
def test_the_setting_takes_mig_parteds_grammar_and_attribute_profiles(layout):
    assert check_mig_layout("mig_layout", layout) == []


@pytest.mark.parametrize("item, why", [
    ("1g.10gb+me-x", "both '+' and '-' attributes"),
    ("3g", "is not a MIG profile name"),
    ("1c.3g.20gb", "names compute instances; mig_layout creates GPU instances: write \"3g.20gb\""),
    (256, "is not a MIG profile id (0 to 255)"),
    (True, "is not a MIG profile name"),
])
def test_the_setting_refuses_what_nvidia_smi_cannot_create(item, why):
    problems = check_mig_layout("mig_layout", [item])
    assert len(problems) == 1 and why in problems[0], problems


@pytest.mark.parametrize("model, layout", [
    ("RTX-PRO-6000-BLACKWELL", ["2g.48gb+gfx", "1g.24gb-me", "1g.24gb+me.all"]),
    ("RTX-PRO-6000-BLACKWELL", [35, 67, 65]),           # the same by profile id
    ("B200", ["3g.90gb", "2g.45gb", "1g.23gb+me", "1g.23gb"]),
    ("H100-80GB-HBM3", ["1g.10gb+me", "3g.40gb"]),
])
def test_attribute_profiles_fit_the_gpus_that_have_them(model, layout):
    assert mig_tables.mig_layout_valid(model, layout) == []


@pytest.mark.parametrize("model, layout, why", [
    # B200 now has a table: a profile of another GPU and a count it cannot hold are refused
    ("B200", ["3g.40gb"], "unknown MIG profile '3g.40gb' for B200"),
    ("B200", ["1g.23gb+me", "1g.23gb+me"], "1g.23gb+me x2: B200 allows at most 1"),
    ("B200", ["3g.90gb", "3g.90gb", "1g.23gb"], "no placement of the memory slices works"),
    ("RTX-PRO-6000-BLACKWELL", ["4g.96gb+gfx", "1g.24gb"], "layout uses 5 compute slices"),
    ("RTX-PRO-6000-BLACKWELL", ["1g.24gb+me.all", "1g.24gb+me.all"], "allows at most 1"),
    ("H100-80GB-HBM3", ["1g.10gb+gfx"], "unknown MIG profile '1g.10gb+gfx' for H100-80GB-HBM3"),
    ("A100-SXM4-40GB", [99], "'99' is not a MIG profile name"),
])
def test_a_layout_the_gpu_cannot_hold_is_refused_with_the_gpu_and_why(model, layout, why):
    problems = mig_tables.mig_layout_valid(model, layout)
    assert any(why in p for p in problems), problems


def test_mig_layout_and_a_named_configuration_give_the_same_judgement():
    for model, layout in [("RTX-PRO-6000-BLACKWELL", ["1g.24gb"] * 5),
                          ("B200", ["4g.90gb", "4g.90gb"]),
                          ("A30", ["2g.12gb", "2g.12gb", "1g.6gb"])]:
        assert mig_tables.mig_layout_valid(model, layout) == mig_tables.layout_problems(model, layout)


def test_profile_ids_become_the_names_of_the_gpus_own_table():
    # RTX PRO 6000's ids (MIG User Guide table, as mig_profiles.json holds them)
    assert mig_tables.mig_profile_names("NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                    [14, "MIG 2g.48gb+gfx", 65]) == [
        "1g.24gb", "2g.48gb+gfx", "1g.24gb+me.all"]
    assert mig_tables.mig_profile_names("B200", [19, 9, "7G.180GB"]) == ["1g.23gb", "3g.90gb", "7g.180gb"]
    # an id of a table without ids stays digits (nvidia-smi is asked as given)
    assert mig_tables.mig_profile_names("GB200", [19]) == ["19"]


def test_a_mig_gpu_without_a_table_gets_the_grammar_and_its_slices(monkeypatch):
    monkeypatch.setattr(mig_tables, "gpu_table", lambda *a, **k: None)
    assert mig_tables.mig_layout_valid("B200", ["3g.90gb", "4g.90gb"]) == []
    assert mig_tables.mig_layout_valid("B200", ["4g.90gb", "4g.90gb"]) == [
        "layout uses 8 compute slices, B200 has 7"]
    assert "is not a MIG profile name" in mig_tables.mig_layout_valid("B200", ["four"])[0]
