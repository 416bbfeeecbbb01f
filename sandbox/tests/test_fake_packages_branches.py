"""The fake local repos of the current branches: each branch's package names as NVIDIA's
repositories have them (sandbox/nvidia/pkg/README.md, "Branches").

- 580: the driver keeps its branched apt names; Fabric Manager, NSCQ, IMEX and NVSDM lose
  the branch on apt and rpm (nvidia-fabricmanager, no hyphen, on rpm too).
- 595: apt names without the branch, plus nvidia-driver-pinning-595 holding the branch.
- 620: open kernel modules only, on apt and in the dnf module streams.

The three repos for debian12, ubuntu2404 and rhel9 are built once per session into a
temporary directory with a throwaway key (a few seconds; no root). Needs the tools of
test_fake_packages.py (`make deps`).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sandbox.nvidia.pkg import common

REPO = Path(__file__).resolve().parents[2]
R580, R595, R620 = "580.95.05", "595.71.05", "620.70.06"
TOOLS = ("dpkg-deb", "apt-ftparchive", "rpmbuild", "rpmsign", "createrepo_c", "modifyrepo_c",
         "gpg", "rpm", "rpm2cpio", "cpio")
COMPANIONS = {"nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex", "libnvsdm"}
# NVLink 5's subnet manager, in every repo, at its own version (pkg/driver.py NVLSM_VERSION)
NVLINK5 = {"nvlsm"}


def sh(*cmd, **kw) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd} failed rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def out(tmp_path_factory) -> Path:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    assert not missing, f"missing build tools {missing}: run `make deps` (mk/nvidia.mk)"
    base = tmp_path_factory.mktemp("branches")
    env = {**os.environ, "GPUHOST_NVIDIA_OUT": str(base / "out"),
           "GPUHOST_NVIDIA_WORK": str(base / "work"), "GPUHOST_NVIDIA_GNUPG": str(base / "gnupg")}
    argv = [sys.executable, "-m", "sandbox.nvidia.build", "--only", "local-repos"]
    for v in (R580, R595, R620):
        argv += ["--driver-version", v]
    for d in ("debian12", "ubuntu2404", "rhel9"):
        argv += ["--distro", d]
    sh(*argv, cwd=REPO, env=env)
    return base / "out"


def apt_index(out: Path, version: str, distro: str, tmp: Path) -> dict[str, dict]:
    """The local repo's Packages index: name -> control fields."""
    deb = out / "local-repos" / version / f"nvidia-driver-local-repo-{distro}-{version}_1.0-1_amd64.deb"
    sh("dpkg-deb", "-x", str(deb), str(tmp))
    repo = tmp / f"var/nvidia-driver-local-repo-{distro}-{version}"
    index = {}
    for para in (repo / "Packages").read_text().strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in para.splitlines()
                      if ": " in line and not line.startswith(" "))
        fields["_deb"] = repo / fields["Filename"].removeprefix("./")
        index[fields["Package"]] = fields
    return index


def rpm_repo(out: Path, version: str, tmp: Path) -> tuple[dict[str, str], dict[str, dict]]:
    """rhel9: name -> epoch:version-release of each RPM, and the module streams."""
    rpm = out / "local-repos" / version / f"nvidia-driver-local-repo-rhel9-{version}-1.0-1.x86_64.rpm"
    tmp.mkdir(parents=True, exist_ok=True)
    sh("sh", "-c", f'rpm2cpio "{rpm}" | (cd "{tmp}" && cpio -idm --quiet)')
    repo = tmp / f"var/nvidia-driver-local-repo-rhel9-{version}"
    names = {}
    for line in sh("rpm", "-qp", "--qf", "%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}\n",
                   *map(str, sorted(repo.glob("*.rpm")))).splitlines():
        name, evr = line.split()
        names[name] = evr
    docs = list(yaml.safe_load_all(gzip.decompress(
        (repo / "repodata" / "modules.yaml.gz").read_bytes())))
    modules = {d["data"]["stream"]: d["data"] for d in docs if d["document"] == "modulemd"}
    modules["_defaults"] = next(d["data"] for d in docs if d["document"] == "modulemd-defaults")
    return names, modules


def test_versions_and_default():
    assert common.DRIVER_VERSIONS[:2] == ("550.163.01", "570.172.08")  # the old upgrade story
    assert {R580, R595, R620} <= set(common.DRIVER_VERSIONS)
    assert common.DEFAULT_DRIVER in common.DRIVER_VERSIONS


@pytest.mark.parametrize("distro", ["ubuntu2404"])  # debian12: its own names, below
def test_580_apt_keeps_branched_driver_names_and_unbranched_companions(out, tmp_path, distro):
    idx = apt_index(out, R580, distro, tmp_path)
    assert set(idx) == {
        "cuda-drivers-580", "nvidia-open-580", "cuda-drivers", "nvidia-open",
        "nvidia-driver-580", "nvidia-driver-580-open", "nvidia-dkms-580", "nvidia-dkms-580-open",
        "nvidia-utils-580", "nvidia-kernel-common-580", "nvidia-persistenced", *COMPANIONS, *NVLINK5}
    v = f"{R580}-0ubuntu1" if distro.startswith("ubuntu") else f"{R580}-1"
    for name in COMPANIONS:
        # exactly the driver's version, bound to its common package; no old name provided
        assert idx[name]["Version"] == v
        assert idx[name]["Depends"] == f"nvidia-kernel-common-580 (= {v})"
        assert "Provides" not in idx[name]
    assert not any(n.startswith("nvidia-driver-pinning") for n in idx)


@pytest.mark.parametrize("distro", ["ubuntu2404"])  # debian12: its own names, below
def test_595_apt_names_lose_the_branch_and_the_pinning_package_holds_it(out, tmp_path, distro):
    idx = apt_index(out, R595, distro, tmp_path)
    drivers = {"cuda-drivers", "nvidia-open", "nvidia-driver", "nvidia-driver-open",
               "nvidia-dkms", "nvidia-dkms-open", "nvidia-utils", "nvidia-kernel-common",
               "nvidia-persistenced", *COMPANIONS, *NVLINK5}
    assert set(idx) == drivers | {"nvidia-driver-pinning-595"}
    v = f"{R595}-0ubuntu1" if distro.startswith("ubuntu") else f"{R595}-1"
    assert idx["nvidia-open"]["Depends"] == (
        f"nvidia-driver-open (= {v}), nvidia-dkms-open (= {v}), nvidia-utils (= {v})")
    assert idx["cuda-drivers"]["Depends"] == (
        f"nvidia-driver (= {v}), nvidia-dkms (= {v}), nvidia-utils (= {v})")
    assert idx["nvidia-fabricmanager"]["Depends"] == f"nvidia-kernel-common (= {v})"
    pin = idx["nvidia-driver-pinning-595"]
    assert pin["Version"] == ("595-1ubuntu1" if distro.startswith("ubuntu") else "595-1")
    assert pin["Description"] == "APT driver pinning file for driver branch 595"
    files = sh("dpkg-deb", "-c", str(pin["_deb"]))
    assert "./etc/apt/preferences.d/nvidia-driver-pin\n" in files
    x = tmp_path / "pin"
    sh("dpkg-deb", "-x", str(pin["_deb"]), str(x))
    stanza = {k: val for k, _, val in (line.partition(": ") for line in
              (x / "etc/apt/preferences.d/nvidia-driver-pin").read_text().splitlines()
              if not line.startswith("#"))}
    assert set(stanza["Package"].split()) == drivers  # every driver package, not itself
    assert stanza["Pin"] == "version 595.*"
    assert stanza["Pin-Priority"] == "1000"


@pytest.mark.parametrize("distro", ["ubuntu2404"])  # debian12: its own names, below
def test_620_apt_has_no_proprietary_package(out, tmp_path, distro):
    idx = apt_index(out, R620, distro, tmp_path)
    assert set(idx) == {"nvidia-open", "nvidia-driver-open", "nvidia-dkms-open", "nvidia-utils",
                        "nvidia-kernel-common", "nvidia-persistenced", "nvidia-driver-pinning-620",
                        *COMPANIONS, *NVLINK5}
    assert "Conflicts" not in idx["nvidia-driver-open"]  # nothing proprietary to conflict with


@pytest.mark.parametrize("version", [R580, R595, R620])
def test_debian12_has_debians_names_on_every_branch(out, tmp_path, version):
    """NVIDIA's debian12 repos: Debian's packaging, the same names on every branch
    (docs/real-hosts.md, "Debian 12's driver names"); the pinning package from 590."""
    idx = apt_index(out, version, "debian12", tmp_path)
    b, v = version.split(".")[0], f"{version}-1"
    metas = {"nvidia-open": "nvidia-kernel-open-dkms", "cuda-drivers": "nvidia-kernel-dkms"}
    if version == R620:  # open modules only
        del metas["cuda-drivers"]
        assert "nvidia-kernel-dkms" not in idx
    for meta, module in metas.items():
        assert idx[meta]["Version"] == v
        assert idx[meta]["Depends"] == f"nvidia-driver-cuda (= {v}), {module} (= {v})"
        assert f"nvidia-kernel-support (= {v})" in idx[module]["Depends"]
    assert not any(name.endswith(f"-{b}") or f"-{b}-" in name for name in idx
                   if not name.startswith("nvidia-driver-pinning-"))
    assert "nvidia-utils" not in idx and "nvidia-dkms-open" not in idx
    # nvidia-smi and the daemon only recommended: gpuhost names nvidia-smi itself
    cuda = idx["nvidia-driver-cuda"]
    assert "nvidia-smi" not in cuda["Depends"] and f"nvidia-smi (= {v})" in cuda["Recommends"]
    pinning = f"nvidia-driver-pinning-{b}"
    assert (pinning in idx) == (int(b) >= 590)
    if pinning in idx:
        assert idx[pinning]["Version"] == f"{b}-1"
    x = tmp_path / "module"
    sh("dpkg-deb", "-x", str(idx["nvidia-kernel-open-dkms"]["_deb"]), str(x))
    conf = (x / f"usr/src/nvidia-{version}/dkms.conf").read_text()
    # registered as nvidia/<version>, as NVIDIA's Debian-style module package does
    assert 'PACKAGE_NAME="nvidia"' in conf and f'PACKAGE_VERSION="{version}"' in conf


def test_580_and_595_rpm_companions_and_fm_profile(out, tmp_path):
    for version in (R580, R595):
        names, streams = rpm_repo(out, version, tmp_path / version)
        b = version.split(".")[0]
        assert set(names) == {
            "nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-latest-dkms",
            "kmod-nvidia-open-dkms", "nvidia-kmod-common", "cuda-drivers", "nvidia-open",
            "nvidia-persistenced", *COMPANIONS, *NVLINK5}
        assert "nvidia-fabric-manager" not in names  # the pre-580 name is gone, not provided
        assert names.pop("nvlsm").endswith(":2025.06.6-1")  # not the driver's version
        assert set(names.values()) == {f"3:{version}-1.el9"}
        assert set(streams) - {"_defaults"} == {f"{b}-dkms", "latest-dkms", f"{b}-open", "open-dkms"}
        for data in (d for s, d in streams.items() if s != "_defaults"):
            assert "nvidia-fabricmanager" in data["profiles"]["fm"]["rpms"]
        assert streams["_defaults"]["stream"] == "latest-dkms"
    repo = tmp_path / R580 / f"var/nvidia-driver-local-repo-rhel9-{R580}"
    requires = sh("rpm", "-qp", "--requires", str(repo / f"libnvsdm-{R580}-1.el9.x86_64.rpm"))
    assert f"nvidia-kmod-common = 3:{R580}-1.el9" in requires
    provides = sh("rpm", "-qp", "--provides",
                  str(repo / f"nvidia-fabricmanager-{R580}-1.el9.x86_64.rpm"))
    assert "nvidia-fabric-manager" not in provides


def test_620_rpm_open_streams_only(out, tmp_path):
    names, streams = rpm_repo(out, R620, tmp_path)
    assert "cuda-drivers" not in names and "kmod-nvidia-latest-dkms" not in names
    assert {"nvidia-open", "kmod-nvidia-open-dkms", "nvidia-fabricmanager"} <= set(names)
    assert set(streams) - {"_defaults"} == {"620-open", "open-dkms"}
    assert streams["_defaults"]["stream"] == "open-dkms"
    assert set(streams["_defaults"]["profiles"]) == {"620-open", "open-dkms"}
    for stream in ("620-open", "open-dkms"):
        assert not any("latest-dkms" in a or a.startswith("cuda-drivers")
                       for a in streams[stream]["artifacts"]["rpms"])


@pytest.mark.parametrize("version", [R580, R595, R620])
def test_nvidia_smi_of_each_branch_reports_its_driver(out, tmp_path, version):
    """The branch's utils and open DKMS packages unpacked into a simulated host root: the
    module gpusim-boot loads and what nvidia-smi prints carry the branch's version."""
    idx = apt_index(out, version, "debian12", tmp_path / "x")
    drv = tmp_path / "drv"
    for name in ("nvidia-smi", "libnvidia-ml1", "nvidia-kernel-open-dkms"):
        sh("dpkg-deb", "-x", str(idx[name]["_deb"]), str(drv))
    kernel = "6.1.0-56-amd64"
    (drv / "etc/gpusim").mkdir(parents=True)
    (drv / "etc/gpusim/machine.json").write_text(json.dumps(
        {"hostname": "gpu-01", "os": "debian12", "kernel_release": kernel,
         "gpu_model": "A100-SXM4-40GB", "gpu_count": 1, "nvswitch": False}))
    mod = drv / f"lib/modules/{kernel}/updates/dkms/nvidia.ko"
    mod.parent.mkdir(parents=True)
    mod.write_text(f"gpusim-module version={version} flavor=open kernel={kernel}\n")
    env = {**os.environ, "GPUSIM_ROOT": str(drv), "PYTHONPATH": str(drv / "usr/lib/gpusim")}
    boot = sh(sys.executable, "-c", "import sys; from gpusim import ctl; sys.exit(ctl.boot_main([]))",
              env=env)
    assert f"nvidia {version} (open) loaded" in boot
    smi = sh(sys.executable, "-m", "gpusim.smi", env=env)
    assert f"Driver Version: {version}" in smi
    csv = sh(sys.executable, "-m", "gpusim.smi", "--query-gpu=driver_version,name",
             "--format=csv,noheader", env=env)
    assert csv.strip() == f"{version}, NVIDIA A100-SXM4-40GB"


@pytest.mark.parametrize("version", [R580, R595])
def test_fabric_manager_and_imex_ship_their_units(out, tmp_path, version):
    """Issue 25: the Fabric Manager package carries NVIDIA's unit name, a forking daemon with
    its pid file, a prerm that stops it; nvidia-imex its daemon, config and unit."""
    idx = apt_index(out, version, "debian12", tmp_path / "x")
    root = tmp_path / "root"
    for name in ("nvidia-fabricmanager", "nvidia-imex"):
        sh("dpkg-deb", "-x", str(idx[name]["_deb"]), str(root))
    unit = (root / "lib/systemd/system/nvidia-fabricmanager.service").read_text()
    assert "Type=forking" in unit and "WantedBy=multi-user.target" in unit
    assert "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg" in unit
    assert "PIDFile=/var/run/nvidia-fabricmanager/nv-fabricmanager.pid" in unit
    assert f"Fabric Manager version is : {version}" in sh(str(root / "usr/bin/nv-fabricmanager"),
                                                           "--version")
    prerm = sh("dpkg-deb", "-I", str(idx["nvidia-fabricmanager"]["_deb"]), "prerm")
    assert "systemctl stop nvidia-fabricmanager.service" in prerm
    imex = (root / "lib/systemd/system/nvidia-imex.service").read_text()
    assert "ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg" in imex
    assert "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg" in (
        root / "etc/nvidia-imex/config.cfg").read_text()
    assert sh(str(root / "usr/bin/nvidia-imex"), "--version").strip() == f"IMEX version is: {version}"
