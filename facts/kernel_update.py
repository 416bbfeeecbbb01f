"""What a kernel update reads from a host besides ``gpuhost.facts.host.GpuHostState``: one
fact, ``KernelCandidate`` (the decisions are in ``gpuhost.kernel_update``).

``pyinfra INVENTORY fact gpuhost.facts.kernel_update.KernelCandidate family=debian
meta=linux-headers-amd64 --json``
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from pyinfra.api import FactBase
from typing_extensions import override

_NAME = re.compile(r"[A-Za-z0-9._+{}-]+")
# one line per package: "pkg NAME installed|available|missing"
_APT_STATE = (
    'st() { if dpkg-query -W -f \'${Status}\' "$1" 2>/dev/null | grep -q " installed$"; then '
    'echo "pkg $1 installed"; elif apt-cache policy "$1" 2>/dev/null | '
    "grep -q 'Candidate: [0-9]'; then echo \"pkg $1 available\"; else echo \"pkg $1 missing\"; "
    "fi; };"
)
_RPM_STATE = (
    'st() { if rpm -q "$1" >/dev/null 2>&1; then echo "pkg $1 installed"; '
    'elif dnf -q repoquery --available "$1" 2>/dev/null | grep -q .; then '
    'echo "pkg $1 available"; else echo "pkg $1 missing"; fi; };'
)


def apt_command(meta: str, requested: str | None) -> str:
    """The newest kernel of the running flavour is the one its headers meta package
    (``linux-headers-amd64``, ``linux-headers-generic``...) depends on at its candidate
    version: ``apt-cache depends`` reads the candidate. ``requested``: that release instead."""
    if requested:
        target = f"t={shlex.quote(requested)};"
    else:
        target = (f"t=$(apt-cache depends --important {shlex.quote(meta)} 2>/dev/null | "
                  "sed -n 's/^ *Depends: linux-headers-//p' | grep -v '^[<]' | head -n 1);")
    return (f": gpuhost-kernel-candidate; {_APT_STATE} {target} echo \"target $t\"; "
            '[ -n "$t" ] || exit 0; '
            'for p in "linux-image-$t" "linux-image-$t-unsigned" "linux-headers-$t"; do st "$p"; '
            'done; [ -e "/boot/vmlinuz-$t" ] && echo "boot_image $t"; true')


def dnf_command(name: str, requested: str | None, devel: list[str]) -> str:
    """The newest ``name`` (``kernel`` or ``kernel-uek``) in the enabled repositories as
    ``uname -r`` prints it; ``devel``: its development packages, ``{}`` standing for the
    release."""
    if requested:
        target = f"t={shlex.quote(requested)};"
    else:
        target = ("t=$(dnf -q repoquery --available --latest-limit=1 "
                  f"--qf '%{{version}}-%{{release}}.%{{arch}}\\n' {shlex.quote(name)} "
                  "2>/dev/null | grep . | tail -n 1);")
    for package in [name, *devel]:  # names from gpuhost.distro's tables: no shell syntax
        if not _NAME.fullmatch(package):
            raise ValueError(f"not a package name: {package!r}")
    pkgs = " ".join(f'"{p.replace("{}", "$t")}"' for p in [f"{name}-{{}}", *devel])
    return (f": gpuhost-kernel-candidate; {_RPM_STATE} {target} echo \"target $t\"; "
            f'[ -n "$t" ] || exit 0; for p in {pkgs}; do st "$p"; done; '
            '[ -e "/boot/vmlinuz-$t" ] && echo "boot_image $t"; true')


def parse(lines: list[str]) -> dict[str, Any]:
    """``{"target": release | None, "packages": {name: installed|available|missing},
    "boot_image": bool}``."""
    result: dict[str, Any] = {"target": None, "packages": {}, "boot_image": False}
    for line in lines:
        key, _, value = line.strip().partition(" ")
        if key == "target":
            result["target"] = value.strip() or None
        elif key == "pkg":
            name, _, status = value.strip().rpartition(" ")
            if name:
                result["packages"][name] = status
        elif key == "boot_image":
            result["boot_image"] = True
    return result


class KernelCandidate(FactBase):
    """
    The kernel a kernel update would install and whether its packages are there.

    + family: ``debian`` or ``rhel``
    + meta: apt: the running flavour's headers meta package (``gpuhost.kernel_meta``)
    + package: dnf: ``kernel`` or ``kernel-uek`` (the running kernel's flavour)
    + devel: dnf: the development packages, ``{}`` for the release
    + requested: an exact release (``uname -r`` form) instead of the newest

    .. code:: python

        {"target": "6.1.0-57-amd64" | None,      # None: the repositories offer none
         "packages": {"linux-image-6.1.0-57-amd64": "installed" | "available" | "missing"},
         "boot_image": bool}                       # /boot/vmlinuz-<target> exists
    """

    @override
    def command(self, family: str, meta: str = "", package: str = "kernel",
                devel: tuple[str, ...] = (), requested: str | None = None) -> str:
        if family == "debian":
            return apt_command(meta, requested)
        return dnf_command(package, requested, list(devel))

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        return parse(output)
