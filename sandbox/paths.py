"""Paths, addresses and constants of the sandbox (see docs/architecture.md, "Sandbox interfaces")."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
FILES_DIR = PACKAGE_DIR / "files"
# Tree the fake-driver helper (sandbox/nvidia) provides; copied into every new host root.
NVIDIA_MACHINE_DIR = PACKAGE_DIR / "nvidia" / "machine"
# Optional extra Debian packages the fake-driver helper wants in the mirror (one a line).
NVIDIA_MIRROR_PACKAGES = PACKAGE_DIR / "nvidia" / "mirror-packages.txt"

CACHE_DIR = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost"))
BASE_CACHE = CACHE_DIR / "base"
MIRROR_CACHE = CACHE_DIR / "mirror"
MIRROR_DEBIAN = MIRROR_CACHE / "debian"      # served as /debian
# served as /nvidia (built by sandbox/nvidia, whose GPUHOST_NVIDIA_OUT moves it)
NVIDIA_CACHE = Path(os.environ.get("GPUHOST_NVIDIA_OUT", CACHE_DIR / "nvidia"))

STATE_DIR = Path(os.environ.get("GPUHOST_SANDBOX_STATE", "/var/lib/gpuhost-sandbox"))
HOSTS_DIR = STATE_DIR / "hosts"


def run_dir() -> Path:
    """Runtime directory (fleet.json, ssh key, pids, logs); GPUHOST_SANDBOX_DIR overrides."""
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


# Addresses: loopback only, in this machine's network namespace. A private fleet beside
# the default one (tests, experiments) sets GPUHOST_SANDBOX_HOST_PREFIX (e.g. 127.77.4.),
# GPUHOST_SANDBOX_HTTP_PORT (e.g. 8004) and GPUHOST_SANDBOX_CGROUP together with
# GPUHOST_SANDBOX_DIR and GPUHOST_SANDBOX_STATE.
HTTP_ADDRESS = "127.77.0.1"
HTTP_PORT = int(os.environ.get("GPUHOST_SANDBOX_HTTP_PORT", "8000"))
MIRROR_URL = f"http://{HTTP_ADDRESS}:{HTTP_PORT}"
SSH_PORT = 2222
MAX_HOSTS = 254
HOST_PREFIX = os.environ.get("GPUHOST_SANDBOX_HOST_PREFIX", "127.77.1.")


def host_address(index: int) -> str:
    """Address of host number `index` (1-based)."""
    if not 1 <= index <= MAX_HOSTS:
        raise ValueError(f"host index {index} out of range 1..{MAX_HOSTS}")
    return f"{HOST_PREFIX}{index}"


# Debian archive used to build the base root and the mirror (the controller's own
# sources may carry third-party repositories; the sandbox uses only these).
DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# Cgroup (relative to each hierarchy's root) under which every host has its own:
# CGROUP_PARENT_PREFIX/NAME holds the host's systemd-nspawn and everything the host runs.
CGROUP_PARENT_PREFIX = os.environ.get("GPUHOST_SANDBOX_CGROUP", "gpuhost-sandbox")
