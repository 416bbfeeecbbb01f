"""GPU health faults of the simulator shown on booted sandbox hosts over real SSH (issue 15,
item 7): each fault through `nvidia-smi -q -x` (read as parser-contract.md "Health fields"
says, sandbox/tests/smi_health.py) and each Xid/SXid through the host's `dmesg`.

The hosts get the fake driver's own nvidia-smi (the nvidia-utils package built by
sandbox.nvidia.build, installed with dpkg from its local repo) and a module "built" for the
running kernel, then `modprobe nvidia`: no deploy, so the faults are seen as gpusim makes
them. Bare hosts of SPEC (below).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from sandbox.tests import smi_health

VERSION = "570.172.08"
OUT = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                                os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
LOCAL_REPO = OUT / "local-repos" / VERSION / f"nvidia-driver-local-repo-debian12-{VERSION}_1.0-1_amd64.deb"
# gpu-01: an HGX H100 (8 GPUs, 4 NVSwitches) with two faults of its spec: a row remapping
# failure (kept in the GPU) and an Xid 79 armed for the first driver load; gpu-02: two V100
# SXM2 (pre-Ampere: page retirement) with two retired pages.
SPEC = {"hosts": 2, "ol": 0, "docker_hosts": 0, "overrides": {
    "gpu-01": {"gpu_model": "H100-80GB-HBM3", "gpu_count": 8, "nvswitch": True,
               "faults": ["fault set row_remap_failure --gpu 6", "xid 79 --gpu 1 --next-load"]},
    "gpu-02": {"gpu_model": "V100-SXM2-16GB", "gpu_count": 2, "nvswitch": False,
               "faults": ["fault set retired_pages 2 --gpu 0"]}}}
pytestmark = [pytest.mark.integration, pytest.mark.fleet(**SPEC, state="bare")]
FLAVOR = {"gpu-01": "open", "gpu-02": "proprietary"}
H100_BUS = ["18:00", "2A:00", "3A:00", "5D:00", "9A:00", "AB:00", "BA:00", "DB:00"]


@pytest.fixture(scope="module")
def fleet(fleet):
    if not LOCAL_REPO.is_file():
        pytest.fail(f"{LOCAL_REPO} is missing: run `python -m sandbox.nvidia.build` first")
    return fleet


@pytest.fixture(scope="module")
def ssh(fleet, sandbox_tools):
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw)


def _copy(fleet, name, src: Path, dest: str) -> None:
    h = next(h for h in fleet["hosts"] if h["name"] == name)
    subprocess.run(["ssh", "-i", fleet["ssh_key"], "-p", str(h["port"]),
                    "-o", f"UserKnownHostsFile={fleet['known_hosts']}", "-o", "BatchMode=yes",
                    "-o", "LogLevel=ERROR", f"root@{h['address']}", f"cat > {dest}"],
                   input=src.read_bytes(), check=True, timeout=60)


@pytest.fixture(scope="module")
def driver(fleet, ssh):
    """The fake driver's nvidia-utils (nvidia-smi + the simulator) from its local repo, a
    module for the running kernel and the user-space version file, then modprobe nvidia."""
    for name, flavor in FLAVOR.items():
        _copy(fleet, name, LOCAL_REPO, "/tmp/local-repo.deb")
        ssh(name, "dpkg -i /tmp/local-repo.deb >/dev/null && dpkg -i "
                  f"/var/nvidia-driver-local-repo-debian12-{VERSION}/nvidia-smi_*.deb "
                  f"/var/nvidia-driver-local-repo-debian12-{VERSION}/libnvidia-ml1_*.deb >/dev/null")
        ssh(name, "m=/lib/modules/$(uname -r)/updates/dkms; mkdir -p $m && printf "
                  f"'gpusim-module version={VERSION} flavor={flavor} kernel=%s\\n' $(uname -r) "
                  f"> $m/nvidia.ko && printf '{{\"version\": \"{VERSION}\", \"flavor\": \"{flavor}\"}}\\n'"
                  " > /usr/lib/gpusim/userspace.json && modprobe nvidia")
    # the HGX host's fabric registers once Fabric Manager of the driver's version runs
    # (sandbox/nvidia/README.md, "Fabric Manager"): its binary from the same local repo
    ssh("gpu-01", f"dpkg-deb -x /var/nvidia-driver-local-repo-debian12-{VERSION}/"
                  "nvidia-fabricmanager-570_*.deb /tmp/fm && "
                  "/tmp/fm/usr/bin/nv-fabricmanager -c /tmp/fm/usr/share/nvidia/nvswitch/fabricmanager.cfg")
    return ssh


def health(ssh, name):
    return smi_health.healths(ssh(name, "nvidia-smi -q -x").stdout)


def test_hosts_have_no_kernel_log_of_their_own_and_dmesg_is_the_simulators(fleet, ssh):
    for name in FLAVOR:
        assert ssh(name, "test -e /dev/kmsg", check=False).returncode == 1
        journal = ssh(name, "journalctl -k -b --no-pager -q", check=False)
        assert journal.stdout.strip() == "", journal.stdout
        real = ssh(name, "/usr/bin/dmesg", check=False)  # util-linux's, no kernel buffer here
        assert real.returncode != 0 and "dmesg:" in real.stderr, (real.stdout, real.stderr)
        assert ssh(name, "command -v dmesg").stdout.strip() == "/usr/local/bin/dmesg"
        assert ssh(name, "dmesg").stdout == ""   # nothing loaded yet: an empty buffer


def test_the_driver_load_logs_and_the_spec_faults_are_in_effect(driver):
    log = driver("gpu-01", "dmesg").stdout
    assert re.search(r"^\[ *\d+\.\d{6}\] NVRM: loading NVIDIA UNIX Open Kernel Module for "
                     rf"x86_64  {VERSION}  Release Build ", log, re.M), log
    # armed by the spec for the first load: the Xid 79 line, after the load line
    assert re.search(r"^\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:2a:00\): 79, pid='<unknown>', "
                     r"name=<unknown>, GPU has fallen off the bus\.$", log, re.M), log
    h = health(driver, "gpu-01")
    assert h["00000000:BA:00.0"]["remapped_rows_failure"] is True
    assert [g["remapped_rows_failure"] for g in h.values()].count(True) == 1
    assert {g["fabric_state"] for g in h.values()} == {"Completed"}
    v100 = driver("gpu-02", "dmesg -t").stdout.splitlines()
    assert v100[:3] == ["nvidia: loading out-of-tree module taints kernel.",
                        "nvidia: module license 'NVIDIA' taints kernel.",
                        "Disabling lock debugging due to kernel taint"]
    assert v100[3].startswith(f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {VERSION}  ")
    assert [g["retired_pages_double_bit"] for g in health(driver, "gpu-02").values()] == [2, 0]


def test_each_fault_shows_in_nvidia_smi_xml_over_ssh(driver):
    for fault in ("ecc_volatile_uncorrectable 2 --gpu 0", "row_remap_pending --gpu 2",
                  "pcie_degraded 8 --gpu 3", "throttle hw_thermal_slowdown,sw_power_cap --gpu 4",
                  "fabric_in_progress --gpu 5", "gpu_missing --gpu 7"):
        driver("gpu-01", f"gpusim fault set {fault}")
    driver("gpu-01", "nvidia-smi -pm 1 && nvidia-smi -i 0 -pm 0")  # persistence off on GPU 0
    h = health(driver, "gpu-01")
    bus = {b: f"00000000:{b}.0" for b in H100_BUS}
    assert bus["DB:00"] not in h and len(h) == 7                  # missing from nvidia-smi ...
    assert "db:00.0" in driver("gpu-01", "lspci -d 10de:").stdout   # ... but on the PCI bus
    assert "0x2330" in driver("gpu-01", "cat /sys/bus/pci/devices/0000:db:00.0/device").stdout
    assert (h[bus["18:00"]]["ecc_volatile_uncorrectable"],
            h[bus["18:00"]]["ecc_aggregate_uncorrectable"]) == (2, 2)
    assert (h[bus["3A:00"]]["remapped_rows_pending"],
            h[bus["3A:00"]]["remapped_rows_uncorrectable"]) == (True, 1)
    assert (h[bus["5D:00"]]["pcie_width_current"], h[bus["5D:00"]]["pcie_width_max"]) == (8, 16)
    assert h[bus["9A:00"]]["throttle_reasons_active"] == ["hw_slowdown", "hw_thermal_slowdown",
                                                          "sw_power_cap"]
    assert h[bus["AB:00"]]["fabric_state"] == "In Progress"
    xml = driver("gpu-01", "nvidia-smi -q -x").stdout
    assert "<attached_gpus>7</attached_gpus>" in xml
    modes = re.findall(r"<persistence_mode>(\w+)</persistence_mode>", xml)
    assert modes == ["Disabled"] + ["Enabled"] * 6
    # pre-Ampere: page retirement pending until the driver reloads
    driver("gpu-02", "gpusim fault set retired_pages_pending --gpu 1")
    v = list(health(driver, "gpu-02").values())
    assert (v[1]["retired_pages_pending"], v[1]["retired_pages_double_bit"]) == (True, 1)
    assert v[0]["remapped_rows_pending"] is None                   # no row remapper on Volta


def test_xids_and_sxids_land_in_dmesg(driver):
    driver("gpu-01", "gpusim xid 13 --gpu 4 --pid 4242 --name python3 --text "
                     "'Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address'")
    driver("gpu-01", "gpusim sxid 12028 --switch 1")
    lines = driver("gpu-01", "dmesg").stdout.splitlines()
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:9a:00\): 13, pid=4242, "
                        r"name=python3, Graphics SM Warp Exception on \(GPC 0, TPC 0, SM 0\): "
                        r"Out Of Range Address", lines[-2]), lines[-2:]
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] nvidia-nvswitch1: SXid \(PCI:0000:c5:00\.0\): 12028, "
                        r"Non-fatal, Link 32 egress non-posted PRIV error \(First\)", lines[-1])
    assert re.fullmatch(r"\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\] nvidia-nvswitch1: SXid .*",
                        driver("gpu-01", "dmesg -T").stdout.splitlines()[-1])
    assert driver("gpu-01", "dmesg | grep -cE 'NVRM: Xid|SXid'").stdout.strip() == "3"


def test_a_lost_gpu_and_what_a_reboot_clears(driver, sandbox_tools, fleet):
    driver("gpu-01", "gpusim fault set gpu_lost --gpu 6")
    lost = driver("gpu-01", "nvidia-smi -q -x", check=False)
    assert lost.returncode == 15 and lost.stdout.startswith(
        "Unable to determine the device handle for GPU0000:BA:00.0: GPU is lost.")
    assert "NVRM: Xid (PCI:0000:ba:00): 79," in driver("gpu-01", "dmesg").stdout
    boots = sandbox_tools.boots("gpu-01")
    driver("gpu-01", "(sleep 1; systemctl reboot) >/dev/null 2>&1 </dev/null &")
    sandbox_tools.wait_for_reboot(fleet, "gpu-01", boots, timeout=180)
    log = driver("gpu-01", "dmesg").stdout
    assert "Xid" not in log and "SXid" not in log                 # the kernel log is per boot
    assert "NVRM: GPU 0000:db:00.0: RmInitAdapter failed!" in log  # fails again at this load
    h = health(driver, "gpu-01")
    bus = lambda b: f"00000000:{b}.0"  # noqa: E731
    assert len(h) == 7 and bus("BA:00") in h                       # back on the bus ...
    assert h[bus("BA:00")]["remapped_rows_failure"] is True        # ... with its failed remap
    assert h[bus("18:00")]["ecc_volatile_uncorrectable"] == 0      # volatile: since the load
    assert h[bus("18:00")]["ecc_aggregate_uncorrectable"] == 2
    assert (h[bus("3A:00")]["remapped_rows_pending"],
            h[bus("3A:00")]["remapped_rows_uncorrectable"]) == (False, 1)
    assert h[bus("5D:00")]["pcie_width_current"] == 8               # hardware stays
