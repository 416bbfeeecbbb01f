"""``gpuhost upgrade``: rolling NVIDIA driver upgrades, canary first, then batches, stop at
the first failure (docs/upgrades.md).

    gpuhost upgrade INVENTORY [--canary 1] [--batch 2 | --batch 25%] [--limit PATTERN]...
                              [--data KEY=VALUE]... [--report PATH]

(``python -m gpuhost.cli.upgrade INVENTORY ...`` is the same command.) pyinfra is run through
its command line, and only its machine-readable output is read:

1. the hosts, in inventory order: ``pyinfra INVENTORY debug-inventory --json``
2. pre-flight, nothing touched: ``pyinfra -y --dry INVENTORY deploys/upgrade_driver.py``
   over every host; the deploy checks them all and refuses with one line per host
3. per batch: ``pyinfra -y --json --fail-percent 0 INVENTORY deploys/upgrade_driver.py
   --limit H...``; its human output (stderr) is passed through, its JSON results (stdout) say
   which hosts pyinfra failed; a failed host stops every later batch
4. a summary table (host, from, to, result, time) and a JSON report

Hosts already at the target are skipped (a rerun resumes). The deploy appends one event per
line to ``REPORT.events.jsonl`` (``--data gpuhost_upgrade_record=...``), which is where the
per-host from/to/result come from. Exit status: 0 done, 1 a batch failed, 2 refused or
unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from gpuhost.upgrade import rollout
from gpuhost.cli import (
    CliError,
    data_args,
    deploy_file,
    inventory_path,
    pyinfra_command,
    read_inventory,
    run_pyinfra,
    say,
    select_hosts,
)

DEPLOY = "upgrade_driver.py"  # in gpuhost.deploys (cli.deploy_file)


class UpgradeError(Exception):
    """Stops the wrapper with a message (exit status 2)."""


def _data_args(record: Path, run: str, extra: list[str]) -> list[str]:
    return ["--data", f"gpuhost_upgrade_record={record}", "--data", f"gpuhost_upgrade_run={run}",
            *data_args(extra)]


def failed_hosts(payload: object) -> set[str] | None:
    """The hosts pyinfra failed, from its ``--json`` results (None: it printed none)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), dict):
        return None
    return {str(name) for name in payload["results"].get("failed_hosts") or []}


class Upgrade:
    """One wrapper run: preflight, batches, results, report."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.size = rollout.parse_batch_size(args.batch)
        if args.canary < 0:
            raise UpgradeError("--canary must be 0 or more")
        self.inventory = inventory_path(args.inventory)
        data_args(args.data)  # refuse a bad --data before anything runs
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.report_path = Path(args.report or f"gpuhost-upgrade-{stamp}.json").resolve()
        self.events_path = self.report_path.with_suffix(".events.jsonl")
        self.pyinfra = pyinfra_command(args.pyinfra)
        self.run_id = f"{stamp}-{os.getpid()}"  # event labels: unique even in a reused file
        self.started = time.time()
        self.batches: list[rollout.Batch] = []
        self.results: dict[str, rollout.HostResult] = {}
        self.target: str | None = None

    def hosts(self) -> list[str]:
        """Host names in inventory order, restricted like pyinfra's --limit."""
        hosts = select_hosts(read_inventory(self.pyinfra, self.inventory, self.args.data),
                             self.args.limit)
        if not hosts:
            raise UpgradeError(f"no host of {self.args.inventory} matches --limit "
                               f"{' '.join(self.args.limit)}")
        return [h["name"] for h in hosts]

    def _deploy(self, run: str, hosts: list[str] | tuple[str, ...],
                *flags: str) -> tuple[int, set[str] | None]:
        """One pyinfra run of the deploy over ``hosts``: its exit status and the hosts its
        ``--json`` results name as failed."""
        argv = [*self.pyinfra, "-y", "--json", *flags, self.inventory, deploy_file(DEPLOY),
                *rollout.limit_args(hosts),
                *_data_args(self.events_path, f"{self.run_id} {run}", self.args.data)]
        code, payload = run_pyinfra(argv, capture_json=True)
        return code, failed_hosts(payload)

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
            code, failed = self._deploy(batch.label, batch.hosts, "--fail-percent", "0")
            events = self._events(batch.label)
            outcome = rollout.batch_outcome(batch, events, code, failed)
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

    # what a command built on this class says and does at the ends of its run
    COMMAND = "gpuhost upgrade"

    def refused(self) -> None:
        """Called when the pre-flight refused the run, before the summary."""

    def planned(self, todo: list[str]) -> int | None:
        """Called after the pre-flight: an exit status ends the run there (``--dry``)."""
        return None

    def nothing_to_do(self) -> str:
        return f"nothing to do: every host runs {self.target}"

    def done(self, count: int) -> str:
        return f"done: {count} host(s) upgraded to {self.target}"

    def run_to_end(self, hosts: list[str]) -> int:
        """Pre-flight, batches, the summary and the report; the exit status: 0 done (or
        nothing to do), 1 a batch failed, 2 refused, 130 interrupted."""
        try:
            try:
                todo = self.preflight(hosts)
            except UpgradeError as error:
                self.refused()
                self.finish(False, f"{self.COMMAND}: {error}")
                return 2
            code = self.planned(todo)
            if code is not None:
                return code
            if not todo:
                self.finish(True, self.nothing_to_do())
                return 0
            if self.run_batches(todo):
                self.finish(True, self.done(sum(r.result == "upgraded"
                                                for r in self.results.values())))
                return 0
            failed = [r for r in self.results.values() if r.result == "failed"]
            names = ", ".join(f"{r.host} ({r.detail})" for r in failed) or "see above"
            self.finish(False, f"{self.COMMAND}: FAILED: {names}; fix it and run the same "
                               "command again: finished hosts are skipped")
            return 1
        except KeyboardInterrupt:
            self.finish(False, f"{self.COMMAND}: interrupted; run the same command again to "
                               "resume (finished hosts are skipped)")
            return 130
        except rollout.RolloutError as error:
            self.finish(False, f"{self.COMMAND}: {error}")
            return 2


def run(args: argparse.Namespace) -> int:
    """``gpuhost upgrade`` with parsed arguments (``gpuhost.cli``)."""
    try:
        upgrade = Upgrade(args)
        hosts = upgrade.hosts()
    except (UpgradeError, CliError, rollout.RolloutError) as error:
        print(f"gpuhost upgrade: {error}", file=sys.stderr)
        return 2
    return upgrade.run_to_end(hosts)


def main(argv: list[str] | None = None) -> int:
    """``python -m gpuhost.cli.upgrade ARGS`` = ``gpuhost upgrade ARGS``."""
    from gpuhost import cli

    return cli.main(["upgrade", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
