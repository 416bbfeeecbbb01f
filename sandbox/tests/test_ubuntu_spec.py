"""Ubuntu hosts in the fleet's plan and their files (no host booted: sandbox/ubuntu.py,
sandbox/spec.py, sandbox/traits/ubuntu.py). The booted hosts: test_traits_ubuntu.py."""
from __future__ import annotations

import pytest

from sandbox import spec, traits, ubuntu
from sandbox.util import SandboxError

KERNEL = "6.1.0-99-amd64"


def test_ubuntu_hosts_come_after_debian_and_oracle_hosts_24_04_takes_the_odd_one():
    hosts = spec.plan(6, 2, 1, {}, KERNEL, ubuntu=3)
    assert [h["name"] for h in hosts] == ["gpu-01", "ol8-02", "ol9-03", "u22-04", "u24-05",
                                          "u24-06"]
    by = {h["name"]: h for h in hosts}
    assert by["u22-04"]["os"] == "ubuntu2204"
    assert by["u22-04"]["kernel_release"] == "5.15.0-131-generic"
    assert by["u24-05"]["kernel_release"] == "6.8.0-51-generic"
    assert [h["name"] for h in spec.plan(1, 0, 0, {}, KERNEL, ubuntu=1)] == ["u24-01"]


def test_without_ubuntu_the_names_do_not_move():
    assert [h["name"] for h in spec.plan(4, 2, 1, {}, KERNEL)] == [
        "gpu-01", "gpu-02", "ol8-03", "ol9-04"]


def test_too_many_ubuntu_hosts_is_refused():
    with pytest.raises(SandboxError, match="--ubuntu must be 0..2"):
        spec.plan(4, 2, 0, {}, KERNEL, ubuntu=3)
    with pytest.raises(SandboxError, match="docker hosts are Debian hosts"):
        spec.plan(2, 0, 1, {}, KERNEL, ubuntu=2)


def test_unattended_upgrades_is_a_default_on_ubuntu_only():
    hosts = {h["name"]: h for h in spec.plan(3, 0, 1, {}, KERNEL, ubuntu=2)}
    assert "unattended-upgrades" in hosts["u24-03"]["traits"]
    assert "unattended-upgrades" in hosts["u22-02"]["traits"]
    assert "unattended-upgrades" not in hosts["gpu-01"]["traits"]
    for name in ("unattended-upgrades", "distro-docker", "distro-containerd"):
        assert traits.REGISTRY[name].source


def test_apt_traits_are_refused_on_oracle_hosts():
    with pytest.raises(SandboxError, match="trait 'distro-docker' is for"):
        spec.plan(2, 1, 1, {"ol8-02": {"traits": ["distro-docker"]}}, KERNEL)


def test_release_files_are_ubuntus():
    text = ubuntu.os_release("ubuntu2404")
    assert "ID=ubuntu\n" in text and 'VERSION_ID="24.04"' in text
    assert "VERSION_CODENAME=noble" in text and "UBUNTU_CODENAME=noble" in text
    assert "DISTRIB_CODENAME=jammy" in ubuntu.lsb_release("ubuntu2204")
    assert ubuntu.RELEASES["ubuntu2204"]["debian_version"] == "bookworm/sid"


def test_apt_sources_as_the_stock_images_ship_them(tmp_path, monkeypatch):
    keyring = tmp_path / "archive.gpg"
    keyring.write_bytes(b"key")
    monkeypatch.setattr(ubuntu.mirror, "KEYRING", keyring)
    jammy, noble = tmp_path / "jammy", tmp_path / "noble"
    ubuntu.write_apt_sources(jammy, "ubuntu2204")
    ubuntu.write_apt_sources(noble, "ubuntu2404")
    lines = (jammy / "etc/apt/sources.list").read_text()
    assert "jammy-security multiverse" in lines and "jammy-updates universe" in lines
    assert (jammy / ubuntu.JAMMY_KEYRING.lstrip("/")).read_bytes() == b"key"
    deb822 = (noble / "etc/apt/sources.list.d/ubuntu.sources").read_text()
    assert "Suites: noble noble-updates\n" in deb822 and "Suites: noble-security\n" in deb822
    assert f"Signed-By: {ubuntu.NOBLE_KEYRING}" in deb822
    assert (noble / "etc/apt/sources.list").read_text().startswith("# Ubuntu sources have moved")


def test_header_packages_are_named_and_laid_out_as_ubuntus():
    pkgs = ubuntu.header_packages("6.8.0-51-generic", "6.8.0-51.52")
    names = [control.split("\n", 1)[0] for _, control, _, _ in pkgs]
    assert names == ["Package: linux-headers-6.8.0-51", "Package: linux-headers-6.8.0-51-generic"]
    assert "Depends: linux-headers-6.8.0-51\n" in pkgs[1][1]
    assert pkgs[1][3] == {"/lib/modules/6.8.0-51-generic/build":
                          "/usr/src/linux-headers-6.8.0-51-generic"}
