"""apt's package sources as the host has them: one-line ``.list`` files and deb822
``.sources`` files, read back as entries (issue 13 item 8: Debian's ``contrib``).

``pyinfra INVENTORY fact gpuhost.facts.apt_sources.AptSources``
"""

from __future__ import annotations

import re

from pyinfra.api import FactBase
from typing_extensions import override

_FILE_MARK = "@@gpuhost-file@@ "
REDACTED = "<redacted-by-gpuhost>"
_OPTIONS = re.compile(r"^\[(?P<options>[^\]]*)\]\s*")


def _split_options(text: str) -> dict[str, str]:
    """``arch=amd64 signed-by=/usr/share/keyrings/x.gpg`` -> {"arch": ..., "signed-by": ...}."""
    options = {}
    for item in text.split():
        key, _, value = item.partition("=")
        options[key.strip().lower().rstrip("+-")] = value.strip()
    return options


def parse_one_line(path: str, text: str) -> list[dict]:
    """Entries of a one-line-style ``sources.list`` file (``deb [options] URI SUITE COMP...``);
    comments and ``deb-src`` lines are skipped."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("deb ") and not line.startswith("deb\t"):
            continue
        rest = line[3:].strip()
        options: dict[str, str] = {}
        match = _OPTIONS.match(rest)
        if match:
            options = _split_options(match.group("options"))
            rest = rest[match.end():]
        words = rest.split()
        if len(words) < 2:
            continue
        entries.append({"file": path, "format": "one-line", "uris": [words[0]],
                        "suites": [words[1]], "components": words[2:],
                        "signed_by": options.get("signed-by"), "enabled": True})
    return entries


def parse_deb822(path: str, text: str) -> list[dict]:
    """Entries of a deb822 ``.sources`` file (stanzas separated by blank lines; a field may
    continue on lines that start with a space, e.g. an inline ``Signed-By`` key)."""
    entries = []
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
                continue
            name, sep, value = line.partition(":")
            if not sep:
                continue
            key = name.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        entries.append({"file": path, "format": "deb822",
                        "uris": fields.get("uris", "").split(),
                        "suites": fields.get("suites", "").split(),
                        "components": fields.get("components", "").split(),
                        "signed_by": fields.get("signed-by") or None,
                        "enabled": fields.get("enabled", "yes").strip().lower() != "no"})
    return entries


def parse_apt_sources(output: str) -> list[dict]:
    """The fact's output (each file behind a marker line) -> entries, in file order."""
    entries: list[dict] = []
    path, lines = None, []

    def flush():
        if path is None:
            return
        text = "\n".join(lines)
        parse = parse_deb822 if path.endswith(".sources") else parse_one_line
        entries.extend(parse(path, text))

    for line in output.splitlines():
        if line.startswith(_FILE_MARK):
            flush()
            path, lines = line[len(_FILE_MARK):].strip(), []
        else:
            lines.append(line)
    flush()
    return entries


class AptSources(FactBase):
    """
    The ``deb`` entries of /etc/apt/sources.list and /etc/apt/sources.list.d/*.{list,sources}:

    .. code:: python

        [{"file": "/etc/apt/sources.list.d/debian.sources", "format": "deb822",
          "uris": ["http://deb.debian.org/debian"], "suites": ["bookworm", "bookworm-updates"],
          "components": ["main"], "signed_by": None | "/usr/share/keyrings/..." | "inline key",
          "enabled": True}]

    The user part of a URI that carries credentials reads ``<redacted-by-gpuhost>@``.
    """

    @override
    def command(self) -> str:
        # credentials in a URI (https://user:password@host/) never leave the host: pyinfra
        # prints fact output at -vvv
        return ("for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list "
                "/etc/apt/sources.list.d/*.sources; do test -f \"$f\" || continue; "
                f"echo \"{_FILE_MARK}$f\"; sed -E 's#://[^/@[:space:]]+@#://{REDACTED}@#g' \"$f\"; "
                "echo; done; true")

    @override
    def process(self, output: list[str]) -> list[dict]:
        return parse_apt_sources("\n".join(output))
