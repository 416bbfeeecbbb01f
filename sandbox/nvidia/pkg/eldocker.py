"""Docker's "Docker CE for RHEL" repository as the sandbox serves it beside each Enterprise
Linux release's channels (`<vendor>/<os>/docker-ce-stable`, built by elrepos.py).

docker-ce, docker-ce-cli and containerd.io repackage Debian bookworm's docker.io,
containerd and runc binaries (fetched with `apt-get download`), with the one library a
minbase root lacks (libdevmapper) bundled under /usr/lib64/docker-ce, plus Debian's
systemd units pointed at /usr/bin/dockerd (a wrapper). Like Docker's RPMs they ship no
init.d script and enable nothing (Docker documents `systemctl enable --now docker`).
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path

from .common import (WORK_DIR, BuildError, code_digest, fresh_dir, inputs_digest, log,
                     mark_done, run, up_to_date)
from .rpm import RpmPackage, build_rpm

DOCKER_VERSION = "20.10.24"
DEBIAN_DEBS = ("docker.io", "containerd", "runc", "tini", "libdevmapper1.02.1")
# Docker's own "Docker CE for RHEL" repository (docker-ce-stable), apart from the vendor's.
DOCKER_REPO = "docker-ce-stable"


def docker_packages(el: str) -> list[RpmPackage]:
    root = WORK_DIR / "debian-docker"
    if not (root / "usr/bin/tini-static").exists():
        dl = fresh_dir(WORK_DIR / "debian-debs")
        log("fetching Debian's docker.io, containerd, runc with apt-get download")
        run(["apt-get", "download", *DEBIAN_DEBS], cwd=dl)
        fresh_dir(root)
        for deb in sorted(dl.glob("*.deb")):
            run(["dpkg-deb", "-x", str(deb), str(root)])
    libdm = sorted((root / "lib/x86_64-linux-gnu").glob("libdevmapper.so.1.02*"))
    if not libdm:
        raise BuildError(f"libdevmapper missing in {root}; remove that directory and rebuild")

    def binfile(rel: str) -> tuple[bytes, int]:
        return (root / rel).read_bytes(), 0o755

    v, r = DOCKER_VERSION, f"1.{el}"
    wrapper = ("#!/bin/sh\n# dockerd from Debian's docker.io, repackaged for the sandbox\n"
               "LD_LIBRARY_PATH=/usr/lib64/docker-ce${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "
               "exec /usr/libexec/docker-ce/dockerd \"$@\"\n")
    units = {name: (root / "lib/systemd/system" / name).read_text().replace(
        "/usr/sbin/dockerd", "/usr/bin/dockerd") for name in
        ("docker.service", "docker.socket", "containerd.service")}
    return [
        RpmPackage(name="containerd.io", version="1.6.20", release="3.1." + el,
                   summary="An industry-standard container runtime (Debian binaries repackaged)",
                   # as Docker's containerd.io spec: it carries its own runc binary and
                   # replaces the distribution's runc and containerd packages
                   provides=["containerd"], obsoletes=["runc"], conflicts=["runc"],
                   files={"/usr/bin/containerd": binfile("usr/bin/containerd"),
                          "/usr/bin/containerd-shim-runc-v2": binfile("usr/bin/containerd-shim-runc-v2"),
                          "/usr/bin/ctr": binfile("usr/bin/ctr"),
                          "/usr/bin/runc": binfile("usr/sbin/runc"),
                          "/usr/lib/systemd/system/containerd.service":
                              (units["containerd.service"], 0o644)},
                   payload="w1.gzdio"),
        RpmPackage(name="docker-ce-cli", version=v, release=r, epoch=1,
                   summary="The open-source application container engine CLI (Debian binary)",
                   files={"/usr/bin/docker": binfile("usr/bin/docker")}, payload="w1.gzdio"),
        RpmPackage(name="docker-ce", version=v, release=r, epoch=3,
                   summary="The open-source application container engine (Debian binaries)",
                   requires=["containerd.io >= 1.6.4", "docker-ce-cli"],
                   # like Docker's own RPM: the docker group exists before dockerd starts
                   scriptlets={"pre": ["/bin/sh", "-c",
                                       "getent group docker >/dev/null || groupadd -r docker"]},
                   files={"/usr/bin/dockerd": (wrapper, 0o755),
                          "/usr/libexec/docker-ce/dockerd": binfile("usr/sbin/dockerd"),
                          "/usr/bin/docker-proxy": binfile("usr/sbin/docker-proxy"),
                          "/usr/bin/docker-init": binfile("usr/bin/docker-init"),
                          # systemd units only, enabled by nothing: Docker documents
                          # `systemctl enable --now docker` after the install on EL
                          "/usr/lib/systemd/system/docker.service":
                              (units["docker.service"], 0o644),
                          "/usr/lib/systemd/system/docker.socket":
                              (units["docker.socket"], 0o644),
                          **{f"/usr/lib64/docker-ce/{p.name}": (p.read_bytes(), 0o644)
                             for p in libdm}},
                   payload="w1.gzdio"),
    ]


def docker_rpms(el: str, force: bool) -> list[Path]:
    """The repackaged Docker RPMs, cached apart from the repos: they take the longest
    (about 150 MB of binaries to compress) and change only with DOCKER_VERSION."""
    cache = WORK_DIR / "docker-rpms" / el
    digest = inputs_digest(code=code_digest("rpm"), docker=DOCKER_VERSION, debs=DEBIAN_DEBS,
                           el=el,  # the key name keeps the built RPMs valid
                           oracle_docker=inspect.getsource(docker_packages))
    if force or not up_to_date(f"docker-rpms-{el}", digest, [cache]) or not any(cache.glob("*.rpm")):
        t = time.monotonic()
        fresh_dir(cache)
        for pkg in docker_packages(el):
            build_rpm(pkg, cache)
        mark_done(f"docker-rpms-{el}", digest)
        log(f"docker-ce, docker-ce-cli, containerd.io for {el}: built in "
            f"{time.monotonic() - t:.1f}s")
    return sorted(cache.glob("*.rpm"))
