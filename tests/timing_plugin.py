"""Where the suite's time goes: a short table at the end of every pytest run.

    slowest modules    seconds of setup + call + teardown of each test module's tests (a
                       module-scoped fixture such as a fleet or a converge counts where it
                       runs: in the setup of the module's first test)
    slowest fixtures   each fixture's own setup time, with its scope and where it ran
    cpu s              CPU seconds a module's tests cost: the test process and what it ran
                       (pyinfra, ssh: rusage of self and children), its sandbox fleet's
                       processes (the fleet's cgroup) and the QEMU of the VM tests (vm.py
                       reports it). The machine's cores bound the suite: this column, not
                       the seconds, says what a module costs the others running beside it.

GPUHOST_TIMINGS=PATH also writes the whole table as JSON (bench/results/suite-*.json are made
this way). Works under pytest-xdist: the workers' fixture times travel with the setup
reports (``user_properties``), the controller adds them up. Loaded by the root conftest.py.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

KEY = "gpuhost_fixture_times"
CPU_KEY = "gpuhost_cpu_seconds"
ROWS = 30           # modules in the table (fixtures: FIXTURE_ROWS)
FIXTURE_ROWS = 12

_modules: dict[str, float] = defaultdict(float)
_tests: dict[str, int] = defaultdict(int)
_fixtures: dict[tuple[str, str, str], float] = {}
_current: list[tuple[str, str, str, float]] = []
_started = time.monotonic()
_cpu: dict[str, float] = defaultdict(float)
_extra_cpu: list[float] = []
_last_cpu: list[tuple[float, float]] = []   # (process CPU, fleet cgroup CPU) at the last phase end


def extra_cpu(seconds: float) -> None:
    """CPU spent outside this process's children and fleet (the VM's daemonized QEMU):
    counted in the phase running now."""
    _extra_cpu.append(seconds)


def _process_cpu() -> float:
    import resource
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _fleet_cpu() -> float:
    """CPU seconds of this process's sandbox fleet (its cgroup, cgroup v2 or v1); 0 without."""
    name = os.environ.get("GPUHOST_SANDBOX_CGROUP")
    if not name:
        return 0.0
    for base in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        try:
            for line in (base / name / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            continue
    try:
        return int(Path(f"/sys/fs/cgroup/cpuacct/{name}/cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        return 0.0


def _phase_cpu() -> float:
    """CPU seconds since the last phase ended. A fleet cgroup made anew during the phase
    (its counter went down) counts from zero."""
    now = (_process_cpu(), _fleet_cpu())
    before = _last_cpu[-1] if _last_cpu else now
    _last_cpu[:] = [now]
    fleet = now[1] - before[1] if now[1] >= before[1] else now[1]
    extra = sum(_extra_cpu)
    _extra_cpu.clear()
    return max(0.0, now[0] - before[0]) + fleet + extra


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    t0 = time.monotonic()
    yield
    where = request.node.nodeid.split("::")[0] if fixturedef.scope != "session" else "session"
    _current.append((fixturedef.argname, fixturedef.scope, where, time.monotonic() - t0))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.user_properties.append((CPU_KEY, _phase_cpu()))
    if call.when == "setup":
        report.user_properties.append((KEY, [list(row) for row in _current]))
        _current.clear()


def pytest_runtest_logreport(report) -> None:
    module = report.nodeid.split("::")[0]
    _modules[module] += report.duration
    if report.when == "call":
        _tests[module] += 1
    for key, rows in report.user_properties:
        if key == CPU_KEY:
            _cpu[module] += rows
        if key == KEY:
            for name, scope, where, seconds in rows:
                slot = (name, scope, where)
                _fixtures[slot] = _fixtures.get(slot, 0.0) + seconds


def table() -> dict:
    modules = sorted(_modules.items(), key=lambda kv: -kv[1])
    fixtures = sorted(_fixtures.items(), key=lambda kv: -kv[1])
    return {"wall_seconds": round(time.monotonic() - _started, 1),
            "modules": [{"module": m, "tests": _tests[m], "seconds": round(s, 1),
                         "cpu_seconds": round(_cpu[m], 1)} for m, s in modules],
            "fixtures": [{"fixture": n, "scope": sc, "where": w, "seconds": round(s, 1)}
                         for (n, sc, w), s in fixtures if s >= 0.05]}


def format_table(data: dict, rows: int = ROWS) -> list[str]:
    busy = sum(m["seconds"] for m in data["modules"])
    cpu = sum(m.get("cpu_seconds", 0.0) for m in data["modules"])
    lines = [f"{'seconds':>8}  {'cpu s':>7}  {'tests':>5}  slowest modules (all modules: {busy:.0f} s "
             f"of test time, {cpu:.0f} s of CPU, in {data['wall_seconds']:.0f} s wall clock)"]
    lines += [f"{row['seconds']:>8.1f}  {row.get('cpu_seconds', 0.0):>7.1f}  {row['tests']:>5}  "
              f"{row['module']}" for row in data["modules"][:rows]]
    lines.append(f"{'seconds':>8}  {'scope':>8}  slowest fixtures (setup)")
    lines += [f"{row['seconds']:>8.1f}  {row['scope']:>8}  {row['fixture']}  ({row['where']})"
              for row in data["fixtures"][:FIXTURE_ROWS]]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller prints
        return
    data = table()
    if not data["modules"]:
        return
    terminalreporter.section("where the time goes (tests/timing_plugin.py)")
    for line in format_table(data):
        terminalreporter.write_line(line)
    path = os.environ.get("GPUHOST_TIMINGS")
    if path:
        Path(path).write_text(json.dumps(data, indent=1) + "\n")
        terminalreporter.write_line(f"(the whole table: {path})")


def main(argv: list[str] | None = None) -> int:
    """python -m tests.timing_plugin FILE [--add NAME SECONDS]: print the table of a run
    (make test adds the Molecule scenario, which runs after pytest, and prints it last)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.timing_plugin")
    ap.add_argument("file")
    ap.add_argument("--add", nargs=2, metavar=("NAME", "SECONDS"), action="append", default=[])
    a = ap.parse_args(argv)
    data = json.loads(Path(a.file).read_text())
    for name, seconds in a.add:
        data["modules"].append({"module": name, "tests": 1, "seconds": float(seconds)})
        data["wall_seconds"] = round(data["wall_seconds"] + float(seconds), 1)
    data["modules"].sort(key=lambda row: -row["seconds"])
    Path(a.file).write_text(json.dumps(data, indent=1) + "\n")
    print("==> where the time went (make test; the whole table: " + a.file + ")")
    print("\n".join(format_table(data)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
