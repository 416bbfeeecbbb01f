"""Rolling NVIDIA driver upgrades: canary first, then batches, stop at the first failure.

    python -m gpuhost.cli_upgrade INVENTORY [--canary 1] [--batch 2 | --batch 25%]
                                  [--limit PATTERN]... [--data KEY=VALUE]... [--report PATH]

A thin wrapper around pyinfra's own mechanisms (docs/upgrades.md):

1. the hosts, in inventory order: ``pyinfra INVENTORY debug-inventory --json``
2. pre-flight, nothing touched: ``pyinfra -y --dry INVENTORY deploys/upgrade_driver.py``
   over every host; the deploy checks them all and refuses with one line per host
3. per batch: ``pyinfra -y --fail-percent 0 INVENTORY deploys/upgrade_driver.py --limit H...``,
   its output streamed; a failed host stops every later batch
4. a summary table (host, from, to, result, time) and a JSON report

Hosts already at the target are skipped (a rerun resumes). The deploy appends one event per
line to ``REPORT.events.jsonl`` (``--data gpuhost_upgrade_record=...``), which is where the
per-host from/to/result come from. Exit status: 0 done, 1 a batch failed, 2 refused or
unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from gpuhost import rollout

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = "deploys/upgrade_driver.py"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_HOST_LINE = re.compile(r"^\s*\[([^\]]+)\] (.*)$")
_STATUS = re.compile(r"^(Success|No changes|Skipped|Error: executed \d+ commands.*|Ready: .*"
                     r"|Connected.*|Loaded fact .*)$")


class UpgradeError(Exception):
    """Stops the wrapper with a message (exit status 2)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpuhost.cli_upgrade",
        description="Move GPU hosts to the driver in nvidia_driver_version: canary first, "
                    "then batches; the first failed host stops every later batch.")
    parser.add_argument("inventory", help="pyinfra inventory file, e.g. inventories/prod.py")
    parser.add_argument("--canary", type=int, default=1, metavar="N",
                        help="hosts upgraded alone first (default 1; 0: no canary)")
    parser.add_argument("--batch", default="1", metavar="N|P%",
                        help="hosts per batch after the canary: a count or a percentage of "
                             "the remaining hosts (default 1)")
    parser.add_argument("--limit", action="append", default=[], metavar="PATTERN",
                        help="only these hosts or groups (pyinfra --limit syntax; repeatable)")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to every pyinfra run as --data (repeatable)")
    parser.add_argument("--report", default=None, metavar="PATH",
                        help="JSON report (default ./gpuhost-upgrade-<UTC time>.json); events "
                             "go to PATH with .events.jsonl")
    parser.add_argument("--pyinfra", default=None, metavar="COMMAND",
                        help="pyinfra command (default: this Python's `-m pyinfra`)")
    return parser


def say(text: str = "") -> None:
    print(text, flush=True)


def _pyinfra_command(option: str | None) -> list[str]:
    return option.split() if option else [sys.executable, "-m", "pyinfra"]


def inventory_hosts(pyinfra: list[str], inventory: str, patterns: list[str]) -> list[str]:
    """Host names in inventory order, restricted like pyinfra's --limit (group names, then
    fnmatch on host names)."""
    done = subprocess.run([*pyinfra, inventory, "debug-inventory", "--json"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UpgradeError(f"cannot read the inventory {inventory}:\n{done.stderr.strip()[-2000:]}")
    try:
        hosts = json.loads(done.stdout)
    except ValueError as error:
        raise UpgradeError(f"pyinfra debug-inventory printed no JSON ({error})") from error
    names = [h["name"] for h in hosts if not patterns or any(
        p in h.get("groups", []) or fnmatch.fnmatch(h["name"], p) for p in patterns)]
    if not names:
        raise UpgradeError(f"no host of {inventory} matches --limit {' '.join(patterns)}")
    return names


def run_pyinfra(argv: list[str]) -> tuple[int, dict[str, list[str]]]:
    """Run pyinfra, streaming its output; return its exit status and each host's lines."""
    say(f"$ {' '.join(argv)}")
    host_lines: dict[str, list[str]] = {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, env=env)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            match = _HOST_LINE.match(_ANSI.sub("", line.rstrip("\n")))
            if match and not _STATUS.match(match.group(2).strip()):
                host_lines.setdefault(match.group(1), []).append(match.group(2).strip())
        return proc.wait(), host_lines
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=60)
        raise


def _data_args(record: Path, run: str, extra: list[str]) -> list[str]:
    args = ["--data", f"gpuhost_upgrade_record={record}", "--data", f"gpuhost_upgrade_run={run}"]
    for item in extra:
        args += ["--data", item]
    return args


class Upgrade:
    """One wrapper run: preflight, batches, results, report."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.size = rollout.parse_batch_size(args.batch)
        if args.canary < 0:
            raise UpgradeError("--canary must be 0 or more")
        self.inventory = str(Path(args.inventory).resolve())
        if not Path(self.inventory).is_file():
            raise UpgradeError(f"no inventory file {args.inventory}")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.report_path = Path(args.report or f"gpuhost-upgrade-{stamp}.json").resolve()
        self.events_path = self.report_path.with_suffix(".events.jsonl")
        self.pyinfra = _pyinfra_command(args.pyinfra)
        self.run_id = f"{stamp}-{os.getpid()}"  # event labels: unique even in a reused file
        self.started = time.time()
        self.batches: list[rollout.Batch] = []
        self.results: dict[str, rollout.HostResult] = {}
        self.target: str | None = None

    def _deploy(self, run: str, hosts: list[str] | tuple[str, ...],
                *flags: str) -> tuple[int, dict]:
        argv = [*self.pyinfra, "-y", *flags, self.inventory, DEPLOY, *rollout.limit_args(hosts),
                *_data_args(self.events_path, f"{self.run_id} {run}", self.args.data)]
        return run_pyinfra(argv)

    def _events(self, run: str) -> list[dict]:
        return rollout.for_run(rollout.read_events(self.events_path), f"{self.run_id} {run}")

    def preflight(self, hosts: list[str]) -> list[str]:
        """Check every host without touching any; return the hosts still to upgrade."""
        say(f"==> pre-flight: checking {len(hosts)} host(s), nothing is changed")
        code, _ = self._deploy("preflight", hosts, "--dry")
        events = self._events("preflight")
        for event in events:
            if event["event"] == "refused":
                self.results[event["host"]] = rollout.HostResult(
                    event["host"], event.get("from"), event.get("to"), "refused",
                    detail=event.get("reason", ""))
        if code != 0:
            refused = sorted({e["host"] for e in events if e["event"] == "refused"})
            for name in hosts:
                self.results.setdefault(name, rollout.HostResult(
                    name, result="not started", detail="the pre-flight refused the run"))
            raise UpgradeError(
                "pre-flight refused the upgrade, no host was touched"
                + (f" (refused: {', '.join(refused)}); see the lines above" if refused
                   else f": pyinfra exited with status {code}; see its output above"))
        plans = {e["host"]: e for e in events if e["event"] == "plan"}
        unknown = sorted(set(hosts) - set(plans))
        if unknown:
            raise UpgradeError(f"pre-flight did not check {', '.join(unknown)} (a --limit "
                               "pattern that is also a group name?); nothing was touched")
        todo = []
        for name in hosts:
            plan = plans[name]
            self.target = plan.get("to") or self.target
            if plan["action"] == "none":
                self.results[name] = rollout.HostResult(
                    name, plan.get("from"), plan.get("to"), "already at target", 0.0,
                    detail="skipped: nothing to do")
            else:
                self.results[name] = rollout.HostResult(name, plan.get("from"), None, "pending")
                todo.append(name)
        return todo

    def run_batches(self, todo: list[str]) -> bool:
        self.batches = rollout.plan_batches(todo, self.args.canary, self.size)
        for batch in self.batches:
            for name in batch.hosts:
                self.results[name].batch = batch.label
        say(f"==> {len(todo)} host(s) to upgrade to {self.target}: " + "; ".join(
            f"{b.label}: {', '.join(b.hosts)}" for b in self.batches))
        for number, batch in enumerate(self.batches):
            say(f"==> {batch.label}: {', '.join(batch.hosts)}")
            code, logs = self._deploy(batch.label, batch.hosts, "--fail-percent", "0")
            events = self._events(batch.label)
            outcome = rollout.batch_outcome(batch, events, code, logs)
            self.results.update(outcome.results)
            self.write_report(ok=False, message=f"running: {batch.label} finished")
            if not outcome.ok:
                later = [h for b in self.batches[number + 1:] for h in b.hosts]
                for name in later:
                    self.results[name].result = "not started"
                    self.results[name].detail = f"{batch.label} failed"
                say(f"==> {batch.label} FAILED; no later batch starts"
                    + (f" ({len(later)} host(s) left as they were)" if later else ""))
                for line in outcome.failures:
                    say(f"    {line}")
                return False
        return True

    def write_report(self, ok: bool, message: str) -> None:
        data = rollout.report(list(self.results.values()), self.batches, target=self.target,
                              ok=ok, started=self.started, finished=time.time(),
                              inventory=self.args.inventory, message=message)
        data["events"] = str(self.events_path)
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.report_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.report_path)

    def finish(self, ok: bool, message: str) -> None:
        self.write_report(ok, message)
        say()
        say(rollout.summary_table(list(self.results.values())))
        say()
        say(f"{message} ({rollout.format_seconds(time.time() - self.started)}); report: "
            f"{self.report_path}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        upgrade = Upgrade(args)
        hosts = inventory_hosts(upgrade.pyinfra, upgrade.inventory, args.limit)
    except (UpgradeError, rollout.RolloutError) as error:
        print(f"gpuhost-upgrade: {error}", file=sys.stderr)
        return 2
    try:
        try:
            todo = upgrade.preflight(hosts)
        except UpgradeError as error:
            upgrade.finish(False, f"gpuhost-upgrade: {error}")
            return 2
        if not todo:
            upgrade.finish(True, f"nothing to do: every host runs {upgrade.target}")
            return 0
        if upgrade.run_batches(todo):
            done = sum(r.result == "upgraded" for r in upgrade.results.values())
            upgrade.finish(True, f"done: {done} host(s) upgraded to {upgrade.target}")
            return 0
        failed = [r for r in upgrade.results.values() if r.result == "failed"]
        names = ", ".join(f"{r.host} ({r.detail})" for r in failed) or "see above"
        upgrade.finish(False, f"gpuhost-upgrade: FAILED: {names}; fix it and run the same "
                              "command again: finished hosts are skipped")
        return 1
    except KeyboardInterrupt:
        upgrade.finish(False, "gpuhost-upgrade: interrupted; run the same command again to "
                              "resume (finished hosts are skipped)")
        return 130
    except rollout.RolloutError as error:
        upgrade.finish(False, f"gpuhost-upgrade: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
