"""Shared machinery of gpuhost's facts: run named sections, assemble, fail one host only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError
from typing_extensions import override

from gpuhost.facts import parsers
from gpuhost.facts.script import build_script


class SectionFact(FactBase):
    """A fact made of ``facts.script`` sections and one ``facts.assemble`` function.

    Subclasses set ``sections`` (names in ``gpuhost.facts.script.SECTIONS``) and ``assemble`` (a
    staticmethod taking the split sections). The remote command always exits 0, so a host
    without NVIDIA software, Docker or dkms answers with its "not installed" state; output
    that a tool printed successfully but that cannot be parsed raises ``FactProcessError``
    for that host only.
    """

    abstract = True
    sections: ClassVar[tuple[str, ...]] = ()
    assemble: ClassVar[Callable[[dict[str, Any]], Any]]

    @override
    def command(self) -> str:
        return build_script(self.sections)

    @override
    def default(self) -> Any:  # type: ignore[override]
        return type(self).assemble({})

    @override
    def process(self, output: list[str]) -> Any:
        try:
            split = parsers.split_sections("\n".join(output) + "\n")
            return type(self).assemble(split)
        except ValueError as error:
            raise FactProcessError(f"{self.name}: cannot read host output: {error}") from error
