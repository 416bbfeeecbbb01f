"""Which dkms signs this host's modules, and with what (issue 23 item 3).

``pyinfra INVENTORY fact gpuhost.facts.dkms.DkmsSigning --json``

dkms 2.8 (Ubuntu 22.04) and 3.x (Debian 12, Ubuntu 24.04, EPEL) take their signing key from
different places (docs/real-hosts.md, "Secure Boot and dkms"), so gpuhost reads the version
before the driver's packages install dkms: the installed one, else apt's candidate.
"""

from __future__ import annotations

import re

from pyinfra.api import FactBase
from typing_extensions import override

_COMMAND = r"""
: gpuhost-dkms-signing
v=$(dpkg-query -W -f '${Version}' dkms 2>/dev/null)
if [ -n "$v" ]; then echo "installed=$v"
elif v=$(rpm -q --qf '%{VERSION}-%{RELEASE}' dkms 2>/dev/null); then echo "installed=$v"
else echo "candidate=$(apt-cache policy dkms 2>/dev/null | sed -n 's/^ *Candidate: //p')"
fi
command -v kmodsign >/dev/null 2>&1 && echo kmodsign=yes
test -d /var/lib/shim-signed/mok && echo shim_mok_dir=yes
true
"""


def dkms_line(version: str | None) -> str | None:
    """"2.8" for dkms 2.x, "3" for 3.x and newer, None when the version is not known."""
    m = re.match(r"^(?:\d+:)?(\d+)\.(\d+)", version or "")
    if not m:
        return None
    return "2.8" if int(m.group(1)) < 3 else "3"


def parse_dkms_signing(lines: list[str]) -> dict:
    values = dict(line.strip().partition("=")[::2] for line in lines if "=" in line)
    version = values.get("installed") or values.get("candidate") or None
    if version == "(none)":
        version = None
    return {"version": version,
            "source": "installed" if values.get("installed") else
                      "candidate" if version else None,
            "line": dkms_line(version),
            "kmodsign": values.get("kmodsign") == "yes",
            "shim_mok_dir": values.get("shim_mok_dir") == "yes"}


class DkmsSigning(FactBase):
    """
    .. code:: python

        {"version": "2.8.7-2ubuntu2" | None,   # installed dkms, else apt's candidate
         "source": "installed" | "candidate" | None,
         "line": "2.8" | "3" | None,
         "kmodsign": bool,                     # sbsigntool's kmodsign on PATH
         "shim_mok_dir": bool}                 # /var/lib/shim-signed/mok exists
    """

    @override
    def command(self) -> str:
        return _COMMAND

    @override
    def process(self, output: list[str]) -> dict:
        return parse_dkms_signing(output)
