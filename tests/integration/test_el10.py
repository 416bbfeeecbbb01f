"""Enterprise Linux 10 over real SSH (issue 34): an Oracle Linux 10 host on UEK 8, a Rocky
Linux 10 host and an unregistered RHEL 10 host, one fleet, one pyinfra run over all three
per step.

1. From bare at 580: OL10 and Rocky 10 converge (headers of the running kernel, the
   vendor's CodeReady Builder and EPEL, nvidia-open installed and versionlocked in one
   step, Docker, the toolkit); the unregistered RHEL host is refused with one line and
   nothing on it changes.
2. The same run again changes nothing.
3. ``gpuhost audit`` names each host's distribution and release and exits 0.
4. A driver version the configured local repos lack is refused before any change.
5. ``gpuhost upgrade`` moves the EL10 hosts 580 -> 595, the versionlock with the driver.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox.py"
LTSB, PRODUCTION = "580.95.05", "595.71.05"
OL10, ROCKY10, RHEL10 = "ol10-01", "rocky10-02", "rhel10-03"
EL10 = (OL10, ROCKY10)
UEK8 = "6.12.0-100.28.2.el10uek.x86_64"
ROCKY_KERNEL = "6.12.0-55.12.1.el10_0.x86_64"

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=3, ol=0, docker_hosts=0, state="bare", overrides={
                  "1": {"os": "ol10"}, "2": {"os": "rocky10"},
                  # no rhsm-registered trait: an unregistered RHEL host
                  "3": {"os": "rhel10", "traits": []}},
                  why="converging EL10 hosts from bare is the point")]


def _env(driver: str) -> dict:
    return {"GPUHOST_SANDBOX_DRIVER": driver}


def _locks(ssh, name: str) -> list[str]:
    out = ssh(name, "cat /etc/dnf/plugins/versionlock.list").stdout
    return sorted(line for line in out.splitlines() if line and not line.startswith("#"))


@pytest.fixture(scope="module")
def first(fleet, pyinfra, ssh):
    before = ssh(RHEL10, "rpm -qa | wc -l; ls /etc/yum.repos.d").stdout
    run = pyinfra("-y", "deploys/gpu_host.py", env=_env(LTSB), check=False, timeout=1800)
    return run, before


def test_el10_hosts_converge_from_bare_and_an_unregistered_rhel_host_is_refused(first, ssh):
    run, rhel_before = first
    assert run.failed_hosts == [RHEL10], run.output[-4000:]
    refusal = [line for line in run.output.splitlines() if "is not registered" in line]
    assert refusal and "subscription-manager register" in refusal[0], run.output[-3000:]
    assert ssh(RHEL10, "rpm -qa | wc -l; ls /etc/yum.repos.d").stdout == rhel_before
    for name in EL10:
        assert ssh(name, "rpm -q --qf '%{VERSION}' nvidia-open").stdout == LTSB
        locks = _locks(ssh, name)
        assert locks and all(f":{LTSB}-" in lock for lock in locks), locks
        assert "nvidia-open-3:" + LTSB in " ".join(locks)
    # OL10: UEK 8's headers, built with the system gcc 14 (no toolset); Oracle's EPEL of 10.0
    assert ssh(OL10, f"rpm -q kernel-uek-devel-{UEK8}", check=False).returncode == 0
    assert ssh(OL10, "rpm -qa 'gcc-toolset*'").stdout == ""
    enabled = ssh(OL10, "dnf -q repolist --enabled").stdout
    assert "ol10_u0_developer_EPEL" in enabled and "ol10_codeready_builder" in enabled
    # Rocky 10: kernel-devel-matched of the running kernel, crb and epel enabled
    assert ssh(ROCKY10, f"rpm -q kernel-devel-matched-{ROCKY_KERNEL}", check=False).returncode == 0
    enabled = ssh(ROCKY10, "dnf -q repolist --enabled").stdout.split()
    assert "crb" in enabled and "epel" in enabled
    # no dnf module streams on EL10: the lock alone holds the branch
    assert "nvidia-driver" not in ssh(OL10, "dnf -q module list 2>&1", check=False).stdout


def test_a_second_run_changes_nothing(first, pyinfra):
    again = pyinfra("-y", "deploys/gpu_host.py", env=_env(LTSB), check=False)
    assert again.failed_hosts == [RHEL10], again.output[-3000:]
    assert again.changed() == {}, again.output[-3000:]
    assert set(EL10) <= again.hosts_that_ran()


def _gpuhost(*args: str, driver: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuhost.cli", *args], cwd=ROOT,
                          env={**os.environ, "PYINFRA_PROGRESS": "off", **_env(driver)},
                          text=True, capture_output=True, timeout=1800)


def _limit() -> list[str]:
    return [arg for name in EL10 for arg in ("--limit", name)]


def test_audit_names_each_hosts_release(first, tmp_path):
    done = _gpuhost("audit", INVENTORY, *_limit(), driver=LTSB)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rows = {line.split()[0]: line for line in done.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in EL10}
    assert " ol 10.0 " in rows[OL10] and " rocky 10.0 " in rows[ROCKY10], done.stdout[-2000:]


def test_a_driver_version_the_local_repos_lack_is_refused_before_any_change(first, pyinfra, ssh):
    before = {name: _locks(ssh, name) for name in EL10}
    run = pyinfra("-y", "deploys/gpu_host.py", *_limit(), "--data",
                  f"nvidia_driver_version={PRODUCTION}", env=_env(LTSB), check=False)
    assert run.returncode != 0 and run.hosts_that_ran() == set()
    line = next(line for line in run.output.splitlines() if "nvidia_local_repo[rhel10]" in line)
    assert f"is the local repo of driver {LTSB}, but nvidia_driver_version is {PRODUCTION}" in line
    assert {name: _locks(ssh, name) for name in EL10} == before


def test_gpuhost_upgrade_moves_the_el10_hosts_and_their_lock_to_595(first, ssh, tmp_path):
    report = tmp_path / "upgrade.json"
    done = _gpuhost("upgrade", INVENTORY, *_limit(), "--canary", "1", "--batch", "100%",
                    "--report", str(report), driver=PRODUCTION)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for name in EL10:
        assert ssh(name, "rpm -q --qf '%{VERSION}' nvidia-open").stdout == PRODUCTION
        locks = _locks(ssh, name)
        assert locks and all(f":{PRODUCTION}-" in lock for lock in locks), locks
        smi = ssh(name, "nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout
        assert smi.split()[0] == PRODUCTION


def test_the_rhel_hosts_subscription_manager_does_what_red_hats_documents(first, ssh):
    """Last: it registers the RHEL host. Unregistered: identity and repos exit 1, no Red Hat
    repository; registered: redhat.repo with BaseOS and AppStream enabled, CodeReady Builder
    enabled by `repos --enable`, and dnf reads them from the sandbox's RHEL repositories."""
    crb = "codeready-builder-for-rhel-10-x86_64-rpms"
    identity = ssh(RHEL10, "subscription-manager identity", check=False)
    assert identity.returncode == 1 and "not yet registered" in identity.stderr
    assert ssh(RHEL10, f"subscription-manager repos --enable={crb}", check=False).returncode == 1
    assert ssh(RHEL10, "dnf -q repolist --enabled").stdout.strip() == ""
    ssh(RHEL10, "subscription-manager register --org=example --activationkey=gpu-hosts")
    assert ssh(RHEL10, "subscription-manager identity", check=False).returncode == 0
    enabled = ssh(RHEL10, "dnf -q repolist --enabled").stdout.split()
    assert "rhel-10-for-x86_64-baseos-rpms" in enabled and crb not in enabled
    out = ssh(RHEL10, f"subscription-manager repos --enable={crb}").stdout
    assert f"Repository '{crb}' is enabled for this system." in out
    assert crb in ssh(RHEL10, "dnf -q repolist --enabled").stdout.split()
    rhck = "6.12.0-55.9.1.el10_0.x86_64"
    assert ssh(RHEL10, f"dnf -q repoquery --available kernel-devel-matched-{rhck}").stdout.strip()
