"""Where the audit's time goes beyond the floor, on a private sandbox fleet.

    .venv/bin/python bench/profile.py [--hosts 50] [--runs 5] [--repeat 30]

1. Wall time and *remote* CPU of ``pyinfra exec -- true`` against the audit, interleaved.
   Remote CPU is read from each host's sshd listener (``/proc/PID/stat``: its own and its
   reaped children's user+system time), so it covers everything the hosts ran.
2. CPU per section of ``facts/script.py`` on one host (each section run ``--repeat`` times
   by ``sh -c``, measured with the shell's ``times``), the whole script and ``true``.

The sandbox hosts share the controller's CPUs, so in the benchmark the fact script's
remote CPU adds to the controller's wall time; on a real fleet it runs on each host's own CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import private_sandbox  # noqa: E402
from gpuhost.facts.script import ALL_SECTIONS, SECTIONS, build_script  # noqa: E402

PYTHON = str(ROOT / ".venv/bin/python")
PYINFRA = str(ROOT / ".venv/bin/pyinfra")
TICK = os.sysconf("SC_CLK_TCK")


def remote_cpu() -> float:
    """CPU seconds used so far by the private fleet's sshd listeners and everything they
    reaped (sessions still open are counted once they end)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "sshd":
                continue
            if str(private_sandbox.STATE_DIR) not in os.readlink(f"/proc/{pid}/root"):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if Path(f"/proc/{fields[1]}/comm").read_text().strip() == "sshd":
                continue  # a session of a listener
            total += sum(int(f) for f in fields[11:15]) / TICK
        except OSError:
            continue
    return total


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    before, start = remote_cpu(), time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # deploys/audit.py: 1 when hosts drift
        raise RuntimeError(f"{' '.join(argv[-3:])}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    time.sleep(0.3)  # let the listeners reap the sessions
    return wall, remote_cpu() - before


def section_cpu(fleet: dict, repeat: int) -> list[tuple[str, float]]:
    host = fleet["hosts"][0]
    ssh = ["ssh", "-i", fleet["ssh_key"], "-o", f"UserKnownHostsFile={fleet['known_hosts']}",
           "-o", "BatchMode=yes", "-p", str(host["port"]), f"root@{host['address']}", "sh -s"]

    def quote(text: str) -> str:
        return "'" + text.replace("'", "'\"'\"'") + "'"

    lines = ['cpu() { times > /tmp/.gh-t; tail -n 1 /tmp/.gh-t | tr "ms" "  "; }']
    items = [*SECTIONS.items(), ("WHOLE-SCRIPT", build_script(ALL_SECTIONS)), ("TRUE", "true")]
    for name, code in items:
        lines.append(f"cpu > /tmp/.gh-b; i=0; while [ $i -lt {repeat} ]; do sh -c {quote(code)} "
                     f'>/dev/null 2>&1; i=$((i+1)); done; cpu > /tmp/.gh-a; echo "{name} '
                     '$(cat /tmp/.gh-b) $(cat /tmp/.gh-a)"')
    proc = subprocess.run(ssh, input="\n".join(lines) + "\nrm -f /tmp/.gh-[tab]\n",
                          capture_output=True, text=True, timeout=1800)
    out = []
    for line in proc.stdout.splitlines():
        name, *numbers = line.split()
        v = [float(x) for x in numbers]
        before, after = v[0] * 60 + v[1] + v[2] * 60 + v[3], v[4] * 60 + v[5] + v[6] * 60 + v[7]
        out.append((name, 1000 * (after - before) / repeat))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    env = {**private_sandbox.env(), "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    sandbox = private_sandbox.PrivateSandbox(PYTHON)
    try:
        fleet = sandbox.up(args.hosts)
        jobs = {"floor (exec true)": [PYINFRA, "-y", "inventories/sandbox.py", "exec", "--", "true"],
                "audit": [PYINFRA, "-y", "inventories/sandbox.py", "deploys/audit.py"]}
        for argv in jobs.values():
            timed(argv, env)  # warm-up
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
        for _ in range(args.runs):
            for name, argv in jobs.items():
                results[name].append(timed(argv, env))
        print(f"{args.hosts} hosts, {args.runs} runs, load average now {os.getloadavg()[0]:.1f}")
        for name, rs in results.items():
            print(f"  {name:<18} wall median {statistics.median(w for w, _ in rs):.2f} s "
                  f"{[round(w, 2) for w, _ in rs]}; remote CPU median "
                  f"{statistics.median(c for _, c in rs):.2f} s")
        print(f"CPU per run on {fleet['hosts'][0]['name']} ({args.repeat} runs each):")
        for name, ms in section_cpu(fleet, args.repeat):
            print(f"  {name:<22} {ms:6.1f} ms")
    finally:
        sandbox.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
