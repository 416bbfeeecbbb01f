"""What a converged fleet costs: the audit and a rerun of the deploy against pyinfra's floor.

    .venv/bin/python bench/converged.py [--runs 3] [--out bench/results/converged.md] [--keep]

Issue 27 item 7 ("a converged host costs one read"), done when, on 4 converged sandbox hosts:
a rerun of ``deploys/gpu_host.py`` sends at most 5 remote commands per host and takes at most
3x ``pyinfra exec -- true``; ``gpuhost audit`` takes at most 1.5x it.

1. A private sandbox fleet of 4 hosts, 3 Debian 12 and 1 Oracle Linux 8 (``python -m sandbox
   up --hosts 4 --ol 1``). Never the developers' own fleet: the five ``GPUHOST_SANDBOX_*``
   variables (runtime and state directories, host address prefix, HTTP port, cgroup name)
   are taken from the environment when all five are set, else this bench's own
   (/run/gpuhost-bench-converged, 127.77.3.N, port 8003); setting only some of them is refused.
   ``inventories/sandbox.py`` reads that fleet through ``GPUHOST_SANDBOX_DIR``.
2. Converged once, untimed: ``pyinfra -y inventories/sandbox.py deploys/gpu_host.py``.
3. Remote commands per host, counted in untimed runs (these are also the warm-up):
   ``tests/integration/count_commands.py`` wraps pyinfra's SSH connector; the audit is counted
   through ``gpuhost audit --pyinfra "PYTHON count_commands.py OUT --"``.
4. Timed, interleaved round by round (``--runs``, default 3) so load changes hit every job
   alike; median, min and max wall time, and each job / the floor of the same round:

   * floor: ``pyinfra -y inventories/sandbox.py exec -- true``;
   * audit: ``gpuhost audit inventories/sandbox.py`` as README tells users (the console
     script ``.venv/bin/gpuhost``; must exit 0 with every host ok);
   * the audit's remote script alone: ``pyinfra -y ... exec -- SCRIPT`` with the script of
     ``gpuhost.facts.host.GpuHostState`` (the same remote work: audit / this is the audit's
     own controller cost);
   * rerun: ``pyinfra -y inventories/sandbox.py deploys/gpu_host.py`` on the converged hosts
     (must exit 0);
   * one host: the floor and the audit again with ``--limit gpu-01`` (its script alone on the
     controller's CPUs, as on a real fleet, where each host runs it on its own), each against
     the one-host floor.

It measures whatever the checkout's code does when it runs (the report names the commit and
whether the tree had uncommitted changes). The sandbox hosts share the controller's CPUs:
every remote command also costs controller CPU here. The fleet is taken down at the end
(``--keep`` leaves it up, converged; a later run with ``--keep`` reuses it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuhost.facts.script import ALL_SECTIONS, build_script  # noqa: E402

VENV_BIN = ROOT / ".venv/bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
PYINFRA = str(VENV_BIN / "pyinfra")
GPUHOST = str(VENV_BIN / "gpuhost")
COUNTER = str(ROOT / "tests/integration/count_commands.py")
INVENTORY = "inventories/sandbox.py"
HOSTS, OL_HOSTS = 4, 1

FLEET_VARS = ("GPUHOST_SANDBOX_DIR", "GPUHOST_SANDBOX_STATE", "GPUHOST_SANDBOX_HOST_PREFIX",
              "GPUHOST_SANDBOX_HTTP_PORT", "GPUHOST_SANDBOX_CGROUP")
OWN_FLEET = dict(zip(FLEET_VARS, ("/run/gpuhost-bench-converged",
                                  "/var/lib/gpuhost-bench-converged", "127.77.3.", "8003",
                                  "gpuhost-bench-converged"), strict=True))
DEFAULT_FLEET = ("/run/gpuhost-sandbox", "/var/lib/gpuhost-sandbox", "127.77.1.", "8000",
                 "gpuhost-sandbox")

JOBS = ("floor", "audit", "script", "rerun", "floor1", "audit1")
ONE = "gpu-01"  # the one-host jobs: the first host alone, with --limit
LABELS = {"floor": "floor: `pyinfra exec -- true`",
          "audit": "`gpuhost audit inventories/sandbox.py`",
          "script": "`pyinfra exec` of the audit's remote script",
          "rerun": "converged rerun `pyinfra deploys/gpu_host.py`",
          "floor1": f"one host: floor `pyinfra --limit {ONE} exec -- true`",
          "audit1": f"one host: `gpuhost audit inventories/sandbox.py --limit {ONE}`"}
TARGETS = {"audit": 1.5, "rerun": 3.0}  # x the floor (issue 27, "Done when")
RERUN_COMMANDS = 5  # at most, per host


class BenchError(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"bench-converged: {message}", flush=True)


def fleet_env() -> dict[str, str]:
    """The private fleet's variables: all five from the environment, or this bench's own."""
    given = [name for name in FLEET_VARS if os.environ.get(name)]
    if given and len(given) != len(FLEET_VARS):
        missing = sorted(set(FLEET_VARS) - set(given))
        raise BenchError(f"set all of {', '.join(FLEET_VARS)} or none (missing: "
                         f"{', '.join(missing)}): a partly private fleet would share the "
                         "developers' addresses or directories")
    chosen = {name: os.environ[name] for name in FLEET_VARS} if given else dict(OWN_FLEET)
    clash = [name for name, default in zip(FLEET_VARS, DEFAULT_FLEET, strict=True)
             if chosen[name].rstrip("/") == default.rstrip("/")]
    if clash:
        raise BenchError(f"{', '.join(clash)} name the developers' default fleet: choose "
                         "private values")
    return chosen


def job_env(fleet: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **fleet, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: bytecode cached
    return env


def run(argv: list[str], env: dict[str, str], timeout: float = 1800,
        ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True,
                          timeout=timeout)
    if proc.returncode not in ok:
        raise BenchError(f"{' '.join(argv[:8])} ... failed (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2500:]}\n{proc.stderr[-2500:]}")
    return proc


# --- the fleet -----------------------------------------------------------------------------------

def fleet_up(env: dict[str, str]) -> dict:
    run([PYTHON, "-m", "sandbox", "up", "--hosts", str(HOSTS), "--ol", str(OL_HOSTS)], env)
    fleet = json.loads((Path(env["GPUHOST_SANDBOX_DIR"]) / "fleet.json").read_text())
    prefix = env["GPUHOST_SANDBOX_HOST_PREFIX"]
    wrong = [h["address"] for h in fleet["hosts"] if not h["address"].startswith(prefix)]
    if wrong or len(fleet["hosts"]) != HOSTS:
        raise BenchError(f"the fleet is not the one asked for: {len(fleet['hosts'])} hosts, "
                         f"addresses outside {prefix}: {wrong}")
    return fleet


def fleet_down(env: dict[str, str]) -> None:
    run([PYTHON, "-m", "sandbox", "down"], env)


# --- measuring -----------------------------------------------------------------------------------

def commands(script: str) -> dict[str, list[str]]:
    return {"floor": [PYINFRA, "-y", INVENTORY, "exec", "--", "true"],
            "audit": [GPUHOST, "audit", INVENTORY],
            "script": [PYINFRA, "-y", INVENTORY, "exec", "--", script],
            "rerun": [PYINFRA, "-y", INVENTORY, "deploys/gpu_host.py"],
            "floor1": [PYINFRA, "-y", INVENTORY, "--limit", ONE, "exec", "--", "true"],
            "audit1": [GPUHOST, "audit", INVENTORY, "--limit", ONE]}


def check(name: str, proc: subprocess.CompletedProcess) -> None:
    """Each timed run must have done its whole job on every host, else its time means
    nothing: exit 0, and the audit's summary line names every host ok."""
    ok = proc.returncode == 0
    if name == "audit":
        ok = ok and f"{HOSTS} hosts: {HOSTS} ok" in proc.stdout
    if name == "audit1":
        ok = ok and "1 host: 1 ok" in proc.stdout
    if not ok:
        raise BenchError(f"{name} did not complete on all {HOSTS} hosts (exit "
                         f"{proc.returncode}):\n{proc.stdout[-2500:]}\n{proc.stderr[-2500:]}")


def timed(name: str, argv: list[str], env: dict[str, str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True, timeout=1800)
    wall = time.perf_counter() - started
    check(name, proc)
    return {"wall": round(wall, 3), "rc": proc.returncode, "load": os.getloadavg()[0]}


def count(name: str, argv: list[str], env: dict[str, str], work: Path) -> dict:
    """Remote commands and uploads per host of one untimed run."""
    out = work / f"count-{name}.json"
    wrap = [PYTHON, COUNTER, str(out), "--"]
    if name == "audit":
        argv = [*argv, "--pyinfra", " ".join(wrap)]  # gpuhost audit runs pyinfra through it
    else:
        argv = [*wrap, *argv[1:]]  # argv[0] is pyinfra itself
    proc = subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True,
                          timeout=1800)
    check(name, proc)
    data = json.loads(out.read_text()) if out.exists() else {}
    hosts = data.get("hosts", {})
    if len(hosts) != HOSTS and name != "floor":
        raise BenchError(f"counting {name}: {len(hosts)} hosts counted, want {HOSTS}")
    per_host = {host: value["commands"] for host, value in sorted(hosts.items())}
    uploads = {host: value["uploads"] for host, value in sorted(hosts.items())}
    texts: dict[str, list[str]] = {}
    for _, host, text in data.get("commands", []):
        texts.setdefault(host, []).append(text)
    return {"per_host": per_host, "uploads": uploads, "commands": texts}


def converge(env: dict[str, str]) -> float:
    started = time.perf_counter()
    run([PYINFRA, "-y", INVENTORY, "deploys/gpu_host.py"], env, timeout=3600)
    return time.perf_counter() - started


# --- the report ----------------------------------------------------------------------------------

def spread(values: list[int]) -> str:
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def render(raw: dict) -> str:
    res, counts, where = raw["results"], raw["counts"], raw["machine"]
    walls = {name: statistics.median(r["wall"] for r in rs) for name, rs in res.items()}
    floor = walls["floor"]
    lines = ["# A converged fleet: audit and rerun against the floor", "",
             f"Measured by `make bench-converged` (bench/converged.py) on {where['when']}: "
             f"{where['cpus']} CPUs, {where['platform']}, Python {where['python']}, "
             f"commit {where['commit']}"
             + (f" with {where['dirty']} uncommitted changes in the tree" if where["dirty"]
                else "") + ".",
             f"{HOSTS} sandbox hosts ({HOSTS - OL_HOSTS} Debian 12, {OL_HOSTS} Oracle Linux 8; "
             f"fleet {raw['fleet']['GPUHOST_SANDBOX_DIR']}, hosts "
             f"{raw['fleet']['GPUHOST_SANDBOX_HOST_PREFIX']}N), converged by one "
             f"`pyinfra -y inventories/sandbox.py deploys/gpu_host.py` "
             + (f"({raw['converge_s']:.1f} s)" if raw["converge_s"] is not None
                else "(skipped: --no-converge)")
             + ". The hosts are namespaces on the controller's own CPUs: every remote command "
             "also costs the controller's CPU here.",
             f"Median of {raw['runs']} rounds, interleaved round by round, after one untimed "
             "run of each job (the counting runs). Remote commands per host: "
             "tests/integration/count_commands.py (pyinfra's SSH connector wrapped).", "",
             "| job | median s | min s | max s | x floor (medians) | x floor, same round "
             "(median, range) | remote commands / host | target |",
             "|---|---:|---:|---:|---:|---|---|---|"]
    for name in JOBS:
        if name not in res:
            continue
        base = "floor1" if name.endswith("1") else "floor"  # one host: its own floor
        w = [r["wall"] for r in res[name]]
        paired = sorted(a["wall"] / f["wall"] for a, f in zip(res[name], res[base],
                                                               strict=True))
        per_host = counts.get(name, {}).get("per_host", {})
        target = ""
        if name in TARGETS:
            met = walls[name] / walls[base] <= TARGETS[name]
            target = f"<= {TARGETS[name]}x floor: {'met' if met else 'MISSED'}"
            if name == "rerun" and per_host:
                met_c = max(per_host.values()) <= RERUN_COMMANDS
                target += f"; <= {RERUN_COMMANDS} commands: {'met' if met_c else 'MISSED'}"
        lines.append(
            f"| {LABELS[name]} | {walls[name]:.2f} | {min(w):.2f} | {max(w):.2f} | "
            f"{walls[name] / walls[base]:.2f} | {statistics.median(paired):.2f} "
            f"({paired[0]:.2f}-{paired[-1]:.2f}) | "
            f"{spread(list(per_host.values())) if per_host else '-'} | {target} |")
    loads = [r["load"] for rs in res.values() for r in rs]
    lines += ["", f"1-minute load average before: {raw['load_before']:.2f}; after the runs: "
                  f"{min(loads):.1f}-{max(loads):.1f}.  ",
              "rounds (s): " + "; ".join(f"{name} " + " ".join(f"{r['wall']:.2f}" for r in rs)
                                         for name, rs in res.items()), ""]
    if "audit1" in walls:
        lines += [f"One host ({ONE}, `--limit`): its script runs on CPUs no other host's script "
                  "uses at that moment, as on a real fleet where every host has its own; the "
                  f"target is the 4-host one (audit1 / floor1 = "
                  f"{walls['audit1'] / walls['floor1']:.2f}).", ""]
    if "script" in walls and "audit" in walls:
        lines += [f"audit / its remote script alone = {walls['audit'] / walls['script']:.2f}; "
                  f"the script alone / floor = {walls['script'] / floor:.2f} (what the remote "
                  "script itself costs on these hosts).", ""]
    for name in ("rerun", "audit"):
        if name not in counts:
            continue
        lines += [f"Remote commands per host, {LABELS[name]}: " + ", ".join(
            f"{host} {n}" for host, n in counts[name]["per_host"].items())
            + (f"; uploads {sum(counts[name]['uploads'].values())}" if any(
                counts[name]["uploads"].values()) else "; no uploads") + "."]
        first = next(iter(counts[name]["commands"].items()), None)
        if first and name == "rerun":
            lines += ["", f"The rerun's commands on {first[0]} (first 120 characters each):", ""]
            lines += [f"{i}. `{text.replace('`', chr(39))}`" for i, text in
                      enumerate(first[1], 1)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def machine() -> dict:
    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else "?"

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"when": time.strftime("%Y-%m-%d %H:%M %Z"), "cpus": os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version(),
            "commit": git("rev-parse", "--short", "HEAD"),
            "dirty": len(dirty.splitlines()) if dirty and dirty != "?" else 0}


def measure(env: dict[str, str], runs: int, work: Path, skip_converge: bool) -> dict:
    started = time.perf_counter()
    fleet_up(env)
    say(f"sandbox up --hosts {HOSTS} --ol {OL_HOSTS}: {time.perf_counter() - started:.1f} s")
    converge_s = None
    if not skip_converge:
        say("converging the fleet once (untimed)")
        converge_s = converge(env)
        say(f"converged in {converge_s:.1f} s")
    todo = commands(build_script(ALL_SECTIONS))
    load = os.getloadavg()[0]
    say("counting remote commands (these runs are the warm-up)")
    counts = {name: count(name, todo[name], env, work) for name in ("floor", "rerun", "audit")}
    say("commands per host: " + ", ".join(
        f"{name} {spread(list(c['per_host'].values())) if c['per_host'] else '-'}"
        for name, c in counts.items()))
    timed("script", todo["script"], env)  # its warm-up
    results: dict[str, list[dict]] = {name: [] for name in JOBS}
    for round_no in range(runs):
        for name in JOBS:
            results[name].append(timed(name, todo[name], env))
        say(f"round {round_no + 1}/{runs}: " + ", ".join(
            f"{name} {rs[-1]['wall']:.2f}s" for name, rs in results.items()))
    return {"runs": runs, "load_before": load, "converge_s": converge_s, "results": results,
            "counts": counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--out", default=str(ROOT / "bench/results/converged.md"))
    parser.add_argument("--keep", action="store_true",
                        help="leave the fleet up, converged (its GPUHOST_SANDBOX_DIR is printed)")
    parser.add_argument("--no-converge", action="store_true",
                        help="skip the converging run (a fleet kept up by --keep)")
    parser.add_argument("--render", metavar="JSON",
                        help="only write the report again from the .json of an earlier run")
    args = parser.parse_args(argv)
    if args.render:
        text = render(json.loads(Path(args.render).read_text()))
        Path(args.out).write_text(text)
        print(text + f"\nwritten to {args.out}")
        return 0
    if os.geteuid() != 0:
        print("bench-converged: needs root (the sandbox uses namespaces and mounts)",
              file=sys.stderr)
        return 1
    for tool in (PYINFRA, GPUHOST):
        if not os.access(tool, os.X_OK):
            print(f"bench-converged: {tool} not found: run `make setup`", file=sys.stderr)
            return 1
    try:
        fleet = fleet_env()
    except BenchError as error:
        print(f"bench-converged: {error}", file=sys.stderr)
        return 1
    env = job_env(fleet)
    try:
        with tempfile.TemporaryDirectory(prefix="gpuhost-bench-converged-") as tmp:
            raw = measure(env, args.runs, Path(tmp), args.no_converge)
    except (BenchError, subprocess.TimeoutExpired, OSError, ValueError) as error:
        print(f"bench-converged: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            say(f"fleet left up: GPUHOST_SANDBOX_DIR={fleet['GPUHOST_SANDBOX_DIR']}")
        else:
            say("taking the fleet down")
            try:
                fleet_down(env)
            except (BenchError, subprocess.TimeoutExpired) as error:
                print(f"bench-converged: taking the fleet down failed: {error}", file=sys.stderr)
    raw.update(fleet=fleet, machine=machine())
    text = render(raw)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print("\n" + text + f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
