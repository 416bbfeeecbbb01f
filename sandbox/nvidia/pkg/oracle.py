"""Oracle Linux's channels (ol8, ol9, ol10) as the sandbox serves them: one signed
repository per Oracle channel (`ol/<os>/<channel id>`: BaseOS, AppStream, UEK, CodeReady
Builder, developer EPEL, each with only what Oracle puts there; sandbox/README.md "Oracle
Linux channels") and the stock .repo files of a fresh install. elrepos.py builds them.
"""

from __future__ import annotations

from . import elrpms
from .elrpms import GCC_8, GCC_11, GCC_14, GCC_TOOLSET, repo_section
from .rpm import RpmPackage

TOP = "ol"
RELEASES = ("ol8", "ol9", "ol10")
GPG_KEY_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-oracle"
SYSTEM_GCC = {"ol8": GCC_8, "ol9": GCC_11, "ol10": GCC_14}
# (release, flavour, the compiler that built it): UEK 7 on OL8 with gcc 11, UEK 8 with gcc
# 14 (a toolset on OL9, the system gcc on OL10), RHCK with its release's system gcc
KERNELS = {
    "ol8": [("5.15.0-307.178.5.el8uek.x86_64", "uek", GCC_TOOLSET[11]),
            ("4.18.0-553.el8_10.x86_64", "rhck", GCC_8)],
    "ol9": [("6.12.0-100.28.2.2.el9uek.x86_64", "uek", GCC_TOOLSET[14]),
            ("5.14.0-503.11.1.el9_5.x86_64", "rhck", GCC_11),
            # an older RHCK, still in the channels: what an OL 9.4 install carries
            # (the host trait rhck-installed)
            ("5.14.0-427.13.1.el9_4.x86_64", "rhck", GCC_11)],
    # OL 10.0: UEK 8 (the default kernel) and RHCK, both built with the system gcc 14
    "ol10": [("6.12.0-100.28.2.el10uek.x86_64", "uek", GCC_14),
             ("6.12.0-55.9.1.0.1.el10_0.x86_64", "rhck", GCC_14)],
}
# Oracle's channels (yum.oracle.com repository ids), per release: see sandbox/README.md,
# "Oracle Linux channels". OL10's EPEL channel follows the update level (10.0: u0).
CHANNELS = {
    "ol8": ["ol8_baseos_latest", "ol8_appstream", "ol8_UEKR7", "ol8_codeready_builder",
            "ol8_developer_EPEL"],
    "ol9": ["ol9_baseos_latest", "ol9_appstream", "ol9_UEKR8", "ol9_codeready_builder",
            "ol9_developer_EPEL"],
    "ol10": ["ol10_baseos_latest", "ol10_appstream", "ol10_UEKR8", "ol10_codeready_builder",
             "ol10_u0_developer_EPEL"],
}


def channels(ol: str) -> list[str]:
    return CHANNELS[ol]


def _section(channel: str, name: str, ol: str, enabled: bool) -> str:
    return repo_section(channel, name, f"{TOP}/{ol}/{channel}", enabled, GPG_KEY_FILE)


def host_files(ol: str) -> dict[str, str]:
    """The .repo files of a fresh Oracle Linux install (oraclelinux-release-elN's):
    BaseOS, AppStream and the UEK channel enabled, CodeReady Builder disabled; no EPEL file."""
    n = ol.removeprefix("ol")
    uek = CHANNELS[ol][2]
    return {
        f"/etc/yum.repos.d/oracle-linux-{ol}.repo":
            _section(f"{ol}_baseos_latest", f"Oracle Linux {n} BaseOS Latest ($basearch)", ol, True)
            + _section(f"{ol}_appstream", f"Oracle Linux {n} Application Stream ($basearch)",
                       ol, True)
            + _section(f"{ol}_codeready_builder",
                       f"Oracle Linux {n} CodeReady Builder ($basearch) - Unsupported", ol, False),
        f"/etc/yum.repos.d/uek-{ol}.repo":
            _section(uek, f"Latest Unbreakable Enterprise Kernel Release {uek[-1]} for Oracle "
                          f"Linux {n} ($basearch)", ol, True),
    }


def epel_release(ol: str) -> RpmPackage:
    """oracle-epel-release-elN (in olN_baseos_latest): installs oracle-epel-olN.repo (on
    OL10 the channel of the release package's update level)."""
    n = ol.removeprefix("ol")
    repo = _section(CHANNELS[ol][4], f"Oracle Linux {n} EPEL Packages for Development "
                    "($basearch)", ol, True)
    path = f"/etc/yum.repos.d/oracle-epel-{ol}.repo"
    return RpmPackage(name=f"oracle-epel-release-el{n}", version="1.0", release=f"5.el{n}",
                      arch="x86_64", summary=f"Oracle Linux {n} EPEL yum repository "
                      "configuration (simulated)", files={path: (repo, 0o644)},
                      config_files=[path])


def packages(ol: str) -> dict[str, list[RpmPackage]]:
    """The packages of each of Oracle's channels for release ``ol`` (only what Oracle puts
    there): kernel devel packages, compilers, dkms in developer EPEL only."""
    el = ol.replace("ol", "el")
    baseos, appstream, uek, crb, epel = CHANNELS[ol]
    # RHCK's kernel-devel and kernel-headers: BaseOS on OL8, AppStream from OL9
    rhck_repo = baseos if ol == "ol8" else appstream
    repos: dict[str, list[RpmPackage]] = {c: [] for c in CHANNELS[ol]}
    for k in KERNELS[ol]:
        repos[uek if k[1] == "uek" else rhck_repo].append(
            elrpms.kernel_devel(*k, SYSTEM_GCC[ol]))
    rhck = next(k for k in KERNELS[ol] if k[1] == "rhck")[0]   # the newest RHCK first
    repos[rhck_repo].append(elrpms.kernel_headers(rhck))
    for rel in (k[0] for k in KERNELS[ol] if k[1] == "rhck" and ol != "ol8"):
        repos[appstream].append(elrpms.kernel_devel_matched(rel))
        # RHCK itself (BaseOS; the channel keeps every version)
        repos[baseos].append(elrpms.kernel_core(rel))
    repos[appstream].append(elrpms.gcc(SYSTEM_GCC[ol], el))
    toolsets = {"ol8": (11, 14), "ol9": (14,)}.get(ol, ())
    repos[appstream] += [elrpms.gcc_toolset(major, el) for major in toolsets]
    repos[appstream] += elrpms.container_tools(el)
    repos[baseos] += [epel_release(ol), elrpms.versionlock_plugin(el)]
    repos[crb].append(elrpms.crb_marker(el))
    repos[epel].append(elrpms.dkms_rpm(el))
    return repos
