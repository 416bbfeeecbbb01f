"""Docker's "Docker CE for Debian" apt repository (download.docker.com/linux/debian), as the
sandbox serves it: `docker-ce`, `docker-ce-cli` and `containerd.io` for bookworm, component
stable, under OUT_DIR/<engine's dir>/ (`dists/bookworm/{InRelease,Release,Release.gpg}`,
`dists/bookworm/stable/binary-amd64/Packages{,.gz}`, the .debs in
`dists/bookworm/pool/stable/amd64/`, the armored key at `gpg`: Docker's layout).

Two engines (ENGINES), each its own copy of the repository as it was when that engine was
the newest (a host chooses one by its docker_repo_url):

- `docker/debian`: docker-ce 26.1.5 (Debian trixie's docker.io/docker-cli) with
  containerd.io 1.6.20 (bookworm's containerd and runc);
- `docker/debian-28`: docker-ce 28.5.2 (Debian testing's docker.io/docker-cli) with
  containerd.io 2.1.9 (testing's containerd 2.1.9 and bookworm's runc 1.1.5: testing's
  runc 1.3 needs glibc 2.38, bookworm has 2.36).

The Debian files are fetched by URL from deb.debian.org (the suite's InRelease checked by
gpgv against this machine's debian-archive-keyring, Packages.xz by InRelease's SHA256, each
.deb by the index's SHA256); bookworm's by apt-get download. containerd.io, like Docker's,
provides, conflicts with and replaces containerd and runc. Sources of each fact:
sandbox/README.md, "Docker CE for Debian".
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
from dataclasses import dataclass
from pathlib import Path

from .common import (BASE_URL, OUT_DIR, WORK_DIR, BuildError, code_digest, fresh_dir,
                     inputs_digest, log, mark_done, replace_dir, run, sha256_file, up_to_date,
                     write)
from .deb import SOURCE_DATE_EPOCH, DebPackage
from .signing import SigningKey

SUITE, COMPONENT = "bookworm", "stable"
DEBIAN_MIRROR = os.environ.get("GPUHOST_DEBIAN_ARCHIVE", "http://deb.debian.org/debian")


@dataclass(frozen=True)
class Engine:
    """One copy of Docker's repository: the Debian packages it is made of."""
    subdir: str           # under OUT_DIR
    docker: str           # upstream Docker version (docker-ce, docker-ce-cli)
    containerd: str       # containerd.io's version
    suite: str            # the Debian suite fetched by URL
    fetched: tuple        # (package, upstream version prefix) from that suite
    bookworm: tuple       # packages taken from bookworm with apt-get download

    @property
    def deb_version(self) -> str:
        """Docker's version strings for Debian 12: epoch 5, "-1~debian.12~bookworm"."""
        return f"5:{self.docker}-1~debian.12~bookworm"

    @property
    def cache(self) -> str:
        return "docker-ce-debian" + self.subdir.removeprefix("docker/debian")


ENGINES = {
    "26": Engine("docker/debian", "26.1.5", "1.6.20-1", "trixie",
                 (("docker.io", "26.1.5"), ("docker-cli", "26.1.5")),
                 ("containerd", "runc", "tini")),
    "28": Engine("docker/debian-28", "28.5.2", "2.1.9-1", "testing",
                 (("docker.io", "28.5.2"), ("docker-cli", "28.5.2"), ("containerd", "2.1.9")),
                 ("runc", "tini")),
}
# the first engine's names, kept for readers of this module
DOCKER_VERSION = ENGINES["26"].docker
DEB_VERSION = ENGINES["26"].deb_version
CONTAINERD_VERSION = ENGINES["26"].containerd
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


def fetch_suite(dest: Path, suite: str, wanted: tuple) -> dict[str, str]:
    """WANTED ((package, upstream version prefix), ...) from Debian SUITE into DEST, checked:
    InRelease by gpgv (Debian's archive keys), Packages.xz by InRelease's SHA256, each .deb
    by the index's."""
    release = _get(f"{DEBIAN_MIRROR}/dists/{suite}/InRelease")
    (dest / "InRelease").write_bytes(release)
    proc = subprocess.run(["gpgv", "--keyring", KEYRING, str(dest / "InRelease")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{suite} InRelease: bad signature ({KEYRING}):\n{proc.stderr[-1500:]}")
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
        raise BuildError(f"{suite} InRelease lists no main/binary-amd64/Packages.xz")
    packages_xz = _get(f"{DEBIAN_MIRROR}/dists/{suite}/main/binary-amd64/Packages.xz")
    if hashlib.sha256(packages_xz).hexdigest() != want:
        raise BuildError(f"{suite} Packages.xz: SHA256 differs from InRelease")
    prefixes = dict(wanted)
    found = {}
    for st in _stanzas(lzma.decompress(packages_xz).decode()):
        name = st.get("Package")
        if name in prefixes and st.get("Version", "").startswith(prefixes[name] + "+"):
            found[name] = st
    missing = set(prefixes) - set(found)
    if missing:
        raise BuildError(f"{suite} has no {', '.join(f'{n} {prefixes[n]}' for n in sorted(missing))}"
                         f" (Debian moved on: pick the engine's versions anew, "
                         "sandbox/README.md \"Docker CE for Debian\")")
    versions = {}
    for name, st in found.items():
        data = _get(f"{DEBIAN_MIRROR}/{st['Filename']}")
        if hashlib.sha256(data).hexdigest() != st["SHA256"]:
            raise BuildError(f"{st['Filename']}: SHA256 differs from {suite}'s Packages index")
        (dest / Path(st["Filename"]).name).write_bytes(data)
        versions[name] = st["Version"]
    return versions


def debian_root(engine: Engine) -> Path:
    """The engine's Debian packages, unpacked (cached)."""
    root = WORK_DIR / engine.cache / "root"
    if (root / "usr/sbin/dockerd").exists() and (root / "usr/bin/tini-static").exists():
        return root
    dl = fresh_dir(WORK_DIR / engine.cache / "debs")
    t = time.monotonic()
    log(f"fetching {engine.suite}'s {', '.join(n for n, _ in engine.fetched)} from {DEBIAN_MIRROR}")
    versions = fetch_suite(dl, engine.suite, engine.fetched)
    log(f"fetching bookworm's {', '.join(engine.bookworm)} with apt-get download")
    run(["apt-get", "download", *engine.bookworm], cwd=dl)
    tmp = fresh_dir(root.with_name("root.new"))
    for deb in sorted(dl.glob("*.deb")):
        run(["dpkg-deb", "-x", str(deb), str(tmp)])
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    log(f"Debian binaries for docker-ce ({versions}): {time.monotonic() - t:.1f}s")
    return root


def _unit(root: Path, name: str) -> str:
    """A systemd unit of the unpacked packages (bookworm's under /lib, later ones /usr/lib)."""
    for where in ("usr/lib/systemd/system", "lib/systemd/system"):
        if (root / where / name).exists():
            return (root / where / name).read_text()
    raise BuildError(f"no {name} in the engine's Debian packages")


def docker_packages(root: Path, engine: Engine) -> list[DebPackage]:
    def binfile(rel: str) -> tuple[bytes, int]:
        return (root / rel).read_bytes(), 0o755

    units = {name: _unit(root, name).replace("/usr/sbin/dockerd", "/usr/bin/dockerd")
             for name in ("docker.service", "docker.socket")}
    containerd_unit = _unit(root, "containerd.service")
    containerd_from = dict(engine.fetched).get("containerd")
    containerd_from = f"Debian {engine.suite}'s containerd {containerd_from}" if containerd_from \
        else "Debian bookworm's containerd"
    deb_version = engine.deb_version
    # dh_installsystemd's maintainer-script snippet (Docker's packages are built with it):
    # enable, then start, a failed start not failing the install
    enable = ('if [ "$1" = configure ] && [ -d /run/systemd/system ]; then\n'
              '  systemctl daemon-reload >/dev/null || true\n'
              '  systemctl enable {units} >/dev/null || true\n'
              '  systemctl start {units} >/dev/null || true\nfi\n')
    return [
        DebPackage(
            "containerd.io", engine.containerd, "An open and reliable container runtime\n"
            f"{containerd_from} and bookworm's runc binaries, packaged as Docker's containerd.io.",
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
            "docker-ce-cli", deb_version, "Docker CLI: the open-source application container "
            f"engine\nDebian {engine.suite}'s docker-cli binary, packaged as Docker's docker-ce-cli.",
            depends=["libc6 (>= 2.34)"], conflicts=["docker.io", "docker-engine"],
            replaces=["docker-ce (<< 5:0)"], section="admin",
            files={"/usr/bin/docker": binfile("usr/bin/docker")}),
        DebPackage(
            "docker-ce", deb_version, "Docker: the open-source application container engine\n"
            f"Debian {engine.suite}'s docker.io binaries, packaged as Docker's docker-ce.",
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


def docker_debs(engine: Engine, force: bool) -> list[Path]:
    """The repackaged .debs, cached apart from the repository (they change only with the
    versions and this module's packaging code)."""
    cache = WORK_DIR / (engine.cache.replace("docker-ce-debian", "docker-ce-debs", 1))
    digest = inputs_digest(code=code_digest("deb"), docker=engine.docker,
                           fetched=[engine.suite, *engine.fetched], bookworm=engine.bookworm,
                           containerd=engine.containerd,
                           packaging=inspect.getsource(docker_packages)
                           + inspect.getsource(build_deb) + inspect.getsource(_unit))
    stamp = cache.name
    if force or not up_to_date(stamp, digest, [cache]) or not any(cache.glob("*.deb")):
        t = time.monotonic()
        fresh_dir(cache)
        for pkg in docker_packages(debian_root(engine), engine):
            build_deb(pkg, cache)
        mark_done(stamp, digest)
        log(f"docker-ce, docker-ce-cli {engine.docker}, containerd.io {engine.containerd} "
            f"debs: built in {time.monotonic() - t:.1f}s")
    return sorted(cache.glob("*.deb"))


def build(key: SigningKey, force: bool = False) -> None:
    for engine in ENGINES.values():
        build_repo(engine, key, force)


def build_repo(engine: Engine, key: SigningKey, force: bool = False) -> None:
    top = OUT_DIR / engine.subdir
    debs = docker_debs(engine, force)
    digest = inputs_digest(code=code_digest("dockerce"), key=key.fingerprint,
                           debs=[sha256_file(p) for p in debs], url=BASE_URL)
    dist = top / "dists" / SUITE
    if not force and up_to_date(engine.cache, digest, [dist / "InRelease", top / "gpg"]):
        log(f"Docker CE for Debian repo ({engine.subdir}, {engine.docker}): up to date")
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
    mark_done(engine.cache, digest)
    size = sum(p.stat().st_size for p in debs) // (1 << 20)
    log(f"Docker CE for Debian repo ({engine.subdir}, {engine.docker}): built in "
        f"{time.monotonic() - t:.1f}s ({size} MiB)")
