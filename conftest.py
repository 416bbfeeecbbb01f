"""Fixtures shared by every test tree (tests/, sandbox/tests/, vagrant/tests/).

The integration tests' sandbox fleet (real SSH hosts on this machine), one per session
whatever tree asks for it:

    fleet        session: brings the sandbox up with `sandbox_spec`, yields fleet.json's
                 data, runs `sandbox down` at the end unless GPUHOST_KEEP_SANDBOX=1 or the
                 fleet was already running when the session started (someone else's)
    sandbox_spec session: {"hosts": 4, "ol": 2, "docker_hosts": 1}; override the fixture
                 in a conftest of your own, or set GPUHOST_SANDBOX_SPEC='{"hosts": 6, ...}'
    pyinfra      run the pyinfra CLI (subprocess: the CLI monkey-patches gevent) from the
                 project root against inventories/sandbox.py
    ssh          run a shell command on a sandbox host over real SSH

Tests that must run after every other sandbox test (they take the fleet down) carry
@pytest.mark.sandbox_last; they are moved to the end of the session (see
pytest_collection_modifyitems for the order of the others).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
INVENTORY = "inventories/sandbox.py"
DEFAULT_SPEC = {"hosts": 4, "ol": 2, "docker_hosts": 1}
_SESSION = {"was_up": False}


def run_dir() -> Path:
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


def pyinfra_bin() -> str:
    venv = ROOT / ".venv" / "bin" / "pyinfra"
    if venv.exists():
        return str(venv)
    return str(Path(sys.executable).parent / "pyinfra")


def sandbox_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m sandbox ARGS` from the project root; fails the test with its output."""
    proc = subprocess.run([sys.executable, "-m", "sandbox", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"python -m sandbox {' '.join(args)} failed (exit {proc.returncode}):\n"
                    f"{proc.stdout}\n{proc.stderr}")
    return proc


def up_args(spec: dict) -> list[str]:
    args = ["up", "--hosts", str(spec["hosts"]), "--ol", str(spec.get("ol", 0)),
            "--docker-hosts", str(spec.get("docker_hosts", 1))]
    if spec.get("ubuntu"):
        args += ["--ubuntu", str(spec["ubuntu"])]
    if spec.get("overrides"):
        args += ["--spec", json.dumps(spec["overrides"])]
    return args


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sandbox_last: run after every other test (takes the sandbox fleet down)")
    config.addinivalue_line(
        "markers", "sandbox_bare: needs the fleet's hosts as `sandbox up` made them (host "
        "traits shown before any deploy): runs before the other tests that share the fleet")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that share the fleet run first (those marked sandbox_bare before the rest),
    in the order of their file names whatever
    tree they are in (test_audit, test_fake_packages_installed, test_gpu_host, test_sandbox,
    test_upgrade: the upgrade reshapes the fleet and takes it down, so it comes last), then
    the others in collection order, then those marked sandbox_last."""
    last = [i for i in items if i.get_closest_marker("sandbox_last")]
    rest = [i for i in items if i not in last]
    shared = sorted((i for i in rest if i.get_closest_marker("integration")),
                    key=lambda i: (not i.get_closest_marker("sandbox_bare"), i.path.name))
    # (stable: test order within a file is kept)
    items[:] = shared + [i for i in rest if not i.get_closest_marker("integration")] + last


@pytest.fixture(scope="session")
def sandbox_spec() -> dict:
    env = os.environ.get("GPUHOST_SANDBOX_SPEC")
    return json.loads(env) if env else dict(DEFAULT_SPEC)


@pytest.fixture(scope="session")
def fleet(sandbox_spec: dict):
    if os.geteuid() != 0:
        pytest.fail("the integration tests need root (namespaces, mounts): run them as root")
    _SESSION["was_up"] = (run_dir() / "fleet.json").is_file()
    sandbox_cli(*up_args(sandbox_spec))
    data = json.loads((run_dir() / "fleet.json").read_text())
    yield data
    if not keep_fleet():
        sandbox_cli("down")


def keep_fleet() -> bool:
    """Leave the fleet up after the session: asked for, or it was up before we started."""
    return os.environ.get("GPUHOST_KEEP_SANDBOX") == "1" or _SESSION["was_up"]


def _run_pyinfra(*args: str, timeout: float = 600, check: bool = True,
                 inventory: str = INVENTORY) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    proc = subprocess.run([pyinfra_bin(), inventory, *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        pytest.fail(f"pyinfra {inventory} {shlex.join(args)} failed (exit {proc.returncode}):\n"
                    f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def pyinfra(fleet):
    """pyinfra(*args, timeout=600, check=True) -> CompletedProcess (inventory prepended)."""
    return _run_pyinfra


def _ssh(fleet: dict, name: str, command: str, timeout: float = 300,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    h = next((h for h in fleet["hosts"] if h["name"] == name), None)
    if h is None:
        pytest.fail(f"no host {name} in the fleet ({[h['name'] for h in fleet['hosts']]})")
    argv = ["ssh", "-i", fleet["ssh_key"], "-p", str(h["port"]),
            "-o", f"UserKnownHostsFile={fleet['known_hosts']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
            f"root@{h['address']}", command]
    proc = subprocess.run(argv, text=True, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"ssh {name} {command!r} failed (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def sandbox_tools():
    """Helpers for tests that drive the sandbox CLI themselves (no import of conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(root=ROOT, run_dir=run_dir, pyinfra_bin=pyinfra_bin,
                           cli=sandbox_cli, up_args=up_args, keep_fleet=keep_fleet, boots=boots,
                           ssh=_ssh, reshaped=reshaped, run_pyinfra=_run_pyinfra)


def reshaped(spec: dict, session_spec: dict):
    """Context manager for a test module that needs its own fleet shape (host traits): brings
    the fleet to ``spec``, yields fleet.json's data, then back to the session's spec.

        @pytest.fixture(scope="module")
        def fleet(fleet, sandbox_tools, sandbox_spec):
            with sandbox_tools.reshaped(SPEC, sandbox_spec) as data:
                yield data

    (a module that overrides ``fleet`` overrides ``ssh`` and ``pyinfra`` too: the session's
    depend on the session's fleet; ``sandbox_tools.ssh``/``run_pyinfra`` build them)
    """
    from contextlib import contextmanager

    @contextmanager
    def _cm():
        sandbox_cli(*up_args(spec))
        try:
            yield json.loads((run_dir() / "fleet.json").read_text())
        finally:
            sandbox_cli(*up_args(session_spec))
    return _cm()


def boots(name: str) -> int:
    """How many times the sandbox booted host NAME (its supervisor counts every boot in
    RUNDIR/hosts/NAME/boots, a simulated reboot included)."""
    return int((run_dir() / "hosts" / name / "boots").read_text())


@pytest.fixture(scope="session")
def ssh(fleet):
    """ssh(name, command, timeout=300, check=True) -> CompletedProcess."""
    return lambda name, command, **kw: _ssh(fleet, name, command, **kw)
