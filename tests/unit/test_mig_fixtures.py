"""Issue 22 item 2, done-when: GPU Operator's default-mig-parted-config (v26.7.0) and
mig-parted's config-default.yaml, unchanged (tests/fixtures/mig/SOURCE.md), are accepted by
gpuhost's loader, and every configuration in them validates against every GPU it names."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gpuhost.mig import config as mig_config, plan as mig_plan
from gpuhost.mig.tables import gpu_table, table_problems

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mig"
FILES = {
    "gpu-operator-v26.7.0-default-mig-parted-config.yaml":
        "e0d1f060dbdd4237ad5cc519536f0e32148b9f7adb3f3d37b0f1dc8ff9d37a2f",
    "mig-parted-bd7160f-config-default.yaml":
        "f94c3be382d7849525ea90a83d7cb523c6a1fef7f4093decefe8ac73a2def913",
}

# The PCI ids the files' device-filters name, with the GPU each file's comment gives them,
# as the product whose table gpuhost has (A800s: NVIDIA's comments put them with the A100s).
BY_FILTER = {
    "0x20B010DE": "A100-SXM4-40GB", "0x20B110DE": "A100-PCIE-40GB",   # A100-40GB
    "0x20F110DE": "A100-PCIE-40GB", "0x20F610DE": "A100-PCIE-40GB",   # A100 / A800 40GB
    "0x20B210DE": "A100-SXM4-80GB", "0x20B510DE": "A100 80GB PCIe",   # A100-80GB
    "0x20F310DE": "A100-SXM4-80GB", "0x20F510DE": "A100 80GB PCIe",   # A800-80GB
    "0x233010DE": "H100 80GB HBM3", "0x233110DE": "H100 PCIe",        # H100-80GB
    "0x232210DE": "H800 PCIe", "0x232410DE": "H800",                  # H800-80GB
    "0x20B710DE": "A30",
    "0x232110DE": "H100 NVL", "0x233A10DE": "H800 NVL",
    "0x234210DE": "GH200 480GB", "0x233D10DE": "GH200 480GB",         # H100-96GB, GH200
    "0x20B610DE": "GH200 480GB", "0x232910DE": "H20",                 # PG506-96GB, H20
    "0x234810DE": "GH200 144G HBM3e",
    "0x233510DE": "H200", "0x233B10DE": "H200 NVL",
    "0x290110DE": "B200", "0x294110DE": "GB200", "0x318210DE": "B300 SXM6 AC",
    "0x31C210DE": "GB300", "0x2BB510DE": "RTX PRO 6000 Blackwell Server Edition",
}

# Unfiltered configurations whose profiles no GPU NVIDIA documents has: GB200's names before
# mig-parted ebab1f77 (2025-08-07) corrected them to 3g.93gb/4g.93gb/7g.186gb. gpuhost refuses
# them before any host is contacted ("fits no MIG GPU model").
NO_DOCUMENTED_GPU = {"all-3g.95gb", "all-4g.95gb", "all-7g.189gb"}


@pytest.fixture(params=sorted(FILES))
def fixture(request) -> Path:
    return FIXTURES / request.param


def test_the_fixtures_are_the_unchanged_copies_source_md_names(fixture):
    assert hashlib.sha256(fixture.read_bytes()).hexdigest() == FILES[fixture.name]
    assert fixture.name in (FIXTURES / "SOURCE.md").read_text()


def test_the_whole_file_loads(fixture):
    configs = mig_config.load(str(fixture))
    assert len(configs) == 81 and "all-balanced" in configs and "all-1g.24gb.me.all" in configs


def test_every_filtered_entry_fits_every_gpu_its_filter_names(fixture):
    checked = 0
    for name, entries in mig_config.load(str(fixture)).items():
        for entry in entries:
            for packed in entry.device_filter:
                gpu = gpu_table(name=BY_FILTER[packed])
                assert table_problems(gpu, entry.profiles) == [], (name, entry.shown(), gpu.name)
                checked += 1
    assert checked > 40


def test_every_configuration_passes_the_controller_check_but_the_undocumented_names(fixture):
    configs = mig_config.load(str(fixture))
    assert NO_DOCUMENTED_GPU <= set(configs)
    for name in configs:
        problems = mig_config.check(str(fixture), name)
        if name in NO_DOCUMENTED_GPU:
            assert len(problems) == 1 and "fits no MIG GPU model" in problems[0], name
        else:
            assert problems == [], (name, problems)


@pytest.mark.parametrize("name, gpus", [
    ("all-1g.24gb", ["H100 NVL", "GH200 480GB", "RTX PRO 6000 Blackwell Server Edition"]),
    ("all-1g.24gb.gfx", ["RTX PRO 6000 Blackwell Workstation Edition"]),
    ("all-1g.24gb.me.all", ["RTX PRO 6000 Blackwell Max-Q Workstation Edition"]),
    ("all-2g.48gb-me", ["RTX PRO 6000 Blackwell Server Edition"]),
    ("all-4g.96gb.gfx", ["RTX PRO 6000 Blackwell Server Edition"]),
    ("all-1g.23gb", ["B200", "GB200"]),
    ("all-1g.12gb", ["H100 NVL", "H800 NVL", "GH200 480GB", "H20"]),
    ("all-7g.144gb", ["GH200 144G HBM3e"]),
    ("all-1g.34gb.me", ["B300 SXM6 AC"]),
    ("all-7g.278gb", ["GB300"]),
    ("all-2g.12gb.me", ["A30"]),
    ("all-7g.80gb", ["A100-SXM4-80GB", "H100 80GB HBM3", "H800"]),
])
def test_unfiltered_configurations_fit_the_gpus_their_comments_name(fixture, name, gpus):
    (entry,) = mig_config.load(str(fixture))[name]
    for gpu in gpus:
        assert table_problems(gpu_table(name=gpu), entry.profiles) == [], (name, gpu)


def test_the_balanced_layout_reaches_h100_and_a100_hosts(fixture):
    entries = mig_config.load(str(fixture))["all-balanced"]
    gpus = [{"index": 0, "model": "H100-80GB-HBM3", "name": "NVIDIA H100 80GB HBM3",
             "pci_device_id": "2330", "mig_capable": True},
            {"index": 1, "model": "A100-SXM4-40GB", "name": "NVIDIA A100-SXM4-40GB",
             "pci_device_id": "20b0", "mig_capable": True}]
    wants = mig_plan.wanted(entries, gpus)
    assert sorted(wants[0].profiles) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert sorted(wants[1].profiles) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert mig_plan.host_problems("all-balanced", wants, gpus) == []
