"""GPUs read from PCI ids alone, on hosts without lspci or whose pci.ids is too old (issue 13
item 3, issue 22), over real SSH: a V100 PCIe host without pciutils converges with the
proprietary modules (its ids come from /sys/bus/pci/devices, NVIDIA's supported-gpus.json
says its last branch is R580), and a B200 host whose lspci cannot name its GPU (10de:2901,
pci.ids too old) converges from bare with `nvidia_driver_flavor: auto` and the open modules
(gpuhost's table knows the id; before issue 22 it stopped there). A GPU that no table and
no rule of the device numbering knows stops before any change: tests/plans/test_plans.py
(the exact plan is one refusal). The traits themselves are shown in effect by
sandbox/tests/test_traits_gpus.py."""
from __future__ import annotations

import pytest

from sandbox.tests.test_traits_gpus import OVERRIDES
from tests.support import default_driver

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, overrides=OVERRIDES, state="bare",
                                why="what a fresh host of an unknown GPU class does is the point")]
LIMIT = ("--limit", "gpu-01", "--limit", "gpu-02")


def gpus(ssh, host: str) -> list[dict]:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    out = ssh(host, build_script(ALL_SECTIONS)).stdout
    return assemble.host_state(parsers.split_sections(out))["gpus"]


@pytest.fixture(scope="module")
def runs(fleet, ssh, pyinfra):
    before = {name: gpus(ssh, name) for name in ("gpu-01", "gpu-02")}
    first = pyinfra("-y", "deploys/gpu_host.py", *LIMIT, check=False, timeout=1800)
    second = pyinfra("-y", "deploys/gpu_host.py", *LIMIT, "--data", "full_check=true", check=False, timeout=900)
    return {"before": before, "first": first.stdout + first.stderr, "second": second}


def test_the_facts_see_both_hosts_gpus_without_lspci_or_names(runs):
    v100 = runs["before"]["gpu-01"]
    assert [(g["name"], g["pci_device_id"], g["generation"], g["source"]) for g in v100] == [
        ("Tesla V100-PCIE-16GB", "1db4", "pre-turing", "sysfs")] * 2
    (b200,) = runs["before"]["gpu-02"]
    assert (b200["name"], b200["pci_device_id"], b200["classified_by"], b200["generation"],
            b200["source"]) == ("NVIDIA B200", "2901", "gpu_models", "turing-or-newer", "sysfs")


def test_the_b200_host_whose_lspci_cannot_name_it_converges_with_the_open_modules(runs, ssh):
    version = ssh("gpu-02", "cat /proc/driver/nvidia/version").stdout
    assert default_driver() in version and "Open Kernel Module" in version, (
        version, runs["first"][-3000:])
    assert ssh("gpu-02", "nvidia-smi -L").stdout.startswith("GPU 0: NVIDIA B200")
    assert "10de:2901" in ssh("gpu-02", "lspci -nn -d 10de:").stdout  # still unnamed there


def test_the_v100_host_without_lspci_converges_proprietary_and_stays_converged(runs, ssh):
    version = ssh("gpu-01", "cat /proc/driver/nvidia/version").stdout
    assert default_driver() in version and "Open Kernel Module" not in version, version
    assert ssh("gpu-01", "nvidia-smi -L").stdout.count("Tesla V100-PCIE-16GB") == 2
    # gpu-01 is a debian12 host: Debian's name of the proprietary module package
    assert ssh("gpu-01", "dpkg-query -W -f '${Status}' nvidia-kernel-dkms").stdout.endswith(
        "installed")
    second = runs["second"].totals
    assert second["changed"] == 0 and second["error"] == 0, runs["second"].output[-3000:]
    assert runs["second"].hosts_that_ran() == {"gpu-01", "gpu-02"}
