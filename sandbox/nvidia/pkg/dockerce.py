"""Docker's "Docker CE for Debian" apt repository (download.docker.com/linux/debian), as the
sandbox serves it: `docker-ce`, `docker-ce-cli` and `containerd.io` for bookworm, component
stable, under OUT_DIR/docker/debian/ (`dists/bookworm/{InRelease,Release,Release.gpg}`,
`dists/bookworm/stable/binary-amd64/Packages{,.gz}`, the .debs in
`dists/bookworm/pool/stable/amd64/`, the armored key at `gpg`: Docker's layout).

The binaries are Debian's: docker-ce and docker-ce-cli repackage Debian trixie's docker.io
and docker-cli 26.1.5 (fetched by URL from deb.debian.org's trixie index, whose InRelease
gpgv checks against this machine's debian-archive-keyring, and each .deb against the
index's SHA256); containerd.io carries bookworm's containerd and runc binaries (apt-get
download, this machine's bookworm sources) and, like Docker's, provides, conflicts with and
replaces containerd and runc. Sources of each fact: sandbox/README.md, "Docker CE for Debian".
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import lzma
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from .common import (BASE_URL, OUT_DIR, WORK_DIR, BuildError, code_digest, fresh_dir,
                     inputs_digest, log, mark_done, replace_dir, run, sha256_file, up_to_date,
                     write)
from .deb import SOURCE_DATE_EPOCH, DebPackage
from .signing import SigningKey

DOCKER_VERSION = "26.1.5"
# Docker's version strings for Debian 12: epoch 5, "-1~debian.12~bookworm"
DEB_VERSION = f"5:{DOCKER_VERSION}-1~debian.12~bookworm"
CONTAINERD_VERSION = "1.6.20-1"
SUITE, COMPONENT = "bookworm", "stable"
DEBIAN_MIRROR = os.environ.get("GPUHOST_DEBIAN_ARCHIVE", "http://deb.debian.org/debian")
TRIXIE_DEBS = ("docker.io", "docker-cli")
BOOKWORM_DEBS = ("containerd", "runc", "tini")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MAINTAINER = "gpuhost sandbox (Debian's binaries as Docker's packages) <sandbox@gpuhost.invalid>"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as resp:  # noqa: S310 (fixed http URL)
        return resp.read()


def _stanzas(text: str):
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def fetch_trixie(dest: Path) -> dict[str, str]:
    """docker.io and docker-cli 26.1.5 from trixie into DEST, checked: InRelease by gpgv
    (Debian's archive keys), Packages.xz by InRelease's SHA256, each .deb by the index's."""
    release = _get(f"{DEBIAN_MIRROR}/dists/trixie/InRelease")
    (dest / "InRelease").write_bytes(release)
    proc = subprocess.run(["gpgv", "--keyring", KEYRING, str(dest / "InRelease")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"trixie InRelease: bad signature ({KEYRING}):\n{proc.stderr[-1500:]}")
    want = None
    in_sha256 = False
    for line in release.decode().splitlines():
        if line.startswith("SHA256:"):
            in_sha256 = True
        elif in_sha256 and line.startswith(" "):
            digest, _, name = line.split()
            if name == "main/binary-amd64/Packages.xz":
                want = digest
        else:
            in_sha256 = False
    if want is None:
        raise BuildError("trixie InRelease lists no main/binary-amd64/Packages.xz")
    packages_xz = _get(f"{DEBIAN_MIRROR}/dists/trixie/main/binary-amd64/Packages.xz")
    if hashlib.sha256(packages_xz).hexdigest() != want:
        raise BuildError("trixie Packages.xz: SHA256 differs from InRelease")
    found = {}
    for st in _stanzas(lzma.decompress(packages_xz).decode()):
        if st.get("Package") in TRIXIE_DEBS and st.get("Version", "").startswith(
                DOCKER_VERSION + "+"):
            found[st["Package"]] = st
    missing = set(TRIXIE_DEBS) - set(found)
    if missing:
        raise BuildError(f"trixie has no {DOCKER_VERSION} of {', '.join(sorted(missing))}")
    versions = {}
    for name, st in found.items():
        data = _get(f"{DEBIAN_MIRROR}/{st['Filename']}")
        if hashlib.sha256(data).hexdigest() != st["SHA256"]:
            raise BuildError(f"{st['Filename']}: SHA256 differs from trixie's Packages index")
        (dest / Path(st["Filename"]).name).write_bytes(data)
        versions[name] = st["Version"]
    return versions


def debian_root() -> Path:
    """Trixie's docker.io/docker-cli and bookworm's containerd/runc/tini, unpacked (cached)."""
    root = WORK_DIR / "docker-ce-debian" / "root"
    if (root / "usr/sbin/dockerd").exists() and (root / "usr/bin/tini-static").exists():
        return root
    dl = fresh_dir(WORK_DIR / "docker-ce-debian" / "debs")
    t = time.monotonic()
    log(f"fetching trixie's docker.io/docker-cli {DOCKER_VERSION} from {DEBIAN_MIRROR}")
    versions = fetch_trixie(dl)
    log(f"fetching bookworm's {', '.join(BOOKWORM_DEBS)} with apt-get download")
    run(["apt-get", "download", *BOOKWORM_DEBS], cwd=dl)
    tmp = fresh_dir(root.with_name("root.new"))
    for deb in sorted(dl.glob("*.deb")):
        run(["dpkg-deb", "-x", str(deb), str(tmp)])
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    log(f"Debian binaries for docker-ce ({versions}): {time.monotonic() - t:.1f}s")
    return root


def docker_packages(root: Path) -> list[DebPackage]:
    def binfile(rel: str) -> tuple[bytes, int]:
        return (root / rel).read_bytes(), 0o755

    unit_dir = root / "usr/lib/systemd/system"
    units = {name: (unit_dir / name).read_text().replace("/usr/sbin/dockerd", "/usr/bin/dockerd")
             for name in ("docker.service", "docker.socket")}
    containerd_unit = (root / "lib/systemd/system/containerd.service").read_text()
    # dh_installsystemd's maintainer-script snippet (Docker's packages are built with it):
    # enable, then start, a failed start not failing the install
    enable = ('if [ "$1" = configure ] && [ -d /run/systemd/system ]; then\n'
              '  systemctl daemon-reload >/dev/null || true\n'
              '  systemctl enable {units} >/dev/null || true\n'
              '  systemctl start {units} >/dev/null || true\nfi\n')
    return [
        DebPackage(
            "containerd.io", CONTAINERD_VERSION, "An open and reliable container runtime\n"
            "Debian bookworm's containerd and runc binaries, packaged as Docker's containerd.io.",
            depends=["libc6 (>= 2.34)", "libseccomp2 (>= 2.5.0)"],
            provides=["containerd", "runc"], conflicts=["containerd", "runc"],
            replaces=["containerd", "runc"], section="devel",
            files={"/usr/bin/containerd": binfile("usr/bin/containerd"),
                   "/usr/bin/containerd-shim-runc-v2": binfile("usr/bin/containerd-shim-runc-v2"),
                   "/usr/bin/ctr": binfile("usr/bin/ctr"),
                   "/usr/bin/runc": binfile("usr/sbin/runc"),
                   "/lib/systemd/system/containerd.service": (containerd_unit, 0o644)},
            scripts={"postinst": "#!/bin/sh\nset -e\n"
                     + enable.format(units="containerd.service")}),
        DebPackage(
            "docker-ce-cli", DEB_VERSION, "Docker CLI: the open-source application container "
            "engine\nDebian trixie's docker-cli binary, packaged as Docker's docker-ce-cli.",
            depends=["libc6 (>= 2.34)"], conflicts=["docker.io", "docker-engine"],
            replaces=["docker-ce (<< 5:0)"], section="admin",
            files={"/usr/bin/docker": binfile("usr/bin/docker")}),
        DebPackage(
            "docker-ce", DEB_VERSION, "Docker: the open-source application container engine\n"
            "Debian trixie's docker.io binaries, packaged as Docker's docker-ce.",
            depends=["containerd.io (>= 1.6.4)", "docker-ce-cli", "iptables",
                     "libseccomp2 (>= 2.3.0)", "libc6 (>= 2.34)", "libsystemd0"],
            conflicts=["docker.io", "docker-engine"], replaces=["docker-engine"],
            section="admin",
            files={"/usr/bin/dockerd": binfile("usr/sbin/dockerd"),
                   "/usr/bin/docker-proxy": binfile("usr/sbin/docker-proxy"),
                   "/usr/bin/docker-init": binfile("usr/bin/tini-static"),
                   "/lib/systemd/system/docker.service": (units["docker.service"], 0o644),
                   "/lib/systemd/system/docker.socket": (units["docker.socket"], 0o644)},
            # Docker's docker-ce.postinst: the docker group (docker.socket's SocketGroup)
            scripts={"postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ] && ! getent "
                     "group docker >/dev/null; then\n  addgroup --system docker || "
                     "groupadd -r docker\nfi\n"
                     + enable.format(units="docker.socket docker.service")}),
    ]


def deb_filename(pkg: DebPackage) -> str:
    """Docker's file names carry no epoch: docker-ce_26.1.5-1~debian.12~bookworm_amd64.deb"""
    return f"{pkg.name}_{pkg.version.partition(':')[2] or pkg.version}_{pkg.arch}.deb"


def build_deb(pkg: DebPackage, outdir: Path) -> Path:
    """dpkg-deb with a fast gzip (about 150 MB of binaries; xz takes minutes)."""
    root = fresh_dir(WORK_DIR / "debroot" / pkg.name)
    total = 0
    for rel, (content, mode) in pkg.files.items():
        write(root / rel.lstrip("/"), content, mode)
        total += len(content)
    debian = root / "DEBIAN"
    debian.mkdir(mode=0o755)
    for script, text in pkg.scripts.items():
        write(debian / script, text, 0o755)
    control = pkg.control(total // 1024).splitlines()
    control = [f"Maintainer: {MAINTAINER}" if line.startswith("Maintainer:") else line
               for line in control]
    write(debian / "control", "\n".join(control) + "\n")
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    out = outdir / deb_filename(pkg)
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(out)],
        env={"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
    shutil.rmtree(root)
    return out


def docker_debs(force: bool) -> list[Path]:
    """The repackaged .debs, cached apart from the repository (they change only with the
    versions and this module's packaging code)."""
    cache = WORK_DIR / "docker-ce-debs"
    digest = inputs_digest(code=code_digest("deb"), docker=DOCKER_VERSION,
                           trixie=TRIXIE_DEBS, bookworm=BOOKWORM_DEBS,
                           packaging=inspect.getsource(docker_packages)
                           + inspect.getsource(build_deb))
    if force or not up_to_date("docker-ce-debs", digest, [cache]) or not any(
            cache.glob("*.deb")):
        t = time.monotonic()
        fresh_dir(cache)
        for pkg in docker_packages(debian_root()):
            build_deb(pkg, cache)
        mark_done("docker-ce-debs", digest)
        log(f"docker-ce, docker-ce-cli, containerd.io {DOCKER_VERSION} debs: built in "
            f"{time.monotonic() - t:.1f}s")
    return sorted(cache.glob("*.deb"))


def build(key: SigningKey, force: bool = False) -> None:
    top = OUT_DIR / "docker" / "debian"
    debs = docker_debs(force)
    digest = inputs_digest(code=code_digest("dockerce"), key=key.fingerprint,
                           debs=[sha256_file(p) for p in debs], url=BASE_URL)
    dist = top / "dists" / SUITE
    if not force and up_to_date("docker-ce-debian", digest, [dist / "InRelease", top / "gpg"]):
        log("Docker CE for Debian repo: up to date")
        return
    t = time.monotonic()
    with replace_dir(top) as new:
        pool = new / "dists" / SUITE / "pool" / COMPONENT / "amd64"
        pool.mkdir(parents=True)
        for deb in debs:
            os.link(deb, pool / deb.name)
        packages = run(["apt-ftparchive", "packages", f"dists/{SUITE}/pool/{COMPONENT}"],
                       cwd=new)
        index = new / "dists" / SUITE / COMPONENT / "binary-amd64"
        write(index / "Packages", packages)
        with gzip.GzipFile(index / "Packages.gz", "wb", mtime=int(SOURCE_DATE_EPOCH)) as f:
            f.write(packages.encode())
        suite_dir = new / "dists" / SUITE
        # Release's checksums name the indexes relative to dists/bookworm (apt's view)
        release = run(["apt-ftparchive",
                       "-o", "APT::FTPArchive::Release::Origin=Docker",
                       "-o", "APT::FTPArchive::Release::Label=Docker CE",
                       "-o", f"APT::FTPArchive::Release::Suite={SUITE}",
                       "-o", f"APT::FTPArchive::Release::Codename={SUITE}",
                       "-o", "APT::FTPArchive::Release::Architectures=amd64",
                       "-o", f"APT::FTPArchive::Release::Components={COMPONENT}",
                       "-o", "APT::FTPArchive::Release::Description=Docker CE for Debian "
                             "(gpuhost sandbox: Debian's binaries)",
                       "release", "."], cwd=suite_dir)
        write(suite_dir / "Release", release)
        key.clearsign(suite_dir / "Release", suite_dir / "InRelease")
        key.detach_sign(suite_dir / "Release", suite_dir / "Release.gpg")
        key.export_armored(new / "gpg")
    mark_done("docker-ce-debian", digest)
    size = sum(p.stat().st_size for p in debs) // (1 << 20)
    log(f"Docker CE for Debian repo: built in {time.monotonic() - t:.1f}s ({size} MiB)")
