"""Exact command plans of deploys/gpu_host.py for every supported OS (pyinfra's @fake connector).

Each scenario is a bare host (tests/plans/scenarios.py). The plan is compared line by line
with tests/plans/golden/<scenario>.plan; after an intended change, regenerate with
``GPUHOST_UPDATE_PLANS=1 .venv/bin/python -m pytest tests/plans`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOLDEN = HERE / "golden"
SCENARIOS = ["ol8-uek", "ol8-rhck", "ol9-uek8", "ol9-rhck", "ol10-uek8", "ol10-rhck", "rhel8",
             "rhel9", "rhel10", "rocky8", "rocky9", "rocky10", "alma8", "alma9", "alma10",
             "ubuntu2204", "ubuntu2404", "ubuntu2604", "debian12", "debian13"]


def run_plan(scenario: str, extra: dict | None = None, deploy: str = "deploys/gpu_host.py"):
    env = dict(os.environ, GPUHOST_PLAN_DATA=json.dumps(extra or {}), PYINFRA_PROGRESS="off")
    return plan_runner.run(
        [sys.executable, str(HERE / "harness.py"), scenario, deploy],
        cwd=ROOT, env=env, timeout=120,
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_plan_matches_golden(scenario):
    result = run_plan(scenario)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    golden = GOLDEN / f"{scenario}.plan"
    if os.environ.get("GPUHOST_UPDATE_PLANS"):
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(result.stdout)
    assert lines == golden.read_text().splitlines()
    assert not any(line.startswith("FAILED") for line in lines)


def test_plans_differ_where_the_distributions_differ():
    plans = {s: (GOLDEN / f"{s}.plan").read_text() for s in SCENARIOS}
    assert "kernel-uek-devel-5.15.0-307.178.5.el8uek.x86_64" in plans["ol8-uek"]
    assert "gcc-toolset-14" in plans["ol9-uek8"] and "gcc-toolset-14" not in plans["ol8-uek"]
    assert "kernel-devel-4.18.0-553.el8_10.x86_64" in plans["ol8-rhck"]
    assert "kernel-devel-matched-5.14.0-503.11.1.el9_5.x86_64" in plans["ol9-rhck"]
    for scenario in ("ol8-uek", "ol8-rhck", "ol9-uek8", "ol9-rhck"):
        assert "dnf -y module enable nvidia-driver:570-open" in plans[scenario]
        assert "/etc/yum.repos.d/docker-ce.repo" in plans[scenario]
    for scenario, tag in (("ubuntu2204", "ubuntu2204"), ("ubuntu2404", "ubuntu2404"),
                          ("debian12", "debian12")):
        assert f"dpkg -i /var/cache/gpuhost/nvidia-driver-local-repo-{tag}-570.172.08_1.0-1_amd64.deb" in plans[scenario]
        # Debian 12: Debian's unversioned names (gpuhost/packages.py)
        meta = "nvidia-open nvidia-smi" if tag == "debian12" else "nvidia-open-570"
        assert f"install --no-install-recommends {meta}" in plans[scenario]
        assert "/etc/apt/preferences.d/gpuhost-nvidia-driver" in plans[scenario]
    assert "linux-headers-5.15.0-130-generic" in plans["ubuntu2204"]


def test_wrong_sha256_stops_the_run_before_anything_is_sent():
    extra = {"nvidia_local_repo": {"debian12": {
        "path": "/tmp/gpuhost-plan-artifacts/nvidia-driver-local-repo-debian12-570.172.08_1.0-1_amd64.deb",
        "sha256": "0" * 64}}}
    result = run_plan("debian12", extra)
    assert result.returncode != 0
    assert "sha256" in result.stderr
    assert result.stdout.strip() == ""  # not one command, not one upload


def test_invalid_settings_stop_the_run_before_any_host_is_touched():
    extra = {"nvidia_driver_version": "570.124.06; rm -rf /", "reboot_policy": "sometimes"}
    result = run_plan("debian12", extra)
    assert result.returncode != 0
    assert "nvidia_driver_version" in result.stderr and "reboot_policy" in result.stderr
    assert result.stdout.strip() == ""


def test_proprietary_on_a_branch_without_proprietary_modules_is_refused_before_any_host():
    # R620 has no proprietary modules at all: the inventory says so before a host is read
    # (before, the host was contacted and failed with the GPU's reason)
    extra = {"nvidia_driver_flavor": "proprietary", "nvidia_driver_version": "620.10.01"}
    result = run_plan("debian12", extra)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "nothing was changed on any host" in out
    assert "nvidia_driver_flavor: proprietary, but driver 620.10.01 has no proprietary" in out
    assert not [line for line in result.stdout.splitlines() if line.startswith(("upload", "apt"))]


def test_values_with_shell_metacharacters_reach_the_host_quoted():
    hostile = "$(touch /tmp/pwned); `id` 'quote' \"dq\" \n next"
    extra = {"docker_daemon_settings": {"labels": [hostile]},
             "verify_image": "gpuhost/verify:plan"}
    result = run_plan("debian12", extra)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    # the hostile value goes into daemon.json as data (an upload), never into a command: the
    # plan is debian12's golden plan plus one line, the verification step failing the host
    # because the fake host has no such image (the image check is a fact, not in the plan)
    assert "pwned" not in result.stdout and "`id`" not in result.stdout
    assert "upload /etc/docker/daemon.json.gpuhost-new" in lines
    golden = (GOLDEN / "debian12.plan").read_text().splitlines()
    added = [line for line in lines if line not in golden]
    assert added == ["echo 'gpuhost: image gpuhost/verify:plan is not on the host and "
                     "verify_image_archive is not set' >&2; exit 1"], added
    assert [line for line in lines if line not in added] == golden


def test_mig_mode_is_applied_where_it_differs_and_a_bad_layout_is_refused():
    result = run_plan("debian12", {"mig_mode": "enabled"})
    assert result.returncode == 0, result.stderr[-2000:]
    # around the change, the GPU holders (nvidia-persistenced, DCGM) are stopped and started
    change = [line for line in result.stdout.splitlines() if "nvidia-smi -i 0 -mig 1" in line]
    assert len(change) == 1 and "systemctl stop $active" in change[0], change
    bad = run_plan("debian12", {"mig_mode": "enabled",
                                "mig_layout": ["4g.20gb", "4g.20gb"]})
    lines = bad.stdout.splitlines()
    assert any("mig_layout on A100-SXM4-40GB" in line and line.endswith("exit 1") for line in lines)
    assert not any(line.startswith("nvidia-smi") for line in lines)


def test_the_proxy_reaches_apt_without_its_credentials_in_any_command():
    secret = "http://ops:s3cr3t-Pa55@proxy.example.internal:3128"
    result = run_plan("debian12", {"http_proxy": secret})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "upload /etc/apt/apt.conf.d/95gpuhost-proxy.gpuhost-new" in result.stdout
    assert "s3cr3t" not in result.stdout and "s3cr3t" not in result.stderr


V100_PCIE_SYSFS = ("0000:3b:00.0 0x1db4 0x030200 0x10de 0x1214 0xa1\n"
                   "0000:d8:00.0 0x1db4 0x030200 0x10de 0x1214 0xa1\n")


def test_a_v100_pcie_host_without_lspci_gets_the_proprietary_driver():
    """The GPUs come from /sys/bus/pci/devices (no pciutils); NVIDIA's supported-gpus.json
    says 1db4 is pre-Turing, so 'auto' picks proprietary: the plan is debian12's golden plan
    with the proprietary package where the open one was."""
    result = run_plan("debian12", {"plan_pci": {"lspci": [127, ""],
                                                "pci_sysfs": [0, V100_PCIE_SYSFS]}})
    lines = result.stdout.splitlines()
    golden = (GOLDEN / "debian12.plan").read_text().splitlines()
    assert not any("nvidia-open" in line for line in lines), result.stdout
    assert lines == [line.replace("install --no-install-recommends nvidia-open nvidia-smi",
                                  "install --no-install-recommends cuda-drivers nvidia-smi")
                     for line in golden], result.stdout


def test_an_nvidia_gpu_no_table_knows_stops_auto_before_anything_changes():
    # 10de:12ff: in no table, and below the device numbering's first Maxwell id (0x1340), so
    # no rule claims it either (docs/real-hosts.md); B200's 2901 is classified since R580's
    # table (tests/unit/test_device_table.py)
    unknown = {"lspci": [0, '0000:1b:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" '
                            '"Device [12ff]" -ra1 "NVIDIA Corporation [10de]" "Device [1999]"\n'],
               "pci_sysfs": [0, "0000:1b:00.0 0x12ff 0x030200 0x10de 0x1999 0xa1\n"]}
    lines = run_plan("debian12", {"plan_pci": unknown}).stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("echo 'gpuhost: "), lines
    assert "PCI id 10de:12ff" in lines[0] and "nvidia_driver_flavor" in lines[0]
    # with the flavour set explicitly the host is provisioned as asked
    lines = run_plan("debian12", {"plan_pci": unknown,
                                  "nvidia_driver_flavor": "open"}).stdout.splitlines()
    assert lines == (GOLDEN / "debian12.plan").read_text().splitlines()

@pytest.mark.parametrize("scenario", ["ol8-uek", "ol9-rhck"])
def test_the_proxy_reaches_dnf_without_its_credentials_in_any_command(scenario):
    # issue 13 item 10: the URL went through `files.line` (a sed/echo command line) into
    # world-readable /etc/dnf/dnf.conf
    secret = "http://ops:s3cr3t-Pa55@proxy.example.internal:3128"
    result = run_plan(scenario, {"http_proxy": secret})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "upload /etc/dnf/dnf.conf.gpuhost-new" in lines
    assert "chmod 600 /etc/dnf/dnf.conf.gpuhost-new" in lines
    assert "s3cr3t" not in result.stdout and "s3cr3t" not in result.stderr


def test_docker_version_pins_docker_ce_and_its_cli_on_apt_and_dnf():
    # issue 13 item 6: without docker_version, fleets drift to the newest Docker
    apt = run_plan("debian12", {"docker_version": "27.5.1"})
    assert apt.returncode == 0, apt.stderr[-2000:]
    lines = apt.stdout.splitlines()
    assert "upload /etc/apt/preferences.d/gpuhost-docker.gpuhost-new" in lines
    assert ("DEBIAN_FRONTEND=noninteractive apt-get -y --allow-downgrades --no-install-recommends "
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install "
            "docker-ce docker-ce-cli containerd.io") in lines
    dnf = run_plan("ol9-rhck", {"docker_version": "27.5.1"})
    assert dnf.returncode == 0, dnf.stderr[-2000:]
    assert ("dnf install -y --allowerasing docker-ce-27.5.1 docker-ce-cli-27.5.1 containerd.io"
            in dnf.stdout.splitlines())


def test_the_docker_pin_goes_when_docker_version_is_removed_from_the_inventory():
    # before: the pin from an earlier docker_version stayed and held Docker there for good
    pin = "/etc/apt/preferences.d/gpuhost-docker"
    kept = run_plan("debian12", {"plan_docker_pin_present": True, "docker_version": "27.5.1"})
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert f"rm -f {pin}" not in kept.stdout.splitlines()
    gone = run_plan("debian12", {"plan_docker_pin_present": True})
    assert gone.returncode == 0, gone.stderr[-2000:]
    lines = gone.stdout.splitlines()
    assert f"rm -f {pin}" in lines
    # before Docker's packages are installed (they would be held at the pinned version)
    assert lines.index(f"rm -f {pin}") < next(
        i for i, line in enumerate(lines) if "apt-get" in line and " docker-ce" in line)
    assert f"rm -f {pin}" not in run_plan("debian12").stdout.splitlines()


def test_a_bad_docker_version_stops_the_run_before_any_host_is_touched():
    result = run_plan("ol9-rhck", {"docker_version": "27.5.1; rm -rf /"})
    assert result.returncode != 0
    assert "docker_version" in result.stderr
    assert result.stdout.strip() == ""


def test_a_headers_meta_package_the_repositories_lack_is_a_warning_not_a_failure():
    # the VM's package lists had no linux-headers-amd64 and the whole deploy failed there
    result = run_plan("debian12", {"plan_no_meta_headers": True})
    assert result.returncode == 0, result.stderr[-2000:]
    golden = (GOLDEN / "debian12.plan").read_text().splitlines()
    assert result.stdout.splitlines() == [line for line in golden
                                          if not line.endswith(" linux-headers-amd64")]
    assert "WARNING: linux-headers-amd64 is not in this host's package lists" in result.stderr


def test_the_headers_meta_package_is_asked_for_after_the_package_lists_are_refreshed():
    # A fresh image without package lists (the VM) whose running kernel's headers are in:
    # read before the local repo's apt-get update, apt knew no linux-headers-amd64 on the
    # first run and installed it on the second (a change on a converged host, CI of stop 18).
    # pyinfra reads an operation's facts again when it executes it: it must come after.
    for scenario in ("debian12", "ubuntu2404", "ol9-rhck"):
        lines = run_plan(scenario).stdout.splitlines()
        meta = next(i for i, line in enumerate(lines) if re.search(
            r"install (--no-install-recommends|-y --setopt=install_weak_deps=False) "
            r"(linux-headers-amd64|linux-headers-generic|kernel-devel)$", line)
            or re.search(r"^dnf install -y --setopt=install_weak_deps=False kernel-devel$", line))
        # the local repo's install and the apt-get update / dnf cache expiry right after it
        local_repo = next(i for i, line in enumerate(lines)
                          if re.search(r"^(dpkg -i|dnf install -y) \S*nvidia-driver-local-repo", line))
        assert local_repo < meta, (scenario, lines)
        assert {"apt-get update -qq", "dnf clean expire-cache"} & set(lines[local_repo:meta])


def test_nvidia_persistenced_is_installed_on_apt_hosts_only_when_wanted():
    # before: nvidia_persistenced: true only enabled a unit the driver packages do not ship
    # on apt hosts (a separate package): persistence mode stayed off
    line = ("DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confdef "
            "-o Dpkg::Options::=--force-confold install --no-install-recommends nvidia-persistenced")
    assert line in run_plan("debian12").stdout.splitlines()
    assert line not in run_plan("debian12", {"nvidia_persistenced": False}).stdout.splitlines()


MIG_CONFIG = """\
version: v1
mig-configs:
  balanced:
    - device-filter: "0x20B010DE"   # A100-SXM4-40GB, the scenario's GPU
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  h100-sizes:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


def test_a_named_mig_config_is_applied_per_gpu_and_a_misfit_stops_before_any_change(tmp_path):
    path = tmp_path / "mig.yaml"
    path.write_text(MIG_CONFIG)
    result = run_plan("debian12", {"mig_config_file": str(path), "mig_config": "balanced"})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    change = [line for line in lines if "nvidia-smi -i 0 -mig 1" in line]
    assert len(change) == 1 and "systemctl stop $active" in change[0], change
    assert "upload /usr/local/sbin/gpuhost-mig-layout.gpuhost-new" in lines
    assert any("systemctl restart nvidia-cdi-refresh.service" in line for line in lines)
    # an entry without device-filter that fits an 80GB GPU but not this host's A100-40GB:
    # refused while pyinfra prepares, so no host runs anything
    bad = run_plan("debian12", {"mig_config_file": str(path), "mig_config": "h100-sizes"})
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0
    assert "GPU 0 (A100-SXM4-40GB): 7x 1g.10gb does not fit" in out, out[-3000:]
    assert "nothing was changed on any host" in out
    assert not any(line.startswith(("nvidia-smi", "apt-get", "upload ")) for line in bad.stdout.splitlines())
