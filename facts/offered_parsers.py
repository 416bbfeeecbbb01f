"""The newest kernel a host's package manager offers, from what it already knows (pure: no
pyinfra, no I/O). The section is ``kernel_offered`` of ``facts.script``; it reads apt's lists
and dnf's metadata cache as they are (no download: ``apt-cache``, ``dnf -C``), so the answer is
as fresh as the host's last ``apt-get update`` / ``dnf makecache``.

Its output is one ``source apt`` or ``source dnf`` line, then:

- apt: ``apt-cache policy linux-image-R linux-headers-R`` for R, the newest release of the
  running kernel's shape (its name without digits: ``6.8.0-51-generic`` and ``6.8.0-71-generic``
  alike, not ``6.8.0-71-lowlatency``) among the ``linux-image-*`` names apt knows; nothing more
  when apt knows none. apt-cache's policy format (apt 2.x, ``LC_ALL=C``): a ``NAME:`` line,
  ``  Installed: VERSION|(none)``, ``  Candidate: VERSION|(none)``, the version table.
- dnf: ``dnf -C -q list --showduplicates kernel`` (``kernel-uek`` on a UEK kernel): rows of
  ``NAME.ARCH VERSION-RELEASE REPO`` (``@REPO``: installed), under ``Installed Packages`` /
  ``Available Packages`` headings; a long name puts the rest of its row on the next line.
  Without a metadata cache dnf prints an error instead.
"""

from __future__ import annotations

import re
from typing import Any

from gpuhost.facts.parser_contract import contract

_NUMBERS = re.compile(r"\d+")
_ROW = re.compile(r"^kernel(-uek)?\.[A-Za-z0-9_]+$")


def release_key(release: str) -> tuple[int, ...]:
    """Orders kernel releases of one flavour (the numbers in order)."""
    return tuple(int(n) for n in _NUMBERS.findall(release))


def _error(lines: list[str]) -> str | None:
    """The tool's error line (dnf: ``Error: ...``), else its first line; None: it said nothing."""
    said = [line.strip() for line in lines if line.strip()]
    return next((line for line in said if line.startswith(("Error", "E:"))), said[0] if said else None)


def _apt(lines: list[str]) -> dict[str, Any]:
    policy: dict[str, dict[str, str | None]] = {}
    name = None
    for line in lines:
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            name = line.rstrip()[:-1]
            policy[name] = {"installed": None, "candidate": None}
            continue
        key, sep, value = line.strip().partition(": ")
        if name and sep and key in ("Installed", "Candidate"):
            policy[name][key.lower()] = None if value.strip() == "(none)" else value.strip()
    images = [n for n in policy if n.startswith("linux-image-")]
    if not images:
        return {"newest": None, "installed": False, "headers": None, "error": _error(lines)}
    image = images[0]
    release = image.removeprefix("linux-image-")
    headers = policy.get(f"linux-headers-{release}") or {}
    return {"newest": release, "installed": policy[image]["installed"] is not None,
            "headers": ("installed" if headers.get("installed") else
                        "available" if headers.get("candidate") else "missing"),
            "error": None}


def _dnf(lines: list[str]) -> dict[str, Any]:
    tokens = " ".join(lines).split()  # a wrapped row is one row again
    rows, i = [], 0
    while i + 2 < len(tokens):
        name_arch, version, repo = tokens[i:i + 3]
        if _ROW.match(name_arch) and _NUMBERS.match(version):
            rows.append((f"{version}.{name_arch.rpartition('.')[2]}", repo.startswith("@")))
            i += 3
        else:
            i += 1  # headings, dnf's notes
    if not rows:
        return {"newest": None, "installed": False, "headers": None, "error": _error(lines)}
    newest = max(rows, key=lambda row: release_key(row[0]))[0]
    return {"newest": newest, "installed": any(r == newest and inst for r, inst in rows),
            "headers": None, "error": None}


@contract("the kernel_offered section (apt-cache policy or dnf list output)")
def parse_kernel_offered(text: str) -> dict[str, Any] | None:
    """``{"source": "apt"|"dnf", "newest": release (uname -r form) | None, "installed": bool,
    "headers": "installed"|"available"|"missing"|None (apt only), "error": first line of the
    tool's answer when it names no kernel}``; None: the section printed no source (neither
    apt nor dnf)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("source "):
        return None
    source = lines[0].split(None, 1)[1].strip()
    if source not in ("apt", "dnf"):
        raise ValueError(f"kernel_offered: unknown source {source!r} (want apt or dnf)")
    return {"source": source, **(_apt if source == "apt" else _dnf)(lines[1:])}
