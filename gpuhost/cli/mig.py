"""``gpuhost mig plan INVENTORY``: what the MIG settings would change, per host and GPU.

1. the hosts and their data, no host contacted (``pyinfra INVENTORY debug-inventory``);
   every host's settings are validated (``gpuhost.settings.validate``: the named
   configuration's file and name, and its layouts against the GPU models they name),
   an invalid one stops here (exit 1) before any host is contacted;
2. one read-only run of ``deploys/audit.py`` (the audit's single remote command per host)
   for the hosts with MIG settings;
3. per host and GPU: ``now -> wanted`` or ``as wanted``; the host's own GPUs are checked
   against their entries (a layout that does not fit is exit 1).

Exit status 0 nothing to do, 2 changes pending, 1 invalid configuration, unusable input or
a host that could not be read. Nothing is ever changed on a host.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from gpuhost import settings
from gpuhost.mig import config as mig_config, plan as mig_plan
from gpuhost.cli import (
    CliError,
    data_args,
    deploy_file,
    inventory_path,
    limit_args,
    pyinfra_command,
    read_inventory,
    run_pyinfra,
    say,
    select_hosts,
)
from gpuhost.cli.audit import DEPLOY, DIR_KEY, read_results

EXIT_OK, EXIT_INVALID, EXIT_PENDING = 0, 1, 2


def host_entries(data: Mapping[str, Any]) -> tuple[str, tuple[mig_config.Entry, ...]] | None:
    """(what the host asks for, as entries) from its valid settings; None: no MIG settings.
    ``mig_mode``/``mig_layout`` become one entry for every GPU, as roles/mig.py applies
    them."""
    config = settings.resolve(data)
    if config.mig_config is not None:
        return (f"mig_config {config.mig_config}",
                mig_config.select(config.mig_config_file, config.mig_config))
    if config.mig_mode is None:
        return None
    layout = [str(p) for p in config.mig_layout or ()]
    pairs: dict[str, int] = {}
    for name in layout:
        pairs[name] = pairs.get(name, 0) + 1
    shown = f"mig_mode {config.mig_mode}" + (f", mig_layout {', '.join(layout)}"
                                              if config.mig_layout is not None else "")
    entry = mig_config.Entry(1, "all", (), config.mig_mode == "enabled", tuple(pairs.items()))
    if config.mig_layout is None and config.mig_mode == "enabled":
        return shown, (_mode_only(entry),)
    return shown, (entry,)


class _ModeOnly(mig_config.Entry):
    """mig_mode: enabled without mig_layout: the instances are left as they are."""


def _mode_only(entry: mig_config.Entry) -> mig_config.Entry:
    return _ModeOnly(entry.position, entry.devices, entry.device_filter, entry.enabled, ())


def plan_host(name: str, asked: str, entries: tuple[mig_config.Entry, ...],
              state: Mapping[str, Any], out: TextIO) -> int:
    """Print one host's plan; its exit status."""
    gpus = state.get("gpus") or []
    wants = mig_plan.wanted(entries, gpus)
    problems = mig_plan.host_problems(asked, wants, gpus)
    if problems:
        say(f"{name} ({asked}): INVALID", out)
        for problem in problems:
            say(f"    {problem}", out)
        return EXIT_INVALID
    if not wants:
        say(f"{name} ({asked}): no MIG-capable GPU matches; nothing to do", out)
        return EXIT_OK
    plans = mig_plan.diff(wants, state["mig"]["gpus"])
    layout_free = {i for i, w in wants.items() if isinstance(w.entry, _ModeOnly)}
    pending = [p for p in plans if p.mode_change or (p.layout_change and p.index not in layout_free)]
    say(f"{name} ({asked}): {'CHANGES' if pending else 'as wanted'}", out)
    for plan in plans:
        wanted = plan.wanted
        changes = plan.mode_change or (plan.layout_change and plan.index not in layout_free)
        if plan.index in layout_free:
            wanted = "MIG enabled (instances left as they are)"
        label = f"    GPU {plan.index} {plan.model or ''}".rstrip()
        say(f"{label}: {plan.now} -> {wanted}" if changes else f"{label}: as wanted ({plan.now})",
            out)
    return EXIT_PENDING if pending else EXIT_OK


def run(args: argparse.Namespace) -> int:
    err, out = sys.stderr, sys.stdout
    try:
        pyinfra = pyinfra_command(args.pyinfra)
        inventory = inventory_path(args.inventory)
        extra = data_args(args.data)
        hosts = select_hosts(read_inventory(pyinfra, inventory, args.data), args.limit)
        if not hosts:
            raise CliError(f"no host of {args.inventory} matches --limit {' '.join(args.limit)}")
    except CliError as error:
        print(f"gpuhost mig plan: {error}\nNothing was read from any host.", file=err)
        return EXIT_INVALID
    problems = settings.validate_inventory({h["name"]: h.get("data") or {} for h in hosts})
    if problems:
        print("gpuhost mig plan: invalid settings; no host was contacted:\n  "
              + "\n  ".join(problems), file=err)
        return EXIT_INVALID
    asked = {}
    for entry in hosts:
        found = host_entries(entry.get("data") or {})
        if found is None:
            say(f"{entry['name']}: no MIG settings (mig_config, mig_mode); nothing to do", out)
        else:
            asked[entry["name"]] = found
    if not asked:
        return EXIT_OK
    with tempfile.TemporaryDirectory(prefix="gpuhost-mig-plan-") as directory:
        run_pyinfra([*pyinfra, "-y", inventory, deploy_file(DEPLOY), *limit_args(sorted(asked)),
                     "--data", f"{DIR_KEY}={directory}", *extra], out=err)
        records = read_results(Path(directory))
    status = EXIT_OK
    for name, (what, entries) in asked.items():
        record = records.get(name) or {}
        if record.get("state") is None:
            say(f"{name} ({what}): could not be read: {record.get('error') or 'unreachable'}",
                out)
            status = EXIT_INVALID
            continue
        result = plan_host(name, what, entries, record["state"], out)
        if result == EXIT_INVALID or status == EXIT_INVALID:
            status = EXIT_INVALID
        else:
            status = max(status, result)
    return status
