"""Enterprise Linux packaging facts: repositories, version locks, RHEL's registration.

``pyinfra INVENTORY fact gpuhost.facts.el.ElPackaging --json``
``pyinfra INVENTORY fact gpuhost.facts.el.RhsmRegistered``
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.el_packages import VERSIONLOCK_LIST, VERSIONLOCK_PLUGIN

_TRUE = {"1", "yes", "true", "on"}


class ElPackaging(FactBase):
    """
    dnf's repositories and the versionlock state of an EL host, read in one command:

    .. code:: python

        {
            "repos": {"ol8_baseos_latest": True, "ol8_codeready_builder": False, ...},
            "packages": {"oracle-epel-release-el8": "1.0-5.el8", ...},  # see below
            "nvidia": {"nvidia-open": "3:570.172.08-1.el8", ...},  # installed *nvidia*
            "versionlock_plugin": bool,
            "locks": ["nvidia-open-3:570.172.08-1.el8.*", ...],   # versionlock.list
        }

    ``repos``: every section of /etc/yum.repos.d/*.repo and whether it is enabled (dnf's
    default: enabled). ``packages``: the installed ones among the EPEL release packages
    (Oracle's ``oracle-epel-release-elN``, Fedora's ``epel-release``), dkms and the
    versionlock plugin.
    """

    requires_command = "rpm"

    @override
    def default(self) -> dict[str, Any]:
        return parse_el_packaging([])

    @override
    def command(self) -> str:
        return (
            "for f in /etc/yum.repos.d/*.repo; do test -r \"$f\" && sed -n "
            "'s/^[[:space:]]*\\[\\([^]]*\\)\\][[:space:]]*$/repo \\1/p; "
            "s/^[[:space:]]*enabled[[:space:]]*=[[:space:]]*\\([^[:space:]]*\\).*$/enabled \\1/p'"
            " \"$f\"; done; "
            "rpm -qa --qf 'rpm %{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n' '*nvidia*' "
            f"'oracle-epel-release-el*' epel-release '{VERSIONLOCK_PLUGIN}' dkms 2>/dev/null; "
            f"if test -r {VERSIONLOCK_LIST}; then sed -n 's/^\\([^#[:space:]].*\\)$/lock \\1/p' "
            f"{VERSIONLOCK_LIST}; fi; true"
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        return parse_el_packaging(output)


def parse_el_packaging(lines: list[str]) -> dict[str, Any]:
    repos: dict[str, bool] = {}
    current = None
    nvidia: dict[str, str] = {}
    other: dict[str, str] = {}
    locks: list[str] = []
    for line in lines:
        kind, _, rest = line.strip().partition(" ")
        if kind == "repo" and rest:
            current = rest.strip()
            repos[current] = True
        elif kind == "enabled" and current is not None:
            repos[current] = rest.strip().lower() in _TRUE
        elif kind == "rpm" and "\t" in rest:
            name, evr = rest.split("\t", 1)
            evr = evr.replace("(none):", "")
            (nvidia if "nvidia" in name else other)[name] = evr
        elif kind == "lock" and rest:
            locks.append(rest.strip())
    return {"repos": repos, "packages": other, "nvidia": nvidia,
            "versionlock_plugin": VERSIONLOCK_PLUGIN in other, "locks": locks}


class RhsmRegistered(FactBase):
    """
    Whether a RHEL host is registered with a subscription service: True/False from
    ``subscription-manager identity`` (exit 0 registered, 1 "This system is not yet
    registered"), None when subscription-manager is not installed.
    """

    @override
    def command(self) -> str:
        return ("if command -v subscription-manager >/dev/null 2>&1; then "
                "if subscription-manager identity >/dev/null 2>&1; then echo registered; "
                "else echo unregistered; fi; else echo absent; fi")

    @override
    def process(self, output: list[str]) -> bool | None:
        word = output[0].strip() if output else ""
        return {"registered": True, "unregistered": False}.get(word)
