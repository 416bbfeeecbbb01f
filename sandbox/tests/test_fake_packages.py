"""The sandbox's fake NVIDIA packages: names, control fields, signatures, rpm headers,
dnf module metadata and the toolkit tools' behaviour.

A mini artifact set (driver 570.172.08 for debian12/ubuntu2404/rhel9, toolkit) is built
once per session into a temporary directory with its own throwaway signing key (about
ten seconds; no root needed). Needs dpkg-dev, apt-utils, gnupg, rpm, createrepo-c
(`make deps`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from sandbox.nvidia.pkg import common, image

REPO = Path(__file__).resolve().parents[2]
VER = "570.172.08"
TK = "1.20.0"  # gpuhost's default; the repos serve the older ones too
TK_118, TK_119, TK_OLD = "1.18.2", "1.19.1", "1.17.8"
TK_ALL = (TK_OLD, TK_118, TK_119, TK)
TOOLS = ("dpkg-deb", "apt-ftparchive", "rpmbuild", "rpmsign", "createrepo_c", "modifyrepo_c",
         "gpg", "gpgv", "rpm")


def sh(*cmd, check=True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    assert not missing, f"missing build tools {missing}: run `make deps` (mk/nvidia.mk)"
    base = tmp_path_factory.mktemp("nvidia")
    env = {**os.environ, "GPUHOST_NVIDIA_OUT": str(base / "out"),
           "GPUHOST_NVIDIA_WORK": str(base / "work"), "GPUHOST_NVIDIA_GNUPG": str(base / "gnupg")}
    proc = subprocess.run(
        [sys.executable, "-m", "sandbox.nvidia.build", "--only", "local-repos", "--only", "toolkit",
         "--driver-version", VER, "--distro", "debian12", "--distro", "ubuntu2404",
         "--distro", "rhel9"], cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = base / "out"
    keyring = base / "keyring.gpg"
    keyring.write_bytes(subprocess.run(["gpg", "--dearmor"], input=(out / "gpgkey").read_bytes(),
                                       capture_output=True, check=True).stdout)
    return {"out": out, "base": base, "keyring": keyring, "log": proc.stdout, "env": env}


def extract_deb(deb: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    sh("dpkg-deb", "-x", str(deb), str(dest))
    return dest


@pytest.fixture(scope="session")
def deb12(built, tmp_path_factory) -> dict:
    deb = built["out"] / "local-repos" / VER / f"nvidia-driver-local-repo-debian12-{VER}_1.0-1_amd64.deb"
    root = extract_deb(deb, tmp_path_factory.mktemp("deb12"))
    return {"deb": deb, "root": root, "repo": root / f"var/nvidia-driver-local-repo-debian12-{VER}"}


def control(deb: Path) -> dict:
    text = sh("dpkg-deb", "-f", str(deb)).stdout
    fields, key = {}, None
    for line in text.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        else:
            key, _, value = line.partition(": ")
            fields[key] = value
    return fields


def test_local_repo_file_names_are_nvidias(built):
    names = sorted(p.name for p in (built["out"] / "local-repos" / VER).iterdir())
    assert names == [f"nvidia-driver-local-repo-debian12-{VER}_1.0-1_amd64.deb",
                     f"nvidia-driver-local-repo-rhel9-{VER}-1.0-1.x86_64.rpm",
                     f"nvidia-driver-local-repo-ubuntu2404-{VER}_1.0-1_amd64.deb"]


def test_local_repo_deb_control_and_layout(deb12):
    fields = control(deb12["deb"])
    assert fields["Package"] == f"nvidia-driver-local-repo-debian12-{VER}"
    assert fields["Version"] == "1.0-1"
    assert fields["Architecture"] == "amd64"
    repo = deb12["repo"]
    for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg"):
        assert (repo / name).is_file(), name
    keyrings = list(repo.glob("nvidia-driver-local-*-keyring.gpg"))
    assert len(keyrings) == 1
    assert re.fullmatch(r"nvidia-driver-local-[0-9A-F]{8}-keyring\.gpg", keyrings[0].name)
    sources = deb12["root"] / f"etc/apt/sources.list.d/nvidia-driver-local-debian12-{VER}.list"
    assert sources.read_text() == (
        f"deb [signed-by=/usr/share/keyrings/{keyrings[0].name}] "
        f"file:///var/nvidia-driver-local-repo-debian12-{VER} /\n")


def packages_index(repo: Path) -> dict[str, dict]:
    out = {}
    for para in repo.joinpath("Packages").read_text().strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in para.splitlines() if ": " in line
                      and not line.startswith(" "))
        out[fields["Package"]] = fields
    return out


def test_driver_packages_named_and_versioned_as_nvidia(deb12, built, tmp_path):
    # debian12: Debian's packaging, as NVIDIA's debian12 repos carry it (driver_debian.py)
    idx = packages_index(deb12["repo"])
    companions = {"nvidia-fabricmanager-570", "libnvidia-nscq-570", "nvidia-imex-570"}
    assert set(idx) - {"nvlsm"} == {
        "cuda-drivers", "nvidia-open", "nvidia-kernel-dkms", "nvidia-kernel-open-dkms",
        "nvidia-kernel-support", "nvidia-driver-cuda", "libcuda1", "libnvidia-ml1", "nvidia-smi",
        "nvidia-persistenced", *companions}
    assert {f["Version"] for n, f in idx.items() if n != "nvlsm"} == {f"{VER}-1"}
    assert idx["cuda-drivers"]["Depends"] == (
        f"nvidia-driver-cuda (= {VER}-1), nvidia-kernel-dkms (= {VER}-1)")
    assert idx["nvidia-open"]["Depends"] == (
        f"nvidia-driver-cuda (= {VER}-1), nvidia-kernel-open-dkms (= {VER}-1)")
    assert "dkms" in idx["nvidia-kernel-dkms"]["Depends"].split(", ")
    # Ubuntu flavour of the same repo: the branch in the names before 590
    u = extract_deb(built["out"] / "local-repos" / VER /
                    f"nvidia-driver-local-repo-ubuntu2404-{VER}_1.0-1_amd64.deb", tmp_path / "u")
    uidx = packages_index(u / f"var/nvidia-driver-local-repo-ubuntu2404-{VER}")
    assert set(uidx) - {"nvlsm"} == {
        "cuda-drivers-570", "nvidia-open-570", "cuda-drivers", "nvidia-open",
        "nvidia-driver-570", "nvidia-driver-570-open", "nvidia-dkms-570", "nvidia-dkms-570-open",
        "nvidia-utils-570", "nvidia-persistenced", "nvidia-kernel-common-570", *companions}
    deps = uidx["cuda-drivers-570"]["Depends"]
    for name in ("nvidia-driver-570 ", "nvidia-dkms-570 ", "nvidia-utils-570 "):
        assert name + f"(= {VER}-0ubuntu1)" in deps
    assert {f["Version"] for n, f in uidx.items() if n != "nvlsm"} == {f"{VER}-0ubuntu1"}


def test_package_payloads(deb12, tmp_path):
    repo = deb12["repo"]
    common = extract_deb(repo / f"nvidia-kernel-support_{VER}-1_amd64.deb", tmp_path / "c")
    assert "blacklist nouveau" in (common / "etc/modprobe.d/nvidia-blacklists-nouveau.conf").read_text()
    utils = extract_deb(repo / f"nvidia-smi_{VER}-1_amd64.deb", tmp_path / "u")
    launcher = (utils / "usr/bin/nvidia-smi").read_text()
    assert "python3 -S -c" in launcher and "from gpusim.smi import main" in launcher
    assert "/usr/lib/gpusim" in launcher
    assert (utils / "usr/lib/gpusim/gpusim/smi.py").is_file()
    for flavor, pkg in (("proprietary", "nvidia-kernel-dkms"), ("open", "nvidia-kernel-open-dkms")):
        d = extract_deb(repo / f"{pkg}_{VER}-1_amd64.deb", tmp_path / pkg)
        assert json.loads((d / "usr/lib/gpusim/userspace.json").read_text()) == {
            "version": VER, "flavor": flavor}
        conf = (d / f"usr/src/nvidia-{VER}/dkms.conf").read_text()
        assert f'PACKAGE_VERSION="{VER}"' in conf and 'PACKAGE_NAME="nvidia"' in conf
        build = (d / f"usr/src/nvidia-{VER}/gpusim-build.sh").read_text()
        assert "gpusim-module version=%s flavor=%s" in build and f'"{flavor}"' in build
        scripts = sh("dpkg-deb", "-I", str(repo / f"{pkg}_{VER}-1_amd64.deb"), "postinst").stdout
        assert f"/usr/src/nvidia-{VER}/gpusim-dkms-hook.sh install" in scripts


def test_apt_signatures_verify_with_the_keyring(deb12, tmp_path):
    repo = deb12["repo"]
    keyring = next(repo.glob("nvidia-driver-local-*-keyring.gpg"))
    sh("gpgv", "--keyring", str(keyring), str(repo / "InRelease"))
    sh("gpgv", "--keyring", str(keyring), str(repo / "Release.gpg"), str(repo / "Release"))
    tampered = tmp_path / "Release"
    tampered.write_text(repo.joinpath("Release").read_text().replace("amd64", "arm64"))
    bad = sh("gpgv", "--keyring", str(keyring), str(repo / "Release.gpg"), str(tampered), check=False)
    assert bad.returncode != 0 and "BAD signature" in bad.stderr
    # Release lists the Packages file with its real sha256
    digest = hashlib.sha256(repo.joinpath("Packages").read_bytes()).hexdigest()
    assert re.search(rf"^ {digest} +\d+ Packages$", repo.joinpath("Release").read_text(), re.M)


@pytest.fixture(scope="session")
def rhel9(built, tmp_path_factory) -> dict:
    rpm = built["out"] / "local-repos" / VER / f"nvidia-driver-local-repo-rhel9-{VER}-1.0-1.x86_64.rpm"
    root = tmp_path_factory.mktemp("rhel9")
    sh("sh", "-c", f'rpm2cpio "{rpm}" | (cd "{root}" && cpio -idm --quiet)')
    return {"rpm": rpm, "root": root, "repo": root / f"var/nvidia-driver-local-repo-rhel9-{VER}"}


def qf(rpm: Path, fmt: str) -> str:
    return sh("rpm", "-qp", "--qf", fmt, str(rpm)).stdout


def test_rpm_local_repo_layout_and_headers(rhel9):
    assert qf(rhel9["rpm"], "%{NAME} %{VERSION}-%{RELEASE} %{ARCH}") == \
        f"nvidia-driver-local-repo-rhel9-{VER} 1.0-1 x86_64"
    repo_file = rhel9["root"] / f"etc/yum.repos.d/nvidia-driver-local-rhel9-{VER}.repo"
    text = repo_file.read_text()
    assert f"baseurl=file:///var/nvidia-driver-local-repo-rhel9-{VER}" in text
    assert "gpgcheck=1" in text
    gpgkey = re.search(r"^gpgkey=file://(\S+)$", text, re.M).group(1)
    assert (rhel9["root"] / gpgkey.lstrip("/")).is_file()
    names = {}
    for rpm in rhel9["repo"].glob("*.rpm"):
        name, evr = qf(rpm, "%{NAME} %{EPOCH}:%{VERSION}-%{RELEASE}").split()
        names[name] = evr
    # NVLSM (NVLink 5 subnet manager) has a version of its own, not the driver's
    assert names.pop("nvlsm").partition(":")[2].startswith("2025.")
    assert set(names) == {"nvidia-driver", "nvidia-driver-cuda", "kmod-nvidia-latest-dkms",
                          "kmod-nvidia-open-dkms", "nvidia-kmod-common", "cuda-drivers",
                          "nvidia-open", "nvidia-fabric-manager", "nvidia-persistenced",
                          "libnvidia-nscq-570"}  # NSCQ before 580: the branch in its name
    assert set(names.values()) == {f"3:{VER}-1.el9"}
    requires = sh("rpm", "-qp", "--requires", str(rhel9["repo"] / f"nvidia-open-{VER}-1.el9.x86_64.rpm")).stdout
    assert f"kmod-nvidia-open-dkms = 3:{VER}-1.el9" in requires
    # no dependency the Debian-based OL hosts' rpm database cannot satisfy
    kmod = rhel9["repo"] / f"kmod-nvidia-latest-dkms-{VER}-1.el9.x86_64.rpm"
    reqs = sh("rpm", "-qp", "--requires", str(kmod)).stdout.split("\n")
    assert not [r for r in reqs if r.startswith("/")], reqs
    assert "gpusim-dkms-hook.sh" in sh("rpm", "-qp", "--scripts", str(kmod)).stdout


def test_rpm_signatures_verify(rhel9, built, tmp_path):
    db = tmp_path / "rpmdb"
    db.mkdir()
    rpms = [rhel9["rpm"], *rhel9["repo"].glob("*.rpm")]
    unsigned = sh("rpm", "--dbpath", str(db), "-K", str(rpms[0]), check=False)
    assert unsigned.returncode != 0  # key not imported yet: signature cannot be checked
    sh("rpm", "--dbpath", str(db), "--import", str(built["out"] / "gpgkey"))
    for rpm in rpms:
        out = sh("rpm", "--dbpath", str(db), "-K", str(rpm)).stdout
        assert "signatures OK" in out, out
    repomd = rhel9["repo"] / "repodata" / "repomd.xml"
    sh("gpgv", "--keyring", str(built["keyring"]), str(repomd) + ".asc", str(repomd))


def test_modules_yaml_lists_nvidias_streams(rhel9):
    docs = list(yaml.safe_load_all(gzip.decompress(
        (rhel9["repo"] / "repodata" / "modules.yaml.gz").read_bytes())))
    streams = {d["data"]["stream"]: d["data"] for d in docs if d["document"] == "modulemd"}
    assert set(streams) == {"570-dkms", "570-open", "latest-dkms", "open-dkms"}
    files = {p.name for p in rhel9["repo"].glob("*.rpm")}
    for name, data in streams.items():
        assert data["name"] == "nvidia-driver"
        assert set(data["profiles"]) >= {"default", "fm"}
        assert "nvidia-fabric-manager" in data["profiles"]["fm"]["rpms"]
        meta = "nvidia-open" if name.endswith("open") or name == "open-dkms" else "cuda-drivers"
        assert data["profiles"]["default"]["rpms"] == [meta]
        for nevra in data["artifacts"]["rpms"]:  # name-3:ver-rel.arch -> name-ver-rel.arch.rpm
            assert nevra.replace(f"-3:{VER}", f"-{VER}") + ".rpm" in files, nevra
    kmods = {name: [a for a in d["artifacts"]["rpms"] if a.startswith("kmod-")]
             for name, d in streams.items()}
    assert all("open-dkms" in k[0] for s, k in kmods.items() if "open" in s)
    assert all("latest-dkms" in k[0] for s, k in kmods.items() if "open" not in s)
    defaults = [d for d in docs if d["document"] == "modulemd-defaults"]
    assert defaults and defaults[0]["data"]["module"] == "nvidia-driver"


def test_manifest_matches_the_files(built):
    m = json.loads((built["out"] / "manifest.json").read_text())
    assert m["driver_versions"] == ["550.163.01", "570.172.08", "580.95.05", "595.71.05",
                                    "620.70.06"]
    assert m["default_driver"] == common.DEFAULT_DRIVER
    assert set(m["local_repos"][VER]) == {"debian12", "ubuntu2204", "ubuntu2404", "rhel8", "rhel9",
                                        "rhel10"}
    checked = 0
    for version, distros in m["local_repos"].items():
        for entry in distros.values():
            path = built["out"] / "local-repos" / version / entry["file"]
            # the fleet's URL (a private fleet's GPUHOST_NVIDIA_URL; port 8000 by default)
            base = os.environ.get("GPUHOST_NVIDIA_URL", "http://127.77.0.1:8000/nvidia")
            assert entry["url"] == f"{base}/local-repos/{version}/{entry['file']}"
            if path.exists():
                assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
                checked += 1
            else:
                assert entry["sha256"] is None
    assert checked == 3
    assert m["toolkit"]["version"] == TK
    # the sandbox inventory sets no toolkit version: its hosts take gpuhost's default
    from gpuhost.settings import defaults
    assert defaults()["container_toolkit_version"] == TK == common.TOOLKIT_VERSION
    assert m["toolkit"]["versions"] == list(TK_ALL)
    assert set(m["ol_repos"]) == {"ol8", "ol9", "ol10", "rocky10", "rhel10"}
    assert m["verify_image"]["name"] == "gpuhost/verify:sandbox"


def test_verify_image_is_a_docker_save_archive(tmp_path):
    """What `docker load` reads (moby's image spec v1.2): manifest.json names the config and
    the layers; the config's name is its sha256, its diff_ids the sha256 of each layer tar."""
    layer = tmp_path / "rootfs.tar"
    with tarfile.open(layer, "w") as tar:
        info = tarfile.TarInfo("./bin/sh")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"#!\n"))
    out = tmp_path / "verify-image.tar"
    image_id = image.write_archive(layer, out)
    with tarfile.open(out) as tar:
        [entry] = json.load(tar.extractfile("manifest.json"))
        assert entry["RepoTags"] == ["gpuhost/verify:sandbox"]
        config_bytes = tar.extractfile(entry["Config"]).read()
        assert entry["Config"] == f"{image_id}.json"
        assert hashlib.sha256(config_bytes).hexdigest() == image_id
        config = json.loads(config_bytes)
        assert (config["architecture"], config["os"]) == ("amd64", "linux")
        assert "NVIDIA_VISIBLE_DEVICES=all" in config["config"]["Env"]
        [layer_name] = entry["Layers"]
        layer_bytes = tar.extractfile(layer_name).read()
        assert layer_bytes == layer.read_bytes()  # uncompressed, as built
        assert config["rootfs"] == {"type": "layers", "diff_ids": [
            f"sha256:{hashlib.sha256(layer_bytes).hexdigest()}"]}
        with image.layer_of(tar) as rootfs:
            assert rootfs.getnames() == ["./bin/sh"]
    assert image.write_archive(layer, tmp_path / "again.tar") == image_id  # reproducible


def test_toolkit_repos(built, tmp_path):
    deb = built["out"] / "toolkit" / "deb"
    sh("gpgv", "--keyring", str(built["keyring"]), str(deb / "InRelease"))
    idx = packages_index(deb)  # the last paragraph of each name: the newest version
    assert set(idx) == {"nvidia-container-toolkit", "nvidia-container-toolkit-base",
                        "libnvidia-container-tools", "libnvidia-container1"}
    paragraphs = (deb / "Packages").read_text().strip().split("\n\n")
    versions = sorted(line.split(": ", 1)[1] for para in paragraphs for line in para.splitlines()
                      if line.startswith("Version: "))
    assert versions == sorted(f"{v}-1" for v in TK_ALL for _ in range(4))
    assert f"nvidia-container-toolkit-base (= {TK}-1)" in idx["nvidia-container-toolkit"]["Depends"]
    rpms = {qf(p, "%{NAME}-%{VERSION}-%{RELEASE}") for p in (built["out"] / "toolkit" / "rpm").glob("*.rpm")}
    assert rpms == {f"{n}-{v}-1" for n in idx for v in TK_ALL}


def test_toolkit_118_ships_and_enables_nvidia_cdi_refresh(built, tmp_path):
    """NVIDIA's packaging @v1.18.2: the base package ships both units and the env file, its
    postinst enables them with --now and starts the service; 1.17.8 has none of it."""
    deb = built["out"] / "toolkit" / "deb"
    new = extract_deb(deb / f"nvidia-container-toolkit-base_{TK_118}-1_amd64.deb", tmp_path / "new")
    old = extract_deb(deb / f"nvidia-container-toolkit-base_{TK_OLD}-1_amd64.deb", tmp_path / "old")
    service = (new / "etc/systemd/system/nvidia-cdi-refresh.service").read_text()
    assert "Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml" in service
    assert "ExecStart=/usr/bin/nvidia-ctk cdi generate" in service
    assert "PathChanged=/usr/bin/nvidia-ctk" in (
        new / "etc/systemd/system/nvidia-cdi-refresh.path").read_text()
    assert (new / "etc/nvidia-container-toolkit/nvidia-cdi-refresh.env").exists()
    assert not (old / "etc/systemd/system/nvidia-cdi-refresh.service").exists()
    control = tmp_path / "control"
    sh("dpkg-deb", "-e", str(deb / f"nvidia-container-toolkit-base_{TK_118}-1_amd64.deb"), str(control))
    postinst = (control / "postinst").read_text()
    assert "systemctl enable --now nvidia-cdi-refresh.path" in postinst
    assert "systemctl start nvidia-cdi-refresh.service" in postinst
    rpm = built["out"] / "toolkit" / "rpm" / f"nvidia-container-toolkit-base-{TK_118}-1.x86_64.rpm"
    assert "enable --now nvidia-cdi-refresh.service" in sh("rpm", "-qp", "--scripts", str(rpm)).stdout


def test_toolkit_119_and_120_packaging_of_the_refresh_unit(built, tmp_path):
    """@v1.19.1: the units stay in /etc/systemd/system and the service first asks nvidia-smi;
    @v1.20.0: the units move to /lib/systemd/system (rpm: /usr/lib, with the preset), the deb
    enables and starts them as debhelper does, the rpm presets them in %post and starts them
    in %posttrans; both keep StartLimitBurst=5 in 10 s with Restart=on-failure."""
    deb = built["out"] / "toolkit" / "deb"
    smi = "ExecStart=/bin/sh -c '/usr/bin/nvidia-smi -L"
    v119 = extract_deb(deb / f"nvidia-container-toolkit-base_{TK_119}-1_amd64.deb", tmp_path / "a")
    service = (v119 / "etc/systemd/system/nvidia-cdi-refresh.service").read_text()
    assert smi in service and not (v119 / "lib/systemd/system").exists()
    v120 = extract_deb(deb / f"nvidia-container-toolkit-base_{TK}-1_amd64.deb", tmp_path / "b")
    assert not (v120 / "etc/systemd/system").exists()
    service = (v120 / "lib/systemd/system/nvidia-cdi-refresh.service").read_text()
    for line in (smi, "StartLimitBurst=5", "StartLimitIntervalSec=10s", "Restart=on-failure",
                 "RestartSec=1s", "@v1.20.0"):
        assert line in service, line
    assert (v120 / "lib/systemd/system/nvidia-cdi-refresh.path").exists()
    control = tmp_path / "control"
    sh("dpkg-deb", "-e", str(deb / f"nvidia-container-toolkit-base_{TK}-1_amd64.deb"), str(control))
    postinst = (control / "postinst").read_text()
    assert "systemctl enable nvidia-cdi-refresh.path nvidia-cdi-refresh.service" in postinst
    assert "systemctl start nvidia-cdi-refresh.path nvidia-cdi-refresh.service" in postinst
    rpm = built["out"] / "toolkit" / "rpm" / f"nvidia-container-toolkit-base-{TK}-1.x86_64.rpm"
    files = sh("rpm", "-qlp", str(rpm)).stdout.split()
    assert "/usr/lib/systemd/system/nvidia-cdi-refresh.service" in files
    assert "/usr/lib/systemd/system-preset/90-nvidia-container-toolkit.preset" in files
    scripts = sh("rpm", "-qp", "--scripts", str(rpm)).stdout
    assert "systemctl preset nvidia-cdi-refresh.path" in scripts and "posttrans" in scripts


@pytest.fixture(scope="session")
def toolkit_root(built, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tk")
    for deb in (built["out"] / "toolkit" / "deb").glob(f"*_{TK}-1_*.deb"):
        extract_deb(deb, root)
    return root


def test_nvidia_ctk_and_cli_versions(toolkit_root):
    out = sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-ctk"), "--version").stdout
    assert out.splitlines()[0] == f"NVIDIA Container Toolkit CLI version {TK}"
    assert out.splitlines()[1].startswith("commit: ")
    cli = sh("sh", str(toolkit_root / "usr/bin/nvidia-container-cli"), "--version").stdout
    assert cli.splitlines()[0] == f"cli-version: {TK}"


def _load_ctk(toolkit_root: Path):
    import importlib.machinery
    import importlib.util

    # the CLI /usr/bin/nvidia-ctk imports (templates/nvidia_ctk.py)
    path = str(toolkit_root / "usr/lib/nvidia-container-toolkit/nvidia_ctk.py")
    loader = importlib.machinery.SourceFileLoader("sandbox_nvidia_ctk", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_nvidia_ctk_cdi_generate_names_devices_and_the_loaded_drivers_libraries(
        toolkit_root, tmp_path, monkeypatch, capsys):
    """`nvidia-ctk cdi generate --output FILE`: kind nvidia.com/gpu, a device per GPU index and
    UUID, per MIG device `<gpu>:<mig>` and MIG UUID, `all`; the libraries of the loaded
    driver (found by their versioned names) mounted; what gpuhost.runtime.cdi reads back as fresh."""
    from gpuhost.runtime import cdi

    ctk = _load_ctk(toolkit_root)
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "libnvidia-ml.so.570.172.08").write_text("x")
    (libdir / "libcuda.so.550.163.01").write_text("x")  # another driver's: not taken
    monkeypatch.setattr(ctk, "LIB_DIRS", (str(libdir),))
    monkeypatch.setattr(ctk, "SIM_MOUNTS", ())
    monkeypatch.setattr(ctk, "loaded_driver", lambda: "570.172.08")
    monkeypatch.setattr(ctk, "smi_devices", lambda: [
        (0, "GPU-0a", [(0, "MIG-00"), (1, "MIG-01")]), (1, "GPU-1b", [])])
    out = tmp_path / "cdi" / "nvidia.yaml"
    assert ctk.main(["cdi", "generate", f"--output={out}"]) == 0
    spec = cdi.parse_spec(str(out), out.read_text())
    assert spec["kind"] == "nvidia.com/gpu" and spec["error"] is None
    assert sorted(spec["devices"]) == sorted(
        ["0", "GPU-0a", "0:0", "MIG-00", "0:1", "MIG-01", "1", "GPU-1b", "all"])
    assert spec["driver_versions"] == ["570.172.08"]
    assert "Could not locate libcuda.so.570.172.08" in capsys.readouterr().err
    monkeypatch.setattr(ctk, "loaded_driver", lambda: None)
    assert ctk.main(["cdi", "generate", f"--output={out}"]) == 1  # no driver: no spec


def test_nvidia_ctk_writes_schema_0_7_0_from_1_19_1_unless_the_feature_flag_says_not(
        toolkit_root, tmp_path, monkeypatch, capsys):
    """toolkit#1860 / cloud-native-docs PR #419: 1.19.1 and newer write cdiVersion 0.7.0;
    --feature-flag no-additional-gids-for-device-nodes (or the env var the refresh unit's env
    file can set, NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS) keeps the older schema."""
    ctk = _load_ctk(toolkit_root)  # TK: 1.20.0
    monkeypatch.setattr(ctk, "loaded_driver", lambda: "570.172.08")
    monkeypatch.setattr(ctk, "smi_devices", lambda: [(0, "GPU-0a", [])])
    monkeypatch.setattr(ctk, "SIM_MOUNTS", ())
    monkeypatch.delenv("NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS", raising=False)
    out = tmp_path / "nvidia.json"
    assert ctk.main(["cdi", "generate", f"--output={out}"]) == 0
    assert json.loads(out.read_text())["cdiVersion"] == "0.7.0"
    assert "Generated CDI spec with version 0.7.0" in capsys.readouterr().err
    assert ctk.main(["cdi", "generate", "--feature-flag", "no-additional-gids-for-device-nodes",
                     f"--output={out}"]) == 0
    assert json.loads(out.read_text())["cdiVersion"] == "0.5.0"
    monkeypatch.setenv("NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS", "no-additional-gids-for-device-nodes")
    assert ctk.main(["cdi", "generate", f"--output={out}"]) == 0
    assert json.loads(out.read_text())["cdiVersion"] == "0.5.0"
    monkeypatch.setattr(ctk, "VERSION", TK_118)
    monkeypatch.delenv("NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS")
    assert ctk.main(["cdi", "generate", f"--output={out}"]) == 0
    assert json.loads(out.read_text())["cdiVersion"] == "0.5.0"


@pytest.mark.parametrize(("head", "version"), [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  (b@h)",
     "570.172.08"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  Tue Apr  8 2025", "550.163.01")])
def test_nvidia_ctk_reads_the_loaded_driver_of_both_flavours(toolkit_root, tmp_path, head,
                                                             version):
    ctk = _load_ctk(toolkit_root)
    proc = tmp_path / "version"
    proc.write_text(head + "\nGCC version:  gcc version 12.2.0\n")
    ctk.PROC_VERSION = str(proc)
    assert ctk.loaded_driver() == version
    ctk.PROC_VERSION = str(tmp_path / "absent")
    assert ctk.loaded_driver() is None


@pytest.mark.parametrize("no_json", [False, True], ids=["python3", "python3-minimal"])
def test_nvidia_ctk_runtime_configure_merges_in_place(toolkit_root, tmp_path, no_json):
    env = dict(os.environ)
    if no_json:  # python3-minimal has no json module: the tool must use its bundled jsonlite
        shadow = tmp_path / "shadow"
        shadow.mkdir()
        (shadow / "json.py").write_text("raise ImportError('no json in python3-minimal')\n")
        (shadow / "jsonlite.py").write_text(
            (toolkit_root / "usr/lib/nvidia-container-toolkit/jsonlite.py").read_text())
        env["PYTHONPATH"] = str(shadow)
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"log-driver": "json-file", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}')
    inode = daemon.stat().st_ino
    proc = sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-ctk"), "runtime", "configure",
              "--runtime=docker", f"--config={daemon}", env=env)
    assert f"Wrote updated config to {daemon}" in proc.stderr
    data = json.loads(daemon.read_text())
    assert data == {"log-driver": "json-file",
                    "runtimes": {"crun": {"path": "/usr/bin/crun"},
                                 "nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    assert daemon.read_text().startswith('{\n    "log-driver"')  # Go-style: sorted, 4 spaces
    assert daemon.stat().st_ino == inode  # rewritten in place, no rename
    assert not list(tmp_path.glob("daemon.json*[!n]"))  # no backup left behind
    sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-ctk"), "runtime", "configure",
       "--runtime=docker", f"--config={daemon}", "--set-as-default", env=env)
    assert json.loads(daemon.read_text())["default-runtime"] == "nvidia"
    daemon.write_text('{"log-driver": "json-file",\n  oops}')
    bad = sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-ctk"), "runtime", "configure",
             "--runtime=docker", f"--config={daemon}", check=False, env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("ERRO[0000] unable to load config")
    assert daemon.read_text() == '{"log-driver": "json-file",\n  oops}'


def runtime_env(toolkit_root: Path, tmp_path: Path) -> tuple[dict, Path, Path]:
    """A driver root holding the four host paths, a config.toml pointing at it and a
    fake runc that records its argv."""
    drv = tmp_path / "drv"
    for rel in ("usr/lib/gpusim", "etc/gpusim", "var/lib/gpusim"):
        (drv / rel).mkdir(parents=True)
    (drv / "usr/bin").mkdir(parents=True)
    (drv / "usr/bin/nvidia-smi").write_text("#!/bin/sh\n")
    cfg = tmp_path / "xdg" / "nvidia-container-runtime"
    cfg.mkdir(parents=True)
    conf = (toolkit_root / "etc/nvidia-container-runtime/config.toml").read_text()
    assert 'root = "/"' in conf
    (cfg / "config.toml").write_text(conf.replace('root = "/"', f'root = "{drv}"'))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "runc-argv"
    (bindir / "runc").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{record}"\n')
    (bindir / "runc").chmod(0o755)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PATH": f"{bindir}:{os.environ['PATH']}"}
    return env, drv, record


@pytest.mark.parametrize("gpu_env,expect_mounts", [
    ("NVIDIA_VISIBLE_DEVICES=all", True), ("NVIDIA_VISIBLE_DEVICES=void", False), (None, False)])
def test_runtime_shim_adds_read_only_mounts_then_execs_runc(toolkit_root, tmp_path, gpu_env,
                                                            expect_mounts):
    env, drv, record = runtime_env(toolkit_root, tmp_path)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec = {"process": {"env": ["PATH=/usr/bin:/bin"] + ([gpu_env] if gpu_env else [])},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]}
    (bundle / "config.json").write_text(json.dumps(spec))
    argv = ["--root", "/run/docker/runtime-runc/moby", "--log", str(tmp_path / "log.json"),
            "--log-format", "json", "create", "--bundle", str(bundle), "--pid-file",
            str(tmp_path / "pid"), "ctr-1"]
    sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-container-runtime"), *argv, env=env)
    assert record.read_text().splitlines() == argv
    mounts = json.loads((bundle / "config.json").read_text())["mounts"]
    added = {m["destination"]: m for m in mounts if m["destination"] != "/proc"}
    if not expect_mounts:
        assert added == {}
        return
    assert set(added) == {"/usr/bin/nvidia-smi", "/usr/lib/gpusim", "/etc/gpusim", "/var/lib/gpusim"}
    for dest, m in added.items():
        assert m["source"] == str(drv) + dest and m["type"] == "bind" and "ro" in m["options"]
    # a second create (restart) does not duplicate them
    sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-container-runtime"), *argv, env=env)
    assert len(json.loads((bundle / "config.json").read_text())["mounts"]) == 5


def test_runtime_shim_passes_other_commands_through(toolkit_root, tmp_path):
    env, _, record = runtime_env(toolkit_root, tmp_path)
    sh(sys.executable, str(toolkit_root / "usr/bin/nvidia-container-runtime"), "delete", "--force",
       "ctr-1", env=env)
    assert record.read_text().splitlines() == ["delete", "--force", "ctr-1"]


def test_rebuild_is_incremental(built):
    proc = subprocess.run(
        [sys.executable, "-m", "sandbox.nvidia.build", "--only", "local-repos", "--only", "toolkit",
         "--driver-version", VER, "--distro", "debian12"], cwd=REPO, env=built["env"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout and "built in" not in proc.stdout
