"""The sandbox's Ubuntu-layout archive (sandbox/ubuntu.py describes its layout): Debian
binaries re-indexed under Ubuntu's suites, fake kernel header packages, signed suites."""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path

from . import mirror, paths, ubuntu2604, ubuntu_signed
from .ubuntu import (COMPONENTS, JAMMY_DKMS_CACHE, JAMMY_DKMS_PACKAGES, JAMMY_DKMS_SUITE,
                     ON_TRIXIE, RELEASES, REPO, REPO_FORMAT, STATE_FILE, UNIVERSE)
from .util import SandboxError, read_json, recipe_hash, run, say, step, write_file



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
    abi, flavour = release.rsplit("-", 1)
    # derivative kernels (-aws, -nvidia ...) name theirs linux-<flavour>-headers-<abi>
    common = f"linux-headers-{abi}" if flavour == "generic" else f"linux-{flavour}-headers-{abi}"
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


def _trixie_pool() -> list[Path]:
    """The trixie mirror's .debs when it is built (resolute's userland), else []."""
    from . import debian13
    a = debian13.archive()
    state = read_json(a.state_file) or {}
    files = [a.pool / f for f in state.get("files", [])]
    return files if files and all(f.is_file() for f in files) else []


def _kernel_debs(os_name: str, r: dict, stage: Path, kdir: Path, metadir: Path) -> None:
    """The fake header packages of a release (running and newer kernel; 26.04 also its
    flavours) into KDIR, its meta packages into METADIR (-updates only)."""
    heads = ubuntu2604.header_packages if os_name == ubuntu2604.OS_NAME else header_packages
    kernels = [(r["kernel"], r["kernel_version"]), (r["newer"], r["newer_version"])]
    if os_name == ubuntu2604.OS_NAME:
        kernels += ubuntu2604.flavour_kernels()
    for release, version in kernels:
        for fname, control, files, links in heads(release, version):
            _deb(stage, kdir / fname, control, files, links)

    def meta_version(release: str, version: str) -> str:
        abi = release.rsplit("-", 1)[0]
        return abi.replace("-", ".") + "." + version.split(".")[-1]
    # the meta packages follow the newest kernel, as on a real archive
    metas = (ubuntu2604.metas(meta_version) if os_name == ubuntu2604.OS_NAME else
             [("linux-headers-generic", meta_version(r["newer"], r["newer_version"]),
               f"linux-headers-{r['newer']}")])
    for name, version, dep in metas:
        _deb(stage, metadir / f"{name}_{version}_amd64.deb",
             _control(name, version, "amd64", "kernel", [dep],
                      "Linux kernel headers (meta package)" if name != "linux-headers-generic"
                      else "Generic Linux kernel headers (meta package)"), {}, {})


def _signed_recipe() -> dict:
    """What the stand-ins of Canonical's signed modules are made of (sandbox/ubuntu_signed.py):
    their drivers and the stand-in key's certificate."""
    return {"drivers": ubuntu_signed.SIGNED, "format": 1,
            "cert": ubuntu_signed.signing_cert().read_bytes().hex()}


def build_repo(mirror_state: dict) -> None:
    """Build (or keep) the Ubuntu-layout archive from the Debian mirrors' pools (resolute's
    suites only once the trixie mirror is built: sandbox/debian13.py)."""
    jammy_debs = jammy_dkms_debs()
    trixie = _trixie_pool()
    releases = {n: r for n, r in RELEASES.items() if n not in ON_TRIXIE or trixie}
    inputs = recipe_hash({"format": REPO_FORMAT, "debian": mirror_state.get("files"),
                          "jammy_dkms": [d.name for d in jammy_debs],
                          "trixie": [f.name for f in trixie],
                          "releases": releases, "universe": UNIVERSE,
                          "flavours": ubuntu2604.FLAVOURS, "config": ubuntu2604.CONFIG,
                          "docker_io_with_cli": True,
                          "signed_modules": _signed_recipe(),
                          "key": mirror.KEYRING.read_bytes().hex()})
    state_text = STATE_FILE.read_text() if STATE_FILE.is_file() else ""
    if state_text.strip() == inputs and (REPO / "dists/noble-security/InRelease").is_file():
        say(f"Ubuntu archive {REPO} is up to date")
        return
    with step("Ubuntu archive: pool (Debian binaries, fake kernel headers), index, sign"):
        if REPO.exists():
            shutil.rmtree(REPO)
        for d in ("main/debian", "universe/debian", "main/d/dkms-bookworm",
                  "main/d/dkms-bullseye", "main/debian-trixie", "universe/debian-trixie"):
            (REPO / "pool" / d).mkdir(parents=True)
        for deb in sorted(mirror.POOL.glob("*.deb")):
            name = deb.name.split("_", 1)[0]
            comp = "universe" if name in UNIVERSE else "main"
            where = "main/d/dkms-bookworm" if name == "dkms" else f"{comp}/debian"
            _link_or_copy(deb, REPO / "pool" / where / deb.name)
        for deb in jammy_debs:
            _link_or_copy(deb, REPO / "pool/main/d/dkms-bullseye" / deb.name)
        for deb in trixie:   # resolute: trixie's binaries, dkms 3.2.2 among them
            comp = "universe" if deb.name.split("_", 1)[0] in UNIVERSE else "main"
            _link_or_copy(deb, REPO / "pool" / f"{comp}/debian-trixie" / deb.name)
        stage = Path(tempfile.mkdtemp(prefix=".build-ubuntu-", dir=paths.MIRROR_CACHE))
        try:
            for os_name, r in releases.items():
                c = r["codename"]
                kdir, metadir = (REPO / "pool/main/l" / f"linux-{c}",
                                 REPO / "pool/main/l" / f"linux-meta-{c}")
                kdir.mkdir(parents=True)
                metadir.mkdir(parents=True)
                _kernel_debs(os_name, r, stage, kdir, metadir)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        signed = {}  # codename -> its stand-ins of Canonical's signed modules (restricted)
        for r in releases.values():
            if r["codename"] in ubuntu_signed.SIGNED:
                rel = f"pool/restricted/l/linux-restricted-modules-{r['codename']}"
                ubuntu_signed.build(r["codename"], r["version_id"], r["kernel"],
                                    r["kernel_version"], REPO / rel)
                signed[r["codename"]] = [rel]
        for os_name, r in releases.items():
            c = r["codename"]
            kdir = REPO / "pool/main/l" / f"linux-{c}"
            # one directory per pocket's kernel content
            upd = REPO / "pool/main/l" / f"linux-{c}-updates"
            sec = REPO / "pool/main/l" / f"linux-{c}-security"
            upd.mkdir()
            sec.mkdir()
            for f in kdir.glob("*.deb"):
                _link_or_copy(f, upd / f.name)
                if r["newer_version"] not in f.name:   # the running kernels
                    _link_or_copy(f, sec / f.name)
            for f in (REPO / "pool/main/l" / f"linux-meta-{c}").glob("*.deb"):
                os.replace(f, upd / f.name)
            shutil.rmtree(kdir)
            shutil.rmtree(REPO / "pool/main/l" / f"linux-meta-{c}")
            if os_name in ON_TRIXIE:
                userland = {"main": ["pool/main/debian-trixie"],
                            "universe": ["pool/universe/debian-trixie"]}
            else:
                dkms_dir = ("pool/main/d/dkms-bullseye" if c == "jammy"
                            else "pool/main/d/dkms-bookworm")
                userland = {"main": ["pool/main/debian", dkms_dir],
                            "universe": ["pool/universe/debian"]}
            pockets = {
                c: userland,
                f"{c}-updates": {"main": [f"pool/main/l/linux-{c}-updates"],
                                 "restricted": signed.get(c, [])},
                f"{c}-security": {"main": [f"pool/main/l/linux-{c}-security"]},
            }
            for suite, comps in pockets.items():
                for comp in COMPONENTS:
                    bdir = REPO / "dists" / suite / comp / "binary-amd64"
                    bdir.mkdir(parents=True)
                    text = _packages_index(comps.get(comp, []))
                    if os_name == ubuntu2604.OS_NAME and suite == c:
                        text = ubuntu2604.docker_io_with_cli(text)
                    write_file(bdir / "Packages", text)
                    with gzip.GzipFile(bdir / "Packages.gz", "wb", mtime=0) as f:
                        f.write(text.encode())
                _sign_suite(suite, c, r["version_id"])
        write_file(STATE_FILE, inputs + "\n")
    if not (REPO / "dists/jammy/InRelease").is_file():
        raise SandboxError(f"the Ubuntu archive in {REPO} was not signed")
