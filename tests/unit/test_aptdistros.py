"""gpuhost.aptdistros: one entry per apt release, and what each decides (identification is in
test_policy.py): driver package names and pins, headers meta packages, the dkms line, the
initramfs tool, and the kernel 7.0 table of Ubuntu 26.04."""

from __future__ import annotations

import pytest

from gpuhost import aptdistros, distro, kernel_meta, packages
from gpuhost.aptdistros import ubuntu


def test_every_release_has_one_entry_and_the_tags_follow_it():
    assert tuple(aptdistros.RELEASES) == ("debian12", "debian13", "ubuntu2204", "ubuntu2404",
                                          "ubuntu2604")
    assert distro.DISTRO_TAGS[:5] == tuple(aptdistros.RELEASES)
    assert packages.DEB_DISTROS == tuple(aptdistros.RELEASES)
    assert {r.codename for r in aptdistros.RELEASES.values()} == {
        "bookworm", "trixie", "jammy", "noble", "resolute"}
    with pytest.raises(ValueError, match="no apt distribution 'rhel9'"):
        aptdistros.release("rhel9")


@pytest.mark.parametrize("tag, version, names", [
    # Debian 12 and 13: Debian's names on every branch, nvidia-smi named
    ("debian12", "570.172.08", ["nvidia-open", "nvidia-smi"]),
    ("debian13", "590.48.01", ["nvidia-driver-pinning-590", "nvidia-open", "nvidia-smi"]),
    ("debian13", "580.105.08", ["nvidia-open", "nvidia-smi"]),
    # Ubuntu 22.04/24.04: the branch in the names before 590, the branch's pinning package from
    ("ubuntu2404", "570.172.08", ["nvidia-open-570"]),
    ("ubuntu2404", "590.48.01", ["nvidia-driver-pinning-590", "nvidia-open"]),
    # Ubuntu 26.04: pinning by the full version (NVIDIA's 26.04 driver container)
    ("ubuntu2604", "595.71.05", ["nvidia-driver-pinning-595.71.05", "nvidia-open"]),
    ("ubuntu2604", "580.142", ["nvidia-driver-pinning-580.142", "nvidia-open"]),  # every branch
])
def test_driver_packages_per_release(tag, version, names):
    assert packages.driver_packages(tag, version, "open", False) == names


def test_the_apt_pin_is_the_same_for_every_source_and_release():
    pin = packages.apt_pin("595.71.05")
    assert "Pin: version 595.71.05-*\nPin-Priority: 1000\n" in pin


@pytest.mark.parametrize("tag, release, meta", [
    ("debian13", "6.12.57+deb13-amd64", "linux-headers-amd64"),
    ("debian13", "6.12.57+deb13-cloud-amd64", "linux-headers-cloud-amd64"),
    ("debian13", "6.12.74+deb13+1-amd64", "linux-headers-amd64"),
    ("debian13", "6.12.57+deb13-rt-amd64", "linux-headers-rt-amd64"),
    ("debian12", "6.1.0-56-cloud-amd64", "linux-headers-cloud-amd64"),
    ("ubuntu2604", "7.0.0-12-generic", "linux-headers-generic"),
    ("ubuntu2604", "7.2.0-5-generic", "linux-headers-generic-hwe-26.04"),
    ("ubuntu2604", "7.0.0-1004-aws", "linux-headers-aws-lts-26.04"),
    ("ubuntu2604", "7.1.0-1010-azure", "linux-headers-azure"),
    ("ubuntu2604", "7.0.0-1008-gcp", "linux-headers-gcp-lts-26.04"),
    ("ubuntu2604", "7.0.0-1006-nvidia", "linux-headers-nvidia-lts-26.04"),
    ("ubuntu2604", "7.0.0-12-generic-64k", "linux-headers-generic-64k"),
    ("ubuntu2404", "6.8.0-51-generic", "linux-headers-generic"),
    ("ubuntu2204", "6.8.0-51-generic", "linux-headers-generic-hwe-22.04"),
])
def test_headers_meta_per_release(tag, release, meta):
    assert kernel_meta.headers_meta(tag, release) == meta


def test_what_differs_per_release():
    r = aptdistros.RELEASES
    assert [t for t, e in r.items() if e.needs_zstd] == ["ubuntu2604"]
    assert [t for t, e in r.items() if not e.local_repo] == ["ubuntu2604"]
    assert [t for t, e in r.items() if e.initramfs == "dracut"] == ["ubuntu2604"]
    assert [t for t, e in r.items() if e.dkms_line == "2.8"] == ["ubuntu2204"]
    assert [t for t, e in r.items() if e.contrib] == ["debian12", "debian13"]
    assert [t for t, e in r.items() if e.pinning == "version"] == ["ubuntu2604"]
    assert [t for t, e in r.items() if e.unversioned_from == 0] == ["ubuntu2604"]


@pytest.mark.parametrize("version, builds", [
    ("570.172.08", False), ("580.119.02", False), ("580.126.18", False), ("580.142", True),
    ("580.159.04", True), ("590.48.01", False), ("595.45.04", False), ("595.71.05", True),
    ("595.91.07", True), ("610.43.02", True), ("620.10.01", True),
])
def test_the_kernel_7_0_table(version, builds):
    assert ubuntu.builds_on_kernel_7_0(version) is builds


def test_a_driver_that_does_not_build_on_7_0_is_one_line_naming_the_first_that_does():
    problem = aptdistros.driver_problem("ubuntu2604", ["7.0.0-12-generic", None], "580.126.09")
    assert problem == ("driver 580.126.09 does not build on kernel 7.0.0-12-generic (Linux 7.0, "
                       "Ubuntu 26.04): the first that does is 580.142; set nvidia_driver_version "
                       "to it or a newer one (580.142+, 595.71.05+, 610+)")
    assert "the first that does is 595.71.05" in aptdistros.driver_problem(
        "ubuntu2604", ["7.0.0-12-generic"], "590.48.01")
    # the next boot's kernel counts too; other kernels and releases are not judged here
    assert aptdistros.driver_problem("ubuntu2604", ["6.17.0-5-generic", "7.0.0-30-generic"],
                                     "570.172.08") is not None
    assert aptdistros.driver_problem("ubuntu2604", ["7.0.0-12-generic"], "595.71.05") is None
    assert aptdistros.driver_problem("ubuntu2404", ["6.8.0-51-generic"], "570.172.08") is None
    assert aptdistros.driver_problem("rhel10", ["7.0.0-1.el10"], "570.172.08") is None


def test_debian_13_installs_docker_cli_beside_docker_io():
    """Trixie's docker.io only recommends docker-cli (the CLI was split out of it); gpuhost
    installs without recommends, so it names both there."""
    from gpuhost.runtime.docker_packages import docker_packages
    assert docker_packages("debian13", "distro") == ["docker.io", "docker-cli"]
    for tag in ("debian12", "ubuntu2204", "ubuntu2404", "ubuntu2604"):
        assert docker_packages(tag, "distro") == ["docker.io"], tag
    assert docker_packages("debian13", "docker") == ["docker-ce", "docker-ce-cli", "containerd.io"]
