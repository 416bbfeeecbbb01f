"""Exact plans of ``nvidia_kernel_modules: distribution`` (issue 39): Ubuntu 24.04 and 26.04
hosts with Secure Boot on and no MOK take Canonical's signed modules for the running kernel
and the branch's user space without DKMS, pinned; everywhere else the setting is one line
before any change. Golden files: tests/plans/golden/signed-<scenario>.plan (regenerate with
``GPUHOST_UPDATE_PLANS=1``, then review the diff)."""

from __future__ import annotations

import os

import pytest

from tests.plans.test_el_plans import _index, _plan
from tests.plans.test_plans import GOLDEN

SIGNED = {"ubuntu2404": "580.95.05", "ubuntu2604": "595.71.05"}


def _signed(scenario: str, version: str, **extra) -> tuple:
    data = {"plan_secure_boot": True, "nvidia_kernel_modules": "distribution",
            "nvidia_driver_version": version, "plan_converged_driver": version, **extra}
    return _plan(scenario, data)


@pytest.mark.parametrize("scenario", sorted(SIGNED))
def test_signed_modules_plan_matches_golden(scenario):
    version = SIGNED[scenario]
    result, lines = _signed(scenario, version)
    assert result.returncode == 0, result.stderr[-3000:]
    golden = GOLDEN / f"signed-{scenario}.plan"
    if os.environ.get("GPUHOST_UPDATE_PLANS"):
        golden.write_text(result.stdout)
    assert lines == golden.read_text().splitlines()
    branch = version.split(".")[0]
    kernel = {"ubuntu2404": "6.8.0-51-generic", "ubuntu2604": "7.0.0-12-generic"}[scenario]
    pin = lines.index("upload /etc/apt/preferences.d/gpuhost-nvidia-driver.gpuhost-new")
    install = _index(lines, f"install --no-install-recommends linux-modules-nvidia-{branch}-"
                            f"server-open-{kernel} nvidia-headless-no-dkms-{branch}-server-open "
                            f"nvidia-utils-{branch}-server")
    assert pin < install
    text = "\n".join(lines).replace("no-dkms", "")
    # no NVIDIA repository, no DKMS, no headers, no MOK, nothing failing
    for absent in ("dkms ", "dkms_", "linux-headers", "mok", "local-repo", "gpuhost-nvidia-driver.sources",
                   "nvidia-driver-pinning", "FAILED", "verification failed"):
        assert absent not in text.lower(), absent


def test_the_pin_holds_canonicals_user_space_at_the_driver_version_not_the_kernel_packages():
    from gpuhost import signed_modules

    pin = signed_modules.apt_pin("ubuntu2604", "595.71.05")
    assert "Pin: version 595.71.05-0ubuntu0.26.04.*\n" in pin
    import re

    regex = re.compile(signed_modules.pin_regex("595.71.05"))
    for name in ("nvidia-headless-no-dkms-595-server-open", "nvidia-utils-595-server",
                 "nvidia-kernel-common-595-server", "libnvidia-compute-595-server",
                 "nvidia-compute-utils-595-server"):
        assert regex.search(name), name
    for name in ("linux-modules-nvidia-595-server-open-7.0.0-12-generic",
                 "nvidia-utils-580-server", "nvidia-container-toolkit", "libnvidia-container1"):
        assert not regex.search(name), name


def test_dkms_under_secure_boot_without_a_mok_is_refused_naming_the_distribution_way():
    result, lines = _plan("ubuntu2404", {"plan_secure_boot": True})
    commands = [line for line in lines if not line.startswith("FAILED")]
    assert len(commands) == 1, commands
    assert "nvidia_kernel_modules: distribution" in commands[0]


@pytest.mark.parametrize("scenario,version,extra,said", [
    ("debian13", "590.48.01", {}, "debian13 has no distribution-signed NVIDIA modules "
     "(signed NVIDIA modules come only with Ubuntu 22.04, 24.04, 26.04;"),
    ("ol10-uek8", "580.95.05", {}, "rhel10 has no distribution-signed NVIDIA modules"),
    ("ubuntu2604", "590.48.01", {}, "no signed modules of branch 590 for Ubuntu 26.04: "
     "Canonical builds branches 580, 595, 615 (-server-open) for Ubuntu 26.04;"),
    ("ubuntu2404", "580.95.05", {"nvidia_fabric": "nvl", "nvidia_imex_peers": ["10.0.0.1"]},
     "does not install Fabric Manager or IMEX yet"),
])
def test_signed_modules_where_there_are_none_is_one_line_before_any_change(
        scenario, version, extra, said):
    result, lines = _plan(scenario, {"nvidia_kernel_modules": "distribution",
                                     "nvidia_driver_version": version, **extra})
    commands = [line for line in lines if not line.startswith("FAILED")]
    assert len(commands) == 1, commands  # the failing line, nothing else
    assert commands[0].startswith(f"echo 'gpuhost: @fake/{scenario}: "), commands[0]
    assert said in commands[0], commands[0]


def test_signed_modules_with_the_proprietary_flavour_is_refused_by_the_settings():
    result, lines = _plan("ubuntu2404", {"nvidia_kernel_modules": "distribution",
                                         "nvidia_driver_flavor": "proprietary"})
    assert result.returncode != 0
    assert result.stdout.strip() == "", result.stdout
    assert "nvidia_kernel_modules: distribution installs the distribution's open signed " \
           "modules" in result.stderr
