"""Enterprise Linux 10 hosts in the fleet's plan, their release files and their fake
repositories' layout (no host booted: sandbox/spec.py, sandbox/elrelease.py,
sandbox/nvidia/pkg/elrepos.py). The booted hosts: tests/integration/test_mixed_fleet.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost import distro
from sandbox import elrelease, paths, spec
from sandbox.nvidia.pkg import elrepos, elrpms, oracle, redhat, rocky
from sandbox.util import SandboxError

KERNEL = "6.1.0-99-amd64"
VERSION = "595.71.05"


def test_a_spec_os_puts_a_host_on_any_el_release_and_names_it_after_it():
    overrides = spec.load_overrides('{"1": {"os": "ol10"}, "2": {"os": "rocky10"}, '
                                    '"3": {"os": "rhel10", "traits": []}}')
    hosts = {h["name"]: h for h in spec.plan(4, 0, 0, overrides, KERNEL)}
    assert list(hosts) == ["ol10-01", "rocky10-02", "rhel10-03", "gpu-04"]
    assert hosts["ol10-01"]["kernel_release"] == "6.12.0-100.28.2.el10uek.x86_64"
    assert hosts["rocky10-02"]["kernel_release"] == "6.12.0-55.12.1.el10_0.x86_64"
    assert hosts["rhel10-03"]["traits"] == []
    # a RHEL host is registered unless its spec says otherwise
    assert "rhsm-registered" in spec.plan(1, 0, 0, {"1": {"os": "rhel10"}}, KERNEL)[0]["traits"]
    assert spec.os_names(overrides) == {"ol10", "rocky10", "rhel10"}


def test_a_spec_os_is_checked():
    with pytest.raises(SandboxError, match="os 'el11' is not one of"):
        spec.load_overrides('{"1": {"os": "el11"}}')
    # by the host's default name too: the host keeps its index, its name follows the OS
    assert [h["name"] for h in spec.plan(1, 0, 0, spec.load_overrides('{"gpu-01": {"os": "ol10"}}'),
                                         KERNEL)] == ["ol10-01"]


@pytest.mark.parametrize("os_name,os_id,tag", [("ol10", "ol", "rhel10"),
                                               ("rocky10", "rocky", "rhel10"),
                                               ("rhel10", "rhel", "rhel10"),
                                               ("ol9", "ol", "rhel9")])
def test_each_release_layer_is_recognised_by_gpuhost_from_its_os_release(tmp_path, os_name,
                                                                           os_id, tag):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/debian_version").write_text("12\n")   # replaced by a whiteout
    (tmp_path / "etc/debian_version").unlink()
    elrelease.write_release(tmp_path, os_name)     # as root, like the layer build
    text = (tmp_path / "usr/lib/os-release").read_text()
    data = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    found = distro.identify(data)
    assert (found["os_id"], found["distro_tag"]) == (os_id, tag)
    assert (tmp_path / "etc/redhat-release").exists()
    assert (tmp_path / "etc/dnf/vars/releasever").read_text() == f"{found['major']}\n"


def test_every_el_release_has_a_vendor_module_a_layer_and_a_kernel():
    assert elrepos.releases() == ["ol8", "ol9", "ol10", "rocky10", "rhel10"]
    assert set(elrepos.releases()) == set(elrelease.RELEASES)
    assert set(elrepos.releases()) == set(spec.OL_KERNELS)
    assert elrepos.vendor("rocky10") is rocky and elrepos.vendor("debian12") is None
    assert elrepos.release_dir("ol10", paths.NVIDIA_CACHE) == paths.NVIDIA_CACHE / "ol/ol10"


def test_oracle_linux_10s_epel_channel_follows_the_update_level_and_uek8_needs_no_toolset():
    assert oracle.channels("ol10")[4] == "ol10_u0_developer_EPEL"
    assert "ol9_developer_EPEL" in oracle.channels("ol9")
    uek8 = elrpms.kernel_devel(*oracle.KERNELS["ol10"][0], oracle.SYSTEM_GCC["ol10"])
    assert uek8.name == "kernel-uek-devel" and uek8.requires == []
    uek8_ol9 = elrpms.kernel_devel(*oracle.KERNELS["ol9"][0], oracle.SYSTEM_GCC["ol9"])
    assert uek8_ol9.requires == ["gcc-toolset-14"]
    stock = oracle.host_files("ol10")
    assert "[ol10_codeready_builder]" in stock["/etc/yum.repos.d/oracle-linux-ol10.repo"]
    assert "enabled=1" in stock["/etc/yum.repos.d/uek-ol10.repo"]


def test_rocky_has_crb_disabled_and_rhel_has_no_repo_file_until_registered():
    repo = rocky.host_files("rocky10")["/etc/yum.repos.d/rocky.repo"]
    crb = repo[repo.index("[crb]"):]
    assert "enabled=0" in crb.split("\n\n")[0]
    files = redhat.host_files("rhel10")
    assert list(files) == [redhat.ENTITLED]       # not in /etc/yum.repos.d
    text = files[redhat.ENTITLED]
    assert "[rhel-10-for-x86_64-baseos-rpms]" in text
    assert "[codeready-builder-for-rhel-10-x86_64-rpms]" in text


def test_the_subscription_manager_stand_in_says_unregistered_where_no_consumer_cert_is():
    """Run on this machine (no /etc/pki/consumer): exit 1 with Red Hat's message."""
    assert not (Path("/etc/pki/consumer/cert.pem")).exists()
    done = subprocess.run([sys.executable, str(paths.FILES_DIR / "subscription-manager"),
                           "identity"], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("This system is not yet registered.")


@pytest.fixture(scope="module")
def rhel10_repo(tmp_path_factory) -> Path:
    """NVIDIA's rhel10 local repo of one fake driver, built into a temporary directory and
    unpacked (rpm2cpio); the path of its repository."""
    base = tmp_path_factory.mktemp("el10")
    env = {**os.environ, "GPUHOST_NVIDIA_OUT": str(base / "out"),
           "GPUHOST_NVIDIA_WORK": str(base / "work"), "GPUHOST_NVIDIA_GNUPG": str(base / "gnupg")}
    done = subprocess.run([sys.executable, "-m", "sandbox.nvidia.build", "--only", "local-repos",
                           "--driver-version", VERSION, "--distro", "rhel10"],
                          cwd=paths.PACKAGE_DIR.parent, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rpm = base / "out/local-repos" / VERSION / f"nvidia-driver-local-repo-rhel10-{VERSION}-1.0-1.x86_64.rpm"
    root = base / "root"
    root.mkdir()
    subprocess.run(["sh", "-c", f'rpm2cpio "{rpm}" | (cd "{root}" && cpio -idm --quiet)'],
                   check=True)
    return root / f"var/nvidia-driver-local-repo-rhel10-{VERSION}"


def test_the_rhel10_local_repo_has_no_module_streams(rhel10_repo):
    """EL10 has no dnf module streams: NVIDIA's rhel10 repos carry no modules.yaml, and the
    driver is `dnf install nvidia-open-<version>` plus a versionlock."""
    repodata = {p.name for p in (rhel10_repo / "repodata").iterdir()}
    assert any(name.endswith("primary.xml.gz") or name.endswith("primary.xml.zst")
               or "primary" in name for name in repodata), repodata
    assert not any("modules" in name for name in repodata), repodata
    assert (rhel10_repo / f"nvidia-open-{VERSION}-1.el10.x86_64.rpm").is_file()
