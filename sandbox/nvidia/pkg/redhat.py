"""Red Hat Enterprise Linux 10's repositories as the sandbox serves them
(`rhel/<os>/<repo id>`): rhel-10-for-x86_64-baseos-rpms, rhel-10-for-x86_64-appstream-rpms
and codeready-builder-for-rhel-10-x86_64-rpms. A RHEL host has no .repo file of its own:
subscription-manager writes /etc/yum.repos.d/redhat.repo when the host is registered
(BaseOS and AppStream enabled, CodeReady Builder disabled), and an unregistered host has
no Red Hat repository at all. The sandbox's stand-in (sandbox/files/subscription-manager)
copies the entitled file below. EPEL comes from Fedora by URL on RHEL, which the offline
sandbox cannot serve (give it by el_repo_urls). sandbox/README.md "RHEL and
subscription-manager"; elrepos.py builds them.
"""

from __future__ import annotations

from . import elrpms
from .elrpms import GCC_14, repo_section
from .rpm import RpmPackage

TOP = "rhel"
RELEASES = ("rhel10",)
GPG_KEY_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
SYSTEM_GCC = {"rhel10": GCC_14}
KERNELS = {"rhel10": ["6.12.0-55.9.1.el10_0.x86_64"]}
# The stand-in's copy of what subscription-manager would write as redhat.repo
ENTITLED = "/usr/share/gpuhost-sandbox/rhsm/redhat.repo"


def _ids(os_name: str) -> list[str]:
    n = os_name.removeprefix("rhel")
    return [f"rhel-{n}-for-x86_64-baseos-rpms", f"rhel-{n}-for-x86_64-appstream-rpms",
            f"codeready-builder-for-rhel-{n}-x86_64-rpms"]


def channels(os_name: str) -> list[str]:
    return _ids(os_name)


def host_files(os_name: str) -> dict[str, str]:
    n = os_name.removeprefix("rhel")
    baseos, appstream, crb = _ids(os_name)
    names = {baseos: f"Red Hat Enterprise Linux {n} for x86_64 - BaseOS (RPMs)",
             appstream: f"Red Hat Enterprise Linux {n} for x86_64 - AppStream (RPMs)",
             crb: f"Red Hat CodeReady Linux Builder for RHEL {n} x86_64 (RPMs)"}
    text = ("#\n# Certificate-Based Repositories\n# Managed by (rhsm) subscription-manager\n#\n\n"
            + "".join(repo_section(i, names[i], f"{TOP}/{os_name}/{i}", i != crb, GPG_KEY_FILE)
                      for i in _ids(os_name)))
    return {ENTITLED: text}


def packages(os_name: str) -> dict[str, list[RpmPackage]]:
    """RHCK's kernel-core in BaseOS; kernel-devel, kernel-devel-matched, kernel-headers and
    gcc in AppStream; the versionlock plugin in BaseOS."""
    el = "el10"
    baseos, appstream, crb = _ids(os_name)
    repos: dict[str, list[RpmPackage]] = {r: [] for r in _ids(os_name)}
    for rel in KERNELS[os_name]:
        repos[appstream] += [elrpms.kernel_devel(rel, "rhck", SYSTEM_GCC[os_name],
                                                 SYSTEM_GCC[os_name]),
                             elrpms.kernel_devel_matched(rel)]
        repos[baseos].append(elrpms.kernel_core(rel))
    repos[appstream] += [elrpms.kernel_headers(KERNELS[os_name][0]),
                         elrpms.gcc(SYSTEM_GCC[os_name], el)]
    repos[baseos].append(elrpms.versionlock_plugin(el))
    repos[crb].append(elrpms.crb_marker(el))
    return repos
