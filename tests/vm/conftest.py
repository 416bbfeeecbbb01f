"""Fixtures for the QEMU/TCG VM tests (marker `vm`): `make test-vm`.

The tests share one VM per session (a TCG boot takes minutes): booted on a throw-away overlay
by the first test that asks for it, booted again only if a test powered it off (the power-off
test runs last), and powered off at the end of the session, pass or fail. The VM tooling lives in vagrant/qemu/ (not a package: `vagrant` would shadow
python-vagrant, which Molecule's vagrant driver imports), so it is loaded from its path; the
tests get it, the pyinfra runner and the timings through the fixtures below.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import timing_plugin

REPO = Path(__file__).resolve().parents[2]
BASE_DIR = Path(os.environ.get("GPUHOST_VM_TEST_DIR", "/run/gpuhost-vm-pytest"))
# One directory per test session: two sessions on one machine get two VMs, not one fight.
RUN_DIR = BASE_DIR / f"session-{os.getpid()}"
MIRROR_DIR = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost")) / "mirror" / "debian"
MANIFEST = Path(os.environ.get("GPUHOST_NVIDIA_OUT", os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia")) / "manifest.json"
TIMINGS = RUN_DIR / "timings.json"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


vm_module = _load("gpuhost_qemu_vm", REPO / "vagrant/qemu/vm.py")
run_pyinfra = _load("gpuhost_run_pyinfra", REPO / "vagrant/run_pyinfra.py")


def count_qemu_cpu(machine) -> None:
    """The powered-off VM's QEMU CPU seconds into the suite's timing table (QEMU runs
    daemonized: no child of the test process, no sandbox cgroup)."""
    timing_plugin.extra_cpu(machine.qemu_cpu_seconds)
    machine.qemu_cpu_seconds = 0.0


def record_timing(key: str, seconds: float) -> None:
    """Keep the measured durations (boot, converge, reboot, whole test) in timings.json."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    data = json.loads(TIMINGS.read_text()) if TIMINGS.is_file() else {}
    data[key] = round(seconds, 1)
    TIMINGS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"[timing] {key}: {seconds:.1f} s")


@pytest.fixture(scope="session", name="record_timing")
def record_timing_fixture():
    """record_timing(key, seconds): keep a measured duration in the session's timings.json."""
    return record_timing


@pytest.fixture(scope="session", name="vm_module")
def vm_module_fixture():
    """vagrant/qemu/vm.py (VM, VMError, pid_alive, image)."""
    return vm_module


@pytest.fixture(scope="session", name="run_pyinfra")
def run_pyinfra_fixture():
    """vagrant/run_pyinfra.py (converge, facts, converged_problems)."""
    return run_pyinfra


@pytest.fixture(scope="session")
def vm_run_dir() -> Path:
    """This session's directory: timings.json and the pyinfra logs."""
    return RUN_DIR


@pytest.fixture(scope="session")
def vm_image(sandbox_caches):
    """The cached image (built on first use, ~70 s; `make vm-image` builds it ahead). Its
    kernel is the one the sandbox mirror serves headers for: vagrant/qemu/image.py builds or
    updates the mirror first (sandbox/debian_kernel.py chooses the kernel)."""
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


class SharedVM:
    """The session's one VM: booted on first use, and again when a test powered it off."""

    def __init__(self):
        self.machine = vm_module.VM(run_dir=RUN_DIR)
        self.boot_error: str | None = None
        self.boots = 0

    def get(self):
        if self.boot_error is not None:
            # Do not spend another boot timeout per test on a VM that could not boot.
            pytest.fail(f"the VM did not come up (earlier in this session): {self.boot_error}")
        if self.machine.running():
            return self.machine
        t0 = time.monotonic()
        try:
            state = self.machine.up()
        except vm_module.VMError as exc:
            self.boot_error = str(exc)
            pytest.fail(f"the VM did not come up: {exc}")
        self.boots += 1
        suffix = "" if self.boots == 1 else f"_{self.boots}"
        record_timing(f"boot_to_ssh{suffix}", state["boot_seconds"])
        record_timing(f"boot_to_ready{suffix}", time.monotonic() - t0)
        return self.machine


@pytest.fixture(scope="session")
def shared_vm(vm_image, sandbox_caches):
    """The session's SharedVM; whatever is still running at the end is powered off and its
    overlay deleted. GPUHOST_VM_DIR points pyinfra's inventory at it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUHOST_VM_DIR", str(RUN_DIR))
        shared = SharedVM()
        yield shared
        if shared.machine.running():
            t1 = time.monotonic()
            shared.machine.down()
            count_qemu_cpu(shared.machine)
            record_timing("shutdown_at_session_end", time.monotonic() - t1)
        else:
            shared.machine.down()   # a VM that died on its own: drop its overlay and state


@pytest.fixture
def vm(shared_vm):
    """The session's booted VM (SSH up, tunnel to the mirror, GPU simulator installed),
    shared by the tests; booted here if no test did yet or one powered it off."""
    return shared_vm.get()
