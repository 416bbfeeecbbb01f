"""NVIDIA's CUDA network repositories for apt, as the sandbox serves them:

    OUT_DIR/cuda/repos/<distro>/x86_64/      (developer.download.nvidia.com/compute/cuda/
        *.deb, Packages, Packages.gz,          repos/<distro>/x86_64/: one flat repository per
        Release, InRelease, Release.gpg        distribution and architecture, `deb [signed-by=
        <keyid>.pub                            ...] URL /`)
        cuda-keyring_1.1-1_all.deb

Every driver version of NETWORK_REPOS in one repository, as NVIDIA's holds every release; a
host picks one with ``nvidia-driver-pinning-<full version>`` (NVIDIA's ubuntu26.04 driver
container installs it first: gpu-driver-container@06a208c ubuntu26.04/install.sh), whose
preferences file pins each driver package to that version at priority 1000. The repository
is signed by the sandbox's NVIDIA key (not NVIDIA's); ``<keyid>.pub`` is its armored public
key under NVIDIA's file-name scheme (NVIDIA's is ``3bf863cc.pub``), and ``cuda-keyring``
installs it as NVIDIA's package does (``/usr/share/keyrings/cuda-archive-keyring.gpg`` and
``/etc/apt/sources.list.d/cuda-<distro>-x86_64.list``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import driver
from .common import (BASE_URL, NETWORK_REPOS, OUT_DIR, WORK_DIR, code_digest, fresh_dir,
                     inputs_digest, log, mark_done, replace_dir, up_to_date)
from .deb import DebPackage, build_deb, build_flat_repo
from .signing import SigningKey

KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"


def url(distro: str) -> str:
    return f"{BASE_URL}/cuda/repos/{distro}/x86_64"


def repo_dir(distro: str) -> Path:
    return OUT_DIR / "cuda" / "repos" / distro / "x86_64"


def full_pinning_package(version: str, distro: str, names: list[str]) -> DebPackage:
    """nvidia-driver-pinning-<full version>: every driver package at exactly VERSION."""
    v = f"{version}-1ubuntu1" if distro.startswith("ubuntu") else f"{version}-1"
    text = (f"# NVIDIA driver {version} (gpuhost sandbox simulation of "
            f"nvidia-driver-pinning-{version})\n"
            f"Package: {' '.join(sorted(names))}\nPin: version {version}-*\nPin-Priority: 1000\n")
    return DebPackage(f"nvidia-driver-pinning-{version}", v,
                      f"APT driver pinning file for driver version {version}", arch="all",
                      files={driver.PIN_FILE: (text, 0o644)},
                      provides=["nvidia-driver-pinning"], conflicts=["nvidia-driver-pinning"],
                      replaces=["nvidia-driver-pinning"], section="multiverse/metapackages")


def keyring_package(key: SigningKey, distro: str) -> DebPackage:
    sources = f"deb [signed-by={KEYRING}] {url(distro)}/ /\n"
    tmp = WORK_DIR / "netrepo-keyring.gpg"
    key.export_binary(tmp)
    files = {KEYRING: (tmp.read_bytes(), 0o644),
             f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list": (sources, 0o644)}
    tmp.unlink()
    return DebPackage("cuda-keyring", "1.1-1", "GPG keyring for the CUDA repository "
                      "(gpuhost sandbox: the sandbox's NVIDIA key)", arch="all", files=files,
                      section="multiverse/devel",
                      conffiles=[f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list"])


def packages(distro: str) -> list[DebPackage]:
    out: dict[str, DebPackage] = {}
    for version in NETWORK_REPOS[distro]:
        pkgs = driver.apt_packages(version, distro)
        names = [p.name for p in pkgs if p.name not in ("nvlsm",)
                 and not p.name.startswith("nvidia-driver-pinning")]
        for p in [*pkgs, full_pinning_package(version, distro, names)]:
            out.setdefault(p.filename, p)
    return list(out.values())


def build(key: SigningKey, force: bool) -> None:
    code = code_digest("deb", "driver", "driver_debian", "netrepo")
    for distro, versions in NETWORK_REPOS.items():
        final = repo_dir(distro)
        digest = inputs_digest(code=code, key=key.fingerprint, v=versions, url=url(distro))
        name = f"network-repo-{distro}"
        if not force and up_to_date(name, digest, [final / "InRelease"]):
            log(f"network repo {distro}: up to date")
            continue
        stage = fresh_dir(WORK_DIR / "netrepo" / distro)
        for pkg in packages(distro) + [keyring_package(key, distro)]:
            build_deb(pkg, stage)
        key.export_armored(stage / f"{key.keyid.lower()[-8:]}.pub")
        build_flat_repo(stage, key, origin="NVIDIA", label="NVIDIA CUDA",
                        description=f"NVIDIA CUDA network repository for {distro} "
                                    "(gpuhost sandbox simulation)")
        with replace_dir(final) as new:
            for f in stage.iterdir():
                shutil.copy2(f, new / f.name)
        shutil.rmtree(stage)
        mark_done(name, digest)
        log(f"network repo {distro}: {len(list(final.glob('*.deb')))} packages, {url(distro)}/")


def manifest(fingerprint: str) -> dict:
    """Each repository's URL, driver versions, keyring package, armored key and the key's
    fingerprint (what an inventory's nvidia_driver_repo names)."""
    return {d: {"url": url(d) + "/", "versions": list(v), "fingerprint": fingerprint,
                "keyring_deb": f"{url(d)}/cuda-keyring_1.1-1_all.deb",
                "gpgkey": next((f"{url(d)}/{p.name}" for p in repo_dir(d).glob("*.pub")), None)}
            for d, v in NETWORK_REPOS.items()}
