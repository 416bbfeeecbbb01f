"""Debian 13 "trixie" hosts: a real trixie root and a trixie mirror, beside (never in place
of) the bookworm ones (sandbox/README.md, "Debian 13 hosts").

  /var/cache/gpuhost/base/debian13-<hash>/       trixie minbase root (mmdebstrap), the same
                                                 package list as the bookworm base
  /var/cache/gpuhost/mirror/debian13-apt/        controller-side apt of the trixie mirror
  /var/cache/gpuhost/mirror/debian13-state.json
  /var/cache/gpuhost/mirror/debian-trixie/       served as http://127.77.0.1:8000/debian-trixie
      pool/main/*.deb, dists/trixie/{main,contrib}/binary-amd64/, signed with the sandbox
      mirror's key (sandbox/mirror.py: same resolver, same kernel rule, trixie's 6.12)

Everything a host runs is Debian's trixie build (apt 3, dkms 3.2, systemd 257, Python 3.13,
docker.io 26.1, containerd 1.7); only the GPU and NVIDIA's binaries are simulated. Ubuntu
26.04 hosts (sandbox/ubuntu.py) are dressed on this root.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import base, mirror, paths
from .util import recipe_hash, write_file

OS_NAME = "debian13"
SUITE = "trixie"
PREFIX = "d13"           # host names d13-NN (Debian 12's are gpu-NN)
SOURCES = [
    "deb http://deb.debian.org/debian trixie main",
    "deb http://deb.debian.org/debian trixie-updates main",
    "deb http://deb.debian.org/debian-security trixie-security main",
]
CONTRIB_SOURCES = ["deb http://deb.debian.org/debian trixie contrib"]
# Bump when the post-processing (base.py's, shared) changes for this root.
RECIPE_VERSION = 1
# What the deploys install on Debian 13 and Ubuntu 26.04 hosts: the bookworm list without
# Slurm (a Debian 12 trait only) and cgroupfs-mount (not in trixie), plus zstd (Ubuntu
# 26.04's dkms compresses modules with it without depending on it: NVIDIA's 26.04 driver
# container installs it, gpu-driver-container@06a208c ubuntu26.04/install.sh).
_NOT_HERE = {"slurmd", "slurmctld", "slurm-client", "munge", "cgroupfs-mount"}
# docker-cli: trixie's docker client, split out of docker.io (which only Recommends it; the
# mirror resolves without recommends).
PACKAGES = [p for p in mirror.MIRROR_PACKAGES if p not in _NOT_HERE] + ["zstd", "docker-cli"]

APT_KEYRING = f"/etc/apt/keyrings/{mirror.KEYRING_NAME}"


def archive() -> mirror.Archive:
    return mirror.Archive(
        suite=SUITE, sources=SOURCES, contrib_sources=CONTRIB_SOURCES, packages=PACKAGES,
        root=paths.MIRROR_CACHE / "debian-trixie", apt_dir=paths.MIRROR_CACHE / "debian13-apt",
        state_file=paths.MIRROR_CACHE / "debian13-state.json", served="debian-trixie")


def build_mirror(refresh: bool = False) -> dict:
    return mirror.build(refresh=refresh, archive=archive())


def kernel_release() -> str:
    return mirror.kernel_release(archive())


# ---------------------------------------------------------------- the base root

def _recipe() -> dict:
    return {"suite": SUITE, "sources": SOURCES, "packages": base.BASE_PACKAGES,
            "version": RECIPE_VERSION, "base_version": base.BASE_RECIPE_VERSION}


def base_dir() -> Path:
    return paths.BASE_CACHE / f"{OS_NAME}-{recipe_hash(_recipe())}"


def build_base() -> Path:
    return base.build_minbase(base_dir(), OS_NAME, SUITE, SOURCES)


# ---------------------------------------------------------------- the host's apt sources

def write_apt_sources(upper: Path) -> None:
    """deb822 /etc/apt/sources.list.d/debian.sources, as Debian 13's installer and cloud
    images write it (trixie release notes: "deb822-style sources by default"), pointed at
    the sandbox's trixie mirror; no /etc/apt/sources.list."""
    url = f"{paths.MIRROR_URL}/{archive().served}"
    write_file(upper / "etc/apt/sources.list.d/debian.sources", (
        "Types: deb\n"
        f"URIs: {url}\n"
        f"Suites: {SUITE}\n"
        "Components: main\n"
        f"Signed-By: {APT_KEYRING}\n"))
    dest = upper / APT_KEYRING.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(archive().keyring, dest)
    os.chmod(dest, 0o644)
