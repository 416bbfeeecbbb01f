"""One fleet of every distribution family gpuhost supports, over real SSH (issues 34 and 35):
Debian 12 and 13, Ubuntu 24.04 and 26.04 (NVIDIA's network repository), Oracle Linux 8, 9
and 10 (UEK 8), Rocky Linux 10, and an unregistered RHEL 10 host. One pyinfra run over all
of them per step (the converge from bare is the point):

1. bare      the hosts' release files, trixie's real packages, the archives and NVIDIA's
             repositories as apt sees them (signed, verified), before anything is installed
2. refused   u26 at the fleet's 580.95.05: one line before any change (580.95.05 does not
             build on kernel 7.0; the first R580 that does: 580.142)
3. converged one run: eight hosts converge from bare (u26 at 580.142 by its own host data,
             with no ``nvidia_local_repo: {}`` beside it), the unregistered RHEL host is
             refused in one line with nothing changed; the same run again (full_check)
             changes nothing; ``gpuhost audit`` exits 0 and names each host's release
4. wrong     a driver version the local repos lack: one line per host, naming only its own
             distribution's entry, before any change
5. upgraded  ``gpuhost upgrade`` moves every converged host 580 -> 595 in one batch, the
             versionlock and the pinning package with the driver
6. last      the RHEL host's subscription-manager, unregistered then registered
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration import new_release_hosts as bare_hosts

D12, D13, U24, U26 = "gpu-01", "d13-02", "u24-03", "u26-04"
OL8, OL9, OL10, ROCKY10, RHEL10 = "ol8-05", "ol9-06", "ol10-07", "rocky10-08", "rhel10-09"
OSES = {D12: "debian12", D13: "debian13", U24: "ubuntu2404", U26: "ubuntu2604", OL8: "ol8",
        OL9: "ol9", OL10: "ol10", ROCKY10: "rocky10", RHEL10: "rhel10"}
CONVERGING = [name for name in OSES if name != RHEL10]
EL10 = (OL10, ROCKY10)
UPGRADED = tuple(CONVERGING)  # every converged host, in one batch
# no traits (RHEL: no rhsm-registered, an unregistered host); one or two GPUs (no NVSwitch)
SPEC = {"hosts": len(OSES), "docker_hosts": 0, "overrides": {
    str(i): {"os": os_name, "traits": [], "gpu_count": 1 + i % 2}
    for i, os_name in enumerate(OSES.values(), start=1)}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, ol=0, state="bare",
                                why="every distribution converged from bare in one run is the "
                                    "point")]

FIRST, FIRST_U26, TARGET = "580.95.05", "580.142", "595.71.05"
UEK8 = "6.12.0-100.28.2.el10uek.x86_64"
ROCKY_KERNEL = "6.12.0-55.12.1.el10_0.x86_64"
RELEASES = {name: release for name, release in (
    (D12, "Debian 12"), (D13, "Debian 13"), (U24, "Ubuntu 24.04"), (U26, "Ubuntu 26.04"),
    (OL8, "Oracle Linux 8.10"), (OL9, "Oracle Linux 9.5"), (OL10, "Oracle Linux 10.0"),
    (ROCKY10, "Rocky Linux 10.0")) if name in CONVERGING}
DEPLOY = "deploys/gpu_host.py"
OUT = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                          os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
# host data outranks the sandbox's group data: u26 takes the first R580 that builds on 7.0
# (its driver comes from the network repository; the fleet's local repo entries, 580.95.05's,
# are not its own distribution's and are not checked against it)
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

_OVERRIDES = {{{u26!r}: {{"nvidia_driver_version": {version!r}}}}}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""
TIMES: dict[str, float] = {}


def _env(driver: str) -> dict:
    return {"GPUHOST_SANDBOX_DRIVER": driver}


def _limit(names) -> list[str]:
    return [arg for name in names for arg in ("--limit", name)]


def state(ssh, name: str) -> dict:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    return assemble.host_state(parsers.split_sections(ssh(name, build_script(ALL_SECTIONS))))


@pytest.fixture(scope="module")
def ssh(fleet, sandbox_tools):
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw).stdout


@pytest.fixture(scope="module")
def sh(fleet, sandbox_tools):
    """The CompletedProcess (returncode, stderr too)."""
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw)


@pytest.fixture(scope="module")
def inventory(fleet, sandbox_tools, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("mixed") / "mixed_inventory.py"
    path.write_text(INVENTORY.format(root=str(sandbox_tools.root), u26=U26, version=FIRST_U26))
    return str(path)


def _gpuhost(root, *args: str, driver: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuhost.cli", *args], cwd=root,
                          env={**os.environ, "PYINFRA_PROGRESS": "off", **_env(driver)},
                          text=True, capture_output=True, timeout=1800)


def _version(ssh, name: str, pkg: str) -> str:
    return ssh(name, f"dpkg-query -W -f '${{Version}}' {pkg}")


def _locks(ssh, name: str) -> list[str]:
    out = ssh(name, "cat /etc/dnf/plugins/versionlock.list")
    return sorted(line for line in out.splitlines() if line and not line.startswith("#"))


def _url(fleet: dict, url: str) -> str:
    """The manifest names the default server; this fleet serves on its own port."""
    return url.replace("http://127.77.0.1:8000/", fleet["mirror"] + "/")


# --- 1. the bare hosts (tests/integration/new_release_hosts.py) ------------------------------

def test_fleet_names_os_and_kernels(fleet):
    hosts = {h["name"]: h for h in fleet["hosts"]}
    assert {name: h["os"] for name, h in hosts.items()} == OSES
    # trixie's ABI names carry the upstream version (the mirror's choice of the day)
    assert hosts[D13]["kernel_release"].startswith("6.12.")
    assert hosts[D13]["kernel_release"].endswith("+deb13-amd64")
    assert hosts[U26]["kernel_release"] == "7.0.0-12-generic"
    assert hosts[OL10]["kernel_release"] == UEK8
    assert hosts[ROCKY10]["kernel_release"] == ROCKY_KERNEL


def test_release_files_and_real_trixie_userland(ssh):
    bare_hosts.release_files_and_real_trixie_userland(ssh, D13, U26)


def test_debian13_apt_sources_are_deb822_and_archive_verifies(ssh):
    bare_hosts.debian13_sources_are_deb822_and_archive_verifies(ssh, D13)


def test_ubuntu2604_archive_kernels_and_flavour_headers(ssh, sh):
    bare_hosts.ubuntu2604_archive_kernels_and_flavour_headers(ssh, sh, U26)


def test_debian13_local_repo_is_built_with_debian_names():
    """The fake debian13 local repo package (the converge below installs it)."""
    bare_hosts.debian13_local_repo_is_built_with_debian_names(OUT, (FIRST, TARGET))


def test_network_repo_with_a_wrong_key_is_refused(fleet, sh):
    url = json.loads((OUT / "manifest.json").read_text())["network_repos"]["ubuntu2604"]["url"]
    bare_hosts.network_repo_with_a_wrong_key_is_refused(sh, U26, _url(fleet, url))


# --- 2. a driver that does not build on the host's kernel --------------------------------

def marks(ssh, name: str) -> dict:
    """What a refused run must not move: the installed packages, apt's sources and
    preferences, the boot count."""
    return {"packages": ssh(name, "dpkg-query -W -f '${Package} ${Version} ${Status}\\n'"),
            "sources": ssh(name, "ls /etc/apt/sources.list.d /etc/apt/preferences.d 2>&1"),
            "boots": json.loads(ssh(name, "cat /var/lib/gpusim/state.json"))["boots"]}


@pytest.fixture(scope="module")
def refused(fleet, ssh, sandbox_tools):
    before = marks(ssh, U26)
    started = time.monotonic()
    run = sandbox_tools.run_pyinfra("-y", DEPLOY, "--limit", U26, check=False, timeout=600,
                                    env=_env(FIRST))
    TIMES["refusal of u26 (one host)"] = time.monotonic() - started
    return {"run": run, "before": before}


def test_a_driver_that_does_not_build_on_kernel_7_is_refused_before_any_change(refused, ssh):
    run = refused["run"]
    assert run.returncode != 0, run.output[-3000:]
    line = (f"{U26}: driver {FIRST} does not build on kernel 7.0.0-12-generic (Linux 7.0, "
            f"Ubuntu 26.04): the first that does is {FIRST_U26}; set nvidia_driver_version to "
            "it or a newer one")
    hits = [text for text in run.output.splitlines() if line in text]
    assert len(hits) == 1, run.output[-3000:]
    assert marks(ssh, U26) == refused["before"]


# --- 3. converge from bare, rerun, audit ---------------------------------------------------

@pytest.fixture(scope="module")
def converged(refused, inventory, ssh, sandbox_tools):
    rhel_before = ssh(RHEL10, "rpm -qa | wc -l; ls /etc/yum.repos.d")
    started = time.monotonic()
    first = sandbox_tools.run_pyinfra("-y", DEPLOY, check=False, timeout=2400,
                                      inventory=inventory, env=_env(FIRST))
    middle = time.monotonic()
    # full_check: every role walked, not only the converged record read (docs/converged.md)
    second = sandbox_tools.run_pyinfra("-y", DEPLOY, "--data", "full_check=true", check=False,
                                       timeout=900, inventory=inventory, env=_env(FIRST))
    TIMES[f"converge of {len(CONVERGING)} hosts from bare (+ RHEL refused)"] = middle - started
    TIMES["second run, full_check"] = time.monotonic() - middle
    return {"first": first, "second": second, "rhel_before": rhel_before}


def test_every_host_converges_from_bare_and_the_unregistered_rhel_host_is_refused(
        converged, ssh):
    first = converged["first"]
    assert first.failed_hosts == [RHEL10], first.output[-5000:]
    refusal = [line for line in first.output.splitlines() if "is not registered" in line]
    assert refusal and "subscription-manager register" in refusal[0], first.output[-3000:]
    assert ssh(RHEL10, "rpm -qa | wc -l; ls /etc/yum.repos.d") == converged["rhel_before"]
    for name in CONVERGING:
        version = FIRST_U26 if name == U26 else FIRST
        host = state(ssh, name)
        driver = host["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", version, [version]), (name, driver)
        assert driver["installed_flavor"] == "open", (name, driver)
        assert host["toolkit"]["consistent"] and host["toolkit"]["version"], (name, host["toolkit"])
        assert host["docker"]["nvidia_runtime"]["defined"], (name, host["docker"])
        daemon = json.loads(ssh(name, "cat /etc/docker/daemon.json"))
        assert daemon["runtimes"]["nvidia"]["path"].endswith("nvidia-container-runtime"), daemon
        assert ssh(name, "systemctl is-active docker").strip() == "active", name


def test_ubuntu2604_takes_the_driver_from_the_network_repository_pinned_by_full_version(
        converged, ssh):
    # the driver from the network repository (both branches in it), the pinning package of
    # its full version chooses one; dkms compressed the module with zstd as the kernel's own
    assert _version(ssh, U26, "nvidia-dkms-open") == f"{FIRST_U26}-0ubuntu1"
    assert f"nvidia-driver-pinning-{FIRST_U26}" in ssh(U26, "dpkg-query -W -f '${Package}\\n'")
    assert "/nvidia/cuda/repos/ubuntu2604/x86_64/" in ssh(U26, "cat /etc/apt/sources.list.d/*")
    assert f"{TARGET}-0ubuntu1" in ssh(U26, "apt-cache madison nvidia-open")
    assert f"Candidate: {FIRST_U26}-0ubuntu1" in ssh(U26, "apt-cache policy nvidia-open")
    assert "nvidia.ko.zst" in ssh(U26, "ls /usr/lib/modules/$(uname -r)/updates/dkms/")
    assert ssh(U26, "command -v zstd").strip()
    assert FIRST_U26 in ssh(U26, "cat /proc/driver/nvidia/version")


def test_debian13_takes_the_local_repo_and_trixies_docker(converged, ssh):
    assert _version(ssh, D13, "nvidia-kernel-open-dkms") == f"{FIRST}-1"
    # docker_source distro: trixie's docker.io (with docker-cli, split out of it in trixie)
    assert ssh(D13, "docker version --format '{{.Server.Version}}'").strip().startswith("26.1.5")
    info = ssh(D13, "docker info --format '{{.CgroupVersion}} {{.Driver}}'").split()
    assert info == ["2", "overlay2"]
    assert _version(ssh, D13, "containerd").startswith("1.7.")


def test_el10_installs_and_locks_in_one_step_with_each_vendors_repositories(converged, ssh):
    for name in EL10:
        assert ssh(name, "rpm -q --qf '%{VERSION}' nvidia-open") == FIRST
        locks = _locks(ssh, name)
        assert locks and all(f":{FIRST}-" in lock for lock in locks), locks
        assert "nvidia-open-3:" + FIRST in " ".join(locks)
    # OL10: UEK 8's headers, built with the system gcc 14 (no toolset); Oracle's EPEL of 10.0
    assert ssh(OL10, f"rpm -q kernel-uek-devel-{UEK8}")
    assert ssh(OL10, "rpm -qa 'gcc-toolset*'") == ""
    enabled = ssh(OL10, "dnf -q repolist --enabled")
    assert "ol10_u0_developer_EPEL" in enabled and "ol10_codeready_builder" in enabled
    # Rocky 10: kernel-devel-matched of the running kernel, crb and epel enabled
    assert ssh(ROCKY10, f"rpm -q kernel-devel-matched-{ROCKY_KERNEL}")
    enabled = ssh(ROCKY10, "dnf -q repolist --enabled").split()
    assert "crb" in enabled and "epel" in enabled
    # no dnf module streams on EL10: the lock alone holds the branch
    assert "nvidia-driver" not in ssh(OL10, "dnf -q module list 2>&1 || true")


def test_a_second_run_changes_nothing(converged):
    second = converged["second"]
    assert second.failed_hosts == [RHEL10], second.output[-3000:]
    assert second.changed() == {} and second.totals["changed"] == 0, second.output[-3000:]
    assert set(CONVERGING) <= second.hosts_that_ran()


def test_the_audit_names_each_hosts_distribution_and_release(converged, inventory,
                                                             sandbox_tools, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit")
    started = time.monotonic()
    done = _gpuhost(sandbox_tools.root, "audit", inventory, *_limit(CONVERGING),
                    "--json", str(out / "audit.json"), "--html", str(out / "audit.html"),
                    driver=FIRST)
    TIMES[f"audit of {len(CONVERGING)} hosts"] = time.monotonic() - started
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    hosts = {h["name"]: h for h in json.loads((out / "audit.json").read_text())["hosts"]}
    assert {name: h["observed"]["os"]["release"] for name, h in hosts.items()} == RELEASES
    rows = {line.split()[0]: line for line in done.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in RELEASES}
    page = (out / "audit.html").read_text()
    for name, release in RELEASES.items():
        assert f" {release} " in rows[name], done.stdout[-3000:]
        assert f"<td>{release}</td>" in page, release


# --- 4. a driver version the local repos lack ----------------------------------------------

def test_a_driver_version_the_local_repo_lacks_is_one_line_per_host_before_any_change(
        converged, inventory, ssh, sandbox_tools):
    """The fleet's local repo entries are 580.95.05's, for every distribution; each host is
    told about its own distribution's entry only, once."""
    checked = (D13, *EL10)
    before = {name: _locks(ssh, name) for name in EL10}
    packages = ssh(D13, "dpkg-query -W -f '${Package} ${Version}\\n'")
    run = sandbox_tools.run_pyinfra("-y", DEPLOY, *_limit(checked), "--data",
                                    f"nvidia_driver_version={TARGET}", check=False,
                                    inventory=inventory, env=_env(FIRST))
    # every host stopped (pyinfra: "No hosts remaining", so no results document)
    assert run.returncode != 0, run.output[-3000:]
    stopped = [line for line in run.output.splitlines() if "Error: executed 0 commands" in line]
    assert sorted(line.split()[0].strip("[]") for line in stopped) == sorted(checked), \
        run.output[-3000:]
    lines = [line for line in run.output.splitlines() if "nvidia_local_repo[" in line]
    tags = {D13: "debian13", OL10: "rhel10", ROCKY10: "rhel10"}
    for name, tag in tags.items():
        mine = [line for line in lines if f"{name}: nvidia_local_repo[" in line]
        assert len(mine) == 1, lines
        assert (f"{name}: nvidia_local_repo[{tag}]: nvidia-driver-local-repo-{tag}-{FIRST} is the "
                f"local repo of driver {FIRST}, but nvidia_driver_version is {TARGET}") in mine[0]
    assert len(lines) == len(tags), lines
    assert {name: _locks(ssh, name) for name in EL10} == before
    assert ssh(D13, "dpkg-query -W -f '${Package} ${Version}\\n'") == packages


# --- 5. the rolling upgrade ------------------------------------------------------------------

@pytest.fixture(scope="module")
def upgraded(converged, inventory, sandbox_tools, tmp_path_factory):
    report = tmp_path_factory.mktemp("upgrade") / "report.json"
    started = time.monotonic()
    # --data outranks the inventory's host data: every host to TARGET
    done = _gpuhost(sandbox_tools.root, "upgrade", inventory, *_limit(UPGRADED),
                    "--canary", "0", "--batch", "100%", "--data",
                    f"nvidia_driver_version={TARGET}", "--report", str(report), driver=TARGET)
    TIMES[f"upgrade of {len(UPGRADED)} hosts, one batch"] = time.monotonic() - started
    data = json.loads(report.read_text()) if report.exists() else None
    return {"done": done, "report": data}


def test_upgrade_moves_the_new_releases_to_r595_with_their_locks_and_pins(upgraded, ssh):
    done, report = upgraded["done"], upgraded["report"]
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert [(b["label"], sorted(b["hosts"])) for b in report["batches"]] == [
        ("batch 1", sorted(UPGRADED))]
    hosts = {h["host"]: h for h in report["hosts"]}
    assert {name: (h["from"], h["to"], h["result"]) for name, h in hosts.items()} == {
        name: (FIRST_U26 if name == U26 else FIRST, TARGET, "upgraded") for name in UPGRADED}
    for name in UPGRADED:
        driver = state(ssh, name)["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", TARGET, [TARGET]), (name, driver)
    for name in EL10:
        assert ssh(name, "rpm -q --qf '%{VERSION}' nvidia-open") == TARGET
        locks = _locks(ssh, name)
        assert locks and all(f":{TARGET}-" in lock for lock in locks), locks
        smi = ssh(name, "nvidia-smi --query-gpu=driver_version --format=csv,noheader")
        assert smi.split()[0] == TARGET
    assert f"nvidia-driver-pinning-{TARGET}" in ssh(U26, "dpkg-query -W -f '${Package}\\n'")
    assert f"nvidia-driver-pinning-{FIRST_U26}" not in ssh(
        U26, "dpkg-query -W -f '${Package} ${Status}\\n' | grep ' installed$' || true")


# --- 6. last: it registers the RHEL host ------------------------------------------------------

def test_the_rhel_hosts_subscription_manager_does_what_red_hats_documents(converged, ssh, sh):
    """Unregistered: identity and repos exit 1, no Red Hat repository; registered:
    redhat.repo with BaseOS and AppStream enabled, CodeReady Builder enabled by
    `repos --enable`, and dnf reads them from the sandbox's RHEL repositories."""
    crb = "codeready-builder-for-rhel-10-x86_64-rpms"
    identity = sh(RHEL10, "subscription-manager identity", check=False)
    assert identity.returncode == 1 and "not yet registered" in identity.stderr
    assert sh(RHEL10, f"subscription-manager repos --enable={crb}", check=False).returncode == 1
    assert ssh(RHEL10, "dnf -q repolist --enabled").strip() == ""
    ssh(RHEL10, "subscription-manager register --org=example --activationkey=gpu-hosts")
    assert sh(RHEL10, "subscription-manager identity", check=False).returncode == 0
    enabled = ssh(RHEL10, "dnf -q repolist --enabled").split()
    assert "rhel-10-for-x86_64-baseos-rpms" in enabled and crb not in enabled
    out = ssh(RHEL10, f"subscription-manager repos --enable={crb}")
    assert f"Repository '{crb}' is enabled for this system." in out
    assert crb in ssh(RHEL10, "dnf -q repolist --enabled").split()
    rhck = "6.12.0-55.9.1.el10_0.x86_64"
    assert ssh(RHEL10, f"dnf -q repoquery --available kernel-devel-matched-{rhck}").strip()
    print("\n" + "\n".join(f"{what}: {seconds:.0f}s" for what, seconds in TIMES.items()))
