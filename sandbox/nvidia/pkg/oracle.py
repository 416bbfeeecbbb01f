"""Oracle-side RPM repositories (ol8, ol9), one signed repository per Oracle channel
(`ol/<ol>/<channel id>`: BaseOS, AppStream, UEK, CodeReady Builder, developer EPEL, each
with only what Oracle puts there; sandbox/README.md "Oracle Linux channels"), the stock
.repo files (`ol/<ol>/yum.repos.d/`), and Docker's RHEL repository apart
(`ol/<ol>/docker-ce-stable`).

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
                     inputs_digest, log, mark_done, replace_dir, run, sha256_file, up_to_date)
from .debian_fetch import fetch_deb
from .rpm import RpmPackage, build_rpm, build_rpm_repo
from .signing import SigningKey

# The compilers, as `gcc --version` prints them and as each kernel's .config records the
# one that built it (CONFIG_CC_VERSION_TEXT; sandbox/README.md "Real dkms" names the sources).
GCC_8 = "gcc (GCC) 8.5.0 20210514 (Red Hat 8.5.0-22.0.1)"
GCC_11 = "gcc (GCC) 11.5.0 20240719 (Red Hat 11.5.0-2.0.1)"
GCC_TOOLSET = {11: "gcc (GCC) 11.2.1 20220127 (Red Hat 11.2.1-9)",
               14: "gcc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)"}
SYSTEM_GCC = {"ol8": GCC_8, "ol9": GCC_11}
# (release, flavour, the compiler that built it): UEK 7 on OL8 and OL9 with gcc 11, UEK 8
# with gcc 14, RHCK with its release's system gcc
KERNELS = {
    "ol8": [("5.15.0-307.178.5.el8uek.x86_64", "uek", GCC_TOOLSET[11]),
            ("4.18.0-553.el8_10.x86_64", "rhck", GCC_8)],
    "ol9": [("6.12.0-100.28.2.2.el9uek.x86_64", "uek", GCC_TOOLSET[14]),
            ("5.14.0-503.11.1.el9_5.x86_64", "rhck", GCC_11),
            # an older RHCK, still in the channels: what an OL 9.4 install carries
            # (the host trait rhck-installed)
            ("5.14.0-427.13.1.el9_4.x86_64", "rhck", GCC_11)],
}
# Debian's real dkms for the OL repos' `dkms` RPM: trixie's 3.2.2, the newest in Debian's
# archive and the closest to EPEL's 3.4.3 (sandbox/README.md, "Real dkms")
DKMS_SUITE = "trixie"
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


def gcc_major(text: str) -> int:
    """11 of 'gcc (GCC) 11.5.0 20240719 (...)'."""
    return int(text.split()[2].split(".")[0])


def kernel_devel(rel: str, flavor: str, cc: str, ol: str) -> RpmPackage:
    version, release = split_release(rel)
    name = "kernel-uek-devel" if flavor == "uek" else "kernel-devel"
    src = f"/usr/src/kernels/{rel}"
    v = cc.split()[2]
    # as a real kernel tree records its compiler (Kconfig's CONFIG_CC_VERSION_TEXT, which
    # Kbuild compares with $(CC)'s and dkms reads to pick CC) and its module signing hash
    config = ("# Simulated kernel configuration (gpuhost sandbox)\nCONFIG_MODULES=y\n"
              f'CONFIG_CC_VERSION_TEXT="{cc}"\nCONFIG_CC_IS_GCC=y\n'
              f"CONFIG_GCC_VERSION={int(v.split('.')[0]) * 10000 + int(v.split('.')[1]) * 100}\n"
              "CONFIG_MODULE_SIG=y\n"
              f'CONFIG_MODULE_SIG_HASH="{"sha512" if flavor == "uek" else "sha256"}"\n')
    requires = []
    if gcc_major(cc) != gcc_major(SYSTEM_GCC[ol]):
        # "the development package of the kernel will pull in the correct GCC toolset as a
        # dependency" (NVIDIA's Oracle Linux page)
        requires.append(f"gcc-toolset-{gcc_major(cc)}")
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
                      provides=[f"kernel-devel-uname-r = {rel}", "installonlypkg(kernel)"])


# Oracle's channels (yum.oracle.com repository ids), per release: see sandbox/README.md,
# "Oracle Linux channels", for where each fact comes from.
CHANNELS = {
    "ol8": ["ol8_baseos_latest", "ol8_appstream", "ol8_UEKR7", "ol8_codeready_builder",
            "ol8_developer_EPEL"],
    "ol9": ["ol9_baseos_latest", "ol9_appstream", "ol9_UEKR8", "ol9_codeready_builder",
            "ol9_developer_EPEL"],
}
# Docker's own "Docker CE for RHEL" repository (docker-ce-stable), apart from Oracle's.
DOCKER_REPO = "docker-ce-stable"
# The dnf variable the host's .repo files use for the sandbox's server (Oracle's own files
# use $ociregion/$ocidomain the same way); hosts.py writes /etc/dnf/vars/<this>.
URL_VAR = "gpuhost_sandbox_url"
GPG_KEY_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-oracle"


def _repo_section(channel: str, name: str, ol: str, enabled: bool) -> str:
    return (f"[{channel}]\nname={name}\n"
            f"baseurl=${URL_VAR}/ol/{ol}/{channel}\n"
            f"gpgkey=file://{GPG_KEY_FILE}\ngpgcheck=1\nenabled={int(enabled)}\n\n")


def stock_repo_files(ol: str) -> dict[str, str]:
    """The .repo files of a fresh Oracle Linux install (oraclelinux-release-elN's):
    BaseOS, AppStream and the UEK channel enabled, CodeReady Builder disabled; no EPEL file."""
    n = ol[-1]
    uek = CHANNELS[ol][2]
    return {
        f"oracle-linux-{ol}.repo":
            _repo_section(f"{ol}_baseos_latest",
                          f"Oracle Linux {n} BaseOS Latest ($basearch)", ol, True)
            + _repo_section(f"{ol}_appstream",
                            f"Oracle Linux {n} Application Stream ($basearch)", ol, True)
            + _repo_section(f"{ol}_codeready_builder",
                            f"Oracle Linux {n} CodeReady Builder ($basearch) - Unsupported",
                            ol, False),
        f"uek-{ol}.repo":
            _repo_section(uek, f"Latest Unbreakable Enterprise Kernel Release "
                               f"{uek[-1]} for Oracle Linux {n} ($basearch)", ol, True),
    }


def epel_release(ol: str) -> RpmPackage:
    """oracle-epel-release-elN (in olN_baseos_latest): installs oracle-epel-olN.repo."""
    n = ol[-1]
    repo = _repo_section(f"{ol}_developer_EPEL",
                         f"Oracle Linux {n} EPEL Packages for Development ($basearch)", ol, True)
    path = f"/etc/yum.repos.d/oracle-epel-{ol}.repo"
    return RpmPackage(name=f"oracle-epel-release-el{n}", version="1.0", release=f"5.el{n}",
                      arch="x86_64", summary=f"Oracle Linux {n} EPEL yum repository "
                      "configuration (simulated)", files={path: (repo, 0o644)},
                      config_files=[path])


def versionlock_plugin(el: str) -> RpmPackage:
    """python3-dnf-plugin-versionlock (olN_baseos_latest), not installed by a stock install:
    the versionlock plugin of Debian's dnf-plugins-core (the sandbox's dnf is Debian's; the
    OL layer drops these files, sandbox/base.py), packaged under Oracle's name."""
    root = WORK_DIR / "debian-dnf-plugins"
    if not (root / "usr/lib/python3/dist-packages/dnf-plugins/versionlock.py").exists():
        dl = fresh_dir(WORK_DIR / "debian-dnf-plugins-deb")
        log("fetching Debian's dnf-plugins-core with apt-get download")
        run(["apt-get", "download", "dnf-plugins-core"], cwd=dl)
        fresh_dir(root)
        for deb in sorted(dl.glob("*.deb")):
            run(["dpkg-deb", "-x", str(deb), str(root)])
    files = {"/usr/lib/python3/dist-packages/dnf-plugins/versionlock.py":
             ((root / "usr/lib/python3/dist-packages/dnf-plugins/versionlock.py").read_text(),
              0o644),
             "/etc/dnf/plugins/versionlock.conf":
             ((root / "etc/dnf/plugins/versionlock.conf").read_text(), 0o644),
             "/etc/dnf/plugins/versionlock.list": ("", 0o644)}
    return RpmPackage(name="python3-dnf-plugin-versionlock", version="4.3.1",
                      release=f"1.{el}", arch="noarch",
                      summary="Version Lock Plugin for DNF (Debian's dnf-plugins-core plugin)",
                      files=files, config_files=["/etc/dnf/plugins/versionlock.conf",
                                                 "/etc/dnf/plugins/versionlock.list"])


def _marker(name: str, el: str, summary: str, version: str = "1.0",
            requires: list[str] | None = None) -> RpmPackage:
    return RpmPackage(name=name, version=version, release=f"1.{el}", summary=summary,
                      requires=requires or [],
                      files={f"/usr/share/doc/{name}/README":
                             (f"{name}: simulated by the gpuhost sandbox\n", 0o644)})


def container_tools(el: str) -> list[RpmPackage]:
    """OL8's container-tools set (ol8_appstream). podman and buildah need runc at a version
    Docker's containerd.io does not provide (it obsoletes and conflicts with runc)."""
    return [
        _marker("containers-common", el, "Common configuration for containers (simulated)", "1"),
        RpmPackage(name="runc", version="1.1.12", release=f"1.module+{el}", summary=(
                   "CLI for running Open Containers (simulated; no binary)"),
                   files={"/usr/share/doc/runc/README":
                          ("runc: simulated by the gpuhost sandbox (no binary)\n", 0o644)}),
        _marker("podman", el, "Manage Pods, Containers and Container Images (simulated)",
                "4.9.4", ["runc >= 1.0.0-26", "containers-common"]),
        _marker("buildah", el, "A command line tool used for creating OCI Images (simulated)",
                "1.33.7", ["runc >= 1.0.0-26", "containers-common"]),
    ]


def ol_packages(ol: str) -> dict[str, list[RpmPackage]]:
    """The packages of each of Oracle's channels for release ``ol`` (only what Oracle puts
    there): kernel devel packages, compilers, dkms in developer EPEL only."""
    el = ol.replace("ol", "el")
    baseos, appstream, uek, crb, epel = CHANNELS[ol]
    repos: dict[str, list[RpmPackage]] = {c: [] for c in CHANNELS[ol]}
    for k in KERNELS[ol]:
        pkg = kernel_devel(*k, ol)
        # kernel-uek-devel: the UEK channel; RHCK's kernel-devel: BaseOS on OL8, AppStream on OL9
        repos[uek if k[1] == "uek" else (baseos if ol == "ol8" else appstream)].append(pkg)
    rhck = next(k for k in KERNELS[ol] if k[1] == "rhck")[0]   # the newest RHCK first
    v, r = split_release(rhck)
    repos[baseos if ol == "ol8" else appstream].append(
        RpmPackage(name="kernel-headers", version=v, release=r,
                   summary="Header files for the Linux kernel for use by glibc (simulated)",
                   files={"/usr/include/linux/version.h":
                          (f"/* kernel-headers {rhck} (simulated) */\n", 0o644)}))
    for rel in (k[0] for k in KERNELS[ol] if k[1] == "rhck" and ol == "ol9"):
        v, r = split_release(rel)
        repos[appstream].append(RpmPackage(
            name="kernel-devel-matched", version=v, release=r,
            summary="Meta package to install matching core and devel kernel packages (simulated)",
            requires=[f"kernel-core = {v}-{r}", f"kernel-devel = {v}-{r}"],
            files={f"/usr/share/doc/kernel-devel-matched-{v}-{r}/README": ("meta package\n", 0o644)}))
        # RHCK itself (BaseOS; the channel keeps every version), so that EPEL 9 dkms's
        # `(kernel-devel-matched if kernel-core)` pulls the newest one onto any host that has
        # a kernel-core installed (installonly, like the real one)
        repos[baseos].append(RpmPackage(
            name="kernel-core", version=v, release=r, provides=["installonlypkg(kernel)"],
            summary="The Linux kernel (simulated: its version only; gpusim boots nothing)",
            files={f"/usr/share/doc/kernel-core-{v}-{r}/README":
                   ("simulated kernel-core: no vmlinuz\n", 0o644)}))
    # the system gcc and the toolsets (AppStream)
    repos[appstream].append(
        RpmPackage(name="gcc", version=SYSTEM_GCC[ol].split()[2], release=f"22.0.1.{el}",
                   summary="Various compilers (simulated: reports its version only)",
                   files={"/usr/bin/gcc": (fake_gcc(SYSTEM_GCC[ol]), 0o755)}))
    for major in ((11, 14) if ol == "ol8" else (14,)):
        root = f"/opt/rh/gcc-toolset-{major}"
        repos[appstream].append(
            RpmPackage(name=f"gcc-toolset-{major}", version=f"{major}.0", release=f"2.{el}",
                       summary=f"Package that installs gcc-toolset-{major} (simulated compiler)",
                       files={f"{root}/enable":
                              (f"# gcc-toolset-{major} (gpuhost sandbox simulation)\n"
                               f"export PATH={root}/root/usr/bin${{PATH:+:${{PATH}}}}\n", 0o644),
                              f"{root}/root/usr/bin/gcc": (fake_gcc(GCC_TOOLSET[major]), 0o755)}))
    repos[appstream] += container_tools(el)
    repos[baseos] += [epel_release(ol), versionlock_plugin(el)]
    # CodeReady Builder: developer packages; NVIDIA's guide enables it (nothing the fake
    # driver needs comes from it): one marker package so the channel is a real repository.
    repos[crb].append(_marker("libvdpau-devel", el, "Wrapper library for VDPAU, development "
                              "files (simulated)", "1.4"))
    repos[epel].append(dkms_rpm(el))
    return repos


def fake_gcc(version_text: str) -> str:
    """A gcc that only tells its version: the simulated module build compares it with the
    kernel's recorded compiler (templates/gpusim-build.sh); nothing is compiled."""
    major = gcc_major(version_text)
    return ("#!/bin/sh\n# Simulated gcc (gpuhost sandbox): reports its version, compiles "
            f"nothing.\ncase \"$1\" in\n-dumpversion) echo {major} ;;\n"
            f"-dumpfullversion) echo {version_text.split()[2]} ;;\n"
            f"--version) echo '{version_text}' ;;\n*) exit 0 ;;\nesac\n")


def debian_dkms() -> tuple[Path, str]:
    """Debian's dkms (DKMS_SUITE) unpacked, cached; (root, Debian version)."""
    top = WORK_DIR / "debian-dkms" / DKMS_SUITE
    root, stamp = top / "root", top / "version"
    if not (root / "usr/sbin/dkms").exists() or not stamp.exists():
        log(f"fetching {DKMS_SUITE}'s dkms from Debian's archive (verified)")
        deb, version = fetch_deb(DKMS_SUITE, "dkms", fresh_dir(top / "debs"))
        fresh_dir(root)
        run(["dpkg-deb", "-x", str(deb), str(root)])
        stamp.write_text(version + "\n")
    return root, stamp.read_text().strip()


def dkms_rpm(el: str) -> RpmPackage:
    """EPEL's `dkms` as the sandbox serves it: Debian's real dkms script and helpers,
    repackaged (no scriptlets: EPEL's only run systemd presets). Like EPEL 9's spec (Fedora's
    dkms.spec) it requires gcc, and on el9 `(kernel-devel-matched if kernel-core)`."""
    root, version = debian_dkms()
    files = {"/usr/sbin/dkms": ((root / "usr/sbin/dkms").read_bytes(), 0o755),
             "/etc/dkms/framework.conf": ((root / "etc/dkms/framework.conf").read_text(), 0o644)}
    for p in sorted((root / "usr/lib/dkms").iterdir()):
        files[f"/usr/lib/dkms/{p.name}"] = (p.read_bytes(), 0o755)
    requires = ["gcc"]
    if el == "el9":
        requires.append("(kernel-devel-matched if kernel-core)")
    return RpmPackage(name="dkms", version=version.split("-")[0], release=f"1.{el}",
                      arch="noarch", requires=requires,
                      summary=f"Dynamic Kernel Module Support Framework (Debian's dkms {version})",
                      files=files, config_files=["/etc/dkms/framework.conf"],
                      dirs=["/etc/dkms/framework.conf.d", "/var/lib/dkms"])


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
        top = OUT_DIR / "ol" / ol
        el = ol.replace("ol", "el")
        docker = docker_rpms(el, force)
        digest = inputs_digest(code=code_digest("rpm", "oracle", "debian_fetch"), key=key.fingerprint, ol=ol,
                               docker=[sha256_file(p) for p in docker], url=BASE_URL)
        stamps = [top / c / "repodata" / "repomd.xml.asc" for c in CHANNELS[ol] + [DOCKER_REPO]]
        if not force and up_to_date(f"ol-{ol}", digest, stamps):
            log(f"Oracle Linux {ol} repos: up to date")
            continue
        t = time.monotonic()
        with replace_dir(top) as new:
            for channel, pkgs in ol_packages(ol).items():
                (new / channel).mkdir()
                for pkg in pkgs:
                    build_rpm(pkg, new / channel)
                build_rpm_repo(new / channel, key)
            (new / DOCKER_REPO).mkdir()
            for rpm in docker:  # signed in the repo copy, the cache stays unsigned
                shutil.copy2(rpm, new / DOCKER_REPO / rpm.name)
            build_rpm_repo(new / DOCKER_REPO, key)
            etc = new / "yum.repos.d"
            etc.mkdir()
            for fname, text in stock_repo_files(ol).items():
                (etc / fname).write_text(text)
        key.export_armored(OUT_DIR / "ol" / "gpgkey")
        (OUT_DIR / "ol" / URL_VAR).write_text(BASE_URL + "\n")
        mark_done(f"ol-{ol}", digest)
        size = sum(p.stat().st_size for p in top.rglob("*.rpm")) // (1 << 20)
        log(f"Oracle Linux {ol} repos: built in {time.monotonic() - t:.1f}s ({size} MiB)")
