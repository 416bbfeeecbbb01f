"""``gpuhost recover``: reset one GPU of one host without rebooting it (docs/recover.md).

    gpuhost recover INVENTORY --limit HOST [--gpu N] [--force] [--reboot-fallback]
                              [--data KEY=VALUE]...

Runs ``pyinfra -y INVENTORY deploys/recover.py --limit HOST`` (its human output passed
through) and reads the events the deploy appends to a record file on the controller
(``--data gpuhost_recover_record=PATH``). Exit status: 0 recovered, or nothing asks for a
reset; 1 the reset failed or the GPU is not healthy after it (the GPU's clients are as
before); 2 refused or unusable input, nothing changed; 130 interrupted (the same command
resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

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

DEPLOY = "recover.py"  # in gpuhost.deploys (cli.deploy_file)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", type=int, default=None, metavar="N",
                        help="the GPU's nvidia-smi index (default: the one GPU whose findings "
                             "ask for a reset)")
    parser.add_argument("--force", action="store_true",
                        help="go on while processes or containers use that GPU (its containers "
                             "are stopped and started again)")
    parser.add_argument("--reboot-fallback", action="store_true",
                        help="reboot the host when the reset fails (only where reboot_policy "
                             "is when_needed)")


def read_events(path: Path) -> list[dict]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def outcome(events: list[dict], code: int, host: str) -> tuple[int, str]:
    """(exit status, last line) from the deploy's events and pyinfra's exit status."""
    mine = [e for e in events if e.get("host") == host]
    last = mine[-1] if mine else {}
    kind, reason = last.get("event"), last.get("reason", "")
    if kind == "refused":
        return 2, f"gpuhost recover: refused, nothing was changed on {host}: {reason}"
    if kind == "nothing" and code == 0:
        return 0, f"nothing to recover on {host}: {reason}"
    if kind == "done" and code == 0:
        return 0, f"done: {reason}"
    if kind == "failed":
        return 1, f"gpuhost recover: FAILED on {host}: {reason}"
    return 1, (f"gpuhost recover: pyinfra exited with status {code} on {host} before the GPU "
               "was judged (see its output above); run the same command again to resume")


def run(args: argparse.Namespace) -> int:
    """``gpuhost recover`` with parsed arguments (``gpuhost.cli``)."""
    try:
        inventory = inventory_path(args.inventory)
        pyinfra = pyinfra_command(args.pyinfra)
        extra = data_args(args.data)
        if not args.limit:
            raise CliError("--limit HOST is required: gpuhost recover works on one host")
        hosts = select_hosts(read_inventory(pyinfra, inventory, args.data), args.limit)
        if len(hosts) != 1:
            names = ", ".join(h["name"] for h in hosts) or "none"
            raise CliError(f"--limit {' '.join(args.limit)} selects {len(hosts)} hosts "
                           f"({names}): name exactly one")
        if args.gpu is not None and args.gpu < 0:
            raise CliError("--gpu must be a GPU index (0 or more)")
    except CliError as error:
        print(f"gpuhost recover: {error}", file=sys.stderr)
        return 2
    name = hosts[0]["name"]
    with tempfile.TemporaryDirectory(prefix="gpuhost-recover-") as tmp:
        record = Path(tmp) / "events.jsonl"
        argv = [*pyinfra, "-y", inventory, deploy_file(DEPLOY), "--limit", name,
                "--data", f"gpuhost_recover_record={record}",
                "--data", f"gpuhost_recover_force={'true' if args.force else 'false'}",
                "--data", f"gpuhost_recover_reboot={'true' if args.reboot_fallback else 'false'}",
                *extra]
        if args.gpu is not None:
            argv += ["--data", f"gpuhost_recover_gpu={args.gpu}"]
        try:
            code, _ = run_pyinfra(argv)
        except KeyboardInterrupt:
            say("gpuhost recover: interrupted; run the same command again to resume")
            return 130
        status, line = outcome(read_events(record), code, name)
    say(line)
    return status


def main(argv: list[str] | None = None) -> int:
    """``python -m gpuhost.cli.recover ARGS`` = ``gpuhost recover ARGS``."""
    from gpuhost import cli

    return cli.main(["recover", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
