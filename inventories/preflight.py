"""Validate gpuhost's inventory data before pyinfra connects to any host.

pyinfra connects to every host right after it loads the inventory, and only then runs the
deploy. An inventory file that calls ``check()`` at its end makes a bad value stop the run
while no host has been contacted, with one line per problem:

    from inventories.preflight import check
    check(__file__)

It builds the inventory exactly as pyinfra will (group_data folders and ``--data``
overrides included, read from pyinfra's own command line) and validates every host with
``gpuhost.settings.validate``. It only acts for the deploys that use gpuhost's settings
(``deploys/gpu_host.py``, ``deploys/upgrade_driver.py``): fact gathering and the read-only
audit are never blocked. The deploys validate again themselves (before changing anything)
for inventories that do not call it.
"""

from __future__ import annotations

import os
import sys

from gpuhost import settings

DEPLOYS_WITH_SETTINGS = ("gpu_host.py", "upgrade_driver.py")
_GUARD = "GPUHOST_PREFLIGHT_RUNNING"


def _cli_params() -> dict | None:
    try:
        import click

        context = click.get_current_context(silent=True)
    except ImportError:  # pragma: no cover (click comes with pyinfra)
        return None
    return dict(context.params) if context is not None else None


def check(inventory_file: str) -> None:
    """Stop pyinfra (exit 2) when any host's gpuhost settings are invalid."""
    if os.environ.get(_GUARD):
        return
    params = _cli_params()
    if not params:
        return  # not under pyinfra's command line (e.g. imported by a test or the API)
    operations = [str(op) for op in params.get("operations") or ()]
    if not any(op.endswith(DEPLOYS_WITH_SETTINGS) for op in operations):
        return
    from pyinfra_cli.inventory import make_inventory
    from pyinfra_cli.util import parse_cli_arg

    override = {}
    for item in params.get("data") or ():
        key, _, value = str(item).partition("=")
        override[key] = parse_cli_arg(value)
    os.environ[_GUARD] = "1"
    try:
        inventory = make_inventory(
            inventory_file,
            override_data=override,
            cwd=os.getcwd(),
            group_data_directories=params.get("group_data"),
        )
    finally:
        del os.environ[_GUARD]
    problems = settings.group_problems(
        {host.name: settings.validate(host.data.dict()) for host in inventory}
    )
    if problems:
        print("gpuhost: inventory data is invalid; no host was contacted:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        print("Fix these values (docs/settings.md lists every key) and run again.", file=sys.stderr)
        sys.exit(2)
