"""The test suite's timing table as Markdown, for bench/results/suite-*.md.

    python -m bench.suite_timing --junit JUNIT.xml --title "..." > bench/results/suite-before.md
    python -m bench.suite_timing --json build/test-timings.json --title "..." > ...after.md

--junit reads pytest's JUnit XML (``--junitxml``: seconds per test, setup and teardown
included, as pytest's ``--durations`` counts them) and adds them up per module; --json reads
what tests/timing_plugin.py writes (``make test``: GPUHOST_TIMINGS). Both print the modules,
slowest first, with their share of the test time.
"""
from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def from_junit(path: str) -> dict:
    root = ET.parse(path).getroot()
    modules: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    total = 0.0
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        # "tests.integration.test_cdi" (or "...test_cdi.TestX") -> tests/integration/test_cdi.py
        parts = classname.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        module = "/".join(parts) + ".py" if parts else classname
        seconds = float(case.get("time", 0))
        modules[module] += seconds
        tests[module] += 1
        total += seconds
    suites = [s for s in root.iter("testsuite")]
    wall = sum(float(s.get("time", 0)) for s in suites)
    return {"wall_seconds": round(wall, 1), "fixtures": [],
            "modules": [{"module": m, "tests": tests[m], "seconds": round(s, 1)}
                        for m, s in sorted(modules.items(), key=lambda kv: -kv[1])]}


def markdown(data: dict, title: str, rows: int = 40) -> str:
    busy = sum(m["seconds"] for m in data["modules"]) or 1.0
    out = [f"# {title}", "",
           f"pytest wall clock: **{data['wall_seconds'] / 60:.1f} min** ({data['wall_seconds']:.0f} s); "
           f"test time of all modules added up: {busy / 60:.1f} min ({busy:.0f} s).", "",
           "| seconds | share | tests | module |", "|---:|---:|---:|---|"]
    for m in data["modules"][:rows]:
        out.append(f"| {m['seconds']:.1f} | {100 * m['seconds'] / busy:.1f}% | {m['tests']} | "
                   f"`{m['module']}` |")
    if data.get("fixtures"):
        out += ["", "| seconds | scope | fixture | where |", "|---:|---|---|---|"]
        for f in data["fixtures"][:15]:
            out.append(f"| {f['seconds']:.1f} | {f['scope']} | `{f['fixture']}` | `{f['where']}` |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.suite_timing")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--junit")
    src.add_argument("--json")
    ap.add_argument("--title", default="Test suite timing")
    a = ap.parse_args(argv)
    data = from_junit(a.junit) if a.junit else json.loads(open(a.json).read())
    sys.stdout.write(markdown(data, a.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
