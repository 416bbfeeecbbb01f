"""MIG profile names: NVIDIA mig-parted's grammar (``1g.10gb``, ``1g.24gb+me.all``,
``1c.2g.10gb``), canonical names, and a layout written compactly. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


# mig-parted's (go-nvlib ``pkg/nvlib/device/mig_profile.go`` vendored in mig-parted @bd7160f,
# read 2026-11-27): ``[<C>c.]<G>g.<GB>gb[(+|-)<attr>[,<attr>...]]``. C defaults to G (a GPU
# instance with its full compute instance); with C < G it names compute instances of C
# slices inside a G-slice GPU instance (``1c.2g.10gb``). Attributes: ``+me`` (a media
# engine), ``+me.all`` (all of them), ``+gfx`` (graphics), ``-me`` (no media engine); a
# profile has either ``+`` or ``-`` attributes, never both; an attribute is unique, starts
# with a letter, has letters, digits and dots and neither starts nor ends with a dot.
_FIELDS_RE = re.compile(r"(?:(\d+)c\.)?(\d+)g\.(\d+)gb")
_ATTR_RE = re.compile(r"[A-Za-z][A-Za-z0-9.]*")


@dataclass(frozen=True)
class Profile:
    """One parsed profile name."""

    c: int
    g: int
    gb: int
    sign: str                  # "", "+" or "-"
    attributes: tuple[str, ...]

    @property
    def gpu_instance(self) -> str:
        """The GPU instance profile name (``1c.2g.10gb`` -> ``2g.10gb``)."""
        suffix = self.sign + ",".join(self.attributes) if self.attributes else ""
        return f"{self.g}g.{self.gb}gb{suffix}"

    @property
    def compute_instance_form(self) -> bool:
        return self.c != self.g

    def __str__(self) -> str:
        return (f"{self.c}c." if self.compute_instance_form else "") + self.gpu_instance


def parse_profile(text: str) -> tuple[Profile | None, str | None]:
    """(Profile, None) or (None, why): mig-parted's grammar, case-insensitive as gpuhost
    has always read profile names (nvidia-smi prints them lower case)."""
    name = str(text).strip().lower()
    if not name:
        return None, "the empty string is not a MIG profile name"
    plus, minus = "+" in name, "-" in name
    if plus and minus:
        return None, f"{text!r} has both '+' and '-' attributes (mig-parted allows one kind)"
    sign = "+" if plus else "-" if minus else ""
    fields, _, attrs = name.partition(sign) if sign else (name, "", "")
    m = _FIELDS_RE.fullmatch(fields)
    if not m:
        return None, (f"{text!r} is not a MIG profile name like \"1g.10gb\", \"1g.24gb+me.all\" "
                      "or \"1c.2g.10gb\"")
    attributes: tuple[str, ...] = ()
    if sign:
        parts = attrs.split(",")
        for attr in parts:
            if not _ATTR_RE.fullmatch(attr) or attr.endswith("."):
                return None, f"{text!r}: attribute {attr!r} is not like \"me\", \"me.all\" or \"gfx\""
        if len(set(parts)) != len(parts):
            return None, f"{text!r}: an attribute is listed twice"
        attributes = tuple(parts)
    g, gb = int(m.group(2)), int(m.group(3))
    c = int(m.group(1)) if m.group(1) is not None else g
    return Profile(c, g, gb, sign, attributes), None


def profile_name(text: str) -> str:
    """The canonical name of a valid profile (``2c.2g.10gb`` -> ``2g.10gb``); unchanged
    (lower-cased) when it does not parse."""
    parsed, _ = parse_profile(text)
    return str(parsed) if parsed else str(text).strip().lower()


def compact(profiles: Iterable[str]) -> str:
    """["1g.10gb", "1g.10gb", "3g.40gb"] -> "2x 1g.10gb + 3g.40gb" (sorted)."""
    counts: dict[str, int] = {}
    for name in sorted(profiles):
        counts[name] = counts.get(name, 0) + 1
    return " + ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())
