"""Service facts.

``pyinfra INVENTORY fact facts.services.ServiceInstalled service=nvidia-persistenced``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override


class ServiceInstalled(FactBase):
    """Whether a systemd unit of this name exists: ``True`` / ``False``."""

    @override
    def command(self, service: str) -> StringCommand:
        unit = QuoteString(f"{service}.service")
        return StringCommand(
            "for d in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do "
            'test -e "$d/"', unit, "&& echo yes && exit 0; done; echo no",
        )

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[-1].strip() == "yes"
