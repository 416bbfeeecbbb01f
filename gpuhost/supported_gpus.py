"""Derive gpuhost/data/nvidia_supported_gpus.json from NVIDIA's ``supported-gpus.json``.

NVIDIA's Linux drivers (and NVIDIA's ``nvidia-driver-assistant`` package) ship their device
table as ``supported-gpus.json``: ``chips`` rows with ``devid`` ("0x1DB4"), optional
``subdevid``/``subvendorid``, ``name``, optional ``legacybranch`` ("580.xx": the last branch
that drives the GPU) and ``features`` (``kernelopen``: the open kernel modules drive it;
``gsp_proprietary_supported``: the proprietary modules drive it too, on its GSP).

gpuhost keeps one row per PCI device id (the row without a subsystem id where there is one;
NVIDIA's rows of one device id agree on these fields) and reads it as:

* ``legacy_branch``: the major of ``legacybranch`` ("580"), or null (current branches);
* ``generation``: "pre-turing" for a row with a legacy branch (R580 rows are Maxwell, Pascal
  and Volta; older ones Kepler and before), else "turing-or-newer". Not from ``kernelopen``:
  NVIDIA's R590-era table tags the R580-legacy rows ``kernelopen`` too, and older tables left
  it off some Turing rows (CMP 30HX/40HX/50HX);
* ``open``: ``kernelopen`` on a row without a legacy branch (the open modules need the GSP of
  Turing and newer; docs/real-hosts.md, "GPUs by PCI id");
* ``proprietary``: a legacy row, a row without ``kernelopen``, or one with
  ``gsp_proprietary_supported``; false means the open modules only (Blackwell, GH200);
* ``kernelopen``: the feature as NVIDIA's row has it.

    .venv/bin/python -m gpuhost.supported_gpus PATH/TO/supported-gpus.json \\
        --driver "590.48.01 (...)" --source "where the file came from"

rewrites the data file with today's date; then run
``.venv/bin/python -m pytest -q tests/unit/test_gpu_classes.py tests/unit/test_device_table.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "nvidia_supported_gpus.json"

FORMAT = (
    "PCI device id (4 hex digits, lower case) -> name (NVIDIA's product name), generation "
    "('pre-turing' when the row has a legacy branch, else 'turing-or-newer'), open (the open "
    "kernel modules drive it: 'kernelopen' on a row without a legacy branch), proprietary (the "
    "proprietary modules drive it: a legacy row, a row without 'kernelopen', or one with "
    "'gsp_proprietary_supported'; false: open modules only), legacy_branch (the last driver "
    "branch that drives it, e.g. '580'; null: the current branches do), kernelopen (NVIDIA's "
    "feature as the row has it). Regenerate with `python -m gpuhost.supported_gpus`.")


def derive(chips: list[dict]) -> dict[str, dict]:
    """NVIDIA's ``chips`` rows -> gpuhost's rows by device id (sorted)."""
    picked: dict[str, tuple[bool, dict]] = {}
    for chip in chips:
        devid = str(chip["devid"]).lower().removeprefix("0x")
        if len(devid) != 4 or any(c not in "0123456789abcdef" for c in devid):
            continue  # not a device id (a wildcard row)
        base = "subdevid" not in chip
        if devid in picked and not (base and not picked[devid][0]):
            continue
        picked[devid] = (base, chip)
    rows = {}
    for devid, (_base, chip) in sorted(picked.items()):
        features = set(chip.get("features") or [])
        legacy = chip.get("legacybranch")
        legacy_branch = str(legacy).split(".")[0] if legacy else None
        kernelopen = "kernelopen" in features
        rows[devid] = {
            "name": chip["name"],
            "generation": "pre-turing" if legacy_branch else "turing-or-newer",
            "open": kernelopen and legacy_branch is None,
            "proprietary": bool(legacy_branch) or not kernelopen
                           or "gsp_proprietary_supported" in features,
            "legacy_branch": legacy_branch,
            "kernelopen": kernelopen,
        }
    return rows


def render(rows: dict[str, dict], head: dict) -> str:
    lines = [json.dumps(head, indent=1)[:-2] + ",", ' "devices": {']
    lines.append(",\n".join(f'  "{devid}": {json.dumps(row, separators=(", ", ": "))}'
                            for devid, row in rows.items()))
    lines.append(" }\n}\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("supported_gpus_json")
    ap.add_argument("--driver", required=True, help="which driver's table it is")
    ap.add_argument("--source", required=True, help="repository, path, commit and date")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    chips = json.loads(Path(a.supported_gpus_json).read_text(encoding="utf-8"))["chips"]
    head = {"_source": a.source, "_driver": a.driver,
            "_date": datetime.date.today().isoformat(), "_format": FORMAT}
    text = render(derive(chips), head)
    json.loads(text)  # well-formed
    Path(a.out).write_text(text, encoding="utf-8")
    print(f"{a.out}: {text.count(chr(10))} lines")


if __name__ == "__main__":
    main()
