"""Ubuntu 26.04 LTS "resolute" hosts: Ubuntu's release files on the Debian 13 root, and
the resolute suites of the sandbox's Ubuntu-layout archive (sandbox/README.md,
"Ubuntu 26.04").

What differs from the 22.04/24.04 hosts, each on a vendor fact:
  - the userland is trixie's (sandbox/debian13.py), the Debian release closest to 26.04:
    apt 3, dkms 3.2.2 (resolute ships 3.2.2-1ubuntu1, packages.ubuntu.com/source/resolute/dkms),
    Python 3.13, systemd 257; its binaries come from the trixie mirror's pool;
  - kernel 7.0 with Ubuntu's naming, ``7.0.0-12-generic`` at release and ``7.0.0-30`` in
    -updates (packages.ubuntu.com resolute); header packages install under /usr/lib/modules
    (merged-/usr kernel packages) and record zstd module compression in their .config
    ("kernel modules are zstd-compressed on 26.04": NVIDIA's ubuntu26.04 driver container
    installs zstd for it, gpu-driver-container@06a208c ubuntu26.04/install.sh); zstd is in
    the archive, not installed, and no package here depends on it (dkms does not);
  - the headers meta packages of the flavours gpuhost may meet: ``linux-headers-generic``,
    ``linux-headers-generic-hwe-26.04`` (no HWE kernel yet: the GA kernel, as Ubuntu's HWE
    metas are at a release), ``linux-headers-nvidia`` (Ubuntu's -nvidia flavour) and
    ``linux-headers-aws`` (a cloud flavour); flavour ABIs numbered from 1000 as Ubuntu's
    derivative kernels are (e.g. noble's 6.8.0-1021-aws). The ABI numbers of the -nvidia
    and -aws kernels are the sandbox's, not read from the archive;
  - Ubuntu's docker.io (source docker.io-app) carries the docker CLI itself, as 24.04's does
    (Ubuntu's snapshot-service documentation installs docker.io on 24.04 and runs
    ``docker --version``; for 26.04 inferred). Trixie's docker.io only recommends its split-out
    ``docker-cli``, so resolute's index makes docker.io depend on it (``docker_io_with_cli``):
    installing docker.io gives the CLI, as on Ubuntu.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

OS_NAME = "ubuntu2604"
CODENAME = "resolute"

RELEASE = {
    "prefix": "u26", "version_id": "26.04", "codename": CODENAME,
    "version": "26.04.1 LTS (Resolute Raccoon)", "pretty": "Ubuntu 26.04.1 LTS",
    # base-files of a release follows Debian testing at its freeze: forky (inferred)
    "debian_version": "forky/sid",
    "kernel": "7.0.0-12-generic", "kernel_version": "7.0.0-12.12",
    "newer": "7.0.0-30-generic", "newer_version": "7.0.0-30.30",
    "root": "debian13",
}

# flavour -> (release of its kernel in this archive, package version, meta package names)
FLAVOURS = {
    "nvidia": ("7.0.0-1004-nvidia", "7.0.0-1004.4", ["linux-headers-nvidia"]),
    "aws": ("7.0.0-1006-aws", "7.0.0-1006.6", ["linux-headers-aws"]),
}
# the generic kernel's metas (all follow the newest generic kernel in -updates)
GENERIC_METAS = ["linux-headers-generic", "linux-headers-generic-hwe-26.04"]

CONFIG = ("# Simulated kernel configuration (gpuhost sandbox)\nCONFIG_MODULES=y\n"
          "CONFIG_MODULE_COMPRESS=y\nCONFIG_MODULE_COMPRESS_ZSTD=y\n")


def header_packages(release: str, version: str) -> list[tuple[str, str, dict, dict]]:
    """Ubuntu's header packages for RELEASE, laid out merged-/usr, with zstd compression
    in the kernel's configuration (what dkms reads to compress the modules it installs)."""
    from . import ubuntu_archive
    out = []
    for fname, control, files, links in ubuntu_archive.header_packages(release, version):
        files = {k: (CONFIG if k.endswith("/.config") else v) for k, v in files.items()}
        links = {k.replace("/lib/modules/", "/usr/lib/modules/", 1): v for k, v in links.items()}
        out.append((fname, control, files, links))
    return out


def metas(version_of) -> list[tuple[str, str, str]]:
    """(meta package, version, the flavoured headers package it depends on)."""
    r = RELEASE
    out = [(m, version_of(r["newer"], r["newer_version"]), f"linux-headers-{r['newer']}")
           for m in GENERIC_METAS]
    for release, version, names in FLAVOURS.values():
        out += [(m, version_of(release, version), f"linux-headers-{release}") for m in names]
    return out


def docker_io_with_cli(packages: str) -> str:
    """A Packages index whose docker.io stanza depends on docker-cli (module docstring)."""
    out = []
    for stanza in packages.split("\n\n"):
        if stanza.startswith("Package: docker.io\n"):
            stanza = "\n".join(line + ", docker-cli" if line.startswith("Depends: ") else line
                                for line in stanza.split("\n"))
        out.append(stanza)
    return "\n\n".join(out)


def flavour_kernels() -> list[tuple[str, str]]:
    return [(release, version) for release, version, _ in FLAVOURS.values()]


# The running kernel's own modules, as linux-modules-<abi>-generic installs them: a stand-in
# file per directory dkms and modprobe look at, zstd-compressed like 26.04's (dkms 3.2
# compresses the modules it installs as it finds the kernel's: dkms's set_module_suffix).
RUNNING_MODULES = ("kernel/drivers/net/dummy.ko.zst", "kernel/fs/overlayfs/overlay.ko.zst")


def layer_files(root: Path) -> None:
    moddir = root / "usr/lib/modules" / RELEASE["kernel"]
    for rel in RUNNING_MODULES:
        dest = moddir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        stub = f"simulated module {Path(rel).name} of {RELEASE['kernel']}\n".encode()
        if shutil.which("zstd"):
            stub = subprocess.run(["zstd", "-q", "-c"], input=stub, capture_output=True,
                                  check=True).stdout
        dest.write_bytes(stub)
    (moddir / "modules.dep").write_text("".join(f"{r}:\n" for r in RUNNING_MODULES))
