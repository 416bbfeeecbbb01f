"""The upgrade's pure decisions shared with the install role (gpuhost.upgrade.reboot, gpuhost.upgrade)."""

from __future__ import annotations

import pytest

from gpuhost import upgrade
from gpuhost.upgrade.reboot import needs_reboot

TARGET = "570.172.08"


def driver(state, loaded=None):
    return {"state": state, "loaded_version": loaded}


@pytest.mark.parametrize(("fact", "expected"), [
    (driver("loaded", TARGET), False),                 # the target answers
    (driver("loaded", "550.163.01"), True),            # the old module is still loaded
    (driver("installed_not_loaded"), True),            # nothing loaded (nouveau may hold the GPU)
    (driver("library_mismatch", TARGET), True),        # user space and module disagree
    (driver("library_mismatch", "550.163.01"), True),
    (driver("not_installed"), False),                  # a reboot cannot load what is not there
])
def test_one_meaning_of_reboot_needed(fact, expected):
    assert needs_reboot(fact, TARGET) is expected


def test_refusal_lists_every_problem_of_every_host_by_name():
    plans = [{"host": "gpu-02", "problems": ["b"]}, {"host": "gpu-01", "problems": ["a1", "a2"]},
             {"host": "gpu-03", "problems": []}]
    assert upgrade.refusal(plans) == (
        "driver upgrade refused, nothing was changed on any host:\n"
        "  gpu-01: a1\n  gpu-01: a2\n  gpu-02: b")
    assert upgrade.refusal([{"host": "gpu-03", "problems": []}]) is None


def test_old_packages_are_the_other_branch_and_the_other_flavours_meta_packages():
    installed = ["cuda-drivers-550", "nvidia-dkms-550", "nvidia-open-570", "nvidia-open",
                 "libnvidia-compute-570", "cuda-drivers"]
    wanted = ["nvidia-open-570"]
    assert upgrade.old_packages(installed, TARGET, "open", wanted) == [
        "cuda-drivers", "cuda-drivers-550", "nvidia-dkms-550"]
    assert upgrade.old_packages(installed, TARGET, "proprietary", ["cuda-drivers-570"]) == [
        "cuda-drivers-550", "nvidia-dkms-550", "nvidia-open", "nvidia-open-570"]
