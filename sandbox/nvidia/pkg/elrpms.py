"""The packages every Enterprise Linux vendor's fake repositories share (sandbox/README.md,
"Enterprise Linux repositories"): kernel devel packages that record their compiler, the
compilers themselves (gcc that only tells its version), the versionlock plugin, EPEL's
dkms (Debian's real dkms, repackaged) and the .repo file sections. The vendor modules
(oracle.py, rocky.py, redhat.py) say which channel carries what.
"""

from __future__ import annotations

from pathlib import Path

from .common import WORK_DIR, fresh_dir, log, run
from .debian_fetch import fetch_deb
from .rpm import RpmPackage

# The compilers, as `gcc --version` prints them and as each kernel's .config records the
# one that built it (CONFIG_CC_VERSION_TEXT; sandbox/README.md "Real dkms" names the sources).
GCC_8 = "gcc (GCC) 8.5.0 20210514 (Red Hat 8.5.0-22.0.1)"
GCC_11 = "gcc (GCC) 11.5.0 20240719 (Red Hat 11.5.0-2.0.1)"
GCC_TOOLSET = {11: "gcc (GCC) 11.2.1 20220127 (Red Hat 11.2.1-9)",
               14: "gcc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)"}
# EL10's system compiler: gcc 14 (RHEL 10.0 release notes, "GCC 14.2"); UEK 8 on OL10 and
# RHCK 6.12.0-55 are built with it, so no gcc-toolset there
GCC_14 = "gcc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7)"
# Debian's real dkms for EPEL's `dkms` RPM: trixie's 3.2.2, the newest in Debian's
# archive and the closest to EPEL's 3.4.3 (sandbox/README.md, "Real dkms")
DKMS_SUITE = "trixie"
# The dnf variable the hosts' .repo files use for the sandbox's server (Oracle's own files
# use $ociregion/$ocidomain the same way); hosts.py writes /etc/dnf/vars/<this>.
URL_VAR = "gpuhost_sandbox_url"

SIGN_FILE = ("#!/usr/bin/python3\n# scripts/sign-file stand-in (gpuhost sandbox): see gpusim firmware.py\n"
             "import sys\nsys.path.append('/usr/local/lib/gpusim')\nfrom gpusim import firmware\n"
             "sys.exit(firmware.main('sign-file'))\n")


def split_release(rel: str) -> tuple[str, str]:
    """'5.14.0-503.11.1.el9_5.x86_64' -> ('5.14.0', '503.11.1.el9_5')"""
    base = rel.removesuffix(".x86_64")
    version, _, release = base.partition("-")
    return version, release


def gcc_major(text: str) -> int:
    """11 of 'gcc (GCC) 11.5.0 20240719 (...)'."""
    return int(text.split()[2].split(".")[0])


def repo_section(repo_id: str, name: str, path: str, enabled: bool, gpgkey: str) -> str:
    """One .repo file section served by the sandbox (``path``: under the server's /nvidia)."""
    return (f"[{repo_id}]\nname={name}\n"
            f"baseurl=${URL_VAR}/{path}\n"
            f"gpgkey=file://{gpgkey}\ngpgcheck=1\nenabled={int(enabled)}\n\n")


def kernel_devel(rel: str, flavor: str, cc: str, system_cc: str) -> RpmPackage:
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
    if gcc_major(cc) != gcc_major(system_cc):
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


def kernel_headers(rel: str) -> RpmPackage:
    v, r = split_release(rel)
    return RpmPackage(name="kernel-headers", version=v, release=r,
                      summary="Header files for the Linux kernel for use by glibc (simulated)",
                      files={"/usr/include/linux/version.h":
                             (f"/* kernel-headers {rel} (simulated) */\n", 0o644)})


def kernel_devel_matched(rel: str) -> RpmPackage:
    v, r = split_release(rel)
    return RpmPackage(
        name="kernel-devel-matched", version=v, release=r,
        summary="Meta package to install matching core and devel kernel packages (simulated)",
        requires=[f"kernel-core = {v}-{r}", f"kernel-devel = {v}-{r}"],
        files={f"/usr/share/doc/kernel-devel-matched-{v}-{r}/README": ("meta package\n", 0o644)})


def kernel_core(rel: str) -> RpmPackage:
    """RHCK itself (installonly, like the real one), so that EPEL's dkms
    `(kernel-devel-matched if kernel-core)` pulls the newest one onto a host that has one."""
    v, r = split_release(rel)
    return RpmPackage(
        name="kernel-core", version=v, release=r, provides=["installonlypkg(kernel)"],
        summary="The Linux kernel (simulated: its version only; gpusim boots nothing)",
        files={f"/usr/share/doc/kernel-core-{v}-{r}/README":
               ("simulated kernel-core: no vmlinuz\n", 0o644)})


def fake_gcc(version_text: str) -> str:
    """A gcc that only tells its version: the simulated module build compares it with the
    kernel's recorded compiler (templates/gpusim-build.sh); nothing is compiled."""
    major = gcc_major(version_text)
    return ("#!/bin/sh\n# Simulated gcc (gpuhost sandbox): reports its version, compiles "
            f"nothing.\ncase \"$1\" in\n-dumpversion) echo {major} ;;\n"
            f"-dumpfullversion) echo {version_text.split()[2]} ;;\n"
            f"--version) echo '{version_text}' ;;\n*) exit 0 ;;\nesac\n")


def gcc(system_cc: str, el: str) -> RpmPackage:
    return RpmPackage(name="gcc", version=system_cc.split()[2], release=f"22.0.1.{el}",
                      summary="Various compilers (simulated: reports its version only)",
                      files={"/usr/bin/gcc": (fake_gcc(system_cc), 0o755)})


def gcc_toolset(major: int, el: str) -> RpmPackage:
    root = f"/opt/rh/gcc-toolset-{major}"
    return RpmPackage(name=f"gcc-toolset-{major}", version=f"{major}.0", release=f"2.{el}",
                      summary=f"Package that installs gcc-toolset-{major} (simulated compiler)",
                      files={f"{root}/enable":
                             (f"# gcc-toolset-{major} (gpuhost sandbox simulation)\n"
                              f"export PATH={root}/root/usr/bin${{PATH:+:${{PATH}}}}\n", 0o644),
                             f"{root}/root/usr/bin/gcc": (fake_gcc(GCC_TOOLSET[major]), 0o755)})


def versionlock_plugin(el: str) -> RpmPackage:
    """python3-dnf-plugin-versionlock (BaseOS), not installed by a stock install: the
    versionlock plugin of Debian's dnf-plugins-core (the sandbox's dnf is Debian's; the EL
    layers drop these files, sandbox/base.py), packaged under the vendors' name."""
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


def marker(name: str, el: str, summary: str, version: str = "1.0",
           requires: list[str] | None = None) -> RpmPackage:
    return RpmPackage(name=name, version=version, release=f"1.{el}", summary=summary,
                      requires=requires or [],
                      files={f"/usr/share/doc/{name}/README":
                             (f"{name}: simulated by the gpuhost sandbox\n", 0o644)})


def crb_marker(el: str) -> RpmPackage:
    """CodeReady Builder: developer packages; NVIDIA's guide enables it (nothing the fake
    driver needs comes from it): one marker package so the channel is a real repository."""
    return marker("libvdpau-devel", el, "Wrapper library for VDPAU, development files "
                  "(simulated)", "1.4")


def container_tools(el: str) -> list[RpmPackage]:
    """OL8's container-tools set (ol8_appstream). podman and buildah need runc at a version
    Docker's containerd.io does not provide (it obsoletes and conflicts with runc)."""
    return [
        marker("containers-common", el, "Common configuration for containers (simulated)", "1"),
        RpmPackage(name="runc", version="1.1.12", release=f"1.module+{el}", summary=(
                   "CLI for running Open Containers (simulated; no binary)"),
                   files={"/usr/share/doc/runc/README":
                          ("runc: simulated by the gpuhost sandbox (no binary)\n", 0o644)}),
        marker("podman", el, "Manage Pods, Containers and Container Images (simulated)",
               "4.9.4", ["runc >= 1.0.0-26", "containers-common"]),
        marker("buildah", el, "A command line tool used for creating OCI Images (simulated)",
               "1.33.7", ["runc >= 1.0.0-26", "containers-common"]),
    ]


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
    repackaged (no scriptlets: EPEL's only run systemd presets). Like EPEL 9's and 10's spec
    (Fedora's dkms.spec) it requires gcc, and from el9 `(kernel-devel-matched if kernel-core)`."""
    root, version = debian_dkms()
    files = {"/usr/sbin/dkms": ((root / "usr/sbin/dkms").read_bytes(), 0o755),
             "/etc/dkms/framework.conf": ((root / "etc/dkms/framework.conf").read_text(), 0o644)}
    for p in sorted((root / "usr/lib/dkms").iterdir()):
        files[f"/usr/lib/dkms/{p.name}"] = (p.read_bytes(), 0o755)
    requires = ["gcc"]
    if el in ("el9", "el10"):
        requires.append("(kernel-devel-matched if kernel-core)")
    return RpmPackage(name="dkms", version=version.split("-")[0], release=f"1.{el}",
                      arch="noarch", requires=requires,
                      summary=f"Dynamic Kernel Module Support Framework (Debian's dkms {version})",
                      files=files, config_files=["/etc/dkms/framework.conf"],
                      dirs=["/etc/dkms/framework.conf.d", "/var/lib/dkms"])
