"""Fixtures shared by every test tree (tests/, sandbox/tests/, vagrant/tests/).

The integration tests' sandbox fleets (real SSH hosts on this machine). Every integration
module declares the hosts it needs and gets exactly those, whatever ran before it:

    pytestmark = [pytest.mark.integration,
                  pytest.mark.fleet(hosts=3, ol=1, docker_hosts=1, ubuntu=0,
                                    overrides={"gpu-02": {"traits": ["secure-boot"]}},
                                    state="bare", why="the converge from bare is the point")]

    state="bare"        every host created anew from the base layers (`sandbox up --fresh`)
    state="converged"   booted in seconds from a snapshot of hosts that deploys/gpu_host.py
                        converged from bare once in this test session, for this exact spec
                        (the first module that asks makes it: `sandbox snapshot save`)

Without the marker a module gets DEFAULT_SPEC, bare. Fixtures (module scope):

    fleet          fleet.json's data of the module's fleet
    sandbox_spec   the module's spec (hosts, ol, docker_hosts, ubuntu, overrides, state)
    pyinfra        pyinfra(*args, timeout=600, check=True) -> tests.support.PyinfraRun
                   against inventories/sandbox.py (which reads the fleet's fleet.json)
    ssh            ssh(name, command, timeout=300, check=True) -> CompletedProcess
    sandbox_tools  (session) the sandbox CLI, boots(), ssh(), run_pyinfra, wait_for_reboot

Each pytest process drives a private fleet of its own (slot N: runtime directory
/run/gpuhost-test-N, state /var/lib/gpuhost-test-N, hosts on 127.77.(10+N).x, mirror on
port 8010+N, cgroup gpuhost-test-N): N is 0, or pytest-xdist's worker number (plus
GPUHOST_TEST_FLEET_BASE, for a second test session on the same machine). Tests never
touch the fleet of `make demo`/`make sandbox-up` (/run/gpuhost-sandbox). The fleet and its
snapshots are removed at the end of the session unless GPUHOST_KEEP_SANDBOX=1.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import support

pytest_plugins = ["tests.timing_plugin"]

ROOT = Path(__file__).resolve().parent
INVENTORY = "inventories/sandbox.py"
DEFAULT_SPEC = {"hosts": 4, "ol": 2, "docker_hosts": 1}
FLEET_KEYS = ("hosts", "ol", "docker_hosts", "ubuntu", "overrides")
CONVERGE_TIMEOUT = 2400


def _slot() -> int:
    """0, or pytest-xdist's worker number; GPUHOST_TEST_FLEET_BASE=K shifts it (two test
    sessions on one machine: give the second K=10)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return int(os.environ.get("GPUHOST_TEST_FLEET_BASE", "0")) + number


def _private_fleet_env(slot: int) -> dict[str, str]:
    return {"GPUHOST_SANDBOX_DIR": f"/run/gpuhost-test-{slot}",
            "GPUHOST_SANDBOX_STATE": f"/var/lib/gpuhost-test-{slot}",
            "GPUHOST_SANDBOX_HOST_PREFIX": f"127.77.{10 + slot}.",
            "GPUHOST_SANDBOX_HTTP_PORT": str(8010 + slot),
            "GPUHOST_SANDBOX_CGROUP": f"gpuhost-test-{slot}"}


def run_dir() -> Path:
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


def pyinfra_bin() -> str:
    return support.pyinfra_bin()


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
        args += ["--spec", json.dumps(spec["overrides"], sort_keys=True)]
    return args


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fleet(hosts=4, ol=2, docker_hosts=1, ubuntu=0, overrides=None, "
        "state='bare'|'converged', why=''): the sandbox fleet an integration module needs "
        "(root conftest.py)")
    # this process's private fleet, for the sandbox CLI, inventories/sandbox.py and every
    # subprocess the tests start (set before any test module imports sandbox.paths; an
    # xdist worker inherits its controller's environment, so set, not setdefault)
    if "sandbox.paths" in sys.modules:
        # it reads the environment once, at its import: this process would use the default
        # fleet's state (its Secure Boot key, its snapshots) while the hosts use the private one
        raise pytest.UsageError("sandbox.paths was imported before conftest.py set the private "
                                "fleet's environment: import it inside a function there")
    os.environ.update(_private_fleet_env(_slot()))


# Modules that take longest start first, longest first (pytest-xdist hands work out in this
# order; measured: bench/results/suite-history.md). The rest keep their collection order.
SLOW_FIRST = ["tests/vm/test_vm.py", "tests/integration/test_docker_mig_safety.py",
              "tests/integration/test_new_apt_releases.py", "tests/integration/test_upgrade.py",
              "tests/integration/test_upgrade_branches.py", "tests/integration/test_el10.py",
              "tests/integration/test_packages_locks_secrets.py", "tests/integration/test_cdi.py"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (make test: --dist loadfile) each module's tests stay on one
    worker: they share its fleet and module fixtures (the VM tests their one VM).
    Integration and VM modules come first, the slowest of them before the others, so the
    long waits overlap; then the rest in collection order.

    (xdist's --dist loadgroup, which would also keep the modules of one converged snapshot
    on one worker, does not work with pytest 9.2: it renames the test's node id through
    ``item._nodeid``, which pytest 9 no longer reads. Modules that boot the same snapshot on
    two workers make it once on each.)"""
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        if path in SLOW_FIRST:
            return SLOW_FIRST.index(path)
        slow = item.get_closest_marker("integration") or item.get_closest_marker("vm")
        return len(SLOW_FIRST) + (0 if slow else 1)

    items.sort(key=rank)  # stable: the order inside a module is kept


def _snapshot_group(path: Path) -> str | None:
    """The converged snapshot a test module's fleet boots from, read from its source without
    importing it (the xdist controller collects nothing): its ``pytest.mark.fleet(...)``
    when every argument is a literal and ``state="converged"``; else None."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "fleet"):
            try:
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            except ValueError:  # a name (**SPEC, a constant): no group, the file alone
                return None
            if any(k.arg is None for k in node.keywords) or kwargs.get("state") != "converged":
                return None
            module = SimpleNamespace(__name__=str(path), pytestmark=[pytest.mark.fleet(**kwargs).mark])
            return "converged-snapshot-" + snapshot_name(module_spec(module))
    return None


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """make test's --dist loadfile, with one change: the modules that boot the same converged
    snapshot are one work unit, so one worker runs them one after the other and converges
    their hosts once (loadfile alone could give them to both workers, each converging the
    same hosts from bare to make its own snapshot)."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    groups: dict[str, str] = {}

    class SnapshotGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            if path not in groups:
                groups[path] = _snapshot_group(Path(config.rootpath) / path) or path
            return groups[path]

    return SnapshotGroups(config, log)


def module_spec(module) -> dict:
    """The fleet a test module declares with pytest.mark.fleet (DEFAULT_SPEC, bare, when it
    declares none)."""
    marks = getattr(module, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    mark = next((m for m in marks if m.name == "fleet"), None)
    kwargs = dict(mark.kwargs) if mark else {}
    unknown = set(kwargs) - set(FLEET_KEYS) - {"state", "why", "converge"}
    if unknown:
        raise pytest.UsageError(f"{module.__name__}: unknown fleet() keys {sorted(unknown)}")
    spec = {**DEFAULT_SPEC, **{k: v for k, v in kwargs.items() if k in FLEET_KEYS}}
    spec["overrides"] = spec.get("overrides") or {}
    spec["state"] = kwargs.get("state", "bare")
    if spec["state"] not in ("bare", "converged"):
        raise pytest.UsageError(f"{module.__name__}: fleet(state=) is 'bare' or 'converged'")
    spec["converge"] = list(kwargs.get("converge", []))
    return spec


def snapshot_name(spec: dict) -> str:
    """One snapshot per fleet shape and converge arguments."""
    key = json.dumps({k: spec.get(k) for k in (*FLEET_KEYS, "converge")}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def keep_fleet() -> bool:
    """Leave the test fleet and its snapshots up after the session (debugging)."""
    return os.environ.get("GPUHOST_KEEP_SANDBOX") == "1"


def _snapshots_dir() -> Path:
    return Path(os.environ["GPUHOST_SANDBOX_STATE"]) / "snapshots"


@pytest.fixture(scope="session")
def _fleet_session():
    """This process's private fleet: snapshots of earlier sessions removed (they were made
    by other code), everything removed at the end."""
    if os.geteuid() != 0:
        pytest.fail("the integration tests need root (namespaces, mounts): run them as root")
    subprocess.run(["rm", "-rf", "--one-file-system", str(_snapshots_dir())], check=True)
    yield
    if not keep_fleet():
        sandbox_cli("down")
        subprocess.run(["rm", "-rf", "--one-file-system", str(_snapshots_dir())], check=True)


def provide_fleet(spec: dict) -> dict:
    """Bring this process's fleet to ``spec`` (module_spec's shape): fresh bare hosts, or
    hosts booted from the converged snapshot of that spec (made first when missing)."""
    args = up_args(spec)
    if spec["state"] == "converged":
        name = snapshot_name(spec)
        if (_snapshots_dir() / name / "snapshot.json").is_file():
            sandbox_cli(*args, "--snapshot", name)
        else:
            sandbox_cli(*args, "--fresh")
            support.run_pyinfra(INVENTORY, "-y", "deploys/gpu_host.py", *spec["converge"],
                                timeout=CONVERGE_TIMEOUT)
            sandbox_cli("snapshot", "save", name)
    else:
        sandbox_cli(*args, "--fresh")
    return json.loads((run_dir() / "fleet.json").read_text())


@pytest.fixture(scope="module")
def sandbox_spec(request) -> dict:
    return module_spec(request.module)


@pytest.fixture(scope="module")
def fleet(_fleet_session, sandbox_spec: dict):
    yield provide_fleet(sandbox_spec)


def _run_pyinfra(*args: str, timeout: float = 600, check: bool = True,
                 inventory: str = INVENTORY, env: dict | None = None) -> support.PyinfraRun:
    return support.run_pyinfra(inventory, *args, timeout=timeout, check=check, env=env)


@pytest.fixture(scope="module")
def pyinfra(fleet):
    """pyinfra(*args, timeout=600, check=True) -> PyinfraRun (inventory prepended)."""
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
    try:
        proc = subprocess.run(argv, text=True, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        if check:
            pytest.fail(f"ssh {name} {command!r} timed out after {timeout:.0f}s")
        proc = subprocess.CompletedProcess(argv, 124, exc.stdout or "", exc.stderr or "")
        proc.stdout = proc.stdout if isinstance(proc.stdout, str) else proc.stdout.decode()
        proc.stderr = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode()
    if check and proc.returncode != 0:
        pytest.fail(f"ssh {name} {command!r} failed (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def boots(name: str) -> int:
    """How many times the sandbox booted host NAME (its supervisor counts every boot in
    RUNDIR/hosts/NAME/boots, a simulated reboot included)."""
    return int((run_dir() / "hosts" / name / "boots").read_text())


@pytest.fixture(scope="session")
def sandbox_tools():
    """Helpers for tests that drive the sandbox CLI themselves (no import of conftest)."""
    from types import SimpleNamespace

    def wait_for_reboot(fleet: dict, name: str, before: int, timeout: float = 300) -> None:
        support.wait_for_reboot(lambda n, c, **kw: _ssh(fleet, n, c, **kw), boots, name,
                                before, timeout)

    return SimpleNamespace(root=ROOT, run_dir=run_dir, pyinfra_bin=pyinfra_bin,
                           cli=sandbox_cli, up_args=up_args, keep_fleet=keep_fleet, boots=boots,
                           ssh=_ssh, run_pyinfra=_run_pyinfra, provide=provide_fleet,
                           wait_for_reboot=wait_for_reboot)


@pytest.fixture(scope="module")
def ssh(fleet):
    """ssh(name, command, timeout=300, check=True) -> CompletedProcess."""
    return lambda name, command, **kw: _ssh(fleet, name, command, **kw)
