"""gpusim's MIG on Blackwell (issue 22): the B200 (7 compute slices, as A100/H100) and the RTX
PRO 6000 Blackwell Server Edition (4 compute slices on a 12-unit memory grid, attribute
profiles +me, +me.all, -me, +gfx), each with its first MIG driver. The simulator keeps its
own copy of NVIDIA's facts (it is the hardware); they must agree with gpuhost's table."""

import json
import re

import pytest

from sandbox.tests.test_gpusim import PKG_DIR, ROOT, Sim, created

RTX = "RTX-PRO-6000-Blackwell-Server"
TABLES = json.loads((ROOT / "gpuhost/data/mig_profiles.json").read_text())


def _modes(sim):
    return sim.smi("--query-gpu=mig.mode.current", "--format=csv,noheader")


@pytest.fixture
def parsers():
    return pytest.importorskip("gpuhost.facts.parsers")


@pytest.fixture
def b200(tmp_path):
    sim = Sim(tmp_path).machine("B200", 2).install("570.172.08")
    sim.boot()
    return sim


@pytest.fixture
def rtx(tmp_path):
    sim = Sim(tmp_path).machine(RTX, 1).install("580.95.05")
    sim.boot()
    sim.smi("-pm", "1")
    return sim


@pytest.mark.parametrize("model, gpu", [("B200", "B200"),
                                        (RTX, "RTX PRO 6000 Blackwell Server Edition")])
def test_profiles_ids_counts_and_placements_agree_with_gpuhosts_table(tmp_path, parsers, model, gpu):
    sim = Sim(tmp_path).machine(model, 1).install("580.95.05")
    sim.boot()
    sim.smi("-mig", "1")
    table = TABLES["tables"][TABLES["gpus"][gpu]["table"]]
    listed = parsers.parse_mig_gpu_instance_profiles(sim.smi("mig", "-lgip"))
    assert {p["profile"]: (p["profile_id"], p["total"]) for p in listed} == {
        name: (spec["id"], spec["max"]) for name, spec in table.items()}
    placements = {}
    for line in sim.smi("mig", "-lgipp").splitlines():
        m = re.fullmatch(r"GPU  0 Profile ID +(\d+) Placements? ?: \{([\d,]+)\}:(\d+)", line)
        placements[int(m[1])] = ([int(x) for x in m[2].split(",")], int(m[3]))
    assert placements == {spec["id"]: (spec["starts"], spec["size"]) for spec in table.values()}


def test_b200_has_mig_from_its_first_mig_driver_and_forgets_it_at_reboot(b200):
    assert b200.smi("-i", "0", "-mig", "1").startswith("Enabled MIG Mode for GPU 00000000:1B:00.0")
    assert _modes(b200) == "Enabled\nDisabled\n"
    b200.boot()                                        # Hopper and newer: not kept
    assert _modes(b200) == "Disabled\nDisabled\n"


def test_b200_capacity_is_the_seven_slice_geometry(b200, parsers):
    b200.smi("-mig", "1")
    b200.smi("mig", "-i", "0", "-cgi", "3g.90gb,2g.45gb,1g.23gb,1g.23gb", "-C")
    gis = parsers.parse_mig_gpu_instances(b200.smi("mig", "-i", "0", "-lgi"))
    assert sorted((g["profile"], tuple(g["placement"])) for g in gis) == [
        ("1g.23gb", (2, 1)), ("1g.23gb", (3, 1)), ("2g.45gb", (0, 2)), ("3g.90gb", (4, 4))]
    assert "Insufficient Resources" in b200.smi("mig", "-i", "0", "-cgi", "19", rc=23)
    # +me at most once; a profile of another GPU is an invalid argument
    assert created(b200.smi("mig", "-i", "1", "-cgi", "20,20", rc=23)) == [9]
    assert "profile 3g.40gb: Invalid Argument" in b200.smi("mig", "-i", "1", "-cgi", "3g.40gb", rc=2)
    b200.smi("mig", "-i", "1", "-dgi")
    assert created(b200.smi("mig", "-i", "1", "-cgi", "7g.180gb")) == [0]


def test_rtx_pro_6000_refuses_mig_before_its_first_mig_driver(tmp_path):
    sim = Sim(tmp_path).machine(RTX, 1).install("570.172.08")
    sim.boot()
    assert sim.smi("-mig", "1") == ("Unable to enable MIG Mode for GPU 00000000:17:00.0: Not "
                                    "Supported\nTreating as warning and moving on.\nAll done.\n")
    assert sim.smi("mig", "-lgip", rc=6) == "No MIG-supported devices found.\n"
    assert _modes(sim) == "[N/A]\n"


def test_rtx_pro_6000_holds_four_slices(rtx, parsers):
    assert rtx.smi("-mig", "1") == "Enabled MIG Mode for GPU 00000000:17:00.0\nAll done.\n"
    assert "NVIDIA RTX PRO 6000 Blackwell Server Edition" in rtx.smi("-L")
    assert rtx.tool("lspci", "-n", "-d", "10de:").stdout == "17:00.0 0302: 10de:2bb5 (rev a1)\n"
    out = rtx.smi("mig", "-cgi", "1g.24gb,1g.24gb,1g.24gb,1g.24gb,1g.24gb", rc=23)
    assert len(created(out)) == 4 and out.endswith("Failed to create GPU instances: "
                                                   "Insufficient Resources\n")
    assert sorted(g["placement"][0] for g in parsers.parse_mig_gpu_instances(
        rtx.smi("mig", "-lgi"))) == [0, 3, 6, 9]
    rtx.smi("mig", "-dgi")
    # 2g + 1g + 1g fill it, in the order gpuhost creates them (largest first)
    rtx.smi("mig", "-cgi", "2g.48gb,1g.24gb,1g.24gb-me", "-C")
    gis = parsers.parse_mig_gpu_instances(rtx.smi("mig", "-lgi"))
    assert sorted((g["profile"], g["profile_id"], tuple(g["placement"])) for g in gis) == [
        ("1g.24gb", 14, (0, 3)), ("1g.24gb-me", 67, (3, 3)), ("2g.48gb", 5, (6, 6))]
    assert len(parsers.parse_smi_list(rtx.smi("-L"))[0]["mig_devices"]) == 3
    assert "Insufficient Resources" in rtx.smi("mig", "-cgi", "1g.24gb+gfx", rc=23)


@pytest.mark.parametrize("profiles, made, why", [
    ("1g.24gb+me.all,1g.24gb+me.all", 1, "Insufficient Resources"),   # one instance only
    ("2g.48gb+gfx,2g.48gb-me,1g.24gb", 2, "Insufficient Resources"),  # 4 slices used
    ("4g.96gb+gfx,1g.24gb", 1, "Insufficient Resources"),              # the whole GPU
    ("3g.90gb", 0, "Invalid Argument"),                                 # no 3g on this GPU
])
def test_rtx_pro_6000_attribute_profiles_and_refusals(rtx, profiles, made, why):
    rtx.smi("-mig", "1")
    res = rtx._run(str(PKG_DIR), "gpusim.smi", ["mig", "-cgi", profiles])
    assert len(created(res.stdout)) == made and res.stdout.endswith(
        f"Failed to create GPU instances: {why}\n"), res.stdout
