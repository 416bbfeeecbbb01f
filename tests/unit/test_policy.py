"""CUDA, GPU models, flavour and MIG rules (gpuhost.cuda_drivers, gpu_models, driver_rules,
mig_tables) and gpuhost.distro (OS, kernel headers)."""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from gpuhost import cuda_drivers, distro, driver_rules, gpu_models
from gpuhost.mig import tables as mig_tables
from gpuhost.cuda_drivers import CUDA_MIN_DRIVER, cuda_compat, min_driver_for_cuda, newest_cuda
from gpuhost.driver_rules import choose_flavor, driver_branch, is_downgrade
from gpuhost.gpu_models import GPU_MODELS, lookup_model
from gpuhost.mig.tables import mig_layout_valid

# --- CUDA ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cuda, driver", [
    ("13.0", "580.65.06"), ("12.9.1", "575.57.08"), ("12.8", "570.26"), ("12.8.1", "570.124.06"),
    ("12.6.2", "560.35.03"), ("12.4.1", "550.54.15"), ("12.0", "525.60.13"), ("11.8", "520.61.05"),
    ("11.6.2", "510.47.03"), ("11.0.3", "450.51.06"), ("10.2", "440.33"), ("12.8.0", "570.26"),
    ("13.0.2", "580.95.05"), ("13.1", "590.44.01"), ("13.1.1", "590.48.01"),
    ("13.2", "595.45.04"), ("13.2.2", "595.71.05"), ("13.3", "610.43.02"),
])
def test_min_driver_for_cuda(cuda, driver):
    assert min_driver_for_cuda(cuda) == driver


@pytest.mark.parametrize("bad", ["12.7", "12.1.1", "9.0", "abc"])
def test_min_driver_for_unknown_cuda_raises(bad):
    with pytest.raises(ValueError, match="unknown CUDA version"):
        min_driver_for_cuda(bad)


def test_table_is_monotonic_and_parses():
    """A newer toolkit never needs an older driver (catches typos in the table)."""
    rows = sorted(CUDA_MIN_DRIVER.items(), key=lambda kv: Version(kv[0]))
    drivers = [Version(d) for _, d in rows]
    assert drivers == sorted(drivers)
    assert len(CUDA_MIN_DRIVER) >= 30


@pytest.mark.parametrize("driver, cuda", [
    ("570.124.06", "12.8.1"), ("570.124.05", "12.8"), ("570.172.08", "12.8.1"),
    ("550.163.01", "12.4.1"), ("535.104.05", "12.2.2"), ("590.48.01", "13.1.1"),
    ("580.126.09", "13.0.2"), ("595.71.05", "13.2.2"), ("620.10.01", "13.3.1"),
    ("450.80.02", "11.0.3"), ("440.33", "10.2"), ("418.43", None),
])
def test_newest_cuda(driver, cuda):
    assert newest_cuda(driver) == cuda


def test_cuda_releases_without_a_confirmed_row_answer_with_a_lower_bound():
    """CUDA 13.4 and 13.5: released, NVIDIA's row not read (cuda_drivers.json _notes)."""
    for cuda in ("13.4", "13.4.0", "13.4.1", "13.5"):
        assert min_driver_for_cuda(cuda) == "610.43.02"
        assert not cuda_drivers.cuda_min_driver_confirmed(cuda)
    assert cuda_drivers.cuda_min_driver_confirmed("13.3.1")
    assert newest_cuda("620.10.01") == "13.3.1"  # a lower bound is never claimed as newest
    old = cuda_compat("595.71.05", "13.4")
    assert old["how"] == "minor-version-compat" and old["driver_needed_confirmed"] is False
    assert cuda_compat("620.10.01", "13.4")["native"]


def test_cuda_compat_native_minor_and_forward():
    native = cuda_compat("570.172.08", "12.8")
    assert native["native"] and native["how"] == "native" and native["driver_needed"] == "570.26"

    minor = cuda_compat("535.104.05", "12.8.1")
    assert not minor["native"] and minor["minor_version_compat"] and minor["how"] == "minor-version-compat"
    assert minor["driver_needed"] == "570.124.06"

    # 13.x needs >= 580 even with minor-version compatibility
    old = cuda_compat("570.172.08", "13.0", gpu_model="NVIDIA H100 80GB HBM3")
    assert not old["minor_version_compat"] and old["forward_compat"] and old["how"] == "forward-compat"
    geforce = cuda_compat("570.172.08", "13.0", gpu_model="NVIDIA GeForce RTX 4090")
    assert geforce["forward_compat"] is False and not geforce["runs"]
    unknown = cuda_compat("570.172.08", "13.0")
    assert unknown["forward_compat"] is None and unknown["runs"] is False

    # 11.x minor-version compatibility starts at 450.80.02, not 450.51
    assert not cuda_compat("450.51.06", "11.8")["minor_version_compat"]
    assert cuda_compat("450.80.02", "11.8")["minor_version_compat"]
    # CUDA 10.x has no minor-version compatibility
    assert not cuda_compat("418.87", "10.2")["minor_version_compat"]


def test_driver_branch_and_downgrade():
    assert driver_branch("570.124.06") == "570"
    assert driver_branch("440.33") == "440"
    with pytest.raises(ValueError, match="not a driver version"):
        driver_branch("570; reboot")
    assert is_downgrade("570.172.08", "550.163.01")
    assert not is_downgrade("550.163.01", "570.172.08")
    assert not is_downgrade("570.172.08", "570.172.08")
    assert not is_downgrade(None, "550.163.01")
    assert is_downgrade("570.172.08", "570.124.06")  # numeric, not string order
    assert not is_downgrade("570.86.10", "570.124.06")


# --- GPU models ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, key", [
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("A100-SXM4-40GB", "A100-SXM4-40GB"),  # before R470: no NVIDIA prefix
    ("nvidia a100-sxm4-80gb", "A100-SXM4-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-80GB-HBM3"),
    ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla P100-PCIE-16GB", "P100"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA RTX A5000", "RTX-A5000"),
    ("NVIDIA GeForce RTX 3090", "RTX-3090"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX-PRO-6000-BLACKWELL"),
    ("NVIDIA  GeForce RTX 2080 SUPER", "RTX-2080-SUPER"),  # whitespace is normalised
    ("l40s", "L40S"),  # model keys work too
])
def test_lookup_by_name(name, key):
    assert lookup_model(name)["key"] == key


@pytest.mark.parametrize("pci, key", [
    ("20b0", "A100-SXM4-40GB"), ("20B2", "A100-SXM4-80GB"), ("0x233010DE", "H100-80GB-HBM3"),
    ("27B810DE", "L4"), ("1eb8", "T4"), ("1db1", "V100-SXM2-16GB"), ("2335", "H200"),
    ("2321", "H100-NVL"), ("2231", "RTX-A5000"), ("2684", "RTX-4090"), ("2bb4", "RTX-PRO-6000-BLACKWELL"),
])
def test_lookup_by_pci_device_id(pci, key):
    assert lookup_model(pci_device_id=pci)["key"] == key


def test_lookup_unknown_and_copy():
    assert lookup_model("NVIDIA Imaginary 9000") is None
    assert lookup_model(pci_device_id="ffff") is None
    assert lookup_model() is None
    model = lookup_model("NVIDIA L4")
    model["architecture"] = "changed"
    assert GPU_MODELS["L4"]["architecture"] == "ada"


def test_model_table_is_consistent():
    pci_seen, names_seen = set(), set()
    for key, m in GPU_MODELS.items():
        assert m["architecture"] in gpu_models.ARCHITECTURES, key
        assert Version(m["compute_capability"]), key
        for pci in m["pci_device_ids"]:
            assert pci == pci.lower() and len(pci) == 4 and pci not in pci_seen, (key, pci)
            pci_seen.add(pci)
        for name in m["names"]:
            assert not name.startswith("NVIDIA "), key  # the prefix is matched either way
            assert name.lower() not in names_seen, key
            names_seen.add(name.lower())
        if m["mig"]:
            assert m["data_center"] or key.startswith("RTX-PRO"), key
            assert m["mig"]["reset_required"] == (m["architecture"] == "ampere"), key
    required = ["A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-40GB", "A30", "H100-80GB-HBM3",
                "H100-PCIE", "H100-NVL", "H200", "GH200", "B200", "L4", "L40S", "T4", "V100-SXM2-16GB",
                "P100", "A10G", "RTX-A5000", "RTX-3090", "RTX-4090", "RTX-PRO-6000-BLACKWELL"]
    assert set(required) <= set(GPU_MODELS)


def test_model_facts():
    a100 = GPU_MODELS["A100-SXM4-40GB"]
    assert (a100["architecture"], a100["compute_capability"], a100["memory_mib"]) == ("ampere", "8.0", 40960)
    assert a100["mig"]["min_driver"] == "450.80.02"
    profiles = a100["mig"]["profiles"]
    assert {n: (p["id"], p["max"]) for n, p in profiles.items()} == {
        "1g.5gb": (19, 7), "1g.5gb+me": (20, 1), "1g.10gb": (15, 4), "2g.10gb": (14, 3),
        "3g.20gb": (9, 2), "4g.20gb": (5, 1), "7g.40gb": (0, 1)}
    assert set(GPU_MODELS["A100-SXM4-80GB"]["mig"]["profiles"]) == {
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
    a30 = GPU_MODELS["A30"]["mig"]
    assert a30["min_driver"] == "460.73.01" and a30["slices"] == 4
    assert {n: p["max"] for n, p in a30["profiles"].items() if "+" not in n} == {
        "1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}
    mins = {k: GPU_MODELS[k]["mig"]["min_driver"] for k in ("H100-80GB-HBM3", "H20", "H200", "B200", "B300")}
    assert mins == {"H100-80GB-HBM3": "525.85.12", "H20": "535.161.07", "H200": "550.90.07",
                    "B200": "570.133.20", "B300": "580.82.07"}
    assert GPU_MODELS["L4"]["mig"] is None and GPU_MODELS["T4"]["compute_capability"] == "7.5"
    assert mig_tables.mig_needs_reset("A100-SXM4-40GB") is True
    assert mig_tables.mig_needs_reset("H100-80GB-HBM3") is False
    assert mig_tables.mig_needs_reset("L4") is None


# --- kernel module flavour ------------------------------------------------------------------


def test_open_and_proprietary_support():
    assert driver_rules.open_module_supported("turing") and driver_rules.open_module_supported("Ada Lovelace")
    assert not driver_rules.open_module_supported("volta")
    assert driver_rules.proprietary_supported("volta", "580.82.07")
    assert not driver_rules.proprietary_supported("pascal", "590.48.01")  # R580 was the last for Pascal
    assert driver_rules.proprietary_supported("ampere", "590.48.01")
    assert not driver_rules.proprietary_supported("ampere", "620.10")  # removed in 620
    assert not driver_rules.proprietary_supported("blackwell", "570.172.08")
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        driver_rules.open_module_supported("kepler2")


@pytest.mark.parametrize("setting, archs, driver, expected", [
    ("auto", ["ampere", "hopper"], "570.172.08", "open"),
    ("auto", ["ampere"], "550.163.01", "proprietary"),  # R550: proprietary was still the default
    ("auto", ["ampere"], "535.104.05", "proprietary"),  # before R560 the default was proprietary
    ("auto", ["volta", "ampere"], "570.172.08", "proprietary"),
    ("auto", ["blackwell"], "550.163.01", "open"),
    ("auto", ["ampere"], "620.10", "open"),
    ("auto", [], "570.172.08", "open"),
    ("auto", [], "535.104.05", "proprietary"),
    ("proprietary", ["ada"], "570.172.08", "proprietary"),
    ("open", ["turing"], "535.104.05", "open"),
])
def test_choose_flavor(setting, archs, driver, expected):
    assert choose_flavor(setting, archs, driver) == expected


def test_choose_flavor_refusals_name_the_gpu_and_the_fix():
    with pytest.raises(ValueError) as info:
        choose_flavor("open", [("GPU 1 (Tesla V100-SXM2-16GB)", "volta")], "570.172.08")
    assert "GPU 1 (Tesla V100-SXM2-16GB)" in str(info.value) and "proprietary" in str(info.value)
    with pytest.raises(ValueError, match="pin nvidia_driver_version to a 580 driver"):
        choose_flavor("auto", [("GPU 0", "pascal")], "590.48.01")
    with pytest.raises(ValueError, match="Blackwell GPUs need the open kernel modules"):
        choose_flavor("proprietary", [("GPU 0 (NVIDIA B200)", "blackwell")], "570.172.08")
    with pytest.raises(ValueError, match="removed in 620"):
        choose_flavor("proprietary", ["ampere"], "620.10")
    with pytest.raises(ValueError, match="cannot run the open kernel modules"):
        choose_flavor("auto", [("GPU 0", "volta"), ("GPU 1", "blackwell")], "570.172.08")
    with pytest.raises(ValueError, match="nvidia_driver_flavor"):
        choose_flavor("closed", ["ampere"], "570.172.08")


# --- MIG layouts --------------------------------------------------------------------------


@pytest.mark.parametrize("model, layout", [
    ("A100-SXM4-40GB", ["1g.5gb"] * 7),
    ("A100-SXM4-40GB", ["4g.20gb", "3g.20gb"]),
    ("A100-SXM4-40GB", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]),
    ("A100-SXM4-40GB", ["2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"]),
    ("A100-SXM4-40GB", ["1g.10gb"] * 4),
    ("A100-SXM4-40GB", [9, "9"]),  # profile ids
    ("A100-SXM4-40GB", ["MIG 7g.40gb"]),
    ("A100-SXM4-40GB", []),
    ("H100-80GB-HBM3", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]),
    ("H200", ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]),  # the layout of a real H200 capture
    ("A30", ["2g.12gb", "1g.6gb", "1g.6gb"]),
    ("B200", ["3g.90gb", "4g.90gb"]),  # no profile table: syntax and slices only
])
def test_valid_mig_layouts(model, layout):
    assert mig_layout_valid(model, layout) == []


@pytest.mark.parametrize("model, layout, expected", [
    ("A100-SXM4-40GB", ["1g.6gb"], "unknown MIG profile '1g.6gb'"),
    ("A100-SXM4-40GB", ["3g.20gb"] * 3, "3g.20gb x3: A100-SXM4-40GB allows at most 2"),
    ("A100-SXM4-40GB", ["4g.20gb", "2g.10gb", "2g.10gb"], "uses 8 compute slices"),
    ("A100-SXM4-40GB", ["3g.20gb", "3g.20gb", "1g.5gb"], "does not fit"),
    ("A100-SXM4-40GB", ["1g.5gb"] * 7 + ["1g.5gb+me"], "uses 8 compute slices"),
    ("A30", ["4g.24gb", "1g.6gb"], "uses 5 compute slices, A30 has 4"),
    ("L4", ["1g.5gb"], "L4 does not support MIG"),
    ("A200", ["1g.5gb"], "unknown GPU model"),
    ("B200", ["4g.90gb", "4g.90gb"], "uses 8 compute slices"),
    ("B200", ["four"], "not a MIG profile name"),
])
def test_invalid_mig_layouts(model, layout, expected):
    problems = mig_layout_valid(model, layout)
    assert any(expected in p for p in problems), problems


# --- distro and kernel headers ---------------------------------------------------------------

OS = {
    "debian12": {"ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)"},
    "ubuntu2204": {"ID": "ubuntu", "VERSION_ID": "22.04", "ID_LIKE": "debian"},
    "ubuntu2404": {"id": "ubuntu", "version_id": "24.04"},
    "debian13": {"ID": "debian", "VERSION_ID": "13", "VERSION_CODENAME": "trixie",
                 "PRETTY_NAME": "Debian GNU/Linux 13 (trixie)"},
    "ubuntu2604": {"ID": "ubuntu", "VERSION_ID": "26.04", "VERSION_CODENAME": "resolute",
                   "PRETTY_NAME": "Ubuntu 26.04 LTS"},
    "ol9": {"ID": "ol", "VERSION_ID": "9.4", "ID_LIKE": "fedora"},
    "ol8": {"ID": "\"ol\"", "VERSION_ID": "\"8.10\""},
    "rhel9": {"ID": "rhel", "VERSION_ID": "9.5"},
    "rocky8": {"ID": "rocky", "VERSION_ID": "8.9"},
    "ol10": {"ID": "ol", "VERSION_ID": "10.0", "ID_LIKE": "fedora"},
    "rhel10": {"ID": "rhel", "VERSION_ID": "10.1"},
    "rocky10": {"ID": "rocky", "VERSION_ID": "10.0"},
    "alma9": {"ID": "almalinux", "VERSION_ID": "9.6"},
    "alma10": {"ID": "almalinux", "VERSION_ID": "10.0"},
}


@pytest.mark.parametrize("name, family, tag, major", [
    ("debian12", "debian", "debian12", 12), ("ubuntu2204", "debian", "ubuntu2204", 22),
    ("ubuntu2404", "debian", "ubuntu2404", 24), ("debian13", "debian", "debian13", 13),
    ("ubuntu2604", "debian", "ubuntu2604", 26), ("ol9", "rhel", "rhel9", 9), ("ol8", "rhel", "rhel8", 8),
    ("rhel9", "rhel", "rhel9", 9), ("rocky8", "rhel", "rhel8", 8),
    ("ol10", "rhel", "rhel10", 10), ("rhel10", "rhel", "rhel10", 10),
    ("rocky10", "rhel", "rhel10", 10), ("alma9", "rhel", "rhel9", 9),
    ("alma10", "rhel", "rhel10", 10),
])
def test_identify(name, family, tag, major):
    d = distro.identify(OS[name])
    assert (d["family"], d["distro_tag"], d["major"]) == (family, tag, major)


@pytest.mark.parametrize("os_release", [
    {"ID": "debian", "VERSION_ID": "11"}, {"ID": "ubuntu", "VERSION_ID": "20.04"},
    {"ID": "ol", "VERSION_ID": "7.9"}, {"ID": "arch"}, {},
    {"ID": "rocky", "VERSION_ID": "11.0"}, {"ID": "rhel", "VERSION_ID": "11.0"},
    {"ID": "ol", "VERSION_ID": "11.0"}, {"ID": "almalinux", "VERSION_ID": "11"},
    {"ID": "debian", "VERSION_ID": "14"}, {"ID": "ubuntu", "VERSION_ID": "25.10"},
    {"ID": "ubuntu", "VERSION_ID": "26"}, {"ID": "ubuntu", "VERSION_ID": "26.10"},
])
def test_identify_unsupported(os_release):
    with pytest.raises(ValueError, match="gpuhost supports Debian 12, Debian 13, Ubuntu 22.04, "
                                         "Ubuntu 24.04, Ubuntu 26.04, "):
        distro.identify(os_release)


@pytest.mark.parametrize("os_name, release, flavour, packages, toolset", [
    ("debian12", "6.1.0-56-amd64", "generic", ["linux-headers-6.1.0-56-amd64"], None),
    ("ubuntu2404", "6.8.0-51-generic", "generic", ["linux-headers-6.8.0-51-generic"], None),
    ("ol8", "5.15.0-307.178.5.el8uek.x86_64", "uek",   # UEK 7 on OL8: gcc 11, OL8's is 8.5
     ["kernel-uek-devel-5.15.0-307.178.5.el8uek.x86_64", "kernel-headers"], "gcc-toolset-11"),
    ("ol8", "4.18.0-553.el8_10.x86_64", "rhck",
     ["kernel-devel-4.18.0-553.el8_10.x86_64", "kernel-headers"], None),
    ("ol9", "6.12.0-100.28.2.2.el9uek.x86_64", "uek",
     ["kernel-uek-devel-6.12.0-100.28.2.2.el9uek.x86_64", "kernel-headers"], "gcc-toolset-14"),
    ("ol9", "5.15.0-300.163.18.el9uek.x86_64", "uek",
     ["kernel-uek-devel-5.15.0-300.163.18.el9uek.x86_64", "kernel-headers"], None),
    ("ol9", "5.14.0-503.11.1.el9_5.x86_64", "rhck",
     ["kernel-devel-matched-5.14.0-503.11.1.el9_5.x86_64", "kernel-headers"], None),
    # OL10: UEK 8 is built with OL10's own gcc 14: no toolset (unlike UEK 8 on OL9)
    ("ol10", "6.12.0-100.28.2.el10uek.x86_64", "uek",
     ["kernel-uek-devel-6.12.0-100.28.2.el10uek.x86_64", "kernel-headers"], None),
    ("ol10", "6.12.0-55.9.1.0.1.el10_0.x86_64", "rhck",
     ["kernel-devel-matched-6.12.0-55.9.1.0.1.el10_0.x86_64", "kernel-headers"], None),
    ("rhel10", "6.12.0-124.8.1.el10_1.x86_64", "rhck",
     ["kernel-devel-matched-6.12.0-124.8.1.el10_1.x86_64", "kernel-headers"], None),
    ("rocky10", "6.12.0-55.12.1.el10_0.x86_64", "rhck",
     ["kernel-devel-matched-6.12.0-55.12.1.el10_0.x86_64", "kernel-headers"], None),
])
def test_kernel_headers(os_name, release, flavour, packages, toolset):
    d = distro.identify(OS[os_name], release)
    assert d["kernel_flavour"] == flavour
    assert distro.headers_packages(d, release, flavour) == packages
    assert distro.headers_packages(d["distro_tag"], release) == packages
    assert distro.needs_gcc_toolset(d, release) == toolset


def test_uek_major_and_bad_releases():
    assert distro.uek_major("6.12.0-100.28.2.2.el9uek.x86_64") == 8
    assert distro.uek_major("5.15.0-307.178.5.el8uek.x86_64") == 7
    assert distro.uek_major("5.4.17-2136.330.7.1.el8uek.x86_64") == 6
    assert distro.uek_major("5.14.0-503.11.1.el9_5.x86_64") is None
    with pytest.raises(ValueError, match="unknown base 7.1"):
        distro.uek_major("7.1.0-1.el10uek.x86_64")
    with pytest.raises(ValueError, match="not a kernel release"):
        distro.headers_packages("debian12", "6.1.0; rm -rf /")
    with pytest.raises(ValueError, match="neither an EL kernel"):
        distro.kernel_flavour("6.9.1-custom", "rhel")


def test_tables_are_data_files_naming_their_source_and_date():
    import json
    from pathlib import Path

    data = Path(gpu_models.__file__).parent / "data"
    for name in ("gpu_models.json", "mig_profiles.json", "cuda_drivers.json"):
        table = json.loads((data / name).read_text())
        assert table["_source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["_date"]), name
        assert "../" not in json.dumps(table), name
    # every MIG model names a profile table that exists (or none)
    for key, m in GPU_MODELS.items():
        assert m["mig"] is None or m["mig"]["profiles"] is None or m["mig"]["profiles"] in \
            gpu_models.MIG_PROFILES.values(), key


def test_one_driver_version_pattern():
    from gpuhost import settings

    assert settings.BY_NAME["nvidia_driver_version"].check("k", "570") != []
    with pytest.raises(ValueError, match="not a driver version"):
        driver_branch("570")
    assert driver_rules.DRIVER_RE.fullmatch("570.172.08") and not driver_rules.DRIVER_RE.fullmatch("570")


def test_mig_profile_ids_and_prefixed_names_become_the_models_profile_names():
    # issue 14 item 6: [19, 19] and "MIG 1g.5gb" must compare equal to what -lgi lists
    assert mig_tables.mig_profile_names("NVIDIA A100-SXM4-40GB", [19, "19", "MIG 1g.5gb", "3G.20GB"]) == [
        "1g.5gb", "1g.5gb", "1g.5gb", "3g.20gb"]
    assert mig_tables.mig_profile_names(None, [19, "1g.5gb"]) == ["19", "1g.5gb"]


def test_the_mig_role_compares_a_layout_given_as_ids_by_name():
    from gpuhost.roles.mig import layout_names

    gpu = {"name": "NVIDIA A100-SXM4-40GB",
           "gpu_instances": [{"profile": "1g.5gb", "profile_id": 19}]}
    assert layout_names(gpu, [19, 19, 9]) == ["1g.5gb", "1g.5gb", "3g.20gb"]
    unknown = {"name": "NVIDIA X9000", "gpu_instances": [{"profile": "1g.9gb", "profile_id": 77}]}
    assert layout_names(unknown, [77, "1g.9gb"]) == ["1g.9gb", "1g.9gb"]


def test_the_mig_boot_script_creates_the_layout_only_on_gpus_without_instances():
    from gpuhost.roles.mig import BOOT_UNIT_TEXT, boot_script

    script = boot_script({"*": ["1g.10gb", "1g.10gb", "3g.40gb"]})  # mig_layout: every GPU
    assert "GPUS=all\n" in script and "*) echo 3g.40gb,1g.10gb,1g.10gb ;;" in script
    assert 'nvidia-smi mig -i "$i" -cgi "$want" -C' in script
    assert "grep -q 'MIG '" in script  # a GPU with instances is left alone
    assert "Before=docker.service containerd.service" in BOOT_UNIT_TEXT
    assert "After=systemd-modules-load.service nvidia-persistenced.service" in BOOT_UNIT_TEXT


def test_an_ampere_mode_change_stops_the_gpu_holders_and_starts_them_again():
    from pyinfra.api import StringCommand

    from gpuhost.roles.mig import around_mode_change

    text = around_mode_change([StringCommand("nvidia-smi -i 0 -mig 1")]).get_raw_value()
    stop, change, start = (text.index("systemctl stop $active"), text.index("-mig 1"),
                           text.index("systemctl start $active"))
    assert stop < change < start and "nvidia-persistenced.service" in text
    assert text.endswith("exit $rc")
