"""A private sandbox fleet for the benchmark, beside the developers' own one.

``make bench`` must not take over the sandbox that tests and people are using (a bench that
resizes it to 50 hosts breaks every test running against it, and their ``sandbox up``
reshapes the fleet under the bench). So the bench runs the sandbox code from a snapshot
copy in a temporary directory, with:

* its own runtime and state directories: /run/gpuhost-bench, /var/lib/gpuhost-bench;
* host N at 127.77.2.N:2222 (the shared fleet uses 127.77.1.N), the HTTP mirror on
  127.77.0.1:8001 (the shared one uses 8000), its own cgroup parent name;
* its own script paths: ``sandbox down`` finds the processes to kill by the paths of the
  sandbox scripts, so neither fleet's ``down`` can stop the other's hosts.

The caches (base root filesystems, package mirror) are shared read-only: same recipes, same
hashes, nothing is rebuilt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = Path(os.environ.get("GPUHOST_BENCH_RUN_DIR", "/run/gpuhost-bench"))
STATE_DIR = Path(os.environ.get("GPUHOST_BENCH_STATE_DIR", "/var/lib/gpuhost-bench"))
ADDRESS_PREFIX = "127.77.2."
HTTP_PORT = 8001

LAUNCHER = f"""
import sys
sys.path.insert(0, sys.argv.pop(1))
from sandbox import paths
paths.host_address = lambda index: {ADDRESS_PREFIX!r} + str(index)
paths.HTTP_PORT = {HTTP_PORT}
paths.MIRROR_URL = f"http://{{paths.HTTP_ADDRESS}}:{HTTP_PORT}"
paths.CGROUP_PARENT_PREFIX = "gpuhost-bench"
from sandbox.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def env() -> dict[str, str]:
    """The environment that points the sandbox code and inventories/sandbox.py at the
    private fleet."""
    return {**os.environ, "GPUHOST_SANDBOX_DIR": str(RUN_DIR),
            "GPUHOST_SANDBOX_STATE": str(STATE_DIR)}


class PrivateSandbox:
    def __init__(self, python: str) -> None:
        self.python = os.path.abspath(python) if os.sep in python else python
        self.copy = Path(tempfile.mkdtemp(prefix="gpuhost-bench-sandbox-"))
        shutil.copytree(ROOT / "sandbox", self.copy / "sandbox",
                        ignore=shutil.ignore_patterns("__pycache__"))

    def cli(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.python, "-c", LAUNCHER, str(self.copy), *args],
                              cwd=self.copy, env=env(), text=True, capture_output=True,
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"private sandbox {' '.join(args)} failed (exit "
                               f"{proc.returncode}):\n{proc.stdout[-2500:]}\n{proc.stderr[-2500:]}")
        return proc

    def up(self, hosts: int) -> dict:
        self.cli("up", "--hosts", str(hosts), "--ol", "0", "--docker-hosts", "0")
        fleet = json.loads((RUN_DIR / "fleet.json").read_text())
        wrong = [h["address"] for h in fleet["hosts"] if not h["address"].startswith(ADDRESS_PREFIX)]
        if wrong:
            raise RuntimeError(f"private sandbox hosts on shared addresses: {wrong}")
        return fleet

    def down(self) -> None:
        try:
            self.cli("down")
        finally:
            shutil.rmtree(self.copy, ignore_errors=True)
