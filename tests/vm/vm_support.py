"""Shared helpers of the VM tests (a module with a unique name: `from conftest import`
would pick whichever conftest.py pytest imported first).

The VM tooling lives in vagrant/qemu/ (not a package: `vagrant` would shadow python-vagrant,
which Molecule's vagrant driver imports), so it is loaded from its path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BASE_DIR = Path(os.environ.get("GPUHOST_VM_TEST_DIR", "/run/gpuhost-vm-pytest"))
# One directory per test session: two sessions on one machine get two VMs, not one fight.
RUN_DIR = BASE_DIR / f"session-{os.getpid()}"
MIRROR_DIR = Path("/var/cache/gpuhost/mirror/debian")
MANIFEST = Path("/var/cache/gpuhost/nvidia/manifest.json")
TIMINGS = RUN_DIR / "timings.json"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


vm_module = _load("gpuhost_qemu_vm", REPO / "vagrant/qemu/vm.py")
run_pyinfra = _load("gpuhost_run_pyinfra", REPO / "vagrant/run_pyinfra.py")


def record_timing(key: str, seconds: float) -> None:
    """Keep the measured durations (boot, converge, reboot, whole test) in timings.json."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    data = json.loads(TIMINGS.read_text()) if TIMINGS.is_file() else {}
    data[key] = round(seconds, 1)
    TIMINGS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"[timing] {key}: {seconds:.1f} s")
