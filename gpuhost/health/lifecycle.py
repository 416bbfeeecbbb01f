"""NVIDIA's data-center driver branch lifecycle as dated data (pure, no I/O at call time).

``gpuhost/data/nvidia_driver_branches.json`` holds each branch's designation (long-term
support, production, new feature) and end-of-life month as NVIDIA's "Supported Drivers and
CUDA Toolkit Versions" pages print them, with the pages and the date they were read.
``finding(version, today)`` turns a driver version into one health finding.
"""

from __future__ import annotations

import datetime as _dt
import json
from importlib import resources
from typing import Any

_TABLE = json.loads(resources.files("gpuhost").joinpath("data", "nvidia_driver_branches.json")
                    .read_text(encoding="utf-8"))
BRANCHES: dict[str, dict[str, Any]] = _TABLE["branches"]
TABLE_DATE: str = _TABLE["_date"]
SOON_DAYS = 90  # "reaches end of life soon": within this many days
DESIGNATIONS = {"long-term-support": " (long-term support branch)",
                "production": " (production branch)", "new-feature": " (new feature branch)",
                None: ""}
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def branch_of(version: str | None) -> str | None:
    """'570.172.08' -> 'R570'; None when the version has no numeric major part."""
    major = str(version or "").split(".", 1)[0]
    return f"R{major}" if major.isdigit() else None


def _month(text: str) -> _dt.date:
    year, month = text.split("-")
    return _dt.date(int(year), int(month), 1)


def month_label(text: str) -> str:
    """'2026-06' -> 'June 2026'."""
    day = _month(text)
    return f"{_MONTHS[day.month - 1]} {day.year}"


def status(version: str | None, today: _dt.date) -> dict[str, Any]:
    """``{"branch", "designation", "end_of_life", "state", "days_left"}``; ``state`` is
    ``supported``, ``ending`` (end of life within SOON_DAYS), ``eol`` (from the first day
    of its end-of-life month, or listed by NVIDIA as end of life without a date) or
    ``unknown`` (not in the table)."""
    branch = branch_of(version)
    entry = BRANCHES.get(branch or "")
    answer: dict[str, Any] = {"branch": branch, "designation": None, "end_of_life": None,
                              "state": "unknown", "days_left": None}
    if entry is None:
        return answer
    answer.update(designation=entry["designation"], end_of_life=entry["end_of_life"])
    if entry["end_of_life"] is None:
        return {**answer, "state": "eol"}
    days = (_month(entry["end_of_life"]) - today).days
    state = "eol" if days <= 0 else "ending" if days <= SOON_DAYS else "supported"
    return {**answer, "state": state, "days_left": max(days, 0)}


def supported_branches(today: _dt.date) -> list[str]:
    """Long-term support and production branches not at end of life, the longest-lived first,
    as 'R580 (long-term support, until June 2028)'."""
    rows = []
    for branch, entry in BRANCHES.items():
        if entry["designation"] in ("long-term-support", "production") and entry["end_of_life"]:
            if _month(entry["end_of_life"]) > today:
                kind = "long-term support" if entry["designation"] == "long-term-support" \
                    else "production"
                rows.append((entry["end_of_life"], f"{branch} ({kind}, until "
                                                   f"{month_label(entry['end_of_life'])})"))
    return [label for _, label in sorted(rows, reverse=True)]


def finding(version: str | None, today: _dt.date) -> dict[str, Any] | None:
    """The lifecycle finding of a host whose driver is ``version`` (None: no driver, no
    finding). See docs/health.md for the ids."""
    if not version:
        return None
    info = status(version, today)
    branch = info["branch"] or version
    kind = DESIGNATIONS[info["designation"]]
    where = f"NVIDIA's data-center driver lifecycle, gpuhost's table of {TABLE_DATE}"
    move = "; ".join(supported_branches(today)[:2]) or "see NVIDIA's lifecycle page"

    def make(ident: str, severity: str, message: str) -> dict[str, Any]:
        return {"id": ident, "severity": severity, "gpu": None,
                "message": f"driver {version}: {message}"}

    if info["state"] == "unknown":
        return make("lifecycle-unknown", "info",
                    f"branch {branch} is not in gpuhost's lifecycle table ({TABLE_DATE}); check "
                    "NVIDIA's data-center driver lifecycle page")
    if info["state"] == "eol":
        when = (f"reached end of life in {month_label(info['end_of_life'])}"
                if info["end_of_life"] else "is end of life (NVIDIA lists it without a date)")
        return make("lifecycle-eol", "warning",
                    f"{branch}{kind} {when} ({where}): no more bug or security fixes; move to "
                    f"a supported branch: {move}")
    until = month_label(info["end_of_life"])
    if info["state"] == "ending":
        return make("lifecycle-eol-soon", "warning",
                    f"{branch}{kind} reaches end of life in {until} ({info['days_left']} days, "
                    f"{where}): plan the move to a supported branch: {move}")
    if info["designation"] == "new-feature":
        return make("lifecycle-new-feature-branch", "warning",
                    f"{branch} is a new feature branch, supported until {until} ({where}): NVIDIA "
                    f"means it for early adopters; run production on a long-term support or "
                    f"production branch: {move}")
    return make("lifecycle-supported", "info",
                f"{branch}{kind} is supported until {until} ({where})")
