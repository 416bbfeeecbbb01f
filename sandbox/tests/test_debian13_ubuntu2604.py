"""Debian 13 and Ubuntu 26.04 hosts (sandbox/debian13.py, sandbox/ubuntu2604.py), booted and
checked over real SSH: release files, trixie's real packages, kernel naming, the archives
and NVIDIA's repositories as apt sees them (signed, verified), and NVIDIA's packages
installed from NVIDIA's ubuntu2604 network repository (dkms 3.2 builds the fake module and
compresses it with zstd as 26.04's kernel modules are; the simulator loads it).

One bare fleet: d13-01 (Debian 13, with trixie's docker.io) and u26-02 (Ubuntu 26.04),
chosen with --spec "os".
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SPEC = {"hosts": 2, "docker_hosts": 0, "overrides": {
    "1": {"os": "debian13", "traits": ["distro-docker"]},
    "2": {"os": "ubuntu2604", "traits": []}}}
pytestmark = [pytest.mark.integration, pytest.mark.fleet(**SPEC, ol=0, state="bare")]

D13, U26 = "d13-01", "u26-02"
OUT = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                          os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
APT = "export DEBIAN_FRONTEND=noninteractive; apt-get -q -y "


def _url(fleet: dict, url: str) -> str:
    """The manifest names the default server; this fleet serves on its own port."""
    return url.replace("http://127.77.0.1:8000/", fleet["mirror"] + "/")


def _version(ssh, host: str, pkg: str) -> str:
    return ssh(host, f"dpkg-query -W -f '${{Version}}' {pkg}").stdout


def test_fleet_names_os_and_kernels(fleet):
    hosts = {h["name"]: h for h in fleet["hosts"]}
    assert sorted(hosts) == [D13, U26]
    assert hosts[D13]["os"] == "debian13" and hosts[U26]["os"] == "ubuntu2604"
    # trixie's ABI names carry the upstream version (the mirror's choice of the day)
    assert hosts[D13]["kernel_release"].startswith("6.12.")
    assert hosts[D13]["kernel_release"].endswith("+deb13-amd64")
    assert hosts[U26]["kernel_release"] == "7.0.0-12-generic"


def test_release_files_and_real_trixie_userland(ssh):
    d13 = ssh(D13, ". /etc/os-release; echo $ID $VERSION_ID $VERSION_CODENAME").stdout.split()
    assert d13 == ["debian", "13", "trixie"]
    assert ssh(D13, "cat /etc/debian_version").stdout.startswith("13.")
    u26 = ssh(U26, ". /etc/os-release; echo $ID $VERSION_ID $UBUNTU_CODENAME").stdout.split()
    assert u26 == ["ubuntu", "26.04", "resolute"]
    assert "DISTRIB_CODENAME=resolute" in ssh(U26, "cat /etc/lsb-release").stdout
    for host in (D13, U26):
        assert ssh(host, "uname -r").stdout.strip() == ssh(
            host, "python3 -c 'import json; print(json.load(open(\"/etc/gpusim/machine.json\"))"
            "[\"kernel_release\"])'").stdout.strip()
        assert _version(ssh, host, "apt").startswith("3.")
        assert _version(ssh, host, "systemd").startswith("257")
        assert _version(ssh, host, "python3-minimal").startswith("3.13")
        assert ssh(host, "systemctl is-system-running --wait").stdout.strip() == "running"


def test_debian13_apt_sources_are_deb822_and_archive_verifies(ssh):
    assert ssh(D13, "test ! -e /etc/apt/sources.list && echo none").stdout.strip() == "none"
    sources = ssh(D13, "cat /etc/apt/sources.list.d/debian.sources").stdout
    assert "Suites: trixie" in sources and "/debian-trixie" in sources
    assert "Components: main\n" in sources          # main only, as a stock image
    update = ssh(D13, "apt-get update 2>&1").stdout
    assert "W:" not in update and "E:" not in update, update
    for pkg, want in (("dkms", "3.2."), ("docker.io", "26.1."), ("containerd", "1.7.")):
        policy = ssh(D13, f"apt-cache policy {pkg}").stdout
        assert f"Candidate: {want}" in policy, policy
    # the running kernel's headers and the meta that depends on exactly them (trixie's
    # headers depend on their image: apt takes it too, as on a real host)
    depends = ssh(D13, "apt-cache depends linux-headers-amd64").stdout
    assert f"linux-headers-{ssh(D13, 'uname -r').stdout.strip()}" in depends


def test_debian13_runs_trixies_docker(ssh):
    """distro-docker: trixie's docker.io (with docker-cli, split out of it in trixie) runs."""
    assert ssh(D13, "docker version --format '{{.Server.Version}}'").stdout.strip() \
        .startswith("26.1.5")
    info = ssh(D13, "docker info --format '{{.CgroupVersion}} {{.Driver}}'").stdout.split()
    assert info == ["2", "overlay2"]
    assert _version(ssh, D13, "containerd").startswith("1.7.")


def test_ubuntu2604_archive_kernels_and_flavour_headers(ssh):
    sources = ssh(U26, "cat /etc/apt/sources.list.d/ubuntu.sources").stdout
    assert "Suites: resolute resolute-updates" in sources
    update = ssh(U26, "apt-get update 2>&1").stdout
    assert "W:" not in update and "E:" not in update, update
    policy = ssh(U26, 'apt-cache policy "linux-headers-$(uname -r)"').stdout
    assert "resolute-updates/main" in policy and "resolute-security/main" in policy, policy
    assert "linux-headers-7.0.0-30-generic" in ssh(
        U26, "apt-cache depends linux-headers-generic").stdout
    for meta, flavoured in (("linux-headers-generic-hwe-26.04", "7.0.0-30-generic"),
                            ("linux-headers-nvidia", "7.0.0-1004-nvidia"),
                            ("linux-headers-aws", "7.0.0-1006-aws")):
        assert f"linux-headers-{flavoured}" in ssh(U26, f"apt-cache depends {meta}").stdout
    assert "Candidate: 3.2.2" in ssh(U26, "apt-cache policy dkms").stdout
    assert "resolute/universe" in ssh(U26, "apt-cache policy docker.io").stdout
    # 26.04's modules are zstd-compressed; zstd is in the archive but not installed
    assert ssh(U26, "ls /usr/lib/modules/$(uname -r)/kernel/drivers/net").stdout.strip() \
        == "dummy.ko.zst"
    assert ssh(U26, "command -v zstd", check=False).returncode != 0


def test_debian13_local_repo_is_built_with_debian_names():
    """The fake debian13 local repo package (installed by hand on a booted host: dkms 3.2.2
    builds the open module and installs it xz-compressed; the deploy tests converge it)."""
    manifest = json.loads((OUT / "manifest.json").read_text())
    for version in ("580.95.05", "595.71.05"):
        repo = manifest["local_repos"][version]["debian13"]
        assert repo["file"] == f"nvidia-driver-local-repo-debian13-{version}_1.0-1_amd64.deb"
        assert repo["sha256"] and (OUT / "local-repos" / version / repo["file"]).is_file()
        listing = subprocess.run(["dpkg-deb", "--contents",
                                  str(OUT / "local-repos" / version / repo["file"])],
                                 capture_output=True, text=True, check=True).stdout
        for deb in (f"nvidia-open_{version}-1_amd64.deb",
                    f"nvidia-kernel-open-dkms_{version}-1_amd64.deb",
                    f"nvidia-driver-cuda_{version}-1_amd64.deb"):
            assert deb in listing, listing
    assert "debian13" not in manifest["local_repos"]["570.172.08"]


def test_ubuntu2604_network_repo_pins_a_full_version(fleet, ssh):
    """NVIDIA's network repository for ubuntu2604 (no local repo package exists): signed,
    both branches in it, nvidia-driver-pinning-<full version> chooses one."""
    net = json.loads((OUT / "manifest.json").read_text())["network_repos"]["ubuntu2604"]
    url = _url(fleet, net["url"])
    assert url.endswith("/nvidia/cuda/repos/ubuntu2604/x86_64/")
    ssh(U26, f"{APT} install curl >/dev/null && cd /tmp && "
             f"curl -fsS {_url(fleet, net['gpgkey'])} | gpg --dearmor > "
             "/usr/share/keyrings/cuda-archive-keyring.gpg && "
             f"echo 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url} /' "
             "> /etc/apt/sources.list.d/cuda-ubuntu2604-x86_64.list")
    update = ssh(U26, "apt-get update 2>&1").stdout
    assert "W:" not in update and "E:" not in update, update
    assert "Candidate: 595.71.05-0ubuntu1" in ssh(U26, "apt-cache policy nvidia-open").stdout
    ssh(U26, f"{APT} install nvidia-driver-pinning-580.95.05 >/dev/null")
    assert "Candidate: 580.95.05-0ubuntu1" in ssh(U26, "apt-cache policy nvidia-open").stdout
    ssh(U26, f'{APT} install zstd nvidia-open "linux-headers-$(uname -r)" >/dev/null',
        timeout=900)
    assert _version(ssh, U26, "nvidia-dkms-open") == "580.95.05-0ubuntu1"
    # with zstd present dkms compresses like the kernel's modules, and the module loads
    assert ssh(U26, "ls /usr/lib/modules/$(uname -r)/updates/dkms/").stdout.split() \
        == ["nvidia.ko.zst"]
    ssh(U26, "modprobe nvidia")
    assert "580.95.05" in ssh(U26, "cat /proc/driver/nvidia/version").stdout


def test_network_repo_with_a_wrong_key_is_refused(fleet, ssh):
    """apt verifies the network repository's signature: another key (the Ubuntu archive's
    of the sandbox) fails the update of that source."""
    url = _url(fleet, json.loads((OUT / "manifest.json").read_text())
               ["network_repos"]["ubuntu2604"]["url"])
    res = ssh(U26, "echo 'deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] "
                   f"{url} /' > /tmp/wrong.list && apt-get update "
                   "-o Dir::Etc::sourcelist=/tmp/wrong.list "
                   "-o Dir::Etc::sourceparts=/nonexistent 2>&1", check=False)
    # apt 3 verifies with sqv: the source is dropped with a warning (exit 0 on apt 3.0)
    assert "OpenPGP signature verification failed" in res.stdout, res.stdout
    assert "Missing key" in res.stdout, res.stdout
