#!/usr/bin/env python3
"""Regenerate gpuhost/data/nvidia_supported_gpus.json from NVIDIA's supported-gpus.json.

NVIDIA's Linux drivers ship their device table as ``supported-gpus.json`` (in the .run
package as ``supported-gpus/supported-gpus.json``; installed as
``/usr/share/doc/NVIDIA_GLX-1.0/supported-gpus/supported-gpus.json`` or, in Debian/Ubuntu
packages, ``/usr/share/doc/nvidia-driver-<branch>/supported-gpus.json``). Its ``chips``
rows carry ``devid`` ("0x1DB4"), optional ``subdevid``/``subvendorid``, ``name``, optional
``legacybranch`` ("470.xx": the last branch that drives it) and ``features`` (``kernelopen``:
the open kernel modules drive it).

    python3 scripts/refresh_supported_gpus.py PATH/TO/supported-gpus.json DRIVER_VERSION \\
        [--source "where the file came from"]

keeps one row per PCI device id (the row without a subsystem id when there is one) and
writes the data file with the driver version and today's date. Run
``.venv/bin/python -m pytest -q tests/unit/test_gpu_classes.py`` afterwards: it checks that
no pre-Turing device claims the open modules.
"""
from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "gpuhost" / "data" / "nvidia_supported_gpus.json"


def devices(chips: list[dict]) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for chip in chips:
        devid = str(chip["devid"]).lower().removeprefix("0x")
        if len(devid) != 4:
            raise SystemExit(f"unexpected devid {chip['devid']!r}")
        base = "subdevid" not in chip
        if devid in rows and not (base and not rows[devid]["_base"]):
            continue
        legacy = chip.get("legacybranch")
        rows[devid] = {"name": chip["name"], "open": "kernelopen" in chip.get("features", []),
                       "legacy_branch": legacy.split(".")[0] if legacy else None, "_base": base}
    for row in rows.values():
        del row["_base"]
    return dict(sorted(rows.items()))


def render(rows: dict[str, dict], driver: str, source: str) -> str:
    head = {
        "_source": source,
        "_driver": driver,
        "_date": datetime.date.today().isoformat(),
        "_format": "PCI device id (4 hex digits, lower case) -> name (NVIDIA's product name), "
                   "open (the row has the 'kernelopen' feature: the open kernel modules drive "
                   "it), legacy_branch (the last driver branch that drives it, e.g. '470'; "
                   "null: the current branches do). Regenerate with "
                   "scripts/refresh_supported_gpus.py.",
    }
    lines = [json.dumps(head, indent=1)[:-2] + ",", ' "devices": {']
    items = [f'  "{devid}": {json.dumps(row, separators=(", ", ": "))}' for devid, row in rows.items()]
    lines.append(",\n".join(items))
    lines.append(" }\n}\n")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("supported_gpus_json")
    ap.add_argument("driver_version")
    ap.add_argument("--source", default="NVIDIA's supported-gpus.json of the driver named in _driver")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    chips = json.loads(Path(a.supported_gpus_json).read_text(encoding="utf-8"))["chips"]
    text = render(devices(chips), a.driver_version, a.source)
    json.loads(text)  # well-formed
    Path(a.out).write_text(text, encoding="utf-8")
    print(f"{a.out}: {text.count(chr(10))} lines")


if __name__ == "__main__":
    main()
