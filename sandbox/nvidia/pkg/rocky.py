"""Rocky Linux 10's repositories as the sandbox serves them (`rocky/<os>/<repo id>`):
BaseOS, AppStream, CRB (disabled on a fresh install), extras (carries epel-release) and
Fedora's EPEL 10 (`epel`, defined by epel-release; carries dkms). Repository ids and
files as Rocky's repository wiki (https://wiki.rockylinux.org/rocky/repo/) and a fresh
install's rocky.repo / rocky-extras.repo name them; sandbox/README.md "Rocky Linux
repositories". elrepos.py builds them.
"""

from __future__ import annotations

from . import elrpms
from .elrpms import GCC_14, repo_section
from .rpm import RpmPackage

TOP = "rocky"
RELEASES = ("rocky10",)
GPG_KEY_FILE = "/etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-10"
SYSTEM_GCC = {"rocky10": GCC_14}
# Rocky 10.0's kernel (RHCK only), built with the system gcc 14
KERNELS = {"rocky10": ["6.12.0-55.12.1.el10_0.x86_64"]}
REPOS = ["baseos", "appstream", "crb", "extras", "epel"]


def channels(os_name: str) -> list[str]:
    del os_name
    return REPOS


def _section(repo: str, name: str, os_name: str, enabled: bool) -> str:
    return repo_section(repo, name, f"{TOP}/{os_name}/{repo}", enabled, GPG_KEY_FILE)


def host_files(os_name: str) -> dict[str, str]:
    """A fresh install's rocky.repo (BaseOS and AppStream enabled, CRB disabled) and
    rocky-extras.repo (extras enabled); no EPEL file until epel-release."""
    return {
        "/etc/yum.repos.d/rocky.repo":
            _section("baseos", "Rocky Linux $releasever - BaseOS", os_name, True)
            + _section("appstream", "Rocky Linux $releasever - AppStream", os_name, True)
            + _section("crb", "Rocky Linux $releasever - CRB", os_name, False),
        "/etc/yum.repos.d/rocky-extras.repo":
            _section("extras", "Rocky Linux $releasever - Extras", os_name, True),
    }


def epel_release(os_name: str) -> RpmPackage:
    """Fedora's epel-release as Rocky's extras carries it: epel.repo with [epel] enabled
    (Fedora signs EPEL with its own key; the sandbox signs every repo with one key)."""
    repo = repo_section("epel", "Extra Packages for Enterprise Linux $releasever - $basearch",
                        f"{TOP}/{os_name}/epel", True, "/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-10")
    return RpmPackage(name="epel-release", version="10", release="5.el10", arch="noarch",
                      summary="Extra Packages for Enterprise Linux repository configuration "
                              "(simulated)",
                      files={"/etc/yum.repos.d/epel.repo": (repo, 0o644)},
                      config_files=["/etc/yum.repos.d/epel.repo"])


def packages(os_name: str) -> dict[str, list[RpmPackage]]:
    """What each repository carries: RHCK's kernel-core in BaseOS, kernel-devel,
    kernel-devel-matched, kernel-headers and gcc in AppStream, dkms in EPEL only."""
    el = "el10"
    repos: dict[str, list[RpmPackage]] = {r: [] for r in REPOS}
    for rel in KERNELS[os_name]:
        repos["appstream"] += [elrpms.kernel_devel(rel, "rhck", SYSTEM_GCC[os_name],
                                                   SYSTEM_GCC[os_name]),
                               elrpms.kernel_devel_matched(rel)]
        repos["baseos"].append(elrpms.kernel_core(rel))
    repos["appstream"] += [elrpms.kernel_headers(KERNELS[os_name][0]),
                           elrpms.gcc(SYSTEM_GCC[os_name], el)]
    repos["baseos"].append(elrpms.versionlock_plugin(el))
    repos["crb"].append(elrpms.crb_marker(el))
    repos["extras"].append(epel_release(os_name))
    repos["epel"].append(elrpms.dkms_rpm(el))
    return repos
