"""Validate gpuhost's inventory data before pyinfra connects to any host.

pyinfra connects to every host right after it loads the inventory, and only then runs the
deploy. An inventory file that calls ``check()`` at its end makes a bad value stop the run
while no host has been contacted, with one line per problem:

    from inventories.preflight import check
    check(__file__)

It asks pyinfra itself for the inventory it is about to use, through the CLI's
machine-readable output: ``pyinfra INVENTORY debug-inventory --json`` with the same
``--data`` and ``--group-data`` options (read from pyinfra's command line with click's
public ``get_current_context``), so group_data folders and overrides count exactly as in
the run; no host is contacted. Every host of the run (``--limit``/``--exclude``) is
validated with ``gpuhost.settings.validate``.
It only acts for the deploys that use gpuhost's settings (``deploys/gpu_host.py``,
``deploys/upgrade_driver.py``): fact gathering and the read-only audit are never blocked.
The deploys validate again themselves (before changing anything) for inventories that do
not call it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpuhost.facts.pyinfra_api import cli_values
from gpuhost import settings
from gpuhost.cli import select_hosts

DEPLOYS_WITH_SETTINGS = ("gpu_host.py", "upgrade_driver.py")
_GUARD = "GPUHOST_PREFLIGHT_RUNNING"


def _cli_params() -> dict | None:
    try:
        import click

        context = click.get_current_context(silent=True)
    except ImportError:  # pragma: no cover (click comes with pyinfra)
        return None
    return dict(context.params) if context is not None else None


def inventory_data(inventory_file: str, data=(), group_data=(), limit=(),
                   exclude=()) -> dict[str, dict]:
    """Host name -> the data pyinfra gives that host (``debug-inventory --json``), for the
    hosts this run is limited to (``--limit``/``--exclude``: a group's name or a host name
    pattern, as pyinfra matches them; gpuhost.cli.select_hosts)."""
    argv = [sys.executable, "-m", "pyinfra", inventory_file, "debug-inventory", "--json"]
    for item in data:
        argv += ["--data", str(item)]
    for folder in group_data:
        argv += ["--group-data", str(folder)]
    done = subprocess.run(argv, cwd=os.getcwd(), env={**os.environ, _GUARD: "1"},
                          capture_output=True, text=True, check=False)
    try:
        hosts = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        hosts = None
    if not isinstance(hosts, list):
        print(f"gpuhost: cannot read the inventory {inventory_file} to check it (pyinfra "
              f"debug-inventory exited {done.returncode}):\n{done.stderr.strip()[-2000:]}",
              file=sys.stderr)
        sys.exit(2)
    chosen = select_hosts(hosts, list(limit)) if limit else hosts
    dropped = {h["name"] for h in select_hosts(hosts, list(exclude))} if exclude else set()
    return {host["name"]: host.get("data") or {} for host in chosen
            if host["name"] not in dropped}


def check(inventory_file: str) -> None:
    """Stop pyinfra (exit 2) when any host's gpuhost settings are invalid."""
    if os.environ.get(_GUARD):
        return
    params = _cli_params()
    if not params:
        return  # not under pyinfra's command line (e.g. imported by a test or the API)
    operations, data, group_data, limit, exclude = cli_values(params)
    if not any(str(op).endswith(DEPLOYS_WITH_SETTINGS) for op in operations):
        return
    hosts = inventory_data(inventory_file, data, group_data, limit, exclude)
    problems = settings.validate_inventory(hosts)
    if problems:
        print("gpuhost: inventory data is invalid; no host was contacted:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print("Fix these values (docs/settings.md lists every key) and run again.", file=sys.stderr)
        sys.exit(2)
