"""Signed repositories in a directory, as NVIDIA's network repositories are laid out, for the
``nvidia_driver_repo`` tests.

apt (``publish``): a flat repository, ``InRelease`` and ``Packages``/``Packages.gz`` beside
it; the index is written by hand (name, version, a fake file name: nothing is downloaded
from it), ``Release`` by the real ``apt-ftparchive``, ``InRelease`` clearsigned by the real
``gpg`` with a key made for the repository. dnf (``publish_rpm``): empty noarch packages built
by the real ``rpmbuild``, indexed by the real ``createrepo_c``, ``repomd.xml`` signed
(detached, armored) when asked.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _gpg(home: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["gpg", "--batch", "--homedir", str(home), *args],
                          check=True, capture_output=True, **kw)


def fingerprint_of(home: Path) -> str:
    out = _gpg(home, "--with-colons", "--list-secret-keys").stdout.decode()
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))


def make_key(home: Path, name: str = "test repository") -> str:
    """A signing key in GnuPG home ``home``; its fingerprint."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _gpg(home, "--passphrase", "", "--quick-gen-key", f"{name} <repo@gpuhost.invalid>",
         "ed25519", "sign", "never")
    return fingerprint_of(home)


def export_key(home: Path, dest: Path, armor: bool = True) -> Path:
    _gpg(home, "--yes", *(["--armor"] if armor else []), "--output", str(dest), "--export")
    return dest


def publish(root: Path, home: Path, packages: list[tuple[str, str]]) -> None:
    """Write ``root``'s index of ``packages`` ([(name, version)]) and sign it with ``home``'s key."""
    root.mkdir(parents=True, exist_ok=True)
    stanzas = [f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
               f"Filename: ./{name}_{version}_amd64.deb\nSize: 1\n"
               f"Description: stand-in for NVIDIA's {name}\n" for name, version in packages]
    index = "\n".join(stanzas).encode()
    (root / "Packages").write_bytes(index)
    (root / "Packages.gz").write_bytes(gzip.compress(index, mtime=0))
    release = subprocess.run(["apt-ftparchive", "release", "."], cwd=root, check=True,
                             capture_output=True, text=True).stdout
    (root / "Release").write_text(release)
    _gpg(home, "--yes", "--clearsign", "--output", str(root / "InRelease"), str(root / "Release"))


def stop_agent(home: Path) -> None:
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                   capture_output=True, check=False)


def cached(base: Path, name: str, packages: list[tuple], rpm: bool = False) -> dict:
    """A signed repository ``base/name`` holding ``packages`` (apt: [(name, version)]; with
    ``rpm``: a dnf repository of [(name, version, release)], metadata unsigned as NVIDIA's),
    built once and reused (built aside and renamed into place, so parallel test processes never
    see half of one): ``{"url": file:// URL, "key": path of the armored key, "fingerprint"}``."""
    target = base / name
    if not (target / "fingerprint").is_file():
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base))
        home = Path(tempfile.mkdtemp(prefix="gpuhost-netrepo-gnupg-"))
        try:
            make_key(home)
            if rpm:
                publish_rpm(work / "repo", None, packages)
            else:
                publish(work / "repo", home, packages)
            export_key(home, work / "repo" / "key.asc")
            (work / "repo" / "fingerprint").write_text(fingerprint_of(home))
            try:
                os.rename(work / "repo", target)
            except OSError:  # another process was first
                pass
        finally:
            stop_agent(home)
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    return {"url": f"file://{target}/", "key": str(target / "key.asc"),
            "fingerprint": (target / "fingerprint").read_text().strip()}


def _rpm(work: Path, name: str, version: str, release: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    spec = work / f"{name}-{version}.spec"
    spec.write_text(f"Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: stand-in\n"
                    "License: none\nBuildArch: noarch\n%description\nstand-in for NVIDIA's "
                    f"{name}\n%files\n")
    subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {work}", str(spec)],
                   check=True, capture_output=True)
    return next((work / "RPMS" / "noarch").glob(f"{name}-{version}-{release}*.rpm"))


def publish_rpm(root: Path, home: Path | None, packages: list[tuple[str, str, str]]) -> None:
    """``root`` as a dnf repository of ``packages`` ([(name, version, release)]), its
    ``repomd.xml`` signed with ``home``'s key (None: unsigned metadata, as NVIDIA's)."""
    work = root.parent / f".{root.name}-build"
    root.mkdir(parents=True, exist_ok=True)
    for name, version, release in packages:
        shutil.copy(_rpm(work, name, version, release), root)
    subprocess.run(["createrepo_c", "--general-compress-type=gz", str(root)], check=True,
                   capture_output=True)
    if home is not None:
        _gpg(home, "--yes", "--armor", "--detach-sign", "--output",
             str(root / "repodata/repomd.xml.asc"), str(root / "repodata/repomd.xml"))
    shutil.rmtree(work, ignore_errors=True)
