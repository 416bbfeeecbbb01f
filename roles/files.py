"""Small managed files (config snippets, keys): one round trip when nothing changes.

pyinfra's ``files.put`` reads three or four facts per file (the file, its directory, its
checksum); a converged host pays them for every file on every run. ``config_file`` reads
one fact (sha256 and mode together) and, when the content differs, writes atomically:
upload beside the file, chmod, rename into place.
"""

from __future__ import annotations

import hashlib
from io import BytesIO

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, QuoteString, StringCommand, operation
from pyinfra.facts.files import FileContents

from gpuhost.facts.files import FileDigest
from gpuhost.facts.pyinfra_api import color_diff


@operation()
def config_file(dest: str, content: str | bytes, mode: str = "644", secret: bool = False):
    """
    A small file with exactly this content and mode, written atomically.

    + dest: path on the host
    + content: the file's content (text or bytes)
    + mode: octal permissions
    + secret: the content may hold credentials: never show it in ``--diff``
    """
    data = content.encode() if isinstance(content, str) else content
    digest = hashlib.sha256(data).hexdigest()
    current = host.get_fact(FileDigest, path=dest)
    if current and current["sha256"] == digest and current["mode"] == mode.lstrip("0"):
        host.noop(f"{dest} is up to date")
        return
    if current and current["sha256"] == digest:
        yield StringCommand("chmod", QuoteString(mode), QuoteString(dest))
        return
    if state.config.DIFF and secret:
        host.log(f"Will {'modify' if current else 'create'} {dest} (content not shown: "
                 "it may hold credentials)", logger.info)
    elif state.config.DIFF and isinstance(content, str):
        before = host.get_fact(FileContents, path=dest) if current else None
        host.log(f"Will {'modify' if current else 'create'} {dest}", logger.info)
        old = [line + "\n" for line in (before or [])]
        for line in color_diff(old, content.splitlines(keepends=True)):
            logger.info("  %s", line)
    yield from atomic_write(dest, data, mode)


def atomic_write(dest: str, data: bytes, mode: str, before_rename=lambda new: ()):
    """Commands that write ``data`` to ``dest`` atomically: upload beside it, chmod, run
    ``before_rename(new_path)``'s commands (checks, backups), rename into place."""
    directory = dest.rsplit("/", 1)[0] or "/"
    new = f"{dest}.gpuhost-new"
    yield StringCommand("mkdir -p", QuoteString(directory))
    yield FileUploadCommand(BytesIO(data), new, remote_temp_filename=host.get_temp_filename(new))
    yield StringCommand("chmod", QuoteString(mode), QuoteString(new))
    yield from before_rename(new)
    yield StringCommand("mv -f", QuoteString(new), QuoteString(dest))
