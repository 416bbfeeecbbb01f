"""Checks of booted, still bare Debian 13 and Ubuntu 26.04 sandbox hosts (sandbox/debian13.py,
sandbox/ubuntu2604.py): release files, trixie's real packages, kernel naming, the archives and
NVIDIA's repositories as apt sees them (signed, verified). Used by test_mixed_fleet.py before
it converges those hosts."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


def _version(ssh, name: str, pkg: str) -> str:
    return ssh(name, f"dpkg-query -W -f '${{Version}}' {pkg}")


def release_files_and_real_trixie_userland(ssh, d13: str, u26: str) -> None:
    assert ssh(d13, ". /etc/os-release; echo $ID $VERSION_ID $VERSION_CODENAME").split() == [
        "debian", "13", "trixie"]
    assert ssh(d13, "cat /etc/debian_version").startswith("13.")
    assert ssh(u26, ". /etc/os-release; echo $ID $VERSION_ID $UBUNTU_CODENAME").split() == [
        "ubuntu", "26.04", "resolute"]
    assert "DISTRIB_CODENAME=resolute" in ssh(u26, "cat /etc/lsb-release")
    for host in (d13, u26):
        assert ssh(host, "uname -r").strip() == ssh(
            host, "python3 -c 'import json; print(json.load(open(\"/etc/gpusim/machine.json\"))"
            "[\"kernel_release\"])'").strip()
        assert _version(ssh, host, "apt").startswith("3.")
        assert _version(ssh, host, "systemd").startswith("257")
        assert _version(ssh, host, "python3-minimal").startswith("3.13")
        assert ssh(host, "systemctl is-system-running --wait").strip() == "running"


def debian13_sources_are_deb822_and_archive_verifies(ssh, d13: str) -> None:
    assert ssh(d13, "test ! -e /etc/apt/sources.list && echo none").strip() == "none"
    sources = ssh(d13, "cat /etc/apt/sources.list.d/debian.sources")
    assert "Suites: trixie" in sources and "/debian-trixie" in sources
    assert "Components: main\n" in sources          # main only, as a stock image
    update = ssh(d13, "apt-get update 2>&1")
    assert "W:" not in update and "E:" not in update, update
    for pkg, want in (("dkms", "3.2."), ("docker.io", "26.1."), ("containerd", "1.7.")):
        policy = ssh(d13, f"apt-cache policy {pkg}")
        assert f"Candidate: {want}" in policy, policy
    # the running kernel's headers and the meta that depends on exactly them (trixie's
    # headers depend on their image: apt takes it too, as on a real host)
    depends = ssh(d13, "apt-cache depends linux-headers-amd64")
    assert f"linux-headers-{ssh(d13, 'uname -r').strip()}" in depends


def ubuntu2604_archive_kernels_and_flavour_headers(ssh, sh, u26: str) -> None:
    assert "Suites: resolute resolute-updates" in ssh(u26, "cat /etc/apt/sources.list.d/ubuntu.sources")
    update = ssh(u26, "apt-get update 2>&1")
    assert "W:" not in update and "E:" not in update, update
    policy = ssh(u26, 'apt-cache policy "linux-headers-$(uname -r)"')
    assert "resolute-updates/main" in policy and "resolute-security/main" in policy, policy
    assert "linux-headers-7.0.0-30-generic" in ssh(u26, "apt-cache depends linux-headers-generic")
    for meta, flavoured in (("linux-headers-generic-hwe-26.04", "7.0.0-30-generic"),
                            ("linux-headers-nvidia", "7.0.0-1004-nvidia"),
                            ("linux-headers-aws", "7.0.0-1006-aws")):
        assert f"linux-headers-{flavoured}" in ssh(u26, f"apt-cache depends {meta}")
    assert "Candidate: 3.2.2" in ssh(u26, "apt-cache policy dkms")
    assert "resolute/universe" in ssh(u26, "apt-cache policy docker.io")
    # 26.04's modules are zstd-compressed; zstd is in the archive but not installed
    assert ssh(u26, "ls /usr/lib/modules/$(uname -r)/kernel/drivers/net").strip() == "dummy.ko.zst"
    assert sh(u26, "command -v zstd", check=False).returncode != 0


def debian13_local_repo_is_built_with_debian_names(out: Path, versions) -> None:
    """The fake debian13 local repo package of each of ``versions`` (not of 570.172.08)."""
    manifest = json.loads((out / "manifest.json").read_text())
    for version in versions:
        repo = manifest["local_repos"][version]["debian13"]
        assert repo["file"] == f"nvidia-driver-local-repo-debian13-{version}_1.0-1_amd64.deb"
        assert repo["sha256"] and (out / "local-repos" / version / repo["file"]).is_file()
        listing = subprocess.run(["dpkg-deb", "--contents",
                                  str(out / "local-repos" / version / repo["file"])],
                                 capture_output=True, text=True, check=True).stdout
        for deb in (f"nvidia-open_{version}-1_amd64.deb",
                    f"nvidia-kernel-open-dkms_{version}-1_amd64.deb",
                    f"nvidia-driver-cuda_{version}-1_amd64.deb"):
            assert deb in listing, listing
    assert "debian13" not in manifest["local_repos"]["570.172.08"]


def network_repo_with_a_wrong_key_is_refused(sh, u26: str, url: str) -> None:
    """apt verifies the network repository's signature: another key (the Ubuntu archive's
    of the sandbox) fails the update of that source."""
    assert url.endswith("/nvidia/cuda/repos/ubuntu2604/x86_64/")
    res = sh(u26, "echo 'deb [signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] "
                  f"{url} /' > /tmp/wrong.list && apt-get update "
                  "-o Dir::Etc::sourcelist=/tmp/wrong.list "
                  "-o Dir::Etc::sourceparts=/nonexistent 2>&1; rm -f /tmp/wrong.list",
             check=False)
    # apt 3 verifies with sqv: the source is dropped with a warning (exit 0 on apt 3.0)
    assert "OpenPGP signature verification failed" in res.stdout, res.stdout
    assert "Missing key" in res.stdout, res.stdout
