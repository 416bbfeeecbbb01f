"""Today's MIG GPUs with NVIDIA's own MIG configuration (issue 22), over real SSH: fresh
Debian hosts with an H100, an A100, a B200 and an RTX PRO 6000 Blackwell Server Edition
converge from bare with the sandbox's default driver and `nvidia_driver_flavor: auto`, given
GPU Operator's unchanged `default-mig-parted-config` (tests/fixtures/mig) and
`mig_config: all-balanced`; each GPU gets the layout of its device-filter entry, keeps it
across a reboot (the boot unit makes it again), and a second run changes nothing. A V100 host
asked for an R595 driver is refused before anything changes (R580 is Volta's last branch).

Blackwell needs the open modules (auto picks them); the RTX PRO 6000 has MIG from R575 on
(NVIDIA's MIG User Guide), so this module needs a default driver of 575 or newer (580.95.05).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests/fixtures/mig/gpu-operator-v26.7.0-default-mig-parted-config.yaml"
R595 = "595.71.05"
HOSTS = {"gpu-01": "H100-80GB-HBM3", "gpu-02": "A100-SXM4-40GB", "gpu-03": "B200",
         "gpu-04": "RTX-PRO-6000-Blackwell-Server"}
V100 = "gpu-05"
# all-balanced's entry for each GPU's device id (the fixture, unchanged)
BALANCED = {"gpu-01": ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"],
            "gpu-02": ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"],
            "gpu-03": ["1g.23gb", "1g.23gb", "2g.45gb", "3g.90gb"],
            "gpu-04": ["1g.24gb", "1g.24gb", "2g.48gb"]}
SPEC = {"hosts": 5, "ol": 0, "docker_hosts": 0, "overrides": {
    **{name: {"gpu_model": model, "gpu_count": 1} for name, model in HOSTS.items()},
    V100: {"gpu_model": "V100-PCIE-16GB", "gpu_count": 1}}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="B200 and RTX PRO 6000 hosts converging from bare is the "
                                    "point; the H100 and A100 ride along in the same run")]
DEPLOY = "deploys/gpu_host.py"
LIMIT = [arg for name in HOSTS for arg in ("--limit", name)]
DATA = ["--data", f"mig_config_file={CONFIG}", "--data", "mig_config=all-balanced"]


def _layout(ssh, name: str) -> list[str]:
    from gpuhost.facts import parsers

    return sorted(r["profile"] for r in parsers.parse_mig_gpu_instances(
        ssh(name, "nvidia-smi mig -lgi").stdout))


@pytest.fixture(scope="module")
def converged(fleet, pyinfra, ssh):
    first = pyinfra("-y", DEPLOY, *LIMIT, *DATA, check=False, timeout=1800)
    assert first.returncode == 0, first.output[-4000:]
    return first


def test_the_blackwell_hosts_converge_from_bare_with_the_open_modules(converged, ssh):
    for name in ("gpu-03", "gpu-04"):
        version = ssh(name, "cat /proc/driver/nvidia/version").stdout
        assert "Open Kernel Module" in version, (name, version)
    branch = int(re.search(r"Kernel Module for \S+\s+(\d+)\.", version).group(1))
    assert branch >= 575, f"the RTX PRO 6000 has MIG from R575 on; the sandbox gave {version}"
    assert ssh("gpu-04", "nvidia-smi -L").stdout.startswith(
        "GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition")


def test_gpu_operators_all_balanced_fits_each_gpu_keeps_across_a_reboot_and_reruns_clean(
        converged, pyinfra, ssh, sandbox_tools, fleet):
    for name, wanted in BALANCED.items():
        assert _layout(ssh, name) == wanted, name
    boots = {name: sandbox_tools.boots(name) for name in HOSTS}
    for name in HOSTS:
        ssh(name, "systemctl reboot", check=False)
    for name, count in boots.items():
        sandbox_tools.wait_for_reboot(fleet, name, count)
    for name, wanted in BALANCED.items():
        assert _layout(ssh, name) == wanted, name
    second = pyinfra("-y", DEPLOY, *LIMIT, *DATA, "--data", "full_check=true", timeout=900)
    assert second.changed() == {}, second.output[-3000:]
    assert second.hosts_that_ran() == set(HOSTS)


def test_a_v100_host_asked_for_r595_is_refused_before_anything_changes(fleet, pyinfra, ssh):
    manifest = json.loads(Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                                os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"),
                               "manifest.json").read_text())
    if R595 not in manifest["driver_versions"]:
        pytest.skip(f"no fake {R595} driver built yet (python -m sandbox.nvidia.build); "
                    "tests/plans/test_plans_gpu_current.py checks the same refusal")
    before = ssh(V100, "ls /etc/apt/sources.list.d; dpkg -l | wc -l").stdout
    refused = pyinfra("-y", DEPLOY, "--limit", V100, check=False,
                      env={"GPUHOST_SANDBOX_DRIVER": R595}, timeout=600)
    out = refused.output
    assert refused.returncode != 0 and "executed 0 commands" in out, out[-3000:]
    assert ("R580 is the last driver branch for pre-Turing GPUs; pin nvidia_driver_version "
            "to a 580 driver") in out, out[-3000:]
    assert ssh(V100, "ls /etc/apt/sources.list.d; dpkg -l | wc -l").stdout == before
