"""Pure parsers of the boot chain: the boot loader's default entry, the enrolled MOKs, DKMS's
build log (no pyinfra, no I/O). Their sections are ``boot_loader``, ``mok`` and ``dkms_log``
of ``facts.script``.
"""

from __future__ import annotations

import re
from typing import Any

_ENTRY = re.compile(
    r"""(menuentry|submenu)\s+['"]([^'"]*)['"].*?(?:\$menuentry_id_option\s+['"]([^'"]*)['"])?\s*\{""")
_LINUX = re.compile(r"linux(?:efi)?\s+\S*vmlinuz-(\S+)")


def grub_entries(lines: list[str], nested: bool = False) -> list[tuple[str, str, str | None]]:
    """(title, id, kernel release) of the top-level menu entries of a grub.cfg (submenus
    count as one entry, as GRUB numbers them; their release is their first entry's), or
    with ``nested`` every menuentry at any depth."""
    entries: list[list] = []
    stack: list[list] = []
    for raw in lines:
        s = raw.strip()
        m = _ENTRY.match(s)
        if m:
            entry = [m.group(2), m.group(3) or "", None, m.group(1)]
            if not stack or nested:
                entries.append(entry)
            stack.append(entry)
            continue
        k = _LINUX.match(s)
        if k:
            for entry in stack:
                if entry[2] is None:
                    entry[2] = k.group(1)
        if s.endswith("}") and stack:
            stack.pop()
    return [(t, i, r) for t, i, r, kind in entries if not nested or kind == "menuentry"]


def parse_boot_loader(text: str) -> dict[str, Any]:
    """The ``boot_loader`` section: which kernel the next boot starts.

    ``{"default_kernel": "6.1.0-57-amd64" | None, "source": "grubby" | "grub" | None,
    "kernels": [releases with /boot/vmlinuz-*], "modules": {release: headers installed}}``.
    EL: ``grubby --default-kernel``. Debian/Ubuntu: GRUB_DEFAULT of /etc/default/grub (a
    number: that top-level entry of /boot/grub/grub.cfg; ``saved``: grubenv's saved_entry; a
    title or id, ``>`` paths by their last part). None when no boot loader can be read.
    """
    grubby = None
    grub_default = "0"
    saved = None
    cfg: list[str] = []
    kernels: list[str] = []
    modules: dict[str, bool] = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        if key == "grubby":
            m = re.search(r"vmlinuz-(\S+)", value)
            grubby = m.group(1) if m else None
        elif key == "grub_default":
            grub_default = value.strip().strip("'\"") or "0"
        elif key == "saved_entry":
            saved = value.strip()
        elif key == "cfg":
            cfg.append(value)
        elif key == "vmlinuz":
            kernels.append(value.strip())
        elif key == "modules":
            rel, _, flag = value.strip().partition(" ")
            modules[rel] = flag == "headers"
    default, source = None, None
    if grubby:
        default, source = grubby, "grubby"
    elif cfg:
        entries = grub_entries(cfg)
        want = saved if grub_default == "saved" else grub_default
        if want is None:
            want = "0"
        if want.isdigit():
            index = int(want)
            default = entries[index][2] if index < len(entries) else None
        else:
            last = want.split(">")[-1]
            default = next((rel for title, ident, rel in grub_entries(cfg, nested=True)
                            if last in (title, ident)), None)
        source = "grub" if default else None
    return {"default_kernel": default, "source": source, "kernels": kernels, "modules": modules}


def parse_mok_fingerprints(text: str) -> list[str]:
    """SHA1 fingerprints (lower case, colon separated) of ``mokutil --list-enrolled``."""
    found = re.findall(r"SHA1 Fingerprint:\s*([0-9A-Fa-f:]+)", text)
    return [f.lower() for f in found]


def parse_dkms_logs(text: str) -> dict[str, str]:
    """``== PATH`` headers followed by a log's last lines: path -> text."""
    logs: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("== "):
            current = line[3:].strip()
            logs[current] = []
        elif current is not None:
            logs[current].append(line)
    return {path: "\n".join(lines) for path, lines in logs.items()}
