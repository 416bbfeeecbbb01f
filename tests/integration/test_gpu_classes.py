"""GPUs the product's table does not know, on hosts without lspci (issue 13 item 3), over real
SSH: a V100 PCIe host without pciutils converges with the proprietary modules (its ids come
from /sys/bus/pci/devices, NVIDIA's supported-gpus.json says pre-Turing), and a host whose
GPU nobody's table knows (B200, 10de:2901, pci.ids too old) stops before any change with a
message naming the PCI id and the setting. The traits themselves are shown in effect by
sandbox/tests/test_traits_gpus.py."""
from __future__ import annotations

import pytest

from sandbox.tests.test_traits_gpus import OVERRIDES

pytestmark = pytest.mark.integration
LIMIT = ("--limit", "gpu-01", "--limit", "gpu-02")


def totals(output: str) -> dict[str, int]:
    for line in output.splitlines():
        if "Grand total" in line:
            cells = [0 if c == "-" else int(c) for c in line.split("Grand total", 1)[1].split()]
            return dict(zip(("operations", "changed", "error", "no_change"), cells, strict=True))
    raise AssertionError(f"no Grand total in pyinfra's output:\n{output[-3000:]}")


def gpus(ssh, host: str) -> list[dict]:
    from facts import assemble, parsers
    from facts.script import ALL_SECTIONS, build_script

    out = ssh(host, build_script(ALL_SECTIONS)).stdout
    return assemble.host_state(parsers.split_sections(out))["gpus"]


@pytest.fixture(scope="module")
def runs(fleet, sandbox_tools, sandbox_spec, ssh, pyinfra):
    wanted = {**sandbox_spec, "hosts": 4, "ol": 2, "overrides": OVERRIDES}
    sandbox_tools.cli("down")  # bare hosts
    sandbox_tools.cli(*sandbox_tools.up_args(wanted))
    before = {name: gpus(ssh, name) for name in ("gpu-01", "gpu-02")}
    first = pyinfra("-y", "deploys/gpu_host.py", *LIMIT, check=False, timeout=1800)
    second = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-01", check=False, timeout=900)
    yield {"before": before, "first": first.stdout + first.stderr,
           "second": second.stdout + second.stderr}
    sandbox_tools.cli("down")
    sandbox_tools.cli(*sandbox_tools.up_args(sandbox_spec))


def test_the_facts_see_both_hosts_gpus_without_lspci_or_names(runs):
    v100 = runs["before"]["gpu-01"]
    assert [(g["name"], g["pci_device_id"], g["generation"], g["source"]) for g in v100] == [
        ("Tesla V100-PCIE-16GB", "1db4", "pre-turing", "sysfs")] * 2
    (b200,) = runs["before"]["gpu-02"]
    assert (b200["name"], b200["classified_by"], b200["generation"]) == (
        "NVIDIA device 10de:2901", None, None)


def test_the_unknown_gpu_host_stops_before_any_change_naming_the_pci_id(runs, ssh):
    out = runs["first"]
    assert "gpu-02: GPU 0 (unknown model, PCI id 10de:2901) is in neither" in out, out[-3000:]
    assert "set nvidia_driver_flavor to 'open'" in out
    listed = ssh("gpu-02", "dpkg-query -W -f '${Package}\\n' 'nvidia*' 2>/dev/null; "
                 "ls /etc/apt/sources.list.d /var/cache/gpuhost 2>&1", check=False).stdout
    assert "nvidia" not in listed, listed


def test_the_v100_host_without_lspci_converges_proprietary_and_stays_converged(runs, ssh):
    version = ssh("gpu-01", "cat /proc/driver/nvidia/version").stdout
    assert "570.172.08" in version and "Open Kernel Module" not in version, version
    assert ssh("gpu-01", "nvidia-smi -L").stdout.count("Tesla V100-PCIE-16GB") == 2
    assert ssh("gpu-01", "dpkg-query -W -f '${Status}' nvidia-dkms-570").stdout.endswith(
        "installed")
    second = totals(runs["second"])
    assert second["changed"] == 0 and second["error"] == 0, runs["second"][-3000:]
