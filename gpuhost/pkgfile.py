"""Name and version of a package file (.deb or .rpm), read on the controller (pure Python,
no pyinfra, no dpkg or rpm needed).

``roles.repos.local_packages`` installs local package files only when the host lacks that
exact package version: package managers given file paths never match them against the
installed packages, so without this an offline host never reaches zero changes.

Formats: a .deb is an ar archive whose ``control.tar.{gz,xz,zst}`` holds ``./control``
(deb(5), deb-control(5)); an .rpm is a 96-byte lead, a signature header padded to 8 bytes,
then the main header whose index entries give NAME (1000), VERSION (1001), RELEASE (1002),
EPOCH (1003) and ARCH (1022) (RPM's file format, "Package File Format" in rpm.org's docs).
"""

from __future__ import annotations

import gzip
import io
import lzma
import shutil
import struct
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path


class PackageFileError(ValueError):
    """Not a readable .deb or .rpm; the message names the file."""


@dataclass(frozen=True)
class PackageFile:
    name: str
    version: str  # as the host's package database shows it: deb [epoch:]upstream-revision,
    #               rpm version-release (pyinfra's RpmPackages has no epoch either)
    arch: str


def read(path: str | Path) -> PackageFile:
    path = Path(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(8)
    except OSError as error:
        raise PackageFileError(f"{path}: cannot read it: {error.strerror}") from error
    if head == b"!<arch>\n":
        return read_deb(path)
    if head[:4] == b"\xed\xab\xee\xdb":
        return read_rpm(path)
    raise PackageFileError(f"{path}: neither a .deb (ar archive) nor an .rpm (no RPM lead)")


def read_deb(path: Path) -> PackageFile:
    data = path.read_bytes()
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset:offset + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError as error:
            raise PackageFileError(f"{path}: broken ar member header") from error
        body = data[offset + 60:offset + 60 + size]
        if name.startswith("control.tar"):
            return _deb_control(path, name, body)
        offset += 60 + size + (size % 2)
    raise PackageFileError(f"{path}: no control.tar member: not a Debian package")


def _deb_control(path: Path, member: str, body: bytes) -> PackageFile:
    if member.endswith(".gz"):
        raw = gzip.decompress(body)
    elif member.endswith(".xz"):
        raw = lzma.decompress(body)
    elif member == "control.tar":
        raw = body
    elif shutil.which("dpkg-deb"):  # zstd (Ubuntu's packages): Python 3.11 cannot read it
        fields = subprocess.run(["dpkg-deb", "--field", str(path), "Package", "Version",
                                 "Architecture"], capture_output=True, text=True, check=False)
        if fields.returncode != 0:
            raise PackageFileError(f"{path}: dpkg-deb cannot read it: {fields.stderr.strip()}")
        return _from_control(path, fields.stdout)
    else:
        raise PackageFileError(f"{path}: {member} needs dpkg-deb on the controller "
                               "(apt-get install dpkg)")
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for entry in tar.getmembers():
            if entry.name in ("./control", "control"):
                handle = tar.extractfile(entry)
                if handle is not None:
                    return _from_control(path, handle.read().decode("utf-8", "replace"))
    raise PackageFileError(f"{path}: {member} has no control file")


def _from_control(path: Path, text: str) -> PackageFile:
    fields = {}
    for line in text.splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    if not fields.get("Package") or not fields.get("Version"):
        raise PackageFileError(f"{path}: its control file has no Package or Version")
    return PackageFile(fields["Package"], fields["Version"], fields.get("Architecture", ""))


_RPM_HEADER_MAGIC = b"\x8e\xad\xe8\x01"


def _rpm_header(data: bytes, offset: int, path: Path) -> tuple[dict[int, object], int]:
    if data[offset:offset + 4] != _RPM_HEADER_MAGIC:
        raise PackageFileError(f"{path}: no RPM header at byte {offset}")
    count, size = struct.unpack(">II", data[offset + 8:offset + 16])
    index = offset + 16
    store = index + 16 * count
    values: dict[int, object] = {}
    for n in range(count):
        tag, kind, at, items = struct.unpack(">IIII", data[index + 16 * n:index + 16 * n + 16])
        if kind == 4:  # INT32
            values[tag] = struct.unpack(">I", data[store + at:store + at + 4])[0]
        elif kind in (6, 9):  # STRING, I18NSTRING: first string
            end = data.index(b"\0", store + at)
            values[tag] = data[store + at:end].decode("utf-8", "replace")
    return values, store + size


def read_rpm(path: Path) -> PackageFile:
    data = path.read_bytes()
    try:
        _, end = _rpm_header(data, 96, path)  # the signature header
        end += (8 - end % 8) % 8
        tags, _ = _rpm_header(data, end, path)
    except (struct.error, ValueError) as error:
        if isinstance(error, PackageFileError):
            raise
        raise PackageFileError(f"{path}: truncated RPM header") from error
    name, version, release = tags.get(1000), tags.get(1001), tags.get(1002)
    if not (isinstance(name, str) and isinstance(version, str) and isinstance(release, str)):
        raise PackageFileError(f"{path}: its RPM header has no name, version or release")
    arch = tags.get(1022)
    return PackageFile(name, f"{version}-{release}", arch if isinstance(arch, str) else "")
