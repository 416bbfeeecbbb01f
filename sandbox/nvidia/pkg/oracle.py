"""Oracle-side RPM repositories (ol8, ol9): kernel devel packages of the sandbox's OL
kernels, gcc-toolset-14, a simulated dkms, and Docker's RHEL package names.

docker-ce, docker-ce-cli and containerd.io repackage Debian bookworm's docker.io,
containerd and runc binaries (fetched with `apt-get download`), with the one library a
minbase root lacks (libdevmapper) bundled under /usr/lib64/docker-ce, plus Debian's
systemd units pointed at /usr/bin/dockerd (a wrapper). Like Docker's RPMs they ship no
init.d script and enable nothing (Docker documents `systemctl enable --now docker`).
"""

from __future__ import annotations

import inspect
import shutil
import time
from pathlib import Path

from .common import (BASE_URL, OUT_DIR, WORK_DIR, BuildError, code_digest, fresh_dir,
                     inputs_digest, log, mark_done, replace_dir, run, sha256_file, template,
                     up_to_date)
from .rpm import RpmPackage, build_rpm, build_rpm_repo
from .signing import SigningKey

# (release, flavour, gcc version the kernel was built with or None)
KERNELS = {
    "ol8": [("5.15.0-307.178.5.el8uek.x86_64", "uek", None),
            ("4.18.0-553.el8_10.x86_64", "rhck", None)],
    "ol9": [("6.12.0-100.28.2.2.el9uek.x86_64", "uek", (14, 2, 1)),
            ("5.14.0-503.11.1.el9_5.x86_64", "rhck", None)],
}
DOCKER_VERSION = "20.10.24"
DEBIAN_DEBS = ("docker.io", "containerd", "runc", "tini", "libdevmapper1.02.1")


def split_release(rel: str) -> tuple[str, str]:
    """'5.14.0-503.11.1.el9_5.x86_64' -> ('5.14.0', '503.11.1.el9_5')"""
    base = rel.removesuffix(".x86_64")
    version, _, release = base.partition("-")
    return version, release


SIGN_FILE = ("#!/usr/bin/python3\n# scripts/sign-file stand-in (gpuhost sandbox): see gpusim firmware.py\n"
             "import sys\nsys.path.append('/usr/local/lib/gpusim')\nfrom gpusim import firmware\n"
             "sys.exit(firmware.main('sign-file'))\n")


def kernel_devel(rel: str, flavor: str, gcc: tuple | None) -> RpmPackage:
    version, release = split_release(rel)
    name = "kernel-uek-devel" if flavor == "uek" else "kernel-devel"
    src = f"/usr/src/kernels/{rel}"
    config = "# Simulated kernel configuration (gpuhost sandbox)\nCONFIG_MODULES=y\n"
    requires = []
    if gcc:
        config += (f'CONFIG_CC_VERSION_TEXT="gcc (GCC) {gcc[0]}.{gcc[1]}.{gcc[2]} 20250110 '
                   f'(Red Hat {gcc[0]}.{gcc[1]}.{gcc[2]}-7)"\n'
                   f"CONFIG_GCC_VERSION={gcc[0] * 10000 + gcc[1] * 100 + gcc[2]}\n")
        requires.append(f"gcc-toolset-{gcc[0]}")
    files = {
        f"{src}/Makefile": (f"# kernel {rel} (simulated headers)\nKERNELRELEASE = {rel}\n", 0o644),
        f"{src}/.config": (config, 0o644),
        f"{src}/include/generated/utsrelease.h": (f'#define UTS_RELEASE "{rel}"\n', 0o644),
        # kernel-devel ships scripts/sign-file; DKMS signs modules with it. The stand-in
        # appends a signature trailer the simulated kernel reads (gpusim firmware.py).
        f"{src}/scripts/sign-file": (SIGN_FILE, 0o755),
    }
    return RpmPackage(name=name, version=version, release=release,
                      summary=f"Development package for building kernel modules to match the "
                              f"{rel} kernel (simulated)", requires=requires, files=files,
                      symlinks={f"/lib/modules/{rel}/build": src},
                      provides=[f"kernel-devel-uname-r = {rel}"])


def ol_packages(ol: str, docker: list[RpmPackage]) -> list[RpmPackage]:
    el = ol.replace("ol", "el")
    pkgs = [kernel_devel(*k) for k in KERNELS[ol]]
    rhck = next(k for k in KERNELS[ol] if k[1] == "rhck")[0]
    v, r = split_release(rhck)
    pkgs.append(RpmPackage(name="kernel-headers", version=v, release=r,
                           summary="Header files for the Linux kernel for use by glibc (simulated)",
                           files={"/usr/include/linux/version.h":
                                  (f"/* kernel-headers {rhck} (simulated) */\n", 0o644)}))
    if ol == "ol9":
        pkgs.append(RpmPackage(name="kernel-devel-matched", version=v, release=r,
                               summary="Meta package to install matching core and devel kernel "
                                       "packages (simulated)",
                               requires=[f"kernel-devel = {v}-{r}"],
                               files={"/usr/share/doc/kernel-devel-matched/README":
                                      ("meta package\n", 0o644)}))
    gcc = "/opt/rh/gcc-toolset-14/root/usr/bin/gcc"
    pkgs += [
        RpmPackage(name="gcc-toolset-14", version="14.0", release=f"2.{el}",
                   summary="Package that installs gcc-toolset-14 (simulated compiler)",
                   files={"/opt/rh/gcc-toolset-14/enable":
                          ("# gcc-toolset-14 (gpuhost sandbox simulation)\n"
                           "export PATH=/opt/rh/gcc-toolset-14/root/usr/bin${PATH:+:${PATH}}\n",
                           0o644),
                          gcc: ("#!/bin/sh\n# Simulated gcc 14 of gcc-toolset-14: reports its "
                                "version, compiles nothing.\ncase \"$1\" in\n"
                                "-dumpversion) echo 14 ;;\n"
                                "--version) echo 'gcc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)' ;;\n"
                                "*) exit 0 ;;\nesac\n", 0o755)}),
        RpmPackage(name="dkms", version="3.2.1", release=f"1.{el}", arch="noarch",
                   summary="Dynamic Kernel Module Support Framework (gpuhost simulation)",
                   files={"/usr/sbin/dkms": (template("dkms-sim.sh"), 0o755),
                          "/etc/dkms/framework.conf":
                          ("# DKMS framework configuration (simulated dkms).\n"
                           "# Drop-ins in /etc/dkms/framework.conf.d/*.conf are sourced too.\n",
                           0o644)},
                   config_files=["/etc/dkms/framework.conf"],
                   dirs=["/etc/dkms/framework.conf.d", "/var/lib/dkms"]),
    ]
    return pkgs + docker


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
                   provides=["containerd", "runc"],
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
                           el=el, oracle_docker=inspect.getsource(docker_packages))
    if force or not up_to_date(f"docker-rpms-{el}", digest, [cache]) or not any(cache.glob("*.rpm")):
        t = time.monotonic()
        fresh_dir(cache)
        for pkg in docker_packages(el):
            build_rpm(pkg, cache)
        mark_done(f"docker-rpms-{el}", digest)
        log(f"docker-ce, docker-ce-cli, containerd.io for {el}: built in "
            f"{time.monotonic() - t:.1f}s")
    return sorted(cache.glob("*.rpm"))


def build(key: SigningKey, force: bool = False) -> None:
    for ol in ("ol8", "ol9"):
        repo = OUT_DIR / "ol" / ol
        el = ol.replace("ol", "el")
        docker = docker_rpms(el, force)
        digest = inputs_digest(code=code_digest("rpm", "oracle"), key=key.fingerprint, ol=ol,
                               docker=[sha256_file(p) for p in docker], url=BASE_URL)
        if not force and up_to_date(f"ol-{ol}", digest, [repo / "repodata" / "repomd.xml.asc"]):
            log(f"Oracle Linux {ol} repo: up to date")
            continue
        t = time.monotonic()
        with replace_dir(repo) as new:
            for pkg in ol_packages(ol, []):
                build_rpm(pkg, new)
            for rpm in docker:  # signed in the repo copy, the cache stays unsigned
                shutil.copy2(rpm, new / rpm.name)
            build_rpm_repo(new, key)
            write_repo_file(new, ol)
        key.export_armored(OUT_DIR / "ol" / "gpgkey")
        mark_done(f"ol-{ol}", digest)
        size = sum(p.stat().st_size for p in repo.glob("*.rpm")) // (1 << 20)
        log(f"Oracle Linux {ol} repo: built in {time.monotonic() - t:.1f}s ({size} MiB)")


def write_repo_file(repo: Path, ol: str) -> None:
    (repo / f"gpuhost-{ol}.repo").write_text(
        f"[gpuhost-{ol}]\nname=gpuhost sandbox {ol} (kernel devel, dkms, docker-ce)\n"
        f"baseurl={BASE_URL}/ol/{ol}\nenabled=1\ngpgcheck=1\n"
        f"gpgkey={BASE_URL}/ol/gpgkey\n")
