"""NVIDIA's Debian packages carry Debian's names (nvidia-graphics-drivers and
nvidia-open-gpu-kernel-modules packaging, packages.debian.org for bookworm: nvidia-kernel-dkms,
nvidia-open-kernel-dkms, libcuda1, nvidia-smi, firmware-nvidia-gsp, libnvidia-ml1, ...;
the same names NVIDIA's Debian repository serves, e.g. `libcuda1=550.163.01-2`). The apt pin
gpuhost writes and the driver fact must cover them, and still leave the container
toolkit (its own version line) alone. issue 13 item 8."""
from __future__ import annotations

import re

import pytest

from facts import assemble
from gpuhost import packages

from facts.script import SECTIONS


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
