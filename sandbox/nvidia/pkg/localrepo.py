"""NVIDIA's local repository packages: a .deb/.rpm that unpacks a signed file:// repo."""

from __future__ import annotations

import shutil
from pathlib import Path

from . import driver
from .common import NO_MODULE_STREAMS, WORK_DIR, fresh_dir, publish
from .deb import DebPackage, build_deb, build_flat_repo
from .rpm import RpmPackage, build_rpm, build_rpm_repo
from .signing import SigningKey


def repo_dir(distro: str, version: str) -> str:
    return f"/var/nvidia-driver-local-repo-{distro}-{version}"


def keyring_name(key: SigningKey) -> str:
    return f"nvidia-driver-local-{key.keyid}-keyring.gpg"


def tree_files(src: Path, dest: str) -> dict[str, tuple[bytes, int]]:
    return {f"{dest}/{p.relative_to(src)}": (p.read_bytes(), 0o644)
            for p in sorted(src.rglob("*")) if p.is_file()}


def build_apt_local_repo(version: str, distro: str, key: SigningKey, outdir: Path) -> Path:
    stage = fresh_dir(WORK_DIR / "localrepo" / f"{distro}-{version}")
    for pkg in driver.apt_packages(version, distro):
        build_deb(pkg, stage)
    key.export_binary(stage / keyring_name(key))
    build_flat_repo(stage, key, origin="NVIDIA", label="NVIDIA Driver Local Repo",
                    description=f"NVIDIA driver {version} local repository for {distro} "
                                "(gpuhost sandbox simulation)")
    dest = repo_dir(distro, version)
    sources = (f"deb [signed-by=/usr/share/keyrings/{keyring_name(key)}] "
               f"file://{dest} /\n")
    files = tree_files(stage, dest)
    files[f"/etc/apt/sources.list.d/nvidia-driver-local-{distro}-{version}.list"] = (sources, 0o644)
    pkg = DebPackage(
        f"nvidia-driver-local-repo-{distro}-{version}", "1.0-1",
        f"nvidia-driver-local repository configuration files ({distro}, {version})\n"
        "Simulated NVIDIA local repository for the gpuhost sandbox. Copy the keyring to\n"
        f"/usr/share/keyrings/ before apt-get update:\n cp {dest}/nvidia-driver-*-keyring.gpg "
        "/usr/share/keyrings/", files=files, section="multiverse/devel",
        conffiles=[f"/etc/apt/sources.list.d/nvidia-driver-local-{distro}-{version}.list"])
    out = publish(build_deb(pkg, WORK_DIR / "publish"), outdir)
    shutil.rmtree(stage)
    return out


def build_rpm_local_repo(version: str, el: str, key: SigningKey, outdir: Path) -> Path:
    stage = fresh_dir(WORK_DIR / "localrepo" / f"{el}-{version}")
    pkgs = driver.rpm_packages(version, el)
    for pkg in pkgs:
        build_rpm(pkg, stage)
    pubkey = f"{key.keyid}.pub"
    key.export_armored(stage / pubkey)
    # EL10: NVIDIA's rhel10 repositories carry no module streams (the R620 guide: install
    # nvidia-open and lock it with dnf versionlock); EL 8/9's have the nvidia-driver module
    streams = None if el in NO_MODULE_STREAMS else driver.modules_yaml(version, el, pkgs)
    build_rpm_repo(stage, key, modules_yaml=streams)
    dest = repo_dir(el, version)
    name = f"nvidia-driver-local-{el}-{version}"
    repo_file = (f"[{name}]\nname={name}\nbaseurl=file://{dest}\nenabled=1\ngpgcheck=1\n"
                 f"repo_gpgcheck=0\ngpgkey=file://{dest}/{pubkey}\nobsoletes=0\n")
    files = tree_files(stage, dest)
    files[f"/etc/yum.repos.d/{name}.repo"] = (repo_file, 0o644)
    pkg = RpmPackage(name=f"nvidia-driver-local-repo-{el}-{version}", version="1.0", release="1",
                     summary=f"nvidia-driver-local repository configuration files ({el}, {version})",
                     files=files, config_files=[f"/etc/yum.repos.d/{name}.repo"],
                     description="Simulated NVIDIA local repository (gpuhost sandbox).")
    built = build_rpm(pkg, WORK_DIR / "publish")
    key.rpmsign(built)
    out = publish(built, outdir)
    shutil.rmtree(stage)
    return out
