"""Fixtures for the QEMU/TCG VM tests (marker `vm`): `make test-vm`.

Every test boots its own VM on a throw-away overlay and powers it off at the end, pass or
fail. Helpers (the VM module, the pyinfra runner, timings) are in vm_support.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vm_support import MANIFEST, MIRROR_DIR, REPO, RUN_DIR, record_timing, vm_module  # noqa: E402


@pytest.fixture(scope="session")
def vm_image():
    """The cached image (built on first use, ~70 s; `make vm-image` builds it ahead)."""
    if os.geteuid() != 0:
        pytest.fail("the VM tests run as root (QEMU image in /var/cache, state in /run)")
    return vm_module.image.build()


def _build(argv: list[str], what: str) -> None:
    res = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                         timeout=3600)
    if res.returncode != 0:
        pytest.fail(f"{what} failed (python {' '.join(argv)}):\n{(res.stderr or res.stdout)[-2000:]}")


@pytest.fixture(scope="session")
def sandbox_caches():
    """The sandbox's Debian mirror and fake NVIDIA artifacts, built when missing (cached in
    /var/cache/gpuhost). vm.py serves them itself (127.77.0.3:PORT) while the VM runs, so
    no sandbox fleet is needed. Returns the NVIDIA manifest."""
    if not (MIRROR_DIR / "dists").is_dir():
        _build(["-m", "sandbox", "mirror"], "building the sandbox mirror")
    if not MANIFEST.is_file():
        _build(["-m", "sandbox.nvidia.build"], "building the fake NVIDIA artifacts")
    return json.loads(MANIFEST.read_text())


@pytest.fixture
def vm(vm_image, sandbox_caches, monkeypatch):
    """A booted VM (SSH up, tunnel to the mirror, GPU simulator installed); powered off and
    its overlay deleted afterwards. GPUHOST_VM_DIR points pyinfra's inventory at it."""
    monkeypatch.setenv("GPUHOST_VM_DIR", str(RUN_DIR))
    machine = vm_module.VM(run_dir=RUN_DIR)
    t0 = time.monotonic()
    try:
        state = machine.up()
    except vm_module.VMError as exc:
        pytest.fail(f"the VM did not come up: {exc}")
    record_timing("boot_to_ssh", state["boot_seconds"])
    record_timing("boot_to_ready", time.monotonic() - t0)
    yield machine
    t1 = time.monotonic()
    machine.down()
    record_timing("shutdown", time.monotonic() - t1)
