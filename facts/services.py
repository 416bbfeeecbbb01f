"""Service facts.

``pyinfra INVENTORY fact gpuhost.facts.services.ServiceInstalled service=nvidia-persistenced``
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override


class ServiceInstalled(FactBase):
    """Whether a systemd unit of this name exists: ``True`` / ``False``."""

    @override
    def command(self, service: str) -> str:
        # one shell word: "$d/"'x.service' (StringCommand would join its parts with spaces,
        # giving `test -e "$d/" 'x.service'`, which is never true: nvidia-persistenced was
        # never enabled on apt hosts)
        unit = shlex.quote(f"{service}.service")
        return ("for d in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do "
                f'test -e "$d/"{unit} && echo yes && exit 0; done; echo no')

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[-1].strip() == "yes"
