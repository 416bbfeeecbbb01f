"""Today's branches over real SSH: 570 -> 580 -> 595 with the HGX companions, on Debian 12,
Oracle Linux 8 and Ubuntu 24.04 hosts with NVSwitches (issue 22).

Each branch brings its own names (NVIDIA's, sources in docs/real-hosts.md):

- 570: versioned apt names (``nvidia-open-570``, ``nvidia-fabricmanager-570``,
  ``libnvidia-nscq-570``, ``nvidia-imex-570``); EL ``nvidia-fabric-manager``.
- 580: the driver keeps its versioned apt names, the companions lose the branch on apt and dnf
  (``nvidia-fabricmanager``, ``libnvidia-nscq``, ``nvidia-imex``).
- 595 (590+ packaging): on apt the driver is unversioned too and
  ``nvidia-driver-pinning-595`` holds the branch.

One story: the hosts are provisioned at 570 from bare (the older branch is the point), an
administrator adds NSCQ and IMEX on the apt hosts, then ``gpuhost upgrade`` moves them to 580,
then to 595, then once more to 595, which has nothing to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox.py"
START, LTSB, PRODUCTION = "570.172.08", "580.95.05", "595.71.05"
HGX = {"gpu_model": "H100-80GB-HBM3", "gpu_count": 8, "nvswitch": True}
APT_HOSTS, EL_HOSTS = ("gpu-01", "u24-03"), ("ol8-02",)
NAMES = (*APT_HOSTS, *EL_HOSTS)
FM_DATA = ["--data", "nvidia_fabricmanager=true"]

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=3, ol=1, ubuntu=1, docker_hosts=0,
                                overrides={name: HGX for name in NAMES}, state="bare",
                                why="step 1 provisions the older branch (570) from bare")]


def _env(driver: str) -> dict:
    return {**os.environ, "PYINFRA_PROGRESS": "off", "GPUHOST_SANDBOX_DRIVER": driver}


def upgrade(driver: str, report: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, "-m", "gpuhost.cli", "upgrade", INVENTORY,
                           "--canary", "1", "--batch", "100%", *FM_DATA, "--report", str(report)],
                          cwd=ROOT, env=_env(driver), text=True, capture_output=True,
                          timeout=3600)
    data = json.loads(report.read_text()) if report.exists() else {}
    return done, data


def installed(ssh, name: str) -> dict[str, str]:
    """Driver-related package -> version on the host (dpkg or rpm)."""
    query = ("if command -v dpkg-query >/dev/null && ! command -v rpm >/dev/null; then "
             "dpkg-query -W -f '${db:Status-Abbrev}${Package} ${Version}\\n' | "
             "sed -n 's/^ii *//p'; else rpm -qa --qf '%{NAME} %{VERSION}\\n'; fi")
    out = ssh(name, query).stdout
    pairs = (line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {p: v for p, v in pairs if "nvidia" in p or p.startswith(("cuda-drivers", "libnvsdm"))}


def companions(packages: dict[str, str]) -> dict[str, str]:
    return {p: v for p, v in packages.items()
            if p.startswith(("nvidia-fabric", "libnvidia-nscq", "nvidia-imex", "libnvsdm"))}


@pytest.fixture(scope="module")
def at_570(fleet, ssh, sandbox_tools):
    done = subprocess.run([sandbox_tools.pyinfra_bin(), "-y", INVENTORY,
                           "deploys/gpu_host.py", *FM_DATA],
                          cwd=ROOT, env=_env(START), text=True, capture_output=True, timeout=2400)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for name in APT_HOSTS:  # what an HGX administrator adds beside Fabric Manager
        ssh(name, "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
                  "libnvidia-nscq-570 nvidia-imex-570 >/dev/null")
    return {name: installed(ssh, name) for name in NAMES}


@pytest.fixture(scope="module")
def to_580(at_570, tmp_path_factory):
    return upgrade(LTSB, tmp_path_factory.mktemp("to580") / "report.json")


@pytest.fixture(scope="module")
def to_595(to_580, tmp_path_factory):
    return upgrade(PRODUCTION, tmp_path_factory.mktemp("to595") / "report.json")


def test_570_hosts_carry_the_branch_in_their_companion_names(at_570):
    for name in APT_HOSTS:
        assert set(companions(at_570[name])) == {
            "nvidia-fabricmanager-570", "libnvidia-nscq-570", "nvidia-imex-570"}, name
    # Fabric Manager and NSCQ (nvidia_fabricmanager: nvswitch, issue 25); EL's NSCQ carries
    # the branch before 580 (gpu-driver-container rhel9/precompiled/Dockerfile)
    assert set(companions(at_570["ol8-02"])) == {"nvidia-fabric-manager", "libnvidia-nscq-570"}


def test_580_companions_lose_the_branch_on_apt_and_dnf(to_580, ssh):
    done, report = to_580
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert {h["host"]: h["result"] for h in report["hosts"]} == dict.fromkeys(NAMES, "upgraded")
    for name in APT_HOSTS:
        packages = installed(ssh, name)
        assert companions(packages) == {
            "nvidia-fabricmanager": f"{LTSB}-1" if name == "gpu-01" else f"{LTSB}-0ubuntu1",
            "libnvidia-nscq": packages["nvidia-fabricmanager"],
            "nvidia-imex": packages["nvidia-fabricmanager"]}, name
        # Ubuntu's driver keeps its branch until 590; Debian 12's names never carry it
        assert ("nvidia-open" if name == "gpu-01" else "nvidia-open-580") in packages, name
        # its own package, depended on by nothing: before, it stayed at 570
        assert packages["nvidia-persistenced"].startswith(LTSB), name
    assert companions(installed(ssh, "ol8-02")) == {"nvidia-fabricmanager": LTSB,
                                                    "libnvidia-nscq": LTSB}
    for name in NAMES:  # Fabric Manager restarted at the new version: the fabric is back
        assert ssh(name, "nv-fabricmanager --version").stdout.strip().endswith(LTSB), name
        assert ssh(name, "nvidia-smi -q | grep -c 'State  *: Completed'").stdout.strip() == "8"


def test_595_is_held_by_nvidias_pinning_package_on_apt(to_595, ssh):
    done, report = to_595
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert {h["host"]: (h["from"], h["to"], h["result"]) for h in report["hosts"]} == dict.fromkeys(
        NAMES, (LTSB, PRODUCTION, "upgraded"))
    for name in APT_HOSTS:
        packages = installed(ssh, name)
        assert "nvidia-driver-pinning-595" in packages, name
        assert packages["nvidia-open"].startswith(PRODUCTION), name
        assert packages["nvidia-persistenced"].startswith(PRODUCTION), name
        assert not [p for p in packages if p.endswith(("-570", "-580"))], name
        assert set(companions(packages)) == {"nvidia-fabricmanager", "libnvidia-nscq",
                                             "nvidia-imex"}, name
    assert "595-open [e]" in ssh("ol8-02", "dnf -q module list --enabled nvidia-driver").stdout
    assert companions(installed(ssh, "ol8-02")) == {"nvidia-fabricmanager": PRODUCTION,
                                                    "libnvidia-nscq": PRODUCTION}
    for name in NAMES:  # driver, Fabric Manager and NSCQ moved together: the fabric is back
        assert ssh(name, "nvidia-smi -q | grep -c 'State  *: Completed'").stdout.strip() == "8"


def test_a_second_upgrade_to_595_has_nothing_to_do(to_595, ssh, tmp_path):
    boots = {n: json.loads(ssh(n, "cat /var/lib/gpusim/state.json").stdout)["boots"] for n in NAMES}
    done, report = upgrade(PRODUCTION, tmp_path / "report.json")
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert {h["host"]: h["result"] for h in report["hosts"]} == dict.fromkeys(
        NAMES, "already at target")
    for name in NAMES:
        assert json.loads(ssh(name, "cat /var/lib/gpusim/state.json").stdout)["boots"] == boots[name]
