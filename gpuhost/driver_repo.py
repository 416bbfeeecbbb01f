"""The driver from NVIDIA's network repository, or a site mirror of it (aptly, Artifactory,
Pulp): the ``nvidia_driver_repo`` setting, its check, and its verification on the controller.

NVIDIA's network repositories are flat apt repositories, one per distribution and
architecture: ``https://developer.download.nvidia.com/compute/cuda/repos/<tag>/x86_64/``,
used as ``deb [signed-by=KEYRING] URL /`` (NVIDIA's driver installation guide, "Network
Repository Installation"; NVIDIA's 26.04 driver container uses
``…/cuda/repos/ubuntu2604/${OS_ARCH}/``: NVIDIA/gpu-driver-container@bd20cb2
``ubuntu26.04/install.sh``). apt itself checks that the repository's ``InRelease`` is signed
by the key of ``signed-by`` and that the package index matches its hashes; gpuhost checks the
same on the controller before any host is changed, so a wrong key or an unreachable mirror is
one line while nothing has been touched (``verify``):

1. the key (a URL or a controller path) has the fingerprint the inventory gives;
2. ``<url>InRelease`` can be fetched and carries a valid signature of that key (``gpgv``);
3. the package index ``InRelease`` lists (``Packages.gz``, else ``Packages``) has the size
   and sha256 ``InRelease`` gives;
4. the index holds the driver's meta package at exactly ``nvidia_driver_version``.

The hosts then get the same key (``signed-by``) and the same apt pin as with the local repo
package (``roles/driver_repo.py``).

NVIDIA's dnf repositories (``…/cuda/repos/rhel<N>/x86_64/``) sign their packages, not their
metadata: NVIDIA's own ``cuda-rhel9.repo`` has ``gpgcheck=1`` and a ``gpgkey``, no
``repo_gpgcheck``. ``verify_rpm`` checks the key's fingerprint, ``repodata/repomd.xml``
(and its signature ``repomd.xml.asc`` where the mirror signs its metadata), the primary
index against the checksum ``repomd.xml`` gives, and the meta package at exactly the
driver's version; the hosts get ``gpgcheck=1`` with that key (``repo_gpgcheck=1`` too when
the metadata is signed), so dnf checks every package's signature, and the same version lock
or module stream as with the local repo package.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.checks import check_path, check_url, mask_url, show
from gpuhost.distro import DISTRO_TAGS

NVIDIA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/{tag}/x86_64/"
FINGERPRINT_RE = re.compile(r"^[0-9A-F]{40}$")
TIMEOUT = (10, 60)


class RepoError(RuntimeError):
    """The network repository could not be verified; the message is one line."""


def normalise_fingerprint(value: str) -> str:
    return re.sub(r"\s+", "", str(value)).upper()


def check_setting(key: str, value: Any) -> list[str]:
    """``nvidia_driver_repo``: ``{tag: {"url": URL, "key": URL or path, "fingerprint": 40 hex}}``."""
    if not isinstance(value, Mapping):
        return [f"{show(value)} is not a mapping of distro tag to {{url, key, fingerprint}}"]
    problems = []
    for tag, entry in value.items():
        if tag not in DISTRO_TAGS:
            problems.append(f"unknown distro tag {tag!r} (want {', '.join(DISTRO_TAGS)})")
            continue
        if not isinstance(entry, Mapping) or set(entry) != {"url", "key", "fingerprint"}:
            problems.append(f"[{tag}] {show(entry)} is not {{\"url\": URL, \"key\": URL or path, "
                            "\"fingerprint\": the key's 40-hex fingerprint}} (all three required)")
            continue
        problems += [f"[{tag}] url: {p}" for p in check_url(key, entry["url"])]
        if isinstance(entry["url"], str) and not entry["url"].endswith("/"):
            problems.append(f"[{tag}] url: {show(entry['url'])} must end with / (the directory "
                            f"of the repository, like NVIDIA's .../cuda/repos/{tag}/x86_64/)")
        location = entry["key"]
        if isinstance(location, str) and "://" in location and not location.startswith("file://"):
            problems += [f"[{tag}] key: {p}" for p in check_url(key, location)]
        else:
            problems += [f"[{tag}] key: {p}" for p in
                         check_path(key, str(location).removeprefix("file://")
                                    if isinstance(location, str) else location)]
        if not FINGERPRINT_RE.fullmatch(normalise_fingerprint(entry["fingerprint"])
                                        if isinstance(entry["fingerprint"], str) else ""):
            problems.append(f"[{tag}] fingerprint: {show(entry['fingerprint'])} is not a key "
                            "fingerprint (40 hex digits, as `gpg --show-keys` prints it)")
    return problems


def key_fingerprints(key: bytes) -> set[str]:
    """The primary-key fingerprints of an OpenPGP key (armored or binary)."""
    shown = subprocess.run(["gpg", "--show-keys", "--with-colons"], input=key,
                           capture_output=True, check=False).stdout.decode(errors="replace")
    fingerprints, primary = set(), False
    for line in shown.splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sub"):
            primary = fields[0] == "pub"
        elif fields[0] == "fpr" and primary:
            fingerprints.add(fields[9])
            primary = False
    return fingerprints


def check_key(key: bytes, fingerprint: str, shown: str) -> None:
    """RepoError unless ``key`` (from ``shown``) is the key of ``fingerprint``."""
    found = key_fingerprints(key)
    want = normalise_fingerprint(fingerprint)
    if want not in found:
        have = ", ".join(sorted(found)) or "none (not an OpenPGP key)"
        raise RepoError(f"the key {shown} has fingerprint(s) {have}, not the configured {want}: "
                        "refusing to trust it; check the key and fingerprint in "
                        "nvidia_driver_repo")


def _gpgv(key: bytes, signed: bytes, signature: bytes | None = None):
    """``gpgv`` of ``signed`` (clearsigned, or with a detached ``signature``) against ``key``."""
    with tempfile.TemporaryDirectory(prefix="gpuhost-repo-") as tmp:
        keyring = Path(tmp) / "key.gpg"
        dearmor = subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring)],
                                 input=key, capture_output=True, check=False)
        if dearmor.returncode != 0:  # already binary
            keyring.write_bytes(key)
        data = Path(tmp) / "data"
        data.write_bytes(signed)
        files = [str(data)]
        if signature is not None:
            (Path(tmp) / "data.asc").write_bytes(signature)
            files = [str(Path(tmp) / "data.asc"), str(data)]
        return subprocess.run(["gpgv", "--status-fd", "1", "--keyring", str(keyring), *files],
                              capture_output=True, check=False)


def _check_signature(result, fingerprint: str, what: str) -> None:
    status = result.stdout.decode(errors="replace")
    valid = [line.split()[-1] for line in status.splitlines() if line.startswith("[GNUPG:] VALIDSIG")]
    if result.returncode != 0 or normalise_fingerprint(fingerprint) not in valid:
        reason = next((line.split()[1] for line in status.splitlines()
                       if line.split()[1:2] and line.split()[1] in
                       ("BADSIG", "NO_PUBKEY", "ERRSIG", "EXPKEYSIG", "REVKEYSIG", "NODATA")),
                      "no valid signature")
        raise RepoError(f"{what} is not signed by the configured key "
                        f"{normalise_fingerprint(fingerprint)} (gpgv: {reason}): a wrong key, or "
                        "a mirror that re-signs with another key: give that key in "
                        "nvidia_driver_repo")


def signed_text(inrelease: bytes, key: bytes, fingerprint: str, url: str) -> str:
    """The signed content of a clearsigned ``InRelease``, after ``gpgv`` checked it is signed by
    the key of ``fingerprint``; RepoError otherwise."""
    _check_signature(_gpgv(key, inrelease), fingerprint, f"{mask_url(url)}InRelease")
    return _content(inrelease)


def _content(inrelease: bytes) -> str:
    """The text between the clearsign header and its signature (dash-escaping undone)."""
    text = inrelease.decode(errors="replace")
    body = text.split("\n\n", 1)[1] if "-----BEGIN PGP SIGNED MESSAGE-----" in text else text
    body = body.split("-----BEGIN PGP SIGNATURE-----", 1)[0]
    return "\n".join(line[2:] if line.startswith("- ") else line for line in body.splitlines())


def index_entries(release: str) -> dict[str, tuple[str, int]]:
    """``{file name: (sha256, size)}`` of the ``SHA256:`` field of a Release text."""
    entries, inside = {}, False
    for line in release.splitlines():
        if not line.startswith(" "):
            inside = line.strip() == "SHA256:"
            continue
        if inside:
            parts = line.split()
            if len(parts) == 3:
                entries[parts[2]] = (parts[0].lower(), int(parts[1]))
    return entries


def versions_of(packages_text: str, name: str) -> list[str]:
    """Every ``Version:`` of package ``name`` in a Packages index."""
    found = []
    for stanza in packages_text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Package") == name and "Version" in fields:
            found.append(fields["Version"])
    return found


def has_version(versions: list[str], version: str) -> bool:
    """Whether one of the Debian versions is upstream ``version`` (``[epoch:]version-rev``)."""
    return any(re.fullmatch(rf"(\d+:)?{re.escape(version)}(-.*)?", v) for v in versions)


@dataclass(frozen=True)
class Verified:
    """A verified network repository: its URL, the key its hosts trust, and (dnf) whether its
    metadata is signed."""

    url: str
    key: bytes
    signed_metadata: bool = True


def verify(url: str, key: bytes, fingerprint: str, version: str, meta: str, get,
           key_shown: str = "") -> Verified:
    """Check the repository at ``url`` on the controller (module docstring, steps 1-4);
    ``get(url) -> bytes`` fetches (raising RepoError with the reason); RepoError, one line,
    on any failure."""
    check_key(key, fingerprint, key_shown or "given")
    release = signed_text(get(url + "InRelease"), key, fingerprint, url)
    entries = index_entries(release)
    name = next((n for n in ("Packages.gz", "Packages") if n in entries), None)
    if name is None:
        raise RepoError(f"{mask_url(url)}InRelease lists no Packages index (a flat repository "
                        "has Packages or Packages.gz beside InRelease): check the URL")
    data = get(url + name)
    sha, size = entries[name]
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
        raise RepoError(f"{mask_url(url)}{name} does not match the sha256 its signed InRelease "
                        "gives (a mirror caught mid-sync?): try again once the mirror is whole")
    text = (gzip.decompress(data) if name.endswith(".gz") else data).decode(errors="replace")
    versions = versions_of(text, meta)
    if not has_version(versions, version):
        have = ", ".join(sorted(set(versions))[-5:]) or "none"
        raise RepoError(f"{mask_url(url)} has no {meta} at {version} (it has: {have}): mirror "
                        "that version, or set nvidia_driver_version to one it has")
    return Verified(url=url, key=key)


_REPO_NS = {"repo": "http://linux.duke.edu/metadata/repo"}
_COMMON_NS = "{http://linux.duke.edu/metadata/common}"


def _decompress(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".xz"):
        return lzma.decompress(data)
    if name.endswith(".xml"):
        return data
    raise RepoError(f"the primary index {name} is compressed in a way gpuhost cannot read "
                    "(gz, xz or none): have the mirror publish gz metadata")


def rpm_versions(primary: bytes, name: str) -> list[str]:
    """Every ``version`` of package ``name`` in a dnf primary index."""
    found = []
    for package in ET.fromstring(primary).iter(f"{_COMMON_NS}package"):
        if package.findtext(f"{_COMMON_NS}name") == name:
            version = package.find(f"{_COMMON_NS}version")
            if version is not None:
                found.append(f"{version.get('ver')}-{version.get('rel')}")
    return found


def verify_rpm(url: str, key: bytes, fingerprint: str, version: str, meta: str, get,
               key_shown: str = "") -> Verified:
    """The dnf counterpart of ``verify`` (module docstring); ``get(url, optional=False)``
    returns None for a missing optional file."""
    check_key(key, fingerprint, key_shown or "given")
    repomd = get(url + "repodata/repomd.xml")
    signature = get(url + "repodata/repomd.xml.asc", optional=True)
    if signature is not None:
        _check_signature(_gpgv(key, repomd, signature), fingerprint,
                         f"{mask_url(url)}repodata/repomd.xml")
    try:
        primary = ET.fromstring(repomd).find("repo:data[@type='primary']", _REPO_NS)
        href = primary.find("repo:location", _REPO_NS).get("href")
        checksum = primary.find("repo:checksum", _REPO_NS)
        algorithm, digest = checksum.get("type"), checksum.text.strip().lower()
    except (ET.ParseError, AttributeError):
        raise RepoError(f"{mask_url(url)}repodata/repomd.xml names no primary index: check "
                        "the URL (the directory that holds repodata/)") from None
    data = get(url + href)
    if hashlib.new(algorithm, data).hexdigest() != digest:
        raise RepoError(f"{mask_url(url)}{href} does not match the {algorithm} repomd.xml gives "
                        "(a mirror caught mid-sync?): try again once the mirror is whole")
    versions = rpm_versions(_decompress(href, data), meta)
    if not has_version(versions, version):
        have = ", ".join(sorted(set(versions))[-5:]) or "none"
        raise RepoError(f"{mask_url(url)} has no {meta} at {version} (it has: {have}): mirror "
                        "that version, or set nvidia_driver_version to one it has")
    return Verified(url=url, key=key, signed_metadata=signature is not None)


def armored(key: bytes) -> bytes:
    """``key`` ASCII-armored (rpm --import and dnf's gpgkey want it so)."""
    if key.lstrip().startswith(b"-----BEGIN PGP"):
        return key
    with tempfile.TemporaryDirectory(prefix="gpuhost-key-") as home:
        subprocess.run(["gpg", "--batch", "--homedir", home, "--import"], input=key,
                       capture_output=True, check=True)
        return subprocess.run(["gpg", "--batch", "--homedir", home, "--armor", "--export"],
                              capture_output=True, check=True).stdout


def rpm_repo_file(url: str, signed_metadata: bool, key_file: str) -> str:
    """gpuhost's ``.repo`` of the driver's network repository: packages always checked
    (``gpgcheck=1``), metadata too where the mirror signs it."""
    return ("# Managed by gpuhost (nvidia_driver_repo): NVIDIA's network repository or your\n"
            "# mirror of it; the driver's version is locked as with the local repo package.\n"
            "[gpuhost-nvidia-driver]\nname=NVIDIA driver (gpuhost)\n"
            f"baseurl={url}\nenabled=1\ngpgcheck=1\n"
            f"repo_gpgcheck={1 if signed_metadata else 0}\n"
            f"gpgkey=file://{key_file}\n")
