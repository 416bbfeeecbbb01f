"""Exact plans on the apt releases of issue 35: Debian 13 from its local repo package, Ubuntu
26.04 from NVIDIA's network repository (no local repo package exists), and the refusals
before any change: a driver that does not build on 26.04's kernel 7.0, a network repository
that is not configured, not signed by the configured key, or not reachable."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.plans.test_el_plans import _index, _plan

GOLDEN = Path(__file__).resolve().parent / "golden"


def _golden(name: str) -> list[str]:
    return (GOLDEN / f"{name}.plan").read_text().splitlines()


def _commands(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("FAILED")]


def test_debian13_takes_its_local_repo_debian_names_and_contrib_for_trixie():
    lines = _golden("debian13")
    deb = "nvidia-driver-local-repo-debian13-590.48.01_1.0-1_amd64.deb"
    assert f"dpkg -i /var/cache/gpuhost/{deb}" in lines
    install = _index(lines, "install --no-install-recommends nvidia-driver-pinning-590 "
                            "nvidia-open nvidia-smi")
    assert _index(lines, "gpuhost-debian-contrib.sources.gpuhost-new") < _index(lines, "dpkg -i")
    assert _index(lines, "upload /etc/apt/preferences.d/gpuhost-nvidia-driver") < install
    assert "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " \
           "linux-headers-6.12.57+deb13-amd64" in lines
    assert any(line.endswith("install --no-install-recommends linux-headers-amd64")
               for line in lines)
    assert _index(lines, "initramfs") == _index(lines, "if command -v update-initramfs")
    assert not any("zstd" in line or "gpuhost-nvidia-driver.sources" in line for line in lines)


def test_ubuntu2604_takes_the_verified_network_repository_pinned_by_full_version():
    lines = _golden("ubuntu2604")
    assert not any("dpkg -i" in line or "local-repo" in line for line in lines)
    key = lines.index("upload /usr/share/keyrings/gpuhost-nvidia-driver.asc.gpuhost-new")
    sources = lines.index("upload /etc/apt/sources.list.d/gpuhost-nvidia-driver.sources"
                          ".gpuhost-new")
    pin = lines.index("upload /etc/apt/preferences.d/gpuhost-nvidia-driver.gpuhost-new")
    zstd = _index(lines, "install --no-install-recommends zstd")
    driver = _index(lines, "install --no-install-recommends nvidia-driver-pinning-595.71.05 "
                           "nvidia-open")
    assert key < sources < pin < zstd < driver
    assert lines[_index(lines, "initramfs")].startswith("if command -v dracut")
    assert any(line.endswith("install --no-install-recommends linux-headers-generic")
               for line in lines)
    assert "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " \
           "linux-headers-7.0.0-12-generic" in lines


def test_a_driver_that_does_not_build_on_kernel_7_is_refused_naming_the_first_that_does():
    for version, first in (("580.126.09", "580.142"), ("590.48.01", "595.71.05")):
        result, lines = _plan("ubuntu2604", {"nvidia_driver_version": version})
        commands = _commands(lines)
        assert len(commands) == 1, commands  # the failing line, nothing else
        assert commands[0].startswith(
            f"echo 'gpuhost: @fake/ubuntu2604: driver {version} does not build on kernel "
            f"7.0.0-12-generic (Linux 7.0, Ubuntu 26.04): the first that does is {first};")


def _refused_before_any_change(extra: dict) -> str:
    result, lines = _plan("ubuntu2604", extra)
    assert result.returncode != 0
    assert result.stdout.strip() == "", result.stdout  # not one command, not one upload
    said = [line for line in result.stderr.splitlines() if "nvidia_driver" in line]
    assert said, result.stderr[-2000:]
    return said[-1]


def test_ubuntu2604_without_a_network_repository_is_one_line_before_any_change():
    other = {"debian13": {"url": "https://mirror.example/cuda/debian13/x86_64/",
                          "key": "/nonexistent.asc", "fingerprint": "A" * 40}}
    line = _refused_before_any_change({"nvidia_driver_repo": other})
    assert "nvidia_driver_repo has no entry for 'ubuntu2604': NVIDIA publishes no local repo " \
           "package for Ubuntu 26.04" in line
    assert "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2604/x86_64/" in line
    line = _refused_before_any_change({"nvidia_driver_source": "local_repo",
                                       "nvidia_local_repo": {"debian12": {
                                           "path": "/x.deb", "sha256": "a" * 64}}})
    assert "NVIDIA publishes no local repo package for Ubuntu 26.04: set " \
           "nvidia_driver_source: network" in line


def test_a_wrong_key_or_an_unreachable_mirror_is_one_line_before_any_change():
    from tests.plans import scenarios

    repo = scenarios.netrepo.cached(scenarios.ARTIFACTS, "netrepo-ubuntu2604",
                                    scenarios.NETWORK_REPOS["ubuntu2604"])
    line = _refused_before_any_change({"nvidia_driver_repo": {"ubuntu2604": {
        **repo, "fingerprint": "0" * 40}}})
    assert line.strip().startswith("gpuhost") or "nvidia_driver_repo[ubuntu2604]" in line
    assert "nvidia_driver_repo[ubuntu2604] (checked on the controller, nothing was changed on " \
           "any host): the key" in line and "not the configured " + "0" * 40 in line
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = _refused_before_any_change({"nvidia_driver_repo": {"ubuntu2604": {
        **repo, "url": f"http://127.0.0.1:{port}/cuda/"}}})
    assert f"cannot reach http://127.0.0.1:{port}/cuda/InRelease" in line


def test_the_upgrades_move_debian13_and_ubuntu2604_from_580_to_595():
    debian = (GOLDEN / "upgrade-debian13.plan").read_text().splitlines()
    new = _index(debian, "dpkg -i /var/cache/gpuhost/nvidia-driver-local-repo-debian13-595.71.05")
    old = _index(debian, "apt-get purge -y nvidia-driver-local-repo-debian13-580.105.08")
    switch = _index(debian, "--no-install-recommends nvidia-driver-pinning-595 nvidia-open "
                            "nvidia-smi cuda-drivers- nvidia-kernel-dkms-")
    assert new < old < switch
    ubuntu = (GOLDEN / "upgrade-ubuntu2604-reboot.plan").read_text().splitlines()
    assert not any("local-repo" in line for line in ubuntu)
    sources = ubuntu.index("upload /etc/apt/sources.list.d/gpuhost-nvidia-driver.sources"
                           ".gpuhost-new")
    pin = ubuntu.index("upload /etc/apt/preferences.d/gpuhost-nvidia-driver.gpuhost-new")
    switch = _index(ubuntu, "install -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::="
                            "--force-confold --no-install-recommends nvidia-driver-pinning-"
                            "595.71.05 nvidia-open cuda-drivers- nvidia-dkms-")
    assert sources < pin < switch < _index(ubuntu, "reboot )")


def test_an_upgrade_to_a_driver_that_does_not_build_on_kernel_7_is_refused_before_any_host():
    from tests.plans.test_upgrade_plans import commands, run_plan

    result = run_plan("ubuntu2604", {"nvidia_driver_version": "590.48.01"})
    assert result.returncode != 0 and commands(result) == []
    assert "driver 590.48.01 does not build on kernel 7.0.0-12-generic (Linux 7.0, Ubuntu " \
           "26.04): the first that does is 595.71.05" in result.stdout + result.stderr


def test_an_el_host_takes_the_network_repository_when_its_inventory_says_so():
    """dnf: the verified key imported, gpuhost's .repo with gpgcheck=1 (NVIDIA signs packages,
    not metadata), no local repo package; the exact version installed and locked as before."""
    from tests.plans import scenarios

    repo = scenarios.netrepo.cached(scenarios.ARTIFACTS, "netrepo-rhel10",
                                    [("nvidia-open", scenarios.DRIVER, "1.el10")], rpm=True)
    result, lines = _plan("rocky10", {"nvidia_driver_source": "network",
                                      "nvidia_driver_repo": {"rhel10": repo}})
    assert result.returncode == 0, result.stderr[-2000:]
    assert not any("local-repo" in line for line in lines)
    key = lines.index("upload /etc/pki/rpm-gpg/gpuhost-nvidia-driver.asc.gpuhost-new")
    imported = lines.index("rpm --import /etc/pki/rpm-gpg/gpuhost-nvidia-driver.asc")
    added = lines.index("upload /etc/yum.repos.d/gpuhost-nvidia-driver.repo.gpuhost-new")
    install = _index(lines, f"dnf install -y python3-dnf-plugin-versionlock nvidia-open-"
                            f"{scenarios.DRIVER} && locks=")
    assert key < imported < added < install
    # otherwise rocky10's golden plan: the local repo package's 4 lines became these 9
    golden = _golden("rocky10")
    start = golden.index("mkdir -p /var/cache/gpuhost")
    assert lines[:start] == golden[:start] and lines[start + 9:] == golden[start + 4:]


def test_an_upgrade_from_an_unreachable_mirror_changes_nothing_anywhere():
    from tests.plans import scenarios
    from tests.plans.test_upgrade_plans import commands, run_plan

    repo = scenarios.netrepo.cached(scenarios.ARTIFACTS, "netrepo-ubuntu2604",
                                    scenarios.NETWORK_REPOS["ubuntu2604"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run_plan("ubuntu2604", {"nvidia_driver_repo": {"ubuntu2604": {
        **repo, "url": f"http://127.0.0.1:{port}/cuda/"}}})
    assert result.returncode != 0 and commands(result) == []
    assert f"nvidia_driver_repo[ubuntu2604] (checked on the controller, nothing was changed on " \
           f"any host): cannot reach http://127.0.0.1:{port}/cuda/InRelease" in result.stdout
