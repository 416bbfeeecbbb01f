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
NVIDIA_CACHE = CACHE_DIR / "nvidia"          # served as /nvidia (built by sandbox/nvidia)

STATE_DIR = Path(os.environ.get("GPUHOST_SANDBOX_STATE", "/var/lib/gpuhost-sandbox"))
HOSTS_DIR = STATE_DIR / "hosts"


def run_dir() -> Path:
    """Runtime directory (fleet.json, ssh key, pids, logs); GPUHOST_SANDBOX_DIR overrides."""
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


# Addresses: loopback only, in this machine's network namespace.
HTTP_ADDRESS = "127.77.0.1"
HTTP_PORT = 8000
MIRROR_URL = f"http://{HTTP_ADDRESS}:{HTTP_PORT}"
SSH_PORT = 2222
MAX_HOSTS = 254


def host_address(index: int) -> str:
    """Address of host number `index` (1-based)."""
    if not 1 <= index <= MAX_HOSTS:
        raise ValueError(f"host index {index} out of range 1..{MAX_HOSTS}")
    return f"127.77.1.{index}"


# Debian archive used to build the base root and the mirror (the controller's own
# sources may carry third-party repositories; the sandbox uses only these).
DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# Cgroup parent (relative to each controller's root) for containers of a host's dockerd.
CGROUP_PARENT_PREFIX = "gpuhost-sandbox"
