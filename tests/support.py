"""What every integration test module needs from pyinfra and the sandbox, written once.

    run_pyinfra(inventory, *args, env=None, timeout=600, check=True) -> PyinfraRun
        the pyinfra CLI with ``--json`` (pyinfra's own results: per operation, which hosts
        changed, failed, had nothing to do); ``.totals``, ``.failed_hosts``, ``.output``
    wait_for_reboot(ssh, boots, name, before, timeout=300)
        after a reboot was asked for: the host's supervisor counted a new boot and its
        systemd is up (running or degraded)

Imported by the root conftest.py (fixtures ``pyinfra``, ``sandbox_tools``) and by test
modules that run pyinfra against an inventory of their own.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pyinfra_bin() -> str:
    venv = ROOT / ".venv" / "bin" / "pyinfra"
    if venv.exists():
        return str(venv)
    return str(Path(sys.executable).parent / "pyinfra")


@dataclass
class PyinfraRun:
    """One pyinfra run: exit status, its JSON results (None when pyinfra stopped before
    running operations, e.g. bad inventory data) and its log (stderr)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    results: dict | None = field(default=None)

    @property
    def output(self) -> str:
        """Everything pyinfra printed: its log and (for a run without --json) results."""
        return self.stdout + self.stderr

    @property
    def totals(self) -> dict[str, int]:
        """pyinfra's grand total: host-operations, changed, error, no change (the columns
        of its 'Grand total' row)."""
        if self.results is None:
            raise AssertionError(f"pyinfra ran no operation (exit {self.returncode}):\n"
                                 f"{self.output[-3000:]}")
        t = self.results["totals"]
        return {"operations": t["hosts"], "changed": t["success"], "error": t["error"],
                "no_change": t["no_change"]}

    @property
    def failed_hosts(self) -> list[str]:
        return list((self.results or {}).get("failed_hosts", []))

    def hosts_that_ran(self) -> set[str]:
        """Hosts that ran at least one operation (changed or not)."""
        ran: set[str] = set()
        for op in (self.results or {}).get("operations", []):
            ran.update(op["success"], op["no_change"], op["error"])
        return ran

    def summary_row(self, operation: str) -> list[str]:
        """The row of pyinfra's results table for the operation whose name starts with
        OPERATION: [hosts, success, error, no change], "-" for none (as pyinfra prints)."""
        for op in (self.results or {}).get("operations", []):
            if op["name"].startswith(operation):
                cells = [op["hosts"], len(op["success"]), len(op["error"]), len(op["no_change"])]
                return [str(c) if c else "-" for c in cells]
        raise AssertionError(f"no operation {operation!r} in pyinfra's results:\n"
                             f"{self.output[-3000:]}")

    def changed(self) -> dict[str, list[str]]:
        """{operation name: hosts it changed} for the operations that changed something."""
        return {op["name"]: op["success"] for op in (self.results or {}).get("operations", [])
                if op["success"]}


def run_pyinfra(inventory: str, *args: str, env: dict | None = None, timeout: float = 600,
                check: bool = True, json_results: bool = True) -> PyinfraRun:
    """The pyinfra CLI from the project root (a subprocess: the CLI monkey-patches gevent).
    With ``json_results`` (default) ``--json`` is added for an operation run (not for
    ``fact``/``exec``, whose stdout the caller reads)."""
    argv = [inventory, *args]
    command_words = {"fact", "exec", "debug-inventory", "all-facts"}
    if json_results and not command_words.intersection(args) and "--json" not in args:
        argv.append("--json")
    proc = subprocess.run([pyinfra_bin(), *argv], cwd=ROOT, text=True, capture_output=True,
                          timeout=timeout,
                          env={**os.environ, **(env or {}), "PYINFRA_PROGRESS": "off"})
    results = None
    if "--json" in argv and proc.stdout.strip().startswith("{"):
        try:
            results = json.loads(proc.stdout).get("results")
        except json.JSONDecodeError:
            results = None
    run = PyinfraRun(argv, proc.returncode, proc.stdout, proc.stderr, results)
    if check and proc.returncode != 0:
        pytest.fail(f"pyinfra {shlex.join(argv)} failed (exit {proc.returncode}):\n"
                    f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return run


def wait_for_reboot(ssh, boots, name: str, before: int, timeout: float = 300) -> None:
    """Wait until host NAME booted again (its boot count above ``before``) and its systemd
    finished starting (running, or degraded). ``ssh(name, command, check=, timeout=)``
    returns a CompletedProcess; ``boots(name)`` is the sandbox's boot count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if boots(name) > before:
            proc = ssh(name, "systemctl is-system-running --wait", check=False, timeout=120)
            if proc.stdout.strip() in ("running", "degraded"):
                return
        time.sleep(1)
    pytest.fail(f"{name} did not come back from the reboot within {timeout:.0f}s")


def default_driver() -> str:
    """The sandbox inventory's driver version (the fake artifacts' manifest: its
    ``default_driver``, else the newest), as inventories/sandbox.py picks it."""
    # imported here, not at the top: conftest.py imports this module before it sets the
    # private fleet's environment, which sandbox.paths reads once, at its import
    from sandbox import paths

    out = paths.NVIDIA_CACHE
    manifest = json.loads((out / "manifest.json").read_text())
    return manifest.get("default_driver") or manifest["driver_versions"][-1]
