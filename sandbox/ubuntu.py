"""Ubuntu 22.04 / 24.04 hosts: a release layer on the Debian root and an Ubuntu-layout apt
archive served by the sandbox (sandbox/README.md, "Ubuntu hosts").

  /var/cache/gpuhost/base/ubuntu2204-<hash>/   overlay layer: Ubuntu's release files only
  /var/cache/gpuhost/base/ubuntu2404-<hash>/   (os-release, lsb-release, debian_version)
  /var/cache/gpuhost/mirror/ubuntu/            served as http://127.77.0.1:8000/ubuntu
      pool/main/debian/*.deb, pool/universe/debian/*.deb
                                               hard links of the Debian mirror's .debs: the
                                               userland of these hosts is Debian's, so the
                                               binaries they install are Debian's too
      pool/main/d/dkms-bookworm/, dkms-bullseye/
                                               the dkms line of each release: noble gets
                                               bookworm's 3.0.x, jammy bullseye's 2.8.x
                                               (with dctrl-tools), fetched and verified from
                                               deb.debian.org (nvidia/pkg/debian_fetch.py)
      pool/main/l/linux-<codename>/*.deb       fake kernel header packages, named as Ubuntu's
      dists/<codename>{,-updates,-security}/{main,restricted,universe,multiverse}/binary-amd64/
                                               signed with the sandbox mirror's key

Pockets: the release pocket holds the userland; `-updates` the running kernel's headers,
a NEWER kernel's headers and `linux-headers-generic` pointing at the newer one (as on a
real host some weeks after its image was built); `-security` the running kernel's headers.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import mirror, paths, ubuntu2604
from .util import recipe_hash, say, step, write_file

UBUNTU_RECIPE_VERSION = 1
REPO_FORMAT = 2

# Release facts: /etc/os-release, /etc/lsb-release and /etc/debian_version as the stock
# images carry them (Ubuntu's base-files 12ubuntu4.x / 13ubuntu10.x). The kernels follow
# Ubuntu's naming: linux-image-<abi>-generic, linux-headers-<abi>-generic (needs the
# flavour-less linux-headers-<abi>), linux-headers-generic (the meta package).
RELEASES = {
    "ubuntu2204": {
        "prefix": "u22", "version_id": "22.04", "codename": "jammy",
        "version": "22.04.5 LTS (Jammy Jellyfish)", "pretty": "Ubuntu 22.04.5 LTS",
        "debian_version": "bookworm/sid",
        "kernel": "5.15.0-131-generic", "kernel_version": "5.15.0-131.141",
        "newer": "5.15.0-133-generic", "newer_version": "5.15.0-133.144",
    },
    "ubuntu2404": {
        "prefix": "u24", "version_id": "24.04", "codename": "noble",
        "version": "24.04.1 LTS (Noble Numbat)", "pretty": "Ubuntu 24.04.1 LTS",
        "debian_version": "trixie/sid",
        "kernel": "6.8.0-51-generic", "kernel_version": "6.8.0-51.52",
        "newer": "6.8.0-53-generic", "newer_version": "6.8.0-53.55",
    },
    ubuntu2604.OS_NAME: ubuntu2604.RELEASE,
}
# Releases dressed on the Debian 13 root (sandbox/debian13.py), the others on Debian 12's.
ON_TRIXIE = tuple(n for n, r in RELEASES.items() if r.get("root") == "debian13")
COMPONENTS = ("main", "restricted", "universe", "multiverse")
# Debian binaries that Ubuntu ships in universe (packages.ubuntu.com lists docker.io
# there); everything else of the Debian mirror goes to main. A stock Ubuntu enables all
# four components, so the placement changes nothing for the deploy.
UNIVERSE = ("docker.io",)
# dkms: Ubuntu 22.04 ships the 2.8 line (jammy 2.8.7-2ubuntu2, packages.ubuntu.com), which
# signs only with kmodsign and shim-signed's /var/lib/shim-signed/mok pair and reads no
# framework.conf.d; 24.04 ships 3.0.11. The closest Debian builds: bullseye's 2.8.4 (signs as
# upstream 2.8.7 does) and the Debian mirror's bookworm 3.0.10 (sandbox/README.md, "Real dkms").
JAMMY_DKMS_SUITE = "bullseye"
JAMMY_DKMS_PACKAGES = ("dkms", "dctrl-tools")   # 2.8.4's Depends that bookworm's 3.0 lacks
JAMMY_DKMS_CACHE = paths.MIRROR_CACHE / "ubuntu-jammy-dkms"   # not served

REPO = paths.MIRROR_CACHE / "ubuntu"
STATE_FILE = paths.MIRROR_CACHE / "ubuntu-state"   # not served
# Where the stock images keep the archive key (jammy: trusted.gpg.d; noble: the keyring
# that ubuntu.sources names in Signed-By). Hosts get the sandbox mirror's key there.
JAMMY_KEYRING = "/etc/apt/trusted.gpg.d/ubuntu-keyring-2018-archive.gpg"
NOBLE_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"


def is_ubuntu(os_name: str) -> bool:
    return os_name in RELEASES


def kernel_release(os_name: str) -> str:
    return RELEASES[os_name]["kernel"]


def debian_root(os_name: str) -> Path:
    """The Debian base root a release is dressed on."""
    from . import base, debian13
    return debian13.base_dir() if os_name in ON_TRIXIE else base.debian_base_dir()


# ---------------------------------------------------------------- the release layer

def layer_dir(base_dir: Path, os_name: str) -> Path:
    recipe = {"base": base_dir.name, "release": RELEASES[os_name],
              "version": UBUNTU_RECIPE_VERSION}
    if os_name == ubuntu2604.OS_NAME:
        recipe["modules"] = ubuntu2604.RUNNING_MODULES
    return paths.BASE_CACHE / f"{os_name}-{recipe_hash(recipe)}"


def os_release(os_name: str) -> str:
    r = RELEASES[os_name]
    text = (
        f'PRETTY_NAME="{r["pretty"]}"\n'
        'NAME="Ubuntu"\n'
        f'VERSION_ID="{r["version_id"]}"\n'
        f'VERSION="{r["version"]}"\n'
        f"VERSION_CODENAME={r['codename']}\n"
        "ID=ubuntu\n"
        "ID_LIKE=debian\n"
        'HOME_URL="https://www.ubuntu.com/"\n'
        'SUPPORT_URL="https://help.ubuntu.com/"\n'
        'BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
        'PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"\n'
        f"UBUNTU_CODENAME={r['codename']}\n"
    )
    if os_name != "ubuntu2204":
        text += "LOGO=ubuntu-logo\n"
    return text


def lsb_release(os_name: str) -> str:
    r = RELEASES[os_name]
    return (f"DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={r['version_id']}\n"
            f"DISTRIB_CODENAME={r['codename']}\nDISTRIB_DESCRIPTION=\"{r['pretty']}\"\n")


def build_layer(base_dir: Path, os_name: str) -> Path:
    """The layer holds only files (no package changes): cheap to build."""
    target = layer_dir(base_dir, os_name)
    if target.is_dir():
        say(f"{os_name} layer {target} is cached")
        return target
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{os_name}-", dir=paths.BASE_CACHE))
    try:
        with step(f"{os_name} layer: Ubuntu {RELEASES[os_name]['version_id']} release files"):
            etc = tmp / "etc"
            write_file(tmp / "usr/lib/os-release", os_release(os_name))
            etc.mkdir(parents=True, exist_ok=True)
            os.symlink("../usr/lib/os-release", etc / "os-release")
            write_file(etc / "lsb-release", lsb_release(os_name))
            write_file(etc / "debian_version", RELEASES[os_name]["debian_version"] + "\n")
            write_file(etc / "issue", f"Ubuntu {RELEASES[os_name]['version'].split(' (')[0]} \\n \\l\n\n")
            if os_name == ubuntu2604.OS_NAME:
                ubuntu2604.layer_files(tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for d in paths.BASE_CACHE.glob(f"{os_name}-*"):
        if d != target and d.is_dir():
            from .base import _in_use
            if not _in_use(d):
                shutil.rmtree(d, ignore_errors=True)
    return target


# ---------------------------------------------------------------- the host's apt sources

def write_apt_sources(upper: Path, os_name: str) -> None:
    """sources.list as the stock image ships it, pointed at the sandbox's archive."""
    r = RELEASES[os_name]
    c = r["codename"]
    url = f"{paths.MIRROR_URL}/ubuntu/"
    if os_name == "ubuntu2204":
        write_file(upper / "etc/apt/sources.list", (
            "# See http://help.ubuntu.com/community/UpgradeNotes for how to upgrade to\n"
            "# newer versions of the distribution. (gpuhost sandbox: the archive is the\n"
            "# sandbox's own, signed with its key.)\n"
            f"deb {url} {c} main restricted\n"
            f"deb {url} {c}-updates main restricted\n"
            f"deb {url} {c} universe\n"
            f"deb {url} {c}-updates universe\n"
            f"deb {url} {c} multiverse\n"
            f"deb {url} {c}-updates multiverse\n"
            f"deb {url} {c}-security main restricted\n"
            f"deb {url} {c}-security universe\n"
            f"deb {url} {c}-security multiverse\n"))
        keyring = JAMMY_KEYRING
    else:
        write_file(upper / "etc/apt/sources.list",
                   "# Ubuntu sources have moved to /etc/apt/sources.list.d/ubuntu.sources\n")
        write_file(upper / "etc/apt/sources.list.d/ubuntu.sources", (
            "Types: deb\n"
            f"URIs: {url}\n"
            f"Suites: {c} {c}-updates\n"
            "Components: main restricted universe multiverse\n"
            f"Signed-By: {NOBLE_KEYRING}\n"
            "\n"
            "Types: deb\n"
            f"URIs: {url}\n"
            f"Suites: {c}-security\n"
            "Components: main restricted universe multiverse\n"
            f"Signed-By: {NOBLE_KEYRING}\n"))
        keyring = NOBLE_KEYRING
    dest = upper / keyring.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mirror.KEYRING, dest)
    os.chmod(dest, 0o644)


# ---------------------------------------------------------------- the archive
def __getattr__(name: str):
    """build_repo and header_packages live in sandbox/ubuntu_archive.py, which reads this
    module's tables: loaded on first use, so either module can be imported first."""
    if name in ("build_repo", "header_packages"):
        from . import ubuntu_archive
        return getattr(ubuntu_archive, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
