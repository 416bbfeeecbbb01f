"""Debian 13 and Ubuntu 26.04 in the sandbox, without booting: host naming by --spec "os",
trixie's kernel ABI naming, Ubuntu 26.04's header packages and NVIDIA's repositories' names."""
from __future__ import annotations

import pytest

from sandbox import debian_kernel, spec, ubuntu, ubuntu2604
from sandbox.nvidia.pkg import common, driver, netrepo
from sandbox.util import SandboxError

K13 = "6.12.118+deb13-amd64"


def test_os_override_renames_the_host_and_keeps_its_index():
    over = spec.load_overrides('{"2": {"os": "debian13"}, "gpu-03": {"os": "ubuntu2604"}}')
    assert spec.oses(3, 0, 0, over) == {"debian12", "debian13", "ubuntu2604"}
    hosts = spec.plan(3, 0, 1, over, "6.1.0-56-amd64", kernels={"debian13": K13})
    assert [(h["name"], h["os"], h["kernel_release"]) for h in hosts] == [
        ("gpu-01", "debian12", "6.1.0-56-amd64"), ("d13-02", "debian13", K13),
        ("u26-03", "ubuntu2604", "7.0.0-12-generic")]
    assert "unattended-upgrades" in hosts[2]["traits"]     # on by default on Ubuntu


def test_unknown_os_and_missing_kernel_are_one_line_errors():
    with pytest.raises(SandboxError, match="os 'debian14' is not one of debian12, debian13"):
        spec.load_overrides('{"1": {"os": "debian14"}}')
    with pytest.raises(SandboxError, match="no kernel known for debian13 hosts"):
        spec.plan(1, 0, 0, {"1": {"os": "debian13"}}, "6.1.0-56-amd64")


def _apt_cache(stanzas: dict[str, list[tuple[str, str]]]):
    def call(args: list[str]) -> str:
        if args[0] == "madison":
            return "".join(f"{args[1]} | {v} | x\n" for v, _ in stanzas.get(args[1], []))
        return "\n\n".join(f"Package: {n}\nVersion: {v}\nDepends: {d}"
                           for n in args[1:] for v, d in stanzas.get(n, []))
    return call


def test_trixie_kernel_abi_names_carry_the_upstream_version():
    cache = _apt_cache({
        "linux-headers-amd64": [("6.12.118-1", f"linux-headers-{K13} (= 6.12.118-1)")],
        f"linux-headers-{K13}": [("6.12.118-1", "")],
        f"linux-image-{K13}": [("6.12.118-1", "")]})
    choice = debian_kernel.choose(cache, "trixie")
    assert (choice.release, choice.image) == (K13, f"linux-image-{K13}")
    assert choice.meta == "linux-headers-amd64=6.12.118-1"
    # bookworm's rule does not take a 6.12 ABI for its own
    with pytest.raises(debian_kernel.NoKernel, match="depends on no linux-headers-6.1.x"):
        debian_kernel.choose(cache, "bookworm")


def test_ubuntu2604_headers_are_merged_usr_and_zstd():
    pkgs = ubuntu2604.header_packages("7.0.0-12-generic", "7.0.0-12.12")
    (common_name, _, _, _), (flav_name, control, files, links) = pkgs
    assert common_name == "linux-headers-7.0.0-12_7.0.0-12.12_all.deb"
    assert "Depends: linux-headers-7.0.0-12\n" in control
    assert list(links) == ["/usr/lib/modules/7.0.0-12-generic/build"]
    assert "CONFIG_MODULE_COMPRESS_ZSTD=y" in files["/usr/src/linux-headers-7.0.0-12-generic/.config"]
    nvidia = ubuntu.header_packages("7.0.0-1004-nvidia", "7.0.0-1004.4")
    assert nvidia[0][0].startswith("linux-nvidia-headers-7.0.0-1004_")
    assert "7.0.0-1004-nvidia" in " ".join(m[2] for m in ubuntu2604.metas(lambda r, v: v))


def test_network_repos_pin_full_versions_with_unbranched_names():
    names = {(p.name, p.version) for p in netrepo.packages("ubuntu2604")}
    for v in common.NETWORK_REPOS["ubuntu2604"]:
        assert (f"nvidia-driver-pinning-{v}", f"{v}-1ubuntu1") in names
        assert ("nvidia-open", f"{v}-0ubuntu1") in names
        assert ("nvidia-dkms-open", f"{v}-0ubuntu1") in names
    assert not any(n.startswith("nvidia-dkms-580") for n, _ in names)   # no branched names
    debian = {p.name for p in netrepo.packages("debian13")}
    assert {"nvidia-open", "nvidia-kernel-open-dkms", "nvidia-driver-cuda",
            "nvidia-driver-pinning-595.71.05"} <= debian
    pin = next(p for p in netrepo.packages("ubuntu2604")
               if p.name == "nvidia-driver-pinning-595.71.05")
    assert "Pin: version 595.71.05-*\nPin-Priority: 1000" in pin.files[driver.PIN_FILE][0]


def test_debian13_local_repos_from_r580_with_debian_names():
    assert not common.builds("570.172.08", "debian13") and common.builds("580.95.05", "debian13")
    names = {p.name for p in driver.apt_packages("595.71.05", "debian13")}
    assert {"nvidia-open", "nvidia-kernel-open-dkms", "nvidia-kernel-support",
            "nvidia-driver-pinning-595"} <= names


def test_next_kernel_trait_follows_each_naming():
    from sandbox.traits.boot import next_kernel
    assert next_kernel({"os": "debian13", "kernel_release": K13}) == "6.12.119+deb13-amd64"
    assert next_kernel({"os": "ubuntu2604", "kernel_release": "7.0.0-12-generic"}) \
        == "7.0.0-13-generic"
    assert next_kernel({"os": "debian12", "kernel_release": "6.1.0-56-amd64"}) == "6.1.0-57-amd64"
