"""Ubuntu hosts and the stock traits of Ubuntu/Debian images (sandbox/traits/ubuntu.py),
each shown in effect on a booted host over real SSH, then what gpuhost does there:
the apt pin it writes holds against unattended-upgrades allowed to take anything.

Bare hosts of SPEC: a Debian host with unattended-upgrades and containerd, an Ubuntu 22.04
host with docker.io, an Ubuntu 24.04 host with its default traits.
"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

SPEC = {"hosts": 3, "ubuntu": 2, "docker_hosts": 0, "overrides": {
    "gpu-01": {"traits": ["unattended-upgrades", "distro-containerd"]},
    "u22-02": {"traits": ["distro-docker"]},
}}


pytestmark = [pytest.mark.integration, pytest.mark.fleet(**SPEC, ol=0, state="bare")]


@pytest.fixture(scope="module")
def hosts(fleet):
    return {h["name"]: h | {"key": fleet["ssh_key"], "known": fleet["known_hosts"]}
            for h in fleet["hosts"]}


def sh(h: dict, command: str, check: bool = True, stdin: str | None = None):
    proc = subprocess.run(
        ["ssh", "-i", h["key"], "-p", str(h["port"]), "-o", f"UserKnownHostsFile={h['known']}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
         f"root@{h['address']}", command],
        text=True, capture_output=True, timeout=600, input=stdin)
    if check and proc.returncode != 0:
        pytest.fail(f"{h['name']}: {command!r} failed ({proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc


def test_ubuntu_hosts_carry_ubuntus_release_files_kernel_and_sources(hosts):
    u22, u24 = hosts["u22-02"], hosts["u24-03"]
    assert sh(u22, ". /etc/os-release; echo $ID $VERSION_ID $VERSION_CODENAME").stdout.split() \
        == ["ubuntu", "22.04", "jammy"]
    assert sh(u24, ". /etc/os-release; echo $ID $VERSION_ID $UBUNTU_CODENAME").stdout.split() \
        == ["ubuntu", "24.04", "noble"]
    assert sh(u22, "cat /etc/debian_version").stdout.strip() == "bookworm/sid"
    assert "DISTRIB_CODENAME=noble" in sh(u24, "cat /etc/lsb-release").stdout
    assert sh(u22, "uname -r").stdout.strip() == "5.15.0-131-generic"
    assert sh(u24, "uname -r").stdout.strip() == "6.8.0-51-generic"
    # 22.04: one-line sources.list; 24.04: deb822 ubuntu.sources, sources.list a pointer
    assert "jammy-security main restricted" in sh(u22, "cat /etc/apt/sources.list").stdout
    sources = sh(u24, "cat /etc/apt/sources.list.d/ubuntu.sources").stdout
    assert "Components: main restricted universe multiverse" in sources
    assert "Suites: noble-security" in sources
    # the signed archive: apt update succeeds with no warning, headers of the running
    # kernel in -updates, the meta package one kernel ahead (gpuhost must not take it)
    for h, newer in ((u22, "5.15.0-133-generic"), (u24, "6.8.0-53-generic")):
        update = sh(h, "apt-get update 2>&1")
        assert "W:" not in update.stdout and "NO_PUBKEY" not in update.stdout, update.stdout
        policy = sh(h, 'apt-cache policy "linux-headers-$(uname -r)"').stdout
        assert "-updates/main" in policy and "-security/main" in policy, policy
        depends = sh(h, "apt-cache depends linux-headers-generic").stdout
        assert f"linux-headers-{newer}" in depends
    assert "noble/universe" in sh(u24, "apt-cache policy docker.io").stdout


def test_debian_hosts_have_main_only_like_the_stock_image(hosts):
    lines = sh(hosts["gpu-01"], "grep -hE '^deb ' /etc/apt/sources.list "
               "/etc/apt/sources.list.d/*.list 2>/dev/null; true").stdout.splitlines()
    assert lines and all(line.split()[-1] == "main" for line in lines), lines
    assert "contrib" not in sh(hosts["gpu-01"], "apt-get update 2>&1; apt-cache policy").stdout


@pytest.mark.parametrize("name", ["gpu-01", "u24-03"])
def test_unattended_upgrades_is_installed_and_on(hosts, name):
    h = hosts[name]
    assert "unattended-upgrades" in h["traits"]  # u24: by default, gpu-01: by override
    sh(h, "dpkg-query -W -f '${db:Status-Abbrev}' unattended-upgrades | grep -q '^ii'")
    dump = sh(h, "apt-config dump APT::Periodic").stdout
    assert 'APT::Periodic::Unattended-Upgrade "1";' in dump
    assert 'APT::Periodic::Update-Package-Lists "1";' in dump
    assert sh(h, "systemctl is-enabled apt-daily-upgrade.timer").stdout.strip() == "enabled"
    dry = sh(h, "unattended-upgrade --dry-run -v 2>&1")
    if name.startswith("u24"):
        # Ubuntu's allowed origins, matched against the sandbox's archive (Origin: Ubuntu)
        assert "o=Ubuntu,a=noble-security" in dry.stdout, dry.stdout[-2000:]


def test_distro_docker_is_installed_and_running(hosts):
    h = hosts["u22-02"]
    sh(h, "dpkg-query -W -f '${db:Status-Abbrev}' docker.io | grep -q '^ii'")
    assert sh(h, "systemctl is-active docker.service").stdout.strip() == "active"
    assert sh(h, "docker info --format '{{.ServerVersion}}'").stdout.strip()


def test_distro_containerd_is_installed_and_running(hosts):
    h = hosts["gpu-01"]
    for pkg in ("containerd", "runc"):
        sh(h, f"dpkg-query -W -f '${{db:Status-Abbrev}}' {pkg} | grep -q '^ii'")
    assert sh(h, "systemctl is-active containerd.service").stdout.strip() == "active"
    status = sh(h, "dpkg-query -W -f '${db:Status-Abbrev}' docker.io 2>/dev/null", check=False)
    assert not status.stdout.startswith("ii"), status.stdout  # containerd alone


# ---------------------------------------------------------------- gpuhost on these hosts

def _deploy(sandbox_tools, limit: str) -> str:
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    proc = subprocess.run([sandbox_tools.pyinfra_bin(), "-y", "--limit", limit,
                           "inventories/sandbox.py", "deploys/gpu_host.py"],
                          cwd=sandbox_tools.root, env=env, text=True, capture_output=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _grand_total(output: str) -> list[int]:
    """pyinfra's 'Grand total' row: operations, success (changed), error, no change."""
    for line in output.splitlines():
        if "Grand total" in line:
            return [0 if c == "-" else int(c) for c in line.split("Grand total", 1)[1].split()]
    raise AssertionError(f"no Grand total in pyinfra's output:\n{output[-3000:]}")


def test_gpu_host_converges_on_ubuntu_and_a_second_run_changes_nothing(hosts, sandbox_tools):
    # u22-02 carries the distribution's docker.io already (docker_source: distro here)
    first = _grand_total(_deploy(sandbox_tools, "ubuntu_hosts"))
    assert first[1] > 0 and first[2] == 0, first
    for name in ("u22-02", "u24-03"):
        h = hosts[name]
        assert sh(h, "nvidia-smi -L").stdout.startswith("GPU 0:")
        listed = sh(h, "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n' 'linux-headers-*'")
        headers = [line.split()[-1] for line in listed.stdout.splitlines()
                   if line.startswith("ii")]
        # the running kernel's headers, and the meta package so the next kernel update
        # builds the module too (issue 14 item 3); its newer kernel is not booted
        assert f"linux-headers-{h['kernel_release']}" in headers, headers
        assert "linux-headers-generic" in headers, headers
        assert sh(h, "uname -r").stdout.strip() == h["kernel_release"]
    second = _grand_total(_deploy(sandbox_tools, "ubuntu_hosts"))
    assert second[1] == 0 and second[2] == 0 and second[3] == second[0], second


def _newer_driver_deb(tmp: Path, branch: str) -> tuple[bytes, str]:
    """nvidia-open-<branch> at a newer version of the branch than the one gpuhost installs
    (a point release of the same branch, the case the pin exists for) and its Packages
    stanza."""
    package, version = f"nvidia-open-{branch}", f"{branch}.999.01-0ubuntu1"
    root = tmp / "root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: gpuhost test <test@gpuhost.invalid>\nDescription: newer point release "
        "(test)\n")
    out = tmp / f"{package}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(out)],
                   check=True, capture_output=True)
    data = out.read_bytes()
    stanza = (f"Package: {package}\nVersion: {version}\nArchitecture: amd64\n"
              "Maintainer: gpuhost test <test@gpuhost.invalid>\n"
              f"Filename: ./{out.name}\nSize: {len(data)}\n"
              f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
              "Description: newer point release (test)\n")
    return data, stanza


def test_the_driver_pin_holds_against_unattended_upgrades(hosts, sandbox_tools, tmp_path):
    from tests.support import default_driver

    driver = default_driver()  # the sandbox inventory's driver (a branch below 590)
    branch = driver.split(".")[0]
    package, newer = f"nvidia-open-{branch}", f"{branch}.999.01"
    h = hosts["u24-03"]
    _deploy(sandbox_tools, "u24-03")  # converged already when run after the test above
    installed = sh(h, f"dpkg-query -W -f '${{Version}}' {package}").stdout
    assert installed.startswith(f"{driver}-")
    # A repository offering a newer point release of the branch, and unattended-upgrades
    # allowed to take anything from any origin (the worst case a site can configure).
    data, stanza = _newer_driver_deb(tmp_path, branch)
    sh(h, f"mkdir -p /srv/newer && base64 -d > /srv/newer/{package}_{newer}-0ubuntu1_amd64.deb",
       stdin=base64.b64encode(data).decode())
    sh(h, "cat > /srv/newer/Packages", stdin=stanza)
    sh(h, "echo 'deb [trusted=yes] file:/srv/newer ./' > /etc/apt/sources.list.d/newer.list; "
       "printf 'Unattended-Upgrade::Origins-Pattern { \"origin=*\"; };\\n' "
       "> /etc/apt/apt.conf.d/52test-any-origin; apt-get update -qq")
    try:
        policy = sh(h, f"apt-cache policy {package}").stdout
        assert f"{newer}-0ubuntu1" in policy  # offered ...
        assert f"Candidate: {driver}-0ubuntu1" in policy, policy  # ... but pinned away
        upgrade = sh(h, "apt-get -s dist-upgrade").stdout
        assert package not in upgrade, upgrade
        uu = sh(h, "unattended-upgrade --dry-run -v 2>&1").stdout
        assert newer not in uu and package not in _upgraded(uu), uu[-3000:]
        # control: without gpuhost's two files the same tool takes the newer driver
        pin = "/etc/apt/preferences.d/gpuhost-nvidia-driver"
        blk = "/etc/apt/apt.conf.d/51gpuhost-nvidia-no-unattended-upgrades"
        sh(h, f"mv {pin} /root/pin.bak && mv {blk} /root/blk.bak")
        try:
            uu = sh(h, "unattended-upgrade --dry-run -v 2>&1").stdout
            assert package in _upgraded(uu), uu[-3000:]
        finally:
            sh(h, f"mv /root/pin.bak {pin} && mv /root/blk.bak {blk}")
    finally:
        sh(h, "rm -rf /srv/newer /etc/apt/sources.list.d/newer.list "
           "/etc/apt/apt.conf.d/52test-any-origin; apt-get update -qq", check=False)
    assert sh(h, f"dpkg-query -W -f '${{Version}}' {package}").stdout == installed


def _upgraded(text: str) -> str:
    """The package list of unattended-upgrade's 'Packages that will be upgraded:' line."""
    for line in text.splitlines():
        if "Packages that will be upgraded:" in line:
            return line.split(":", 1)[1]
    return ""

