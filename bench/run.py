"""Benchmark the gpuhost audit against the floor and against Ansible on the sandbox fleet.

    .venv/bin/python bench/run.py [--sizes 20,50] [--runs 5] [--ansible-runs 3]
                                  [--out bench/results/latest.md] [--keep]

For each fleet size N (a private sandbox fleet of N Debian 12 hosts, see
bench/private_sandbox.py: the developers' own fleet is left alone), in the same run and
interleaved round by round so load changes hit every tool alike:

* floor, pyinfra: ``pyinfra -y inventories/sandbox.py exec -- true``;
* floor, OpenSSH: one ``ssh HOST true`` per host, all started at once;
* same script: ``pyinfra -y inventories/sandbox.py exec -- SCRIPT`` with the audit's own
  remote script (``facts.script.build_script(ALL_SECTIONS)``): the same remote work, so
  audit / same script is gpuhost's own controller overhead (issue 15: <= 1.25);
* audit: ``pyinfra -y inventories/sandbox.py deploys/audit.py`` (must print an OK or DRIFT
  row for every host; exit 0, or 1 when hosts drift);
* Ansible: ``ansible-playbook`` with ``gather_facts: true`` plus one ``shell`` task per
  section of ``facts/script.py`` (the same commands as the audit), ``forks = N``,
  pipelining on, a fresh SSH ControlPath per run (every run connects cold, as pyinfra does).

Reported per tool: median/min/max wall time, remote commands per host (counted in a separate
run: pyinfra's SSH connector wrapped by tests/integration/count_commands.py, ``ssh -vvv``
EXEC lines for Ansible), peak RSS of the largest process (``getrusage(RUSAGE_CHILDREN)``),
peak RSS of the whole process tree (``/proc`` sampled every 20 ms) and controller CPU time.
Hosts get Debian's ``python3`` from the sandbox mirror before timing (Ansible's modules
need more than python3-minimal). The private fleet is taken down at the end (``--keep``
leaves it up: ``GPUHOST_SANDBOX_DIR=/run/gpuhost-bench`` points inventories/sandbox.py at it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import ansible_job, private_sandbox  # noqa: E402
from gpuhost.facts.script import ALL_SECTIONS, build_script  # noqa: E402

SCRIPT = build_script(ALL_SECTIONS)  # what deploys/audit.py runs on every host

VENV_BIN = ROOT / ".venv/bin"
PYINFRA = str(VENV_BIN / "pyinfra")
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
INVENTORY = "inventories/sandbox.py"
ENV = {**private_sandbox.env(), "PYINFRA_PROGRESS": "off", "NO_COLOR": "1", "ANSIBLE_NOCOLOR": "1"}

# Runs one measured job in a fresh process so RUSAGE_CHILDREN covers exactly that job.
WRAPPER = """
import json, resource, subprocess, sys, time
job = json.loads(sys.argv[1])
out, err = open(job["out"], "w"), open(job["err"], "w")
start = time.perf_counter()
procs = [subprocess.Popen(argv, stdout=out, stderr=err, env=job.get("env"), cwd=job["cwd"])
         for argv in job["argvs"]]
rcs = [p.wait() for p in procs]
wall = time.perf_counter() - start
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "rcs": rcs, "maxrss_kb": ru.ru_maxrss,
                  "cpu": ru.ru_utime + ru.ru_stime}))
"""


class BenchError(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"bench: {message}", flush=True)


def sh(argv: list[str], timeout: float = 1800, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=ROOT, text=True, capture_output=True, timeout=timeout,
                          env=ENV, **kw)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv[:6])} ... failed (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2500:]}\n{proc.stderr[-2500:]}")
    return proc


# --- the fleet ---------------------------------------------------------------------------------

def prepare_hosts(fleet: dict) -> None:
    """Debian's full python3 on every host (Ansible's modules import json, ctypes...)."""
    started = time.perf_counter()
    sh([PYINFRA, "-y", INVENTORY, "exec", "--",
        "command -v python3 >/dev/null && python3 -c 'import json, ctypes' 2>/dev/null || "
        "{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3; }"
        " >/dev/null"])
    say(f"python3 on {len(fleet['hosts'])} hosts: {time.perf_counter() - started:.1f} s")


# --- measuring ---------------------------------------------------------------------------------

def _tree_rss_kb(root: int) -> int:
    """Summed VmRSS of every descendant of ``root`` (not root itself)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            with open(f"/proc/{entry}/statm") as handle:
                pages = int(handle.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(entry)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
    total = 0
    for pid in rss:
        seen, parent = 0, parents.get(pid)
        while parent and seen < 64:
            if parent == root:
                total += rss[pid]
                break
            parent, seen = parents.get(parent), seen + 1
    return total


def measure(name: str, argvs: list[list[str]], work: Path, env: dict | None = None) -> dict:
    """Run argvs (started together), return wall, rcs, peak RSS (largest, tree), CPU."""
    tag = f"{name}-{time.monotonic_ns()}"
    job = {"argvs": argvs, "cwd": str(ROOT), "env": env or ENV,
           "out": str(work / f"{tag}.out"), "err": str(work / f"{tag}.err")}
    wrapper = subprocess.Popen([PYTHON, "-c", WRAPPER, json.dumps(job)], stdout=subprocess.PIPE,
                               text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(wrapper.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = wrapper.communicate(timeout=3600)
    done.set()
    sampler.join()
    result = json.loads(stdout)
    result.update(tree_kb=peak[0], out=job["out"], err=job["err"], load=os.getloadavg()[0])
    return result


def check(name: str, result: dict, hosts: int) -> None:
    """Every run must have done its whole job on every host, else its time means nothing."""
    out = Path(result["out"]).read_text(errors="replace")
    err = Path(result["err"]).read_text(errors="replace")
    if name == "audit":
        rows = re.findall(r"^\S+: (OK|DRIFT|FAILED) ", out, re.M)  # one row per audited host
        ok = result["rcs"] in ([0], [1]) and len(rows) == hosts and "FAILED" not in rows
    elif name == "ansible":
        recap = re.findall(r"^\S+\s*:\s*ok=\d+.*?unreachable=(\d+)\s+failed=(\d+)", out, re.M)
        ok = result["rcs"] == [0] and len(recap) == hosts and all(r == ("0", "0") for r in recap)
    else:
        ok = all(rc == 0 for rc in result["rcs"])
    if not ok:
        raise BenchError(f"{name} did not complete on all {hosts} hosts (exit {result['rcs']}):"
                         f"\n{out[-2000:]}\n{err[-2000:]}")


def jobs(fleet: dict, ansible_dir: Path) -> dict[str, tuple[list[list[str]], dict | None]]:
    ssh = ["ssh", "-i", fleet["ssh_key"], "-o", f"UserKnownHostsFile={fleet['known_hosts']}",
           "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"]
    return {
        "floor-pyinfra": ([[PYINFRA, "-y", INVENTORY, "exec", "--", "true"]], None),
        "floor-ssh": ([ssh + ["-p", str(h["port"]), f"root@{h['address']}", "true"]
                       for h in fleet["hosts"]], None),
        "audit": ([[PYINFRA, "-y", INVENTORY, "deploys/audit.py"]], None),
        "same-script": ([[PYINFRA, "-y", INVENTORY, "exec", "--", SCRIPT]], None),
        "ansible": ([[str(VENV_BIN / "ansible-playbook"), "-i", str(ansible_dir / "inventory.ini"),
                      str(ansible_dir / "audit.yml")]], ansible_job.env(ansible_dir)),
    }


def count_commands(fleet: dict, ansible_dir: Path, work: Path) -> dict[str, str]:
    """Remote commands per host, counted in untimed runs (min-max over the hosts)."""
    counts = {"floor-ssh": "1"}
    counter = str(ROOT / "tests/integration/count_commands.py")
    for name, args in (("floor-pyinfra", ["exec", "--", "true"]), ("audit", ["deploys/audit.py"]),
                       ("same-script", ["exec", "--", SCRIPT])):
        out = work / f"count-{name}.json"
        proc = subprocess.run([PYTHON, counter, str(out), "--", "-y", INVENTORY, *args], cwd=ROOT,
                              env=ENV, capture_output=True, text=True, timeout=1800)
        data = json.loads(out.read_text()) if out.exists() else {}
        data = data.get("hosts", data) if isinstance(data.get("hosts"), dict) else data
        if len(data) != len(fleet["hosts"]) or proc.returncode not in (0, 1):
            raise BenchError(f"counting {name}: exit {proc.returncode}, counted {len(data)} hosts"
                             f"\n{proc.stderr[-2000:]}")
        per_host = sorted(v["commands"] for v in data.values())
        uploads = sum(v["uploads"] for v in data.values())
        counts[name] = (f"{per_host[0]}" if per_host[0] == per_host[-1] else
                        f"{per_host[0]}-{per_host[-1]}") + (f" (+{uploads} uploads)" if uploads else "")
    return counts


def bench_size(sandbox, n: int, runs: int, ansible_runs: int, work: Path) -> dict:
    started = time.perf_counter()
    fleet = sandbox.up(n)
    say(f"private sandbox up --hosts {n}: {time.perf_counter() - started:.1f} s")
    prepare_hosts(fleet)
    ansible_dir = ansible_job.write(fleet, work / f"ansible-{n}", forks=n)
    todo = jobs(fleet, ansible_dir)
    if ansible_runs == 0:  # --ansible-runs 0: gpuhost against its floors only
        del todo["ansible"]
    load = os.getloadavg()[0]
    say(f"{n} hosts: counting remote commands (these runs are the warm-up)")
    counts = count_commands(fleet, ansible_dir, work)
    if ansible_runs:
        counts["ansible"] = ansible_job.count_exec(ansible_dir, fleet, work)
    check("floor-ssh", measure("floor-ssh", todo["floor-ssh"][0], work), n)
    results: dict[str, list[dict]] = {name: [] for name in todo}
    for round_no in range(runs):
        for name, (argvs, env) in todo.items():
            if name == "ansible" and round_no >= ansible_runs:
                continue
            result = measure(name, argvs, work, env)
            check(name, result, n)
            results[name].append(result)
        say(f"{n} hosts, round {round_no + 1}/{runs}: " + ", ".join(
            f"{k} {v[-1]['wall']:.2f}s" for k, v in results.items() if len(v) > round_no))
    return {"hosts": n, "load_before": load, "results": results, "counts": counts}


# --- the report --------------------------------------------------------------------------------

LABELS = {"floor-pyinfra": "floor: `pyinfra exec -- true`",
          "floor-ssh": "floor: `ssh HOST true` x N in parallel",
          "audit": "gpuhost audit (`deploys/audit.py`)",
          "same-script": "`pyinfra exec` of the audit's own remote script",
          "ansible": "Ansible (`gather_facts` + the same commands)"}


def median(values: list[float]) -> float:
    return statistics.median(values)


def summary(size: dict) -> dict[str, float]:
    walls = {name: median([r["wall"] for r in rs]) for name, rs in size["results"].items()}
    walls["floor"] = min(walls["floor-pyinfra"], walls["floor-ssh"])
    return walls


def versions() -> str:
    def first_line(argv):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            return (proc.stdout or proc.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    return (f"pyinfra {first_line([PYINFRA, '--version'])}; "
            f"{first_line([str(VENV_BIN / 'ansible-playbook'), '--version'])}; "
            f"{first_line(['ssh', '-V'])}; Python {platform.python_version()}")


def machine() -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"when": time.strftime("%Y-%m-%d %H:%M %Z"), "cpus": os.cpu_count(),
            "memory": f"{mem:.0f} GiB", "platform": platform.platform(), "tools": versions()}


def render(sizes: list[dict], runs: int, ansible_runs: int, where: dict) -> str:
    lines = ["# gpuhost audit benchmark", "",
             f"Measured by `make bench` (bench/run.py) on {where['when']}: {where['cpus']} CPUs, "
             f"{where['memory']}, {where['platform']}.",
             f"Tools: {where['tools']}.",
             "The sandbox hosts are Debian 12 namespaces on the same machine as the controller, "
             "so the controller and every host share the same CPUs; the hosts carry no NVIDIA "
             "stack (the fact's tools answer \"not installed\" or come from the GPU simulator). "
             "Every remote command therefore also costs controller CPU: Ansible's 20 Python "
             "module runs per host compete with the controller here, where on a real fleet they "
             "would run on the hosts' own CPUs, so the Ansible gap is wider here than on real "
             "machines (its 20 round trips per host against the audit's 1 remain).",
             f"Median of {runs} runs ({ansible_runs} for Ansible), interleaved round by round, "
             "after one untimed run of each tool (the command-counting runs).", ""]
    for size in sizes:
        n, walls = size["hosts"], summary(size)
        lines += [f"## {n} hosts (load average before: {size['load_before']:.2f})", "",
                  "| tool | median s | min s | max s | remote commands / host | peak RSS largest "
                  "process MiB | peak RSS process tree MiB | controller CPU s | controller CPU "
                  "ms / host |",
                  "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
        for name, rs in size["results"].items():
            w = [r["wall"] for r in rs]
            lines.append(
                f"| {LABELS[name]} | {median(w):.2f} | {min(w):.2f} | {max(w):.2f} | "
                f"{size['counts'][name]} | {max(r['maxrss_kb'] for r in rs) / 1024:.0f} | "
                f"{max(r['tree_kb'] for r in rs) / 1024:.0f} | "
                f"{median([r['cpu'] for r in rs]):.2f} | "
                f"{median([r['cpu'] for r in rs]) * 1000 / n:.0f} |")
        ratio = walls["audit"] / walls["floor"]
        speedup = walls["ansible"] / walls["audit"] if "ansible" in walls else None
        res = size["results"]
        paired = sorted(a["wall"] / min(p["wall"], s["wall"]) for a, p, s in
                        zip(res["audit"], res["floor-pyinfra"], res["floor-ssh"], strict=True))
        loads = [r["load"] for rs in res.values() for r in rs]
        same = walls["audit"] / walls["same-script"] if "same-script" in walls else None
        same_paired = sorted(a["wall"] / x["wall"] for a, x in
                             zip(res["audit"], res.get("same-script", []), strict=False))
        lines += ["", f"audit / floor = {ratio:.2f} (target <= 1.25: "
                      f"{'met' if ratio <= 1.25 else 'MISSED'})"
                      + (f"; Ansible / audit = {speedup:.1f}x (target >= 10x: "
                         f"{'met' if speedup >= 10 else 'MISSED'})" if speedup else
                         "; Ansible not run (--ansible-runs 0)") + "  ",
                  f"audit / floor of the same round: median {median(paired):.2f}, "
                  f"range {paired[0]:.2f}-{paired[-1]:.2f}; 1-minute load average after the "
                  f"runs: {min(loads):.1f}-{max(loads):.1f}  ",
                  (f"audit / same script = {same:.2f} (gpuhost's own controller overhead; "
                   f"target <= 1.25: {'met' if same <= 1.25 else 'MISSED'}); same round: median "
                   f"{median(same_paired):.2f}, range {same_paired[0]:.2f}-{same_paired[-1]:.2f}  "
                   if same else ""),
                  "rounds (s): " + "; ".join(
                      f"{name} " + " ".join(f"{r['wall']:.2f}" for r in rs)
                      for name, rs in res.items()), ""]
    top = max(sizes, key=lambda s: s["hosts"])
    walls = summary(top)
    lines.append(f"audit {top['hosts']} hosts: {walls['audit']:.2f} s; floor: "
                 f"{walls['floor']:.2f} s; same script: {walls.get('same-script', 0):.2f} s"
                 + (f"; ansible: {walls['ansible']:.2f} s" if "ansible" in walls else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,50", help="fleet sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ansible-runs", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench/results/latest.md"))
    parser.add_argument("--render", metavar="JSON",
                        help="only write the report again from the .json of an earlier run")
    parser.add_argument("--keep", action="store_true",
                        help="leave the private bench fleet up (GPUHOST_SANDBOX_DIR=/run/gpuhost-bench)")
    args = parser.parse_args(argv)
    if args.render:
        raw = json.loads(Path(args.render).read_text())
        text = render(raw["sizes"], raw["runs"], raw["ansible_runs"], raw["machine"])
        Path(args.out).write_text(text)
        print(text + f"\nwritten to {args.out}")
        return 0
    if os.geteuid() != 0:
        print("bench: needs root (the sandbox uses namespaces and mounts)", file=sys.stderr)
        return 1
    for tool in ("ssh", PYINFRA, str(VENV_BIN / "ansible-playbook")):
        if shutil.which(tool) is None:
            print(f"bench: {tool} not found: run `make setup deps`", file=sys.stderr)
            return 1
    sizes = []
    sandbox = private_sandbox.PrivateSandbox(PYTHON)
    try:
        with tempfile.TemporaryDirectory(prefix="gpuhost-bench-") as tmp:
            for n in [int(s) for s in args.sizes.split(",")]:
                sizes.append(bench_size(sandbox, n, args.runs, args.ansible_runs, Path(tmp)))
    except (BenchError, RuntimeError) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            say("taking the private bench fleet down")
            sandbox.down()
    where = machine()
    text = render(sizes, args.runs, args.ansible_runs, where)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    raw = [{**size, "results": {name: [{k: v for k, v in r.items() if k not in ("out", "err")}
                                       for r in rs] for name, rs in size["results"].items()}}
           for size in sizes]
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"runs": args.runs, "ansible_runs": args.ansible_runs, "machine": where, "sizes": raw},
        indent=1) + "\n")
    print("\n" + text + f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
