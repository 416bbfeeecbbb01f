"""Fetch NVIDIA packages on the controller: download once, verify sha256, cache.

``fetch({"url": ..., "sha256": ...}, cache_dir)`` returns the path of a verified file in
``cache_dir/<sha256>/<file name>``. Downloads go through a ``requests`` Session with
urllib3 retries, stream to a temporary file beside the target and are renamed into place
only after the digest matches, so the cache never holds a bad or partial file.
``{"path": ...}`` sources and ``file://`` URLs are copied and verified the same way.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

import click
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from gpuhost.settings import SHA256_RE, is_local_source, mask_url, on_mirror

CHUNK = 1024 * 1024
PROGRESS_MIN_BYTES = 8 * CHUNK  # smaller files get no progress bar
RETRY_STATUS = (429, 500, 502, 503, 504)
TIMEOUT = (10, 60)  # connect, read (seconds between bytes)

_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


class ArtifactError(RuntimeError):
    """An artifact could not be fetched or did not match its checksum."""


def make_session(*, retries: int = 5, backoff_factor: float = 1.0,
                 proxy: str | None = None) -> requests.Session:
    """A Session that retries connection errors, 429 and 5xx ``retries`` times with
    exponential backoff (honouring Retry-After), through ``proxy`` when given."""
    retry = Retry(total=retries, connect=retries, read=retries, status=retries, other=0,
                  backoff_factor=backoff_factor, backoff_max=60, status_forcelist=RETRY_STATUS,
                  allowed_methods=frozenset({"GET", "HEAD"}), respect_retry_after_header=True,
                  raise_on_status=True)
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    if proxy:
        session.proxies = {"http": proxy, "https": proxy}
    return session


def _check_source(source: Mapping) -> tuple[str, str]:
    if not isinstance(source, Mapping):
        raise ArtifactError(f"artifact source {source!r} is not a mapping with url or path and sha256")
    if ("url" in source) == ("path" in source):
        raise ArtifactError("artifact source needs exactly one of url or path (plus sha256)")
    sha = source.get("sha256")
    if not isinstance(sha, str) or not SHA256_RE.fullmatch(sha):
        raise ArtifactError(f"artifact source sha256 {sha!r} is not 64 hex digits")
    return str(source.get("url") or source.get("path")), sha.lower()


def _file_name(location: str) -> str:
    path = urlsplit(location).path if "://" in location else location
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    name = re.sub(r"[^A-Za-z0-9._+~-]", "_", name).lstrip(".")
    return name or "artifact"


def cache_path(source: Mapping, cache_dir: str | os.PathLike) -> Path:
    """Where ``fetch`` keeps ``source``: ``cache_dir/<sha256>/<file name>``."""
    location, sha = _check_source(source)
    return Path(os.path.expanduser(str(cache_dir))) / sha / _file_name(location)


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _cached_ok(path: Path, sha: str) -> bool:
    """Re-verify a cached file; the full hash is skipped when this process already hashed
    the same file (same size and mtime)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    key = (str(path), st.st_size, st.st_mtime_ns)
    if _verified.get(key) != sha:
        if sha256_file(path) != sha:
            return False
        _verified[key] = sha
    return True


def _say(message: str, progress: bool) -> None:
    if progress:
        click.echo(f"gpuhost: {message}", err=True)


def _stream_to(chunks, total: int | None, dest_dir: Path, label: str, progress: bool) -> tuple[Path, str]:
    """Write ``chunks`` to a temporary file in ``dest_dir``; return (temp path, sha256)."""
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=dest_dir)
    bar_wanted = progress and sys.stderr.isatty() and (total or 0) >= PROGRESS_MIN_BYTES
    try:
        with os.fdopen(fd, "wb") as out:
            if bar_wanted:
                with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
                    for chunk in chunks:
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
            else:
                for chunk in chunks:
                    out.write(chunk)
                    digest.update(chunk)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp), digest.hexdigest()


def _download(url: str, session: requests.Session, dest_dir: Path, label: str, progress: bool):
    shown = mask_url(url)
    try:
        with session.get(url, stream=True, timeout=TIMEOUT) as response:
            if response.status_code >= 400:
                raise ArtifactError(f"download of {shown} failed: HTTP {response.status_code} "
                                    f"{response.reason}: check the URL in nvidia_local_repo")
            size = int(response.headers.get("Content-Length") or 0) or None
            return _stream_to(response.iter_content(CHUNK), size, dest_dir, label, progress)
    except requests.exceptions.RetryError as exc:
        raise ArtifactError(f"download of {shown} failed after retries ({_reason(exc)}); "
                            "the server keeps answering with an error: try again later") from None
    except requests.RequestException as exc:
        raise ArtifactError(f"download of {shown} failed: {_reason(exc)}; check the network, "
                            "http_proxy, or use a local path / offline mirror") from None


def _reason(exc: Exception) -> str:
    """The innermost reason of a requests/urllib3 error, with URLs masked."""
    inner = exc.args[0] if exc.args else exc
    text = str(getattr(inner, "reason", None) or inner)
    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", lambda m: mask_url(m.group()), text)


def _copy(location: str, dest_dir: Path, label: str, progress: bool):
    path = Path(unquote(urlsplit(location).path) if location.startswith("file://") else location).expanduser()
    if not path.is_file():
        raise ArtifactError(f"artifact {path} does not exist or is not a file: check nvidia_local_repo")
    with open(path, "rb") as f:
        return _stream_to(iter(lambda: f.read(CHUNK), b""), path.stat().st_size, dest_dir, label, progress)


def fetch(source: Mapping, cache_dir: str | os.PathLike, *, proxy: str | None = None,
          offline: bool = False, progress: bool = True, mirror_urls: Sequence[str] = (),
          session: requests.Session | None = None, backoff_factor: float = 1.0) -> Path:
    """Return the path of the verified artifact ``source`` in ``cache_dir``.

    + source: ``{"url": ..., "sha256": ...}`` or ``{"path": ..., "sha256": ...}``
    + cache_dir: controller cache (``~`` expanded); files live in ``<sha256>/<name>``
    + proxy: HTTP(S) proxy URL for the download
    + offline: refuse http(s) URLs that are not under ``mirror_urls``
    + progress: one line per file on stderr, plus a progress bar for large files when
      stderr is a TTY; False prints nothing
    + session / backoff_factor: a caller's Session (then ``proxy`` is not applied) and the
      retry backoff of the default one

    A cached file is re-verified and reused without any request. A digest mismatch
    removes the temporary file and raises ArtifactError with both digests and the URL
    (credentials masked).
    """
    location, sha = _check_source(source)
    target = cache_path(source, cache_dir)
    shown = mask_url(location) if "://" in location else location
    if _cached_ok(target, sha):
        _say(f"{target.name}: cached, sha256 ok", progress)
        return target
    if target.exists():
        _say(f"cached {target} does not match its sha256, fetching it again", progress)
        target.unlink()
    local = is_local_source(location)
    if offline and not local and not on_mirror(location, mirror_urls):
        raise ArtifactError(f"offline: refusing to download {shown}; use a local path, a file:// URL "
                            "or a URL under offline_mirror_urls")
    target.parent.mkdir(parents=True, exist_ok=True)
    label = f"gpuhost: {target.name}"
    if local:
        tmp, actual = _copy(location, target.parent, label, progress)
    else:
        own = session is None
        session = session or make_session(proxy=proxy, backoff_factor=backoff_factor)
        try:
            tmp, actual = _download(location, session, target.parent, label, progress)
        finally:
            if own:
                session.close()
    if actual != sha:
        tmp.unlink(missing_ok=True)
        raise ArtifactError(f"sha256 mismatch for {shown}: expected {sha}, got {actual}; the file was "
                            "discarded: check the sha256 in nvidia_local_repo or the mirror's copy")
    os.replace(tmp, target)
    os.chmod(target, 0o644)
    st = target.stat()
    _verified[(str(target), st.st_size, st.st_mtime_ns)] = sha
    how = "copied from" if local else "downloaded from"
    _say(f"{target.name}: {how} {shown} ({st.st_size / CHUNK:.1f} MiB), sha256 ok", progress)
    return target


def clean_partial(cache_dir: str | os.PathLike) -> int:
    """Remove leftover ``.part-*`` files of interrupted fetches; return how many."""
    parts = list(Path(os.path.expanduser(str(cache_dir))).glob("*/.part-*"))
    for part in parts:
        part.unlink(missing_ok=True)
    return len(parts)
