"""One package from Debian's archive, fetched by URL and checked as apt checks it: the
suite's InRelease by gpgv against this machine's debian-archive-keyring, the Packages index
against InRelease's SHA256, the .deb against the index's SHA256 (the way dockerce.py takes
trixie's docker.io). Used for the sandbox's real dkms: trixie's for the Oracle Linux hosts'
`dkms` RPM (sandbox/README.md, "Real dkms").
"""

from __future__ import annotations

import hashlib
import lzma
import subprocess
from pathlib import Path

from .common import BuildError
from .dockerce import DEBIAN_MIRROR, KEYRING, _get, _stanzas


def _index_digest(release: str, name: str) -> str | None:
    in_sha256 = False
    for line in release.splitlines():
        if line.startswith("SHA256:"):
            in_sha256 = True
        elif in_sha256 and line.startswith(" "):
            digest, _, entry = line.split()
            if entry == name:
                return digest
        else:
            in_sha256 = False
    return None


def fetch_deb(suite: str, package: str, dest: Path) -> tuple[Path, str]:
    """(path of the .deb in DEST, its Debian version): the newest ``package`` of ``suite``
    (main, binary-amd64, which lists Architecture: all packages too), verified."""
    dest.mkdir(parents=True, exist_ok=True)
    release = _get(f"{DEBIAN_MIRROR}/dists/{suite}/InRelease")
    (dest / f"{suite}.InRelease").write_bytes(release)
    proc = subprocess.run(["gpgv", "--keyring", KEYRING, str(dest / f"{suite}.InRelease")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{suite} InRelease: bad signature ({KEYRING}):\n{proc.stderr[-1500:]}")
    index = "main/binary-amd64/Packages.xz"
    want = _index_digest(release.decode(), index)
    if want is None:
        raise BuildError(f"{suite} InRelease lists no {index}")
    packages_xz = _get(f"{DEBIAN_MIRROR}/dists/{suite}/{index}")
    if hashlib.sha256(packages_xz).hexdigest() != want:
        raise BuildError(f"{suite} {index}: SHA256 differs from InRelease")
    found = [st for st in _stanzas(lzma.decompress(packages_xz).decode())
             if st.get("Package") == package]
    if not found:
        raise BuildError(f"{suite} has no package {package}")
    newest = found[-1]   # a suite's index holds one version of a package
    data = _get(f"{DEBIAN_MIRROR}/{newest['Filename']}")
    if hashlib.sha256(data).hexdigest() != newest["SHA256"]:
        raise BuildError(f"{newest['Filename']}: SHA256 differs from {suite}'s Packages index")
    out = dest / Path(newest["Filename"]).name
    out.write_bytes(data)
    return out, newest["Version"]

