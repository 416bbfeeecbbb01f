"""gpuhost's converged stamp as a fact of its own (issue 27 item 7; gpuhost/stamp.py).

``pyinfra INVENTORY fact gpuhost.facts.stamp.ConvergedStamp``
"""

from __future__ import annotations

from typing import Any

from gpuhost import stamp
from gpuhost.facts.base import SectionFact
from gpuhost.facts.sections import Sections, section


def _assemble(sections: Sections) -> dict[str, Any] | None:
    return stamp.parse(*section(sections, "stamp"))


class ConvergedStamp(SectionFact):
    """
    The stamp's header and what differs between its witness and the host now
    (``gpuhost.stamp.parse``), None without a stamp. The composite fact carries the same
    section; ``roles/stamp.py`` reads this one again after a run, before it records.
    """

    sections = ("dpkg", "rpm", "stamp")
    assemble = staticmethod(_assemble)
