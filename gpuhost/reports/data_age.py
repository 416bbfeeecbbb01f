"""How old is each vendor data file in ``gpuhost/data/``?

Every vendor data file there names its source and the date gpuhost last read it (``_date``,
YYYY-MM-DD). ``gpuhost data-age`` (or ``python -m gpuhost.reports.data_age``) lists them, oldest first,
and marks those older than six months (183 days): their vendor facts (NVIDIA's device table,
CUDA minimum drivers, driver lifecycle, Xid catalog, GPU models, MIG profiles) are due for a
re-check. Exit 0 when every file is fresh, 1 when one is stale or has no date.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from importlib import resources
from typing import Any, TextIO

MAX_AGE_DAYS = 183  # six months


def ages(today: _dt.date, max_age_days: int = MAX_AGE_DAYS) -> list[dict[str, Any]]:
    """One row per JSON file in gpuhost/data, oldest first: ``{"file", "date", "age_days",
    "stale", "source"}``; ``date`` None (and stale) where the file has no valid ``_date``."""
    rows = []
    for entry in sorted(resources.files("gpuhost").joinpath("data").iterdir(),
                        key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        table = json.loads(entry.read_text(encoding="utf-8"))
        try:
            date = _dt.date.fromisoformat(str(table.get("_date")))
        except ValueError:
            date = None
        age = (today - date).days if date else None
        rows.append({"file": entry.name, "date": date.isoformat() if date else None,
                     "age_days": age, "stale": age is None or age > max_age_days,
                     "source": str(table.get("_source", ""))})
    return sorted(rows, key=lambda r: (r["age_days"] is not None, -(r["age_days"] or 0)))


def run(today: _dt.date | None = None, max_age_days: int = MAX_AGE_DAYS,
        out: TextIO | None = None) -> int:
    out = out or sys.stdout
    rows = ages(today or _dt.date.today(), max_age_days)
    for row in rows:
        state = "STALE" if row["stale"] else "ok"
        when = f"{row['date']} ({row['age_days']} days)" if row["date"] else "no _date"
        out.write(f"{state:5}  {row['file']:32}  {when}\n")
    stale = [r["file"] for r in rows if r["stale"]]
    if stale:
        out.write(f"{len(stale)} of {len(rows)} vendor data files are older than "
                  f"{max_age_days} days: re-check them against the source each names "
                  "(its _source) and update _date\n")
        return 1
    out.write(f"all {len(rows)} vendor data files were checked within {max_age_days} days\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpuhost data-age", description=__doc__.split("\n\n")[1])
    add_arguments(ap)
    args = ap.parse_args(argv)
    return run(args.today, args.max_age_days)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--max-age-days", type=int, default=MAX_AGE_DAYS, metavar="N",
                    help=f"older than this is stale (default {MAX_AGE_DAYS}, six months)")
    ap.add_argument("--today", type=_dt.date.fromisoformat, default=None, metavar="YYYY-MM-DD",
                    help="judge as of this day (default: today)")


if __name__ == "__main__":
    sys.exit(main())
