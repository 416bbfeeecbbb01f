"""Host names as people count them, and many of them in a few characters.

``natural_key``: gpu-2 before gpu-10 (the digit runs of a name compare as numbers), the order
of every host list of the audit report. ``compact``: a list of names in Slurm's hostlist
notation (``gpu-[1-3,5], login``: every name kept, consecutive numbers as a range), so a
group of 250 hosts fits in one table cell. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DIGITS = re.compile(r"(\d+)")
_LAST_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


def natural_key(name: str) -> tuple:
    """Sort key: the name's digit runs compare as numbers (gpu-9 < gpu-10 < gpu-100), the
    name itself breaks ties (gpu-01 and gpu-1)."""
    parts = _DIGITS.split(name)
    return (tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name)


def natural_sorted(names: Iterable[str]) -> list[str]:
    return sorted(names, key=natural_key)


def _padded(digits: str) -> int:
    """The width of a zero-padded number ("007": 3), 0 for a plain one ("7", "0")."""
    return len(digits) if len(digits) > 1 and digits.startswith("0") else 0


def _same_form(a: str, b: str) -> bool:
    """Whether two numbers can share a range: both plain, or both written at one width."""
    width_a, width_b = _padded(a), _padded(b)
    if not width_a and not width_b:
        return True
    width = width_a or width_b
    return len(a) == width and len(b) == width


def _ranges(numbers: list[str]) -> list[str]:
    """'1','2','3','5' -> ['1-3', '5'] (numbers in numeric order)."""
    runs: list[list[str]] = []
    for digits in numbers:
        last = runs[-1][-1] if runs else None
        if last is not None and int(digits) == int(last) + 1 and _same_form(last, digits):
            runs[-1].append(digits)
        else:
            runs.append([digits])
    return [run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]


def compact(names: Iterable[str], limit: int | None = None) -> str:
    """The names in hostlist notation, in natural order: ``gpu-[1-254]``,
    ``gpu-[01-03,07], node-4, login``. Names that differ only in their last number share one
    bracket. ``limit``: at most that many ranges or single names, then ``+N more`` (hosts)."""
    numbered: dict[tuple[str, str], list[str]] = {}
    order: list[tuple[str, str]] = []  # (prefix, suffix); a name without a number: (name, "")
    for name in natural_sorted(set(names)):
        match = _LAST_NUMBER.match(name)
        key = (match.group(1), match.group(3)) if match else (name, "")
        if key not in numbered:
            numbered[key] = []
            order.append(key)
        if match:
            numbered[key].append(match.group(2))
    items: list[tuple[tuple[str, str], str | None, int]] = []  # (key, range, hosts)
    for key in order:
        numbers = sorted(numbered[key], key=lambda d: (int(d), d))
        if not numbers:
            items.append((key, None, 1))
        for text in _ranges(numbers):
            first, _, last = text.partition("-")
            items.append((key, text, int(last or first) - int(first) + 1))
    shown = items if limit is None else items[:limit]
    pieces: list[str] = []
    index = 0
    while index < len(shown):
        key, text, _ = shown[index]
        if text is None:
            pieces.append(key[0])
            index += 1
            continue
        run = [text]
        while index + len(run) < len(shown) and shown[index + len(run)][0] == key:
            run.append(shown[index + len(run)][1])
        single = len(run) == 1 and "-" not in text
        body = text if single else f"[{','.join(str(r) for r in run)}]"
        pieces.append(f"{key[0]}{body}{key[1]}")
        index += len(run)
    hidden = sum(count for _, _, count in items[len(shown):])
    return ", ".join(pieces) + (f", +{hidden} more" if hidden else "")
