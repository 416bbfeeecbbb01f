"""The release files that make a Debian root with rpm and dnf look like each Enterprise
Linux release the sandbox boots (sandbox/base.py builds one layer per release):
/etc/os-release as each vendor writes it, the vendor's release file, redhat-release and
system-release, and dnf's releasever. Sources: sandbox/README.md "Enterprise Linux hosts".
"""
from __future__ import annotations

import os
from pathlib import Path

from .util import write_file

# os name -> version, major, RHEL codename and the vendor's files
RELEASES = {
    "ol8": {"version": "8.10", "major": "8", "rhel_codename": "Ootpa", "vendor": "oracle"},
    "ol9": {"version": "9.5", "major": "9", "rhel_codename": "Plow", "vendor": "oracle"},
    "ol10": {"version": "10.0", "major": "10", "rhel_codename": "Coughlan", "vendor": "oracle"},
    "rocky10": {"version": "10.0", "major": "10", "codename": "Red Quartz", "vendor": "rocky"},
    "rhel10": {"version": "10.0", "major": "10", "rhel_codename": "Coughlan", "vendor": "redhat"},
}


def _oracle(rel: dict) -> tuple[str, dict[str, str], str]:
    ver, major = rel["version"], rel["major"]
    minor = ver.split(".")[1]
    os_release = (
        'NAME="Oracle Linux Server"\n' f'VERSION="{ver}"\n' 'ID="ol"\n' 'ID_LIKE="fedora"\n'
        'VARIANT="Server"\n' 'VARIANT_ID="server"\n' f'VERSION_ID="{ver}"\n'
        f'PLATFORM_ID="platform:el{major}"\n' f'PRETTY_NAME="Oracle Linux Server {ver}"\n'
        'ANSI_COLOR="0;31"\n' f'CPE_NAME="cpe:/o:oracle:linux:{major}:{minor}:server"\n'
        'HOME_URL="https://linux.oracle.com/"\n'
        'BUG_REPORT_URL="https://github.com/oracle/oracle-linux"\n\n'
        f'ORACLE_BUGZILLA_PRODUCT="Oracle Linux {major}"\n'
        f"ORACLE_BUGZILLA_PRODUCT_VERSION={ver}\n"
        'ORACLE_SUPPORT_PRODUCT="Oracle Linux"\n'
        f"ORACLE_SUPPORT_PRODUCT_VERSION={ver}\n")
    files = {"oracle-release": f"Oracle Linux Server release {ver}\n",
             "redhat-release": f"Red Hat Enterprise Linux release {ver} ({rel['rhel_codename']})\n"}
    return os_release, files, "oracle-release"


def _rocky(rel: dict) -> tuple[str, dict[str, str], str]:
    ver, major, code = rel["version"], rel["major"], rel["codename"]
    os_release = (
        'NAME="Rocky Linux"\n' f'VERSION="{ver} ({code})"\n' 'ID="rocky"\n'
        'ID_LIKE="rhel centos fedora"\n' f'VERSION_ID="{ver}"\n'
        f'PLATFORM_ID="platform:el{major}"\n' f'PRETTY_NAME="Rocky Linux {ver} ({code})"\n'
        'ANSI_COLOR="0;32"\n' 'LOGO="fedora-logo-icon"\n'
        f'CPE_NAME="cpe:/o:rocky:rocky:{major}::baseos"\n'
        'HOME_URL="https://rockylinux.org/"\n' 'BUG_REPORT_URL="https://bugs.rockylinux.org/"\n'
        f'ROCKY_SUPPORT_PRODUCT="Rocky-Linux-{major}"\n'
        f'ROCKY_SUPPORT_PRODUCT_VERSION="{ver}"\n'
        f'REDHAT_SUPPORT_PRODUCT="Rocky Linux"\n'
        f'REDHAT_SUPPORT_PRODUCT_VERSION="{ver}"\n')
    return os_release, {"rocky-release": f"Rocky Linux release {ver} ({code})\n"}, "rocky-release"


def _redhat(rel: dict) -> tuple[str, dict[str, str], str]:
    ver, major, code = rel["version"], rel["major"], rel["rhel_codename"]
    os_release = (
        'NAME="Red Hat Enterprise Linux"\n' f'VERSION="{ver} ({code})"\n' 'ID="rhel"\n'
        'ID_LIKE="centos fedora"\n' f'VERSION_ID="{ver}"\n'
        f'PLATFORM_ID="platform:el{major}"\n'
        f'PRETTY_NAME="Red Hat Enterprise Linux {ver} ({code})"\n' 'ANSI_COLOR="0;31"\n'
        'LOGO="fedora-logo-icon"\n'
        f'CPE_NAME="cpe:/o:redhat:enterprise_linux:{major}::baseos"\n'
        'HOME_URL="https://www.redhat.com/"\n'
        f'REDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux {major}"\n'
        f'REDHAT_SUPPORT_PRODUCT_VERSION="{ver}"\n')
    return os_release, {"redhat-release":
                        f"Red Hat Enterprise Linux release {ver} ({code})\n"}, "redhat-release"


VENDORS = {"oracle": _oracle, "rocky": _rocky, "redhat": _redhat}


def write_release(upper: Path, os_name: str) -> None:
    rel = RELEASES[os_name]
    os_release, release_files, system = VENDORS[rel["vendor"]](rel)
    os_release += (f"# gpuhost sandbox: a Debian root with rpm and dnf dressed as "
                   f"{os_name}\n")
    etc = upper / "etc"
    # /etc/os-release is a symlink to ../usr/lib/os-release on Debian: replace both.
    for p in (etc / "os-release", upper / "usr/lib/os-release"):
        if p.is_symlink() or p.exists():
            p.unlink()
    write_file(upper / "usr/lib/os-release", os_release)
    os.symlink("../usr/lib/os-release", etc / "os-release")
    for name, text in release_files.items():
        write_file(etc / name, text)
    if "redhat-release" not in release_files:
        os.symlink(system, etc / "redhat-release")
    if not (etc / "system-release").exists():
        os.symlink(system, etc / "system-release")
    write_file(etc / "dnf/vars/releasever", f"{rel['major']}\n")
    (etc / "yum.repos.d").mkdir(parents=True, exist_ok=True)
    # Hide Debian's release marker, as an overlay whiteout (character device 0:0).
    dv = etc / "debian_version"
    if not dv.exists():
        os.mknod(dv, 0o600 | 0o020000, os.makedev(0, 0))
