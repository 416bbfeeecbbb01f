"""containerd as the optional containerd role sees it, in one command (read only when
``containerd_nvidia_runtime`` is on: neither the deploy without it nor the audit pays it).

``pyinfra INVENTORY fact gpuhost.facts.containerd.ContainerdView``
"""

from __future__ import annotations

import re
import shlex

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

MARK = "@@gpuhost-containerd@@"


def config_flag(exec_start: str) -> str | None:
    """The ``--config``/``-c`` path in containerd.service's ExecStart (``systemctl show -p
    ExecStart --value``: ``{ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd -c X ;
    ... }``), None when the unit uses containerd's default."""
    found = re.search(r"argv\[\]=([^;]*)", exec_start or "")
    try:
        argv = shlex.split(found.group(1)) if found else []
    except ValueError:
        return None
    for i, arg in enumerate(argv):
        if arg in ("--config", "-c") and i + 1 < len(argv):
            return argv[i + 1]
        for prefix in ("--config=", "-c="):
            if arg.startswith(prefix):
                return arg[len(prefix):]
    return None


class ContainerdView(FactBase):
    """
    containerd's version and unit, its top-level config's text and the drop-in's sha256.

    .. code:: python

        {"installed": bool, "version": "containerd github.com/containerd/containerd 1.6.20~ds1 ...",
         "active": bool,
         "config_flag": "/path" | None,  # a --config/-c in containerd.service's ExecStart
         "config": str | None,           # the top-level config's text (None: no file)
         "drop_in_sha256": str | None}
    """

    @override
    def command(self, config: str, drop_in: str) -> StringCommand:
        def section(name: str) -> str:
            return f"echo '{MARK} {name}';"

        def show(path: str) -> list:
            return ["if test -e", QuoteString(path), "; then echo present; cat", QuoteString(path),
                    "; echo; fi;"]

        return StringCommand(
            section("version"), "containerd --version 2>/dev/null;",
            section("active"), "systemctl is-active containerd.service 2>/dev/null;",
            section("exec"), "systemctl show -p ExecStart --value containerd.service 2>/dev/null;",
            section("config"), *show(config),
            section("drop_in"), "if test -e", QuoteString(drop_in), "; then sha256sum",
            QuoteString(drop_in), "; fi;",
            "true",
        )

    @override
    def process(self, output: list[str]) -> dict:
        sections: dict[str, list[str]] = {}
        current = None
        for line in output:
            if line.startswith(MARK + " "):
                current = line[len(MARK) + 1:]
                sections[current] = []
            elif current is not None:
                sections[current].append(line)

        def file_text(lines: list[str]) -> str | None:
            if not lines or lines[0] != "present":
                return None
            body = lines[1:]
            if body and body[-1] == "":  # the echo after cat
                body = body[:-1]
            return "\n".join(body) + ("\n" if body else "")

        version = "\n".join(sections.get("version", [])).strip()
        digest = "".join(sections.get("drop_in", [])).split()
        exec_start = "\n".join(sections.get("exec", []))
        return {
            "installed": bool(version),
            "version": version or None,
            "active": "\n".join(sections.get("active", [])).strip() == "active",
            "config_flag": config_flag(exec_start),
            "config": file_text(sections.get("config", [])),
            "drop_in_sha256": digest[0] if digest else None,
        }
