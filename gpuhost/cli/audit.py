"""``gpuhost audit``: the fleet report, its files and its exit status.

1. no host contacted: ``--cuda``, the output paths, ``--baseline``, ``--data`` and the
   inventory path are checked (exit 1)
2. ONE pyinfra process: ``pyinfra -y INVENTORY deploys/audit.py --data gpuhost_audit_dir=DIR``.
   The first host's deploy code writes ``DIR/fleet.json`` (``gpuhost.roles.audit.write_fleet``):
   the run's hosts as pyinfra's own ``--limit``/``--exclude`` select them (reachable or not),
   their groups, address and audited settings; when any audited setting is invalid it lists
   them and no host is read (this command exits 1 with them). Then every host it reaches
   writes ``DIR/<id>.json`` (its ``gpuhost.facts.host.GpuHostState``, one remote command, or
   why it could not be read; only its name if the run stopped before); a host with no file
   was never reached
3. ``gpuhost.reports.audit.build`` -> (``--baseline``: ``gpuhost.reports.baseline.compare``) -> table on
   stdout, ``--json`` / ``--html`` files, ``--prom`` metrics (``gpuhost.reports.prom``), exit
   status ``gpuhost.reports.audit.exit_code`` (0 ok,
   2 drift, 4 unhealthy, 3 failed or unreachable; 1 unusable input, or pyinfra failed before
   any host was audited: a deploy that does not import, an exception on the controller)

Why the deploy writes the inventory (issue 27 item 7), not a read of it in this process
through pyinfra's API: that read costs this process pyinfra's import (~0.35 s, measured) and
the inventory's own code a second time, and pyinfra's inventory loader
(``pyinfra_cli.inventory``) is not public API; the deploy already has pyinfra's own view,
``--data``, group data and ``--limit`` applied, at no cost. Before this, a second pyinfra
process (``pyinfra INVENTORY debug-inventory --json``, ~0.7 s) ran first. It still runs, as
the only fallback, when no host ran the audit deploy (every host unreachable: pyinfra stops
with "No hosts remaining!" before any deploy code; ``--limit`` matched no host; pyinfra
failed first): then there is no ``fleet.json``, and that read names the hosts, their
addresses and settings, so those reports and exit statuses are as before.

``gpuhost report merge SHARD.json...`` (``merge()``) reads shards' documents instead of
running pyinfra, then does step 3 the same way (``gpuhost.reports.merge``).

pyinfra's own output (connection errors included) goes to stderr as it comes; it is also
read for its connection errors ("[HOST] Could not connect (...)"): only those make a host
"unreachable" (issue 23 item 8: a pyinfra crash was reported as every host unreachable).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuhost.reports import audit, baseline, prom, text as report, merge as merging
from gpuhost.cli import (
    CliError,
    data_args,
    deploy_file,
    inventory_path,
    limit_args,
    pyinfra_command,
    read_inventory,
    run_pyinfra,
    select_hosts,
)

DEPLOY = "audit.py"  # in gpuhost.deploys (cli.deploy_file)
DIR_KEY = "gpuhost_audit_dir"  # read by deploys/audit.py
FLEET_FILE = "fleet.json"  # written into DIR by gpuhost.roles.audit.write_fleet


def _output_path(value: str | None, option: str) -> Path | None:
    if not value:
        return None
    path = Path(value).resolve()
    if option == "--prom" and path.is_dir():
        return path  # one file per host in it
    if not path.parent.is_dir():
        raise CliError(f"{option} {value}: directory {path.parent} does not exist; create it first")
    return path


def desired_for(hosts: list[dict]) -> dict[str, dict[str, Any]]:
    """Each host's audited settings; one AuditError listing every invalid value."""
    desired, problems = {}, []
    for entry in hosts:
        try:
            desired[entry["name"]] = audit.desired_settings(entry.get("data") or {},
                                                            entry["name"])
        except audit.AuditError as error:
            problems += str(error).splitlines()[1:]
    if problems:
        raise audit.AuditError("invalid settings for the audit:\n" + "\n".join(problems))
    return desired


def read_fleet(directory: Path) -> dict[str, Any] | None:
    """``DIR/fleet.json`` as ``gpuhost.roles.audit.write_fleet`` wrote it (``{"hosts":
    [{"name", "groups", "data", "desired"}], "problems": [...]}``), or None when no host ran
    the audit deploy (or the file is not that)."""
    try:
        fleet = json.loads((directory / FLEET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(fleet, dict) or not isinstance(fleet.get("hosts"), list)
            or not isinstance(fleet.get("problems"), list)
            or not all(isinstance(h, dict) and isinstance(h.get("name"), str)
                       for h in fleet["hosts"])):
        return None
    return fleet


def read_results(directory: Path) -> dict[str, dict[str, Any]]:
    """The per-host files ``deploys/audit.py`` wrote: host name -> its record."""
    records = {}
    for file in sorted(directory.glob("*.json")):
        if file.name == FLEET_FILE:
            continue
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
        except ValueError:
            continue  # a torn file: that host counts as not finished
        if isinstance(record, dict) and isinstance(record.get("host"), str):
            records[record["host"]] = record
    return records


# How pyinfra (3.10, pyinfra/connectors/ssh.py and api/host.py) logs a host it could not
# connect to: "[NAME] Could not connect (REASON)" and its siblings. Only such a line makes a
# host "unreachable"; a host without a result and without one was not audited (pyinfra
# stopped first).
CONNECT_ERRORS = ("Could not connect", "Could not resolve hostname", "SSH error", "EOF error",
                  "Authentication error", "SSH host key error")
# pyinfra's own stage lines, not errors
_STAGES = ("--> Loading", "--> Connecting", "--> Preparing", "--> Disconnecting",
           "--> Beginning", "--> Results", "--> Detected", "--> Skipping", "--> Starting")


def connect_errors(lines: list[str], names: set[str]) -> dict[str, str]:
    """Host name -> pyinfra's connection error, for the hosts pyinfra could not connect to."""
    found = {}
    for line in lines:
        text = line.strip()
        name, _, message = text[1:].partition("]")  # pyinfra pads "[NAME]" to align names
        message = message.strip()
        if text.startswith("[") and name in names and message.startswith(CONNECT_ERRORS):
            found[name] = message
    return found


def pyinfra_error(lines: list[str]) -> str:
    """pyinfra's last error line (``--> ...``) and the line that ends its traceback."""
    marks = [i for i, line in enumerate(lines)
             if line.startswith("--> ") and not line.startswith(_STAGES)]
    if not marks:
        return ""
    head = lines[marks[-1]][4:].strip().rstrip(":")
    tail = next((line.strip() for line in reversed(lines[marks[-1] + 1:]) if line.strip()), "")
    return f"{head}: {tail}" if tail and not tail.startswith("File ") else head


def pyinfra_failure(code: int, hosts: list[dict], records: dict[str, dict[str, Any]],
                    unreachable: dict[str, str], lines: list[str]) -> str | None:
    """Why pyinfra itself failed, when it told nothing about any host: it exited non-zero,
    no host wrote a result, and not every host was unreachable (e.g. the audit deploy does
    not import, an exception before any host). None when the hosts can be reported."""
    if code == 0 or records or all(entry["name"] in unreachable for entry in hosts):
        return None
    error = pyinfra_error(lines)
    return (f"pyinfra failed (exit {code}) before any host was audited"
            + (f": {error}" if error else "") + ". Its output is above: fix that and run "
            "gpuhost audit again.")


def host_results(hosts: list[dict], records: dict[str, dict[str, Any]],
                 unreachable: dict[str, str] | None = None, code: int = 0,
                 ) -> dict[str, Any]:
    """Host name -> GpuHostState or ``audit.HostError``, for every selected host.
    ``unreachable``: pyinfra's connection error per host (``connect_errors``); ``code``:
    pyinfra's exit status."""
    results: dict[str, Any] = {}
    unreachable = unreachable or {}
    for entry in hosts:
        name, record = entry["name"], records.get(entry["name"])
        if record is None and name in unreachable:
            data = entry.get("data") or {}
            address = data.get("ssh_hostname") or name
            port = data.get("ssh_port") or 22
            results[name] = audit.HostError("unreachable", (
                f"cannot connect to {address} port {port}: {unreachable[name]}"))
        elif record is None:
            results[name] = audit.HostError("failed", (
                f"not audited: pyinfra stopped (exit {code}) before it reached this host; "
                "see its error above"))
        elif record.get("state") is not None:
            results[name] = record["state"]
        else:
            results[name] = audit.HostError("failed", record.get("error") or (
                "the audit did not finish on this host (the run stopped early; see pyinfra's "
                "output above)"))
    return results


@contextmanager
def no_gc() -> Iterator[None]:
    """Python's cyclic GC off while millions of (acyclic) JSON objects are built: reading
    10,000 host records takes a third of the time (bench/merge.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_document(path: str, option: str) -> dict[str, Any]:
    """A JSON report from disk; CliError naming the file when it cannot be read."""
    try:
        with no_gc():
            return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"{option} {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise CliError(f"{option} {path}: not JSON ({error})") from None


def read_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    previous = read_document(path, "--baseline")
    try:
        baseline.check(previous, f"--baseline {path}")
    except audit.AuditError as error:
        raise CliError(str(error)) from None
    return previous


def finish(document: dict[str, Any], args: argparse.Namespace,
           previous: dict[str, Any] | None) -> int:
    """Baseline, files, table, exit status: the common end of audit and merge."""
    json_out = _output_path(args.json_out, "--json")
    html_out = _output_path(args.html_out, "--html")
    prom_out = _output_path(getattr(args, "prom_out", None), "--prom")
    if previous is not None:
        document["baseline"] = baseline.compare(previous, document)
    for path, text in ((json_out, report.render_json), (html_out, report.render_html)):
        if path:
            path.write_text(text(document), encoding="utf-8")
    written = prom.write(document, prom_out) if prom_out else []
    out = sys.stdout
    out.write("\n" + report.render_table(document, colour=report.use_colour(out),
                                         details=getattr(args, "details", False)))
    for path in (json_out, html_out):
        if path:
            out.write(f"report written to {path}\n")
    if prom_out:
        out.write(f"metrics written to {prom_out}"
                  + (f" ({len(written)} files)\n" if prom_out.is_dir() else "\n"))
    out.flush()
    return audit.exit_code(document)


def merge(args: argparse.Namespace) -> int:
    """``gpuhost report merge SHARD.json... [--json OUT] [--html OUT] [--baseline PREV]``."""
    try:
        _output_path(args.json_out, "--json")
        _output_path(args.html_out, "--html")
        _output_path(args.prom_out, "--prom")
        previous = read_baseline(args.baseline)
        shards = [(path, read_document(path, "shard")) for path in args.shards]
        with no_gc():
            document = merging.merge(shards, fail_on=args.fail_on_health)
    except (CliError, merging.MergeError) as error:
        print(f"gpuhost report merge: {error}", file=sys.stderr)
        return audit.EXIT_USAGE
    return finish(document, args, previous)


def _fallback_hosts(pyinfra: list[str], inventory: str, args: argparse.Namespace,
                    ) -> tuple[list[dict], dict[str, dict[str, Any]]]:
    """The selected hosts and their audited settings from ``pyinfra debug-inventory`` (a
    second pyinfra process): only when no host ran the audit deploy (no ``fleet.json``)."""
    hosts = select_hosts(read_inventory(pyinfra, inventory, args.data), args.limit)
    if not hosts:
        raise CliError(f"no host of {args.inventory} matches --limit {' '.join(args.limit)}"
                       if args.limit else f"no host in {args.inventory}")
    return hosts, desired_for(hosts)


def run(args: argparse.Namespace) -> int:
    err = sys.stderr
    try:
        try:
            cuda = audit.parse_cuda(args.cuda)
        except audit.AuditError as error:  # its hint names pyinfra's --data cuda=...
            raise CliError(str(error).split(". Pass it as")[0]) from None
        _output_path(args.json_out, "--json")
        _output_path(args.html_out, "--html")
        _output_path(args.prom_out, "--prom")
        previous = read_baseline(args.baseline)
        pyinfra = pyinfra_command(args.pyinfra)
        inventory = inventory_path(args.inventory)
        extra = data_args(args.data)
        deploy = deploy_file(DEPLOY)
    except (CliError, audit.AuditError) as error:
        print(f"gpuhost audit: {error}\nNothing was read from any host.", file=err)
        return audit.EXIT_USAGE
    output: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpuhost-audit-") as directory:
        code, _ = run_pyinfra([*pyinfra, "-y", inventory, deploy, *limit_args(args.limit),
                               "--data", f"{DIR_KEY}={directory}", *extra], out=err,
                              lines=output)
        fleet = read_fleet(Path(directory))
        records = read_results(Path(directory))
    try:
        if fleet is None:  # no host ran the deploy: unreachable, no host selected, a crash
            hosts, desired = _fallback_hosts(pyinfra, inventory, args)
        elif fleet["problems"]:
            raise audit.AuditError("invalid settings for the audit:\n"
                                   + "\n".join(fleet["problems"]))
        else:
            hosts = fleet["hosts"]
            desired = {entry["name"]: entry["desired"] for entry in hosts}
    except (CliError, audit.AuditError) as error:
        print(f"gpuhost audit: {error}\nNothing was read from any host.", file=err)
        return audit.EXIT_USAGE
    unreachable = connect_errors(output, {entry["name"] for entry in hosts})
    failure = pyinfra_failure(code, hosts, records, unreachable, output)
    if failure:
        print(f"gpuhost audit: {failure}\nNo host was audited.", file=err)
        return audit.EXIT_USAGE
    document = audit.build(host_results(hosts, records, unreachable, code), desired,
                           cuda=cuda, fail_on=args.fail_on_health)
    return finish(document, args, previous)
