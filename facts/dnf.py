"""/etc/dnf/dnf.conf without the value of its ``[main]`` ``proxy=`` line (which may hold a
password: pyinfra prints fact output at ``-vvv``).

``pyinfra INVENTORY fact gpuhost.facts.dnf.DnfConfRedacted``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

REDACTED = "<redacted by gpuhost>"


class DnfConfRedacted(FactBase):
    """The file's text with ``proxy=`` in ``[main]`` replaced by ``proxy=<redacted by gpuhost>``
    (``None`` when the file does not exist). Every other line as it is."""

    @override
    def command(self, path: str = "/etc/dnf/dnf.conf") -> StringCommand:
        program = (
            "/^[[:space:]]*\\[/ { s = $0; gsub(/[[:space:]]/, \"\", s) } "
            "s == \"[main]\" && /^[[:space:]]*proxy[[:space:]]*=/ { print \"proxy=" + REDACTED
            + "\"; next } { print }"
        )
        return StringCommand("if test -f", QuoteString(path), "; then echo present; awk",
                             QuoteString(program), QuoteString(path), "; fi")

    @override
    def process(self, output: list[str]) -> str | None:
        if not output or output[0] != "present":
            return None
        return "\n".join(output[1:])
