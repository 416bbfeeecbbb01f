"""Reading the sections of ``facts.script`` back: exit status, output, installed packages.

Pure (no pyinfra, no I/O). ``Sections`` is what ``facts.parsers.split_sections`` returns:
section name -> ``{"rc": int, "out": str}``. The exit status conventions are those of
``facts.script``.
"""

from __future__ import annotations

import re
from typing import Any

from gpuhost.facts import parsers

Sections = dict[str, dict[str, Any]]

ABSENT = 3  # section exit status: file absent
NOT_INSTALLED = 127  # section exit status: tool absent
TIMED_OUT = 124


def section(sections: Sections, name: str) -> tuple[int | None, str]:
    """``(rc, output)`` of a section; ``(None, "")`` when the script did not run it."""
    entry = sections.get(name)
    if entry is None:
        return None, ""
    return entry["rc"], entry["out"]


def ok(sections: Sections, name: str) -> str | None:
    """The section's output when it ran and succeeded, else None."""
    rc, out = section(sections, name)
    return out if rc == 0 else None


def upstream_version(package_version: str) -> str:
    """``570.172.08-0ubuntu1`` / ``3:570.172.08-1.el9`` -> ``570.172.08``."""
    version = package_version.split(":", 1)[-1]
    return version.split("-", 1)[0]


def packages(sections: Sections) -> dict[str, dict[str, Any]]:
    """Installed packages of interest, from dpkg or rpm: name -> {version, held}."""
    found: dict[str, dict[str, Any]] = {}
    dpkg = ok(sections, "dpkg")
    if dpkg:
        found.update(parsers.parse_dpkg_query(dpkg))
    rpm = ok(sections, "rpm")
    if rpm:
        found.update(parsers.parse_rpm_query(rpm))
    return found


_RPM_ARCH = re.compile(r"\.(x86_64|aarch64|noarch|i686)$")


def installed_specs(sections: Sections) -> set[str]:
    """Every installed package as ``name`` and, for rpm, ``name-version-release`` too.

    rpm keeps several versions of kernel packages side by side, so the headers of exactly
    the running kernel are looked up by their full name-version-release.
    """
    specs = set(packages(sections))
    for line in (ok(sections, "rpm") or "").splitlines():
        name, _, evr = line.partition("\t")
        if name and evr:
            specs.add(f"{name.strip()}-{evr.strip().split(':', 1)[-1]}")
    return specs


def is_installed(package: str, specs: set[str]) -> bool:
    """Whether ``package`` (an rpm name may end in its arch) is among ``installed_specs``."""
    return package in specs or _RPM_ARCH.sub("", package) in specs
