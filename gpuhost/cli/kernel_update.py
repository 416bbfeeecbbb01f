"""``gpuhost kernel-update``: move GPU hosts to a newer kernel with the NVIDIA module built
for it before it boots (docs/kernel-updates.md).

    gpuhost kernel-update INVENTORY --dry [--kernel TAG=RELEASE]... [--limit PATTERN]...
    gpuhost kernel-update INVENTORY [--canary 1] [--batch 2 | --batch 25%] [--report PATH]

The rolling machinery is the driver upgrade's (``gpuhost.cli.upgrade``: pre-flight over every
host, canary, batches, the first failed host stops every later batch, a rerun resumes, the
summary and the JSON report); the deploy is ``deploys/kernel_update.py``. ``--dry`` runs
only the pre-flight and prints per host the kernel it would install, whether its headers
are there and whether DKMS must build the NVIDIA module for it. Exit status: 0 done (or
planned), 1 a batch failed, 2 refused or unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuhost import kernel_update
from gpuhost.cli import CliError, deploy_file, run_pyinfra, say
from gpuhost.cli.upgrade import Upgrade, UpgradeError, _data_args, failed_hosts
from gpuhost.upgrade import rollout

DEPLOY = "kernel_update.py"  # in gpuhost.deploys
TARGETS_KEY = "gpuhost_kernel_targets"  # roles/kernel_update.py reads them
REMOVE_KEY = "gpuhost_kernel_remove_failed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry", action="store_true",
                        help="change nothing: print per host the kernel it would get, whether "
                             "its headers are available and whether DKMS must build the "
                             "NVIDIA module for it")
    parser.add_argument("--kernel", action="append", default=[], metavar="DISTRO=RELEASE",
                        help="this exact kernel (as uname -r prints it) on the hosts of that "
                             "distribution tag (debian12, ubuntu2404, rhel9...) instead of the "
                             "newest of the running flavour (repeatable)")
    parser.add_argument("--remove-failed", action="store_true",
                        help="remove a new kernel again when DKMS cannot build the NVIDIA "
                             "module for it (default: leave it installed, not the boot default)")
    parser.add_argument("--canary", type=int, default=1, metavar="N",
                        help="hosts updated alone first (default 1; 0: no canary)")
    parser.add_argument("--batch", default="1", metavar="N|P%",
                        help="hosts per batch after the canary: a count or a percentage of "
                             "the remaining hosts (default 1)")
    parser.add_argument("--report", default=None, metavar="PATH",
                        help="JSON report (default ./gpuhost-kernel-update-<UTC time>.json); "
                             "events go to PATH with .events.jsonl")


class KernelUpdate(Upgrade):
    """One run: the driver upgrade's machinery with the kernel update's deploy."""

    def __init__(self, args: argparse.Namespace):
        targets = kernel_update.parse_targets(",".join(args.kernel))  # ValueError: exit 2
        if not args.report:
            args.report = Path(f"gpuhost-kernel-update-{rollout_stamp()}.json")
        self.targets = ",".join(f"{tag}={release}" for tag, release in targets.items())
        super().__init__(args)

    def _deploy(self, run: str, hosts, *flags: str):
        data = list(self.args.data) + ([f"{TARGETS_KEY}={self.targets}"] if self.targets else [])
        if getattr(self.args, "remove_failed", False):
            data.append(f"{REMOVE_KEY}=true")
        argv = [*self.pyinfra, "-y", "--json", *flags, self.inventory, deploy_file(DEPLOY),
                *rollout.limit_args(hosts),
                *_data_args(self.events_path, f"{self.run_id} {run}", data)]
        code, payload = run_pyinfra(argv, capture_json=True)
        return code, failed_hosts(payload)

    COMMAND = "gpuhost kernel-update"

    def refused(self) -> None:
        say(self.plan_table())

    def planned(self, todo: list[str]) -> int | None:
        if not self.args.dry:
            return None
        say()
        say(self.plan_table())
        say()
        say(f"--dry: nothing was changed; {len(todo)} host(s) would get a new kernel")
        return 0

    def nothing_to_do(self) -> str:
        return "nothing to do: every host runs its target kernel"

    def done(self, count: int) -> str:
        return f"done: {count} host(s) moved to their new kernel"

    def plan_table(self) -> str:
        """The pre-flight's plan per host: running, target, headers, DKMS build, what."""
        events = {e["host"]: e for e in self._events("preflight")
                  if e["event"] in ("plan", "refused")}
        header = ("host", "running", "target", "headers", "module", "plan")
        rows = []
        for name in self.results:
            event = events.get(name, {})
            build = {"installed": "built", "needed": "to build"}.get(event.get("build"), "-")
            rows.append((name, event.get("from") or "-", event.get("to") or "-",
                         event.get("headers") or "-", build,
                         event.get("detail") or event.get("reason") or "-"))
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r[:-1], widths, strict=True))
                 + "  " + r[-1] for r in [header, *rows]]
        return "\n".join(lines)


def rollout_stamp() -> str:
    import time

    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def run(args: argparse.Namespace) -> int:
    """``gpuhost kernel-update`` with parsed arguments (``gpuhost.cli``)."""
    try:
        update = KernelUpdate(args)
        hosts = update.hosts()
    except (ValueError, UpgradeError, CliError, rollout.RolloutError) as error:
        print(f"gpuhost kernel-update: {error}", file=sys.stderr)
        return 2
    return update.run_to_end(hosts)
