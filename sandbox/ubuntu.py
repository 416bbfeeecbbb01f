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

import gzip
import os
import shutil
import tempfile
from pathlib import Path

from . import mirror, paths
from .util import SandboxError, recipe_hash, run, say, step, write_file

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
}
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


# ---------------------------------------------------------------- the release layer

def layer_dir(base_dir: Path, os_name: str) -> Path:
    recipe = {"base": base_dir.name, "release": RELEASES[os_name],
              "version": UBUNTU_RECIPE_VERSION}
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
    if os_name == "ubuntu2404":
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

def _deb(stage: Path, out: Path, control: str, files: dict[str, str],
         symlinks: dict[str, str]) -> None:
    root = stage / "root"
    if root.exists():
        shutil.rmtree(root)
    for rel, text in files.items():
        write_file(root / rel.lstrip("/"), text)
    for rel, target in symlinks.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)
    write_file(root / "DEBIAN/control", control)
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(out)],
        env={"SOURCE_DATE_EPOCH": "1735689600"}, quiet=True)


def _control(name: str, version: str, arch: str, section: str, depends: list[str],
             description: str) -> str:
    lines = [f"Package: {name}", f"Version: {version}", f"Architecture: {arch}",
             "Maintainer: gpuhost sandbox (fake Ubuntu kernel package) <sandbox@gpuhost.invalid>",
             "Installed-Size: 1", f"Section: {section}", "Priority: optional"]
    if depends:
        lines.append(f"Depends: {', '.join(depends)}")
    lines.append(f"Description: {description}")
    lines.append(" Simulated header package of the gpuhost sandbox: a few files, no kernel.")
    return "\n".join(lines) + "\n"


def header_packages(release: str, version: str) -> list[tuple[str, str, dict, dict]]:
    """(filename, control, files, symlinks) of linux-headers-<abi> and
    linux-headers-<abi>-generic, laid out as Ubuntu's: /usr/src/linux-headers-<release>,
    /lib/modules/<release>/build pointing at it."""
    abi = release.removesuffix("-generic")
    common = f"linux-headers-{abi}"
    flav = f"linux-headers-{release}"
    src = f"/usr/src/linux-headers-{release}"
    files = {
        f"{src}/Makefile": f"# kernel {release} (simulated headers)\nKERNELRELEASE = {release}\n",
        f"{src}/.config": "# Simulated kernel configuration (gpuhost sandbox)\nCONFIG_MODULES=y\n",
        f"{src}/include/generated/utsrelease.h": f'#define UTS_RELEASE "{release}"\n',
    }
    return [
        (f"{common}_{version}_all.deb",
         _control(common, version, "all", "devel", [],
                  f"Header files related to Linux kernel version {abi.split('-')[0]}"),
         {f"/usr/src/{common}/Makefile": f"# kernel {abi} common headers (simulated)\n"}, {}),
        (f"{flav}_{version}_amd64.deb",
         _control(flav, version, "amd64", "devel", [common],
                  f"Linux kernel headers for version {abi.split('-')[0]} on 64 bit x86 SMP"),
         files, {f"/lib/modules/{release}/build": src}),
    ]


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def _packages_index(rel_dirs: list[str]) -> str:
    out = ""
    for d in rel_dirs:
        if (REPO / d).is_dir() and any((REPO / d).glob("*.deb")):
            out += run(["sh", "-c", 'cd "$1" && apt-ftparchive packages "$2"', "sh",
                        str(REPO), d], capture=True).stdout
    return out


def _sign_suite(suite: str, codename: str, version_id: str) -> None:
    dist = REPO / "dists" / suite
    rel = run(["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(dist), "apt-ftparchive",
               "-o", "APT::FTPArchive::Release::Origin=Ubuntu",
               "-o", "APT::FTPArchive::Release::Label=Ubuntu",
               "-o", f"APT::FTPArchive::Release::Suite={suite}",
               "-o", f"APT::FTPArchive::Release::Version={version_id}",
               "-o", f"APT::FTPArchive::Release::Codename={codename}",
               "-o", "APT::FTPArchive::Release::Architectures=amd64",
               "-o", f"APT::FTPArchive::Release::Components={' '.join(COMPONENTS)}",
               "-o", "APT::FTPArchive::Release::Description=Ubuntu layout, gpuhost sandbox",
               "release", "."], capture=True).stdout
    for f in ("Release", "InRelease", "Release.gpg"):
        (dist / f).unlink(missing_ok=True)
    write_file(dist / "Release", rel)
    env = {"GNUPGHOME": str(mirror.GNUPG_DIR)}
    run(["gpg", "--batch", "--yes", "--local-user", mirror.KEY_UID, "--clearsign",
         "--output", str(dist / "InRelease"), str(dist / "Release")], env=env)
    run(["gpg", "--batch", "--yes", "--local-user", mirror.KEY_UID, "--armor", "--detach-sign",
         "--output", str(dist / "Release.gpg"), str(dist / "Release")], env=env)


def jammy_dkms_debs() -> list[Path]:
    """Bullseye's dkms and dctrl-tools, fetched once (verified: InRelease by gpgv, the index
    and each .deb by SHA256) and kept in JAMMY_DKMS_CACHE."""
    stamp = JAMMY_DKMS_CACHE / "files"
    if stamp.is_file():
        debs = [JAMMY_DKMS_CACHE / n for n in stamp.read_text().split()]
        if debs and all(d.is_file() for d in debs):
            return debs
    from .nvidia.pkg.common import BuildError
    from .nvidia.pkg.debian_fetch import fetch_deb
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=paths.MIRROR_CACHE))
    try:
        with step(f"Ubuntu archive: {JAMMY_DKMS_SUITE}'s {' and '.join(JAMMY_DKMS_PACKAGES)} "
                  "for jammy (deb.debian.org, verified)"):
            names = [fetch_deb(JAMMY_DKMS_SUITE, p, tmp)[0].name for p in JAMMY_DKMS_PACKAGES]
        for f in tmp.glob("*.InRelease"):
            f.unlink()
        write_file(tmp / "files", " ".join(names) + "\n")
        if JAMMY_DKMS_CACHE.exists():
            shutil.rmtree(JAMMY_DKMS_CACHE)
        os.replace(tmp, JAMMY_DKMS_CACHE)
    except BuildError as error:
        raise SandboxError(f"cannot fetch jammy's dkms from Debian {JAMMY_DKMS_SUITE}: {error}; "
                           "check this machine's access to deb.debian.org "
                           "(GPUHOST_DEBIAN_ARCHIVE overrides the mirror)") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return [JAMMY_DKMS_CACHE / n for n in names]


def build_repo(mirror_state: dict) -> None:
    """Build (or keep) the Ubuntu-layout archive from the Debian mirror's pool."""
    jammy_debs = jammy_dkms_debs()
    inputs = recipe_hash({"format": REPO_FORMAT, "debian": mirror_state.get("files"),
                          "jammy_dkms": [d.name for d in jammy_debs],
                          "releases": RELEASES, "universe": UNIVERSE,
                          "key": mirror.KEYRING.read_bytes().hex()})
    state_text = STATE_FILE.read_text() if STATE_FILE.is_file() else ""
    if state_text.strip() == inputs and (REPO / "dists/noble-security/InRelease").is_file():
        say(f"Ubuntu archive {REPO} is up to date")
        return
    with step("Ubuntu archive: pool (Debian binaries, fake kernel headers), index, sign"):
        if REPO.exists():
            shutil.rmtree(REPO)
        for d in ("main/debian", "universe/debian", "main/d/dkms-bookworm",
                  "main/d/dkms-bullseye"):
            (REPO / "pool" / d).mkdir(parents=True)
        for deb in sorted(mirror.POOL.glob("*.deb")):
            name = deb.name.split("_", 1)[0]
            comp = "universe" if name in UNIVERSE else "main"
            where = "main/d/dkms-bookworm" if name == "dkms" else f"{comp}/debian"
            _link_or_copy(deb, REPO / "pool" / where / deb.name)
        for deb in jammy_debs:
            _link_or_copy(deb, REPO / "pool/main/d/dkms-bullseye" / deb.name)
        stage = Path(tempfile.mkdtemp(prefix=".build-ubuntu-", dir=paths.MIRROR_CACHE))
        try:
            for r in RELEASES.values():
                kdir = REPO / "pool/main/l" / f"linux-{r['codename']}"
                kdir.mkdir(parents=True)
                for release, version in ((r["kernel"], r["kernel_version"]),
                                         (r["newer"], r["newer_version"])):
                    for fname, control, files, links in header_packages(release, version):
                        _deb(stage, kdir / fname, control, files, links)
                # the meta package follows the newest kernel, as on a real archive
                newer_abi = r["newer"].removesuffix("-generic")
                meta_version = newer_abi.replace("-", ".") + "." + r["newer_version"].split(".")[-1]
                _deb(stage, REPO / "pool/main/l" / f"linux-meta-{r['codename']}.deb",
                     _control("linux-headers-generic", meta_version, "amd64", "kernel",
                              [f"linux-headers-{r['newer']}"],
                              "Generic Linux kernel headers (meta package)"), {}, {})
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        for r in RELEASES.values():
            c = r["codename"]
            kdir = f"pool/main/l/linux-{c}"
            meta = REPO / "pool/main/l" / f"linux-meta-{c}.deb"
            # one directory per pocket's kernel content
            upd = REPO / "pool/main/l" / f"linux-{c}-updates"
            sec = REPO / "pool/main/l" / f"linux-{c}-security"
            upd.mkdir()
            sec.mkdir()
            for f in (REPO / kdir).glob("*.deb"):
                _link_or_copy(f, upd / f.name)
                if r["kernel_version"] in f.name:
                    _link_or_copy(f, sec / f.name)
            os.replace(meta, upd / meta.name)
            shutil.rmtree(REPO / kdir)
            dkms_dir = ("pool/main/d/dkms-bullseye" if c == "jammy"
                        else "pool/main/d/dkms-bookworm")
            pockets = {
                c: {"main": ["pool/main/debian", dkms_dir], "universe": ["pool/universe/debian"]},
                f"{c}-updates": {"main": [f"pool/main/l/linux-{c}-updates"]},
                f"{c}-security": {"main": [f"pool/main/l/linux-{c}-security"]},
            }
            for suite, comps in pockets.items():
                for comp in COMPONENTS:
                    bdir = REPO / "dists" / suite / comp / "binary-amd64"
                    bdir.mkdir(parents=True)
                    text = _packages_index(comps.get(comp, []))
                    write_file(bdir / "Packages", text)
                    with gzip.GzipFile(bdir / "Packages.gz", "wb", mtime=0) as f:
                        f.write(text.encode())
                _sign_suite(suite, c, r["version_id"])
        write_file(STATE_FILE, inputs + "\n")
    if not (REPO / "dists/jammy/InRelease").is_file():
        raise SandboxError(f"the Ubuntu archive in {REPO} was not signed")
