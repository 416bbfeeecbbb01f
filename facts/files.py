"""File facts for gpuhost's own managed files: one round trip per file.

``pyinfra INVENTORY fact gpuhost.facts.files.FileDigest path=/etc/docker/daemon.json``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override


class FileDigest(FactBase):
    """``{"sha256": str, "mode": "644"}`` of a regular file, or ``None`` when absent.

    Checksum and mode in one remote command, so an unchanged small file costs one round trip
    (``roles.files.config_file``).
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if test -f", QuoteString(path), "; then sha256sum", QuoteString(path),
            "| cut -d' ' -f1; stat -c %a", QuoteString(path), "; fi",
        )

    @override
    def process(self, output: list[str]) -> dict | None:
        if len(output) < 2:
            return None
        return {"sha256": output[0].strip(), "mode": output[1].strip()}


class RawFile(FactBase):
    """A file's exact text (``None`` when it does not exist); keeps line numbers intact.

    ``roles.daemon_json`` reads daemon.json with it so a JSON error names the line and
    column of the file as it is on the host.
    """

    @override
    def command(self, path: str) -> StringCommand:
        return StringCommand(
            "if test -e", QuoteString(path), "; then echo present; cat", QuoteString(path),
            "; fi",
        )

    @override
    def process(self, output: list[str]) -> str | None:
        if not output or output[0] != "present":
            return None
        return "\n".join(output[1:])
