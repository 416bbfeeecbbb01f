"""gpuhost's front door: one command per job.

    gpuhost audit INVENTORY [--json OUT] [--html OUT] [--cuda X.Y] [--limit PATTERN]...
                            [--data KEY=VALUE]... [--baseline PREVIOUS.json]
                            [--fail-on-health critical|warning|never]
    gpuhost upgrade INVENTORY [--canary N] [--batch N|P%] [--limit PATTERN]...
                              [--data KEY=VALUE]... [--report PATH]
    gpuhost kernel-update INVENTORY [--dry] [--kernel DISTRO=RELEASE]... [--canary N] [--batch N|P%]
    gpuhost recover INVENTORY --limit HOST [--gpu N] [--force] [--reboot-fallback]
    gpuhost mig plan INVENTORY [--limit PATTERN]... [--data KEY=VALUE]...
    gpuhost report merge SHARD.json... [--json OUT] [--html OUT] [--baseline PREVIOUS.json]
                                       [--fail-on-health critical|warning|never]

(``python -m gpuhost.cli ...`` before ``make setup`` installed the console script.)

Both drive pyinfra through its command line and read only what pyinfra and gpuhost's
deploys write for machines: ``pyinfra INVENTORY debug-inventory --json`` (hosts, groups,
data), the ``--json`` results of a deploy run, and JSON files the deploys write on the
controller when ``--data`` asks them to. No pyinfra import here: ``gpuhost/`` stays the pure
core, and pyinfra's human output is passed through untouched, never parsed.

Exit statuses: ``gpuhost audit`` and ``gpuhost report merge`` 0 every host healthy and as
wanted, 2 drift, 4 unhealthy (a critical health finding), 3 failed or unreachable hosts (3
wins over 4, 4 over 2), 1 unusable input or pyinfra error; ``gpuhost upgrade`` 0 done, 1 a
batch failed, 2 refused or unusable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO



# What an installed gpuhost has to provision with: the deploy as a function (pyinfra runs a
# function given by its dotted name), not the checkout's deploys/gpu_host.py.
PROVISION = ("Provisioning is a pyinfra deploy: pyinfra INVENTORY gpuhost.deploys.api.gpu_host "
             "--dry (settings as KEY=VALUE after the name, or from your inventory data), or "
             "gpu_host(...) from gpuhost.deploys.api in a deploy file of your own.")


class CliError(Exception):
    """Unusable input or a pyinfra run that printed nothing usable; the message says why."""


def deploy_file(name: str) -> str:
    """The absolute path of gpuhost's deploy ``name`` (``audit.py``) inside the package
    ``gpuhost.deploys`` as Python finds it (installed, or the checkout's ``deploys/``), so
    pyinfra runs it from the user's directory. Found without importing it (no pyinfra here)."""
    spec = importlib.util.find_spec("gpuhost.deploys")
    folders = list(spec.submodule_search_locations or ()) if spec else []
    for folder in folders:
        path = Path(folder) / name
        if path.is_file():
            return str(path)
    raise CliError(f"gpuhost's deploy {name} is missing (looked in "
                   f"{', '.join(folders) or 'no gpuhost.deploys package'}): this gpuhost "
                   "install is incomplete; reinstall it (pip install --force-reinstall gpuhost)")


def say(text: str = "", out: TextIO | None = None) -> None:
    print(text, file=out or sys.stdout, flush=True)


def pyinfra_command(option: str | None) -> list[str]:
    """The pyinfra to run: ``--pyinfra COMMAND`` split on spaces, else this Python's."""
    return option.split() if option else [sys.executable, "-m", "pyinfra"]


def data_args(items: Sequence[str]) -> list[str]:
    """``--data`` once per ``KEY=VALUE`` (checked: pyinfra would silently ignore a bad one)."""
    args: list[str] = []
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--data {item!r}: want KEY=VALUE")
        args += ["--data", item]
    return args


def limit_args(patterns: Sequence[str]) -> list[str]:
    """``--limit`` once per pattern: pyinfra 3.10 does not split a comma-separated value."""
    args: list[str] = []
    for pattern in patterns:
        args += ["--limit", pattern]
    return args


def inventory_path(inventory: str) -> str:
    """The inventory as an absolute path."""
    path = Path(inventory).resolve()
    if not path.is_file():
        raise CliError(f"no inventory file {inventory}")
    return str(path)


def read_inventory(pyinfra: list[str], inventory: str, data: Sequence[str] = ()) -> list[dict]:
    """Every host of the inventory, in inventory order: ``{"name", "groups", "data"}`` from
    ``pyinfra INVENTORY debug-inventory --json`` (group data and ``--data`` applied; no host
    is contacted)."""
    done = subprocess.run([*pyinfra, inventory, "debug-inventory", "--json", *data_args(data)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CliError(f"cannot read the inventory {inventory}:\n{done.stderr.strip()[-2000:]}")
    try:
        hosts = json.loads(done.stdout)
    except ValueError as error:
        raise CliError(f"pyinfra debug-inventory printed no JSON ({error})") from error
    if not isinstance(hosts, list) or not all(isinstance(h, dict) and "name" in h for h in hosts):
        raise CliError("pyinfra debug-inventory printed JSON that is not a list of hosts")
    return hosts


def select_hosts(hosts: list[dict], patterns: Sequence[str]) -> list[dict]:
    """The hosts ``--limit PATTERN...`` selects, like pyinfra: a pattern that names a group
    selects its hosts, any other pattern matches host names with fnmatch. Inventory order."""
    if not patterns:
        return list(hosts)
    groups = {g for h in hosts for g in h.get("groups", [])}
    chosen: set[str] = set()
    for pattern in patterns:
        if pattern in groups:
            chosen |= {h["name"] for h in hosts if pattern in h.get("groups", [])}
        else:
            chosen |= {h["name"] for h in hosts if fnmatch.fnmatch(h["name"], pattern)}
    return [h for h in hosts if h["name"] in chosen]


def run_pyinfra(argv: list[str], out: TextIO | None = None,
                capture_json: bool = False, lines: list[str] | None = None) -> tuple[int, Any]:
    """Run pyinfra from the current directory, its human output going straight to ``out``
    (default stdout). With ``capture_json`` pyinfra's stdout (``--json``) is kept and parsed
    (None when it printed no JSON, e.g. after an error). With ``lines`` (and no
    ``capture_json``) its output is also appended there, line by line, as it is copied to
    ``out``. Returns (exit status, JSON)."""
    stream = out or sys.stdout
    say(f"$ {' '.join(argv)}", stream)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if lines is not None and not capture_json:
        return _run_teed(argv, env, stream, lines), None
    try:
        target: Any = stream.fileno()  # a real file: pyinfra writes to it directly
    except (AttributeError, OSError, ValueError):
        target = subprocess.PIPE  # e.g. a captured stream in tests: copied below
    proc = subprocess.Popen(argv, env=env, text=True,
                            stdout=subprocess.PIPE if capture_json else target,
                            stderr=subprocess.STDOUT if target is subprocess.PIPE
                            and not capture_json else target)
    try:
        stdout, stderr = proc.communicate()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=60)
        raise
    if target is subprocess.PIPE:
        stream.write((stderr or "") + ("" if capture_json else stdout or ""))
        stream.flush()
    payload = None
    if capture_json and stdout and stdout.strip():
        try:
            payload = json.loads(stdout)
        except ValueError:
            payload = None
    return proc.returncode, payload


def _run_teed(argv: list[str], env: dict[str, str], stream: TextIO, lines: list[str]) -> int:
    proc = subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            stream.write(line)
            stream.flush()
            lines.append(line.rstrip("\n"))
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=60)
        raise


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inventory", help="pyinfra inventory file, e.g. inventories/prod.py")
    parser.add_argument("--limit", action="append", default=[], metavar="PATTERN",
                        help="only these hosts or groups (pyinfra --limit syntax; repeatable)")
    parser.add_argument("--data", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to every pyinfra run as --data (repeatable)")
    parser.add_argument("--pyinfra", default=None, metavar="COMMAND",
                        help="pyinfra command (default: this Python's `-m pyinfra`)")


AUDIT_EXIT = ("Exit 0 every host healthy and as wanted, 2 drift, 4 unhealthy (a health finding "
              "at or above --fail-on-health, critical by default), 3 failed or unreachable "
              "hosts (3 wins over 4, 4 over 2), 1 unusable input.")


def _report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", dest="json_out", default=None, metavar="OUT",
                        help="write the report as JSON (docs/audit-schema.md)")
    parser.add_argument("--html", dest="html_out", default=None, metavar="OUT",
                        help="write the report as a self-contained HTML page")
    parser.add_argument("--prom", dest="prom_out", default=None, metavar="PATH",
                        help="write Prometheus metrics (node_exporter textfile): a directory "
                             "gets one gpuhost-HOST.prom per host, a file the fleet "
                             "(docs/metrics.md)")
    parser.add_argument("--details", action="store_true",
                        help="the table lists every drift item and finding per host instead "
                             "of one entry per identical one across hosts")
    parser.add_argument("--baseline", default=None, metavar="PREVIOUS.json",
                        help="show what changed since that audit's JSON (gpuhost.audit/1 or /2): "
                             "hosts new and gone, new and resolved drift and findings, new Xids")
    parser.add_argument("--fail-on-health", default="critical",
                        choices=("critical", "warning", "never"),
                        help="which health findings make the exit status 4 (default critical; "
                             "never: health does not change the exit status)")


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog="gpuhost", description="Audit GPU hosts and upgrade their NVIDIA driver with "
                                    "pyinfra. " + PROVISION)
    commands = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    audit = commands.add_parser(
        "audit", help="read-only fleet report; exit 0 ok, 2 drift, 4 unhealthy, "
                      "3 failed/unreachable",
        description="Read every host's GPU stack and health (one remote command per host), "
                    "compare it with the inventory, judge its health (docs/health.md), print "
                    "the table, write JSON/HTML. " + AUDIT_EXIT)
    _common(audit)
    _report_options(audit)
    audit.add_argument("--cuda", default=None, metavar="X.Y",
                       help="also answer which hosts can run images built for this CUDA version")
    upgrade = commands.add_parser(
        "upgrade", help="rolling driver upgrade: canary, batches, stop at the first failure",
        description="Move GPU hosts to the driver in nvidia_driver_version: canary first, "
                    "then batches; the first failed host stops every later batch "
                    "(docs/upgrades.md). Exit 0 done, 1 a batch failed, 2 refused or "
                    "unusable input, 130 interrupted.")
    _common(upgrade)
    upgrade.add_argument("--canary", type=int, default=1, metavar="N",
                         help="hosts upgraded alone first (default 1; 0: no canary)")
    upgrade.add_argument("--batch", default="1", metavar="N|P%",
                         help="hosts per batch after the canary: a count or a percentage of "
                              "the remaining hosts (default 1)")
    _break_lock(upgrade)
    upgrade.add_argument("--report", default=None, metavar="PATH",
                         help="JSON report (default ./gpuhost-upgrade-<UTC time>.json); events "
                              "go to PATH with .events.jsonl")
    kernel = commands.add_parser(
        "kernel-update", help="rolling kernel update: the NVIDIA module built before the boot",
        description="Move GPU hosts to a newer kernel (the newest of the running flavour, or "
                    "--kernel): install it with its headers, let DKMS build the NVIDIA module, "
                    "check it is there, only then boot it; canary and batches as `gpuhost "
                    "upgrade` (docs/kernel-updates.md). Exit 0 done, 1 a batch failed, 2 "
                    "refused or unusable input, 130 interrupted.")
    _common(kernel)
    from gpuhost.cli import kernel_update as _cli_kernel

    _cli_kernel.add_arguments(kernel)
    _break_lock(kernel)
    recover = commands.add_parser(
        "recover", help="reset one GPU of one host for findings that ask for a reset",
        description="Reset one GPU without rebooting the host, for findings whose catalogued "
                    "action is a GPU reset (docs/recover.md): drain hook, stop the clients "
                    "that block it, persistence off for that GPU, nvidia-smi -r -i N, "
                    "everything back as before, verify with the health checks, uncordon "
                    "hook. Exit 0 recovered or nothing to do, 1 the reset failed or did "
                    "not help (clients as before), 2 refused, 130 interrupted.")
    _common(recover)
    from gpuhost.cli import recover as _cli_recover

    _cli_recover.add_arguments(recover)
    _break_lock(recover)
    report = commands.add_parser(
        "report", help="work with audit reports: merge the shards of several controllers",
        description="Work with the JSON of `gpuhost audit --json` (docs/audit-schema.md).")
    jobs = report.add_subparsers(dest="report_command", required=True, metavar="JOB")
    merge = jobs.add_parser(
        "merge", help="one report and one exit status from several shards' JSON",
        description="Merge the JSON reports of audits run over parts of a fleet (e.g. one "
                    "controller per inventory group, `gpuhost audit INVENTORY --limit GROUP "
                    "--json SHARD.json`) into one report: the table on stdout, --json/--html "
                    "files. A host in two shards is an error. " + AUDIT_EXIT)
    merge.add_argument("shards", nargs="+", metavar="SHARD.json",
                       help="gpuhost.audit/2 documents, one per shard")
    _report_options(merge)
    mig = commands.add_parser(
        "mig", help="MIG configurations: what would change (docs/mig.md)",
        description="Work with the inventory's MIG settings (mig_config, mig_mode/mig_layout).")
    mig_jobs = mig.add_subparsers(dest="mig_command", required=True, metavar="JOB")
    plan = mig_jobs.add_parser(
        "plan", help="per host and GPU: now -> wanted; never changes a host",
        description="Validate the MIG settings (no host contacted), read every host with "
                    "one read-only command (the audit's) and print per GPU `now -> wanted` "
                    "or `as wanted`. Exit 0 nothing to do, 2 changes pending, 1 invalid "
                    "configuration or a host that could not be read.")
    _common(plan)
    data_age = commands.add_parser(
        "data-age", help="which vendor data files in gpuhost/data are older than six months",
        description="List gpuhost's vendor data files (gpuhost/data/*.json) with the date each "
                    "was last read from its source (_date), oldest first; exit 1 when one is "
                    "older than six months.")
    from gpuhost.reports import data_age as _data_age

    _data_age.add_arguments(data_age)
    return main_parser


def _break_lock(command: argparse.ArgumentParser) -> None:
    command.add_argument("--break-lock", action="store_true",
                         help="take over another gpuhost run's lock on the hosts by hand "
                              "(--data lock_break=true); only when that run is dead "
                              "(docs/locking.md)")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "break_lock", False):  # as the one-line message of a held lock says
        args.data = [*args.data, "lock_break=true"]
    if args.command == "audit":
        from gpuhost.cli import audit as cli_audit

        return cli_audit.run(args)
    if args.command == "mig":
        from gpuhost.cli import mig as cli_mig

        return cli_mig.run(args)
    if args.command == "data-age":
        from gpuhost.reports import data_age

        return data_age.run(args.today, args.max_age_days)
    if args.command == "recover":
        from gpuhost.cli import recover as cli_recover

        return cli_recover.run(args)
    if args.command == "kernel-update":
        from gpuhost.cli import kernel_update as cli_kernel

        return cli_kernel.run(args)
    if args.command == "report":
        from gpuhost.cli import audit as cli_audit

        return cli_audit.merge(args)
    from gpuhost.cli import upgrade as cli_upgrade

    return cli_upgrade.run(args)

