"""NVIDIA's Debian packages carry Debian's names (nvidia-graphics-drivers and
nvidia-open-gpu-kernel-modules packaging, packages.debian.org for bookworm: nvidia-kernel-dkms,
nvidia-open-kernel-dkms, libcuda1, nvidia-smi, firmware-nvidia-gsp, libnvidia-ml1, ...;
the same names NVIDIA's Debian repository serves, e.g. `libcuda1=550.163.01-2`). The apt pin
gpuhost writes and the driver fact must cover them, and still leave the container
toolkit (its own version line) alone. issue 13 item 8."""
from __future__ import annotations

import re

import pytest

from gpuhost.facts import assemble
from gpuhost import packages

from gpuhost.facts.script import SECTIONS


def host(**sections: tuple[int, str]) -> dict:
    """Sections as the fact script's split gives them (tests/unit/test_fact_state.py)."""
    result = {name: {"rc": 127, "out": ""} for name in SECTIONS}
    for name in ("proc_version", "daemon_json", "headers_build"):
        result[name] = {"rc": 3, "out": ""}
    for name, (rc, out) in sections.items():
        result[name] = {"rc": rc, "out": out}
    return result

DEBIAN_STYLE = [
    "nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-kernel-support",
    "nvidia-open-kernel-support", "libcuda1", "nvidia-smi", "firmware-nvidia-gsp",
    "libnvidia-ml1", "libnvidia-ptxjitcompiler1", "libnvidia-pkcs11-openssl3",
    "libnvidia-nvvm4", "nvidia-driver", "nvidia-driver-libs", "nvidia-persistenced",
    "nvidia-alternative", "libnvidia-cfg1", "nvidia-kernel-source",
]
UBUNTU_STYLE = ["nvidia-open-570", "cuda-drivers-570", "nvidia-dkms-570-open", "nvidia-utils-570",
                "libnvidia-compute-570", "nvidia-kernel-common-570", "nvidia-fabricmanager-570",
                # the branch's companions at the driver's version (before and after 590's names)
                "nvidia-imex-570", "libnvsdm-570", "libnvidia-nscq-570", "nvidia-imex", "libnvsdm"]
TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base",
           "libnvidia-container-tools", "libnvidia-container1"]


def pinned(name: str) -> bool:
    # apt matches /regex/ package names with POSIX extended regexps; this one uses only
    # ERE constructs, so Python's re gives the same answer
    return re.search(packages.DRIVER_PACKAGE_REGEX, name) is not None


@pytest.mark.parametrize("name", DEBIAN_STYLE + UBUNTU_STYLE)
def test_the_apt_pin_covers_the_drivers_packages_under_both_naming_schemes(name):
    assert pinned(name)


@pytest.mark.parametrize("name", TOOLKIT + ["nvidia-container-runtime"])
def test_the_apt_pin_leaves_the_toolkit_alone(name):
    assert not pinned(name)


def test_the_pin_regex_is_posix_ere_only():
    assert "(?" not in packages.DRIVER_PACKAGE_REGEX and "\\d" not in packages.DRIVER_PACKAGE_REGEX


def test_the_driver_fact_sees_an_open_driver_installed_with_debian_names():
    dpkg = "".join(f"{name}\t570.172.08-1\tii \n" for name in (
        "nvidia-open-kernel-dkms", "nvidia-open-kernel-support", "libcuda1", "nvidia-smi",
        "firmware-nvidia-gsp", "nvidia-driver-libs"))
    dpkg += "nvidia-container-toolkit\t1.17.8-1\tii \n"
    driver = assemble.driver_state(host(dpkg=(0, dpkg)))
    assert set(driver["packages"]) == {"nvidia-open-kernel-dkms", "nvidia-open-kernel-support",
                                       "libcuda1", "nvidia-smi", "firmware-nvidia-gsp",
                                       "nvidia-driver-libs"}
    assert driver["installed_version"] == "570.172.08"
    assert driver["installed_flavor"] == "open"


def test_the_driver_fact_sees_a_proprietary_driver_with_debian_names():
    dpkg = "nvidia-kernel-dkms\t570.172.08-1\tii \nlibcuda1\t570.172.08-1\tii \n"
    driver = assemble.driver_state(host(dpkg=(0, dpkg)))
    assert driver["installed_flavor"] == "proprietary"
    assert driver["installed_version"] == "570.172.08"


def test_the_fact_script_lists_libcuda1_and_the_gsp_firmware():
    assert "libcuda" in SECTIONS["dpkg"] and "firmware-nvidia" in SECTIONS["dpkg"]


# --- issue 23 item 5: what gpuhost installs on Debian 12, and the DKMS names it counts -----

@pytest.mark.parametrize("version", ["550.163.01", "570.172.08", "580.95.05"])
def test_debian12_installs_the_unversioned_meta_package_before_590(version):
    """NVIDIA's debian12 repos carry Debian's packaging: no nvidia-open-<branch>; the local repo
    holds one version and gpuhost's apt pin holds it (docs/real-hosts.md)."""
    assert packages.driver_packages("debian12", version, "open", False) == ["nvidia-open", "nvidia-smi"]
    assert packages.driver_packages("debian12", version, "proprietary", False) == [
        "cuda-drivers", "nvidia-smi"]


@pytest.mark.parametrize("version", ["595.71.05", "620.70.06"])
def test_debian12_installs_the_pinning_package_first_from_590(version):
    branch = version.split(".")[0]
    assert packages.driver_packages("debian12", version, "open", False) == [
        f"nvidia-driver-pinning-{branch}", "nvidia-open", "nvidia-smi"]


def test_ubuntu_keeps_its_branched_names_before_590():
    assert packages.driver_packages("ubuntu2404", "570.172.08", "open", False) == ["nvidia-open-570"]
    assert packages.driver_packages("ubuntu2204", "595.71.05", "proprietary", False) == [
        "nvidia-driver-pinning-595", "cuda-drivers"]


@pytest.mark.parametrize("name", [
    # NVIDIA's Debian-style names (field dpkg -l of its repo: nvidia-kernel-open-dkms,
    # nvidia-driver-cuda) and the rest of Debian's driver closure an Azure image pins
    "nvidia-kernel-open-dkms", "nvidia-driver-cuda", "nvidia-xconfig", "nvidia-egl-icd",
    "nvidia-vulkan-icd", "nvidia-opencl-icd", "nvidia-vdpau-driver", "libcudadebugger1",
    "libnvcuvid1", "libnvoptix1", "libgl1-nvidia-glvnd-glx", "libglx-nvidia0", "libegl-nvidia0",
    "libgles-nvidia2", "nvidia-suspend-common"])
def test_the_apt_pin_covers_debians_whole_driver_closure(name):
    assert pinned(name)


@pytest.mark.parametrize("name", ["nvidia-support", "glx-alternative-nvidia",
                                  "nvidia-installer-cleanup"])
def test_the_apt_pin_leaves_debians_version_independent_contrib_packages_alone(name):
    # Debian's contrib helpers have their own versions (nvidia-support 20220217+3)
    assert not pinned(name)


def test_the_driver_fact_sees_nvidias_open_module_package_on_debian12():
    dpkg = "".join(f"{name}\t580.95.05-1\tii \n" for name in (
        "nvidia-open", "nvidia-kernel-open-dkms", "nvidia-kernel-support", "nvidia-driver-cuda",
        "libcuda1", "nvidia-smi"))
    driver = assemble.driver_state(host(dpkg=(0, dpkg)))
    assert "nvidia-kernel-open-dkms" in driver["packages"]
    assert driver["installed_flavor"] == "open"
    assert driver["installed_version"] == "580.95.05"


@pytest.mark.parametrize("module", ["nvidia", "nvidia-current", "nvidia-current-open",
                                    "nvidia-open"])
def test_the_dkms_check_counts_every_name_the_nvidia_module_is_registered_under(module):
    """Debian's own packaging registers nvidia-current / nvidia-current-open; the next boot's
    module must be seen under those names too (boot.next_boot_module, the reboot gate)."""
    from gpuhost.dkms_names import is_nvidia_module
    from gpuhost import boot
    assert is_nvidia_module(module)
    assert boot.dkms_builds_nvidia({"dkms": [{"module": module, "version": "580.95.05",
                                               "kernel": "6.1.0-56-amd64",
                                               "status": "installed"}]})


@pytest.mark.parametrize("module", ["nvidia-fs", "gdrdrv", "nvidia-peermem", "nvidia-current-x"])
def test_the_dkms_check_ignores_other_modules(module):
    from gpuhost.dkms_names import is_nvidia_module
    assert not is_nvidia_module(module)


@pytest.mark.parametrize("line, seen", [
    ("nvidia-current/535.247.01, 6.1.0-56-amd64, x86_64: installed", ["535.247.01"]),
    ("nvidia-current-open/535.247.01, 6.1.0-56-amd64, x86_64: installed", ["535.247.01"]),
    ("nvidia/580.95.05, 6.1.0-56-amd64, x86_64: installed", ["580.95.05"]),
    ("nvidia-fs/2.26.6, 6.1.0-56-amd64, x86_64: installed", []),
])
def test_the_next_boots_module_is_read_under_debians_dkms_names(line, seen):
    """A `reboot_policy: when_needed` run refused the reboot ("DKMS did not install the NVIDIA
    module") when Debian's packaging had registered it as nvidia-current(-open)."""
    from tests.unit.test_boot_safety import _sections
    k = assemble.kernel_state(_sections("", line + "\n"))
    assert k["next_boot"]["nvidia_module"] == seen
