"""Run a gpuhost deploy against pyinfra's ``@fake`` connector and print its exact command plan.

    python tests/plans/harness.py SCENARIO [DEPLOY]     # one command per line on stdout

A scenario is a bare host of one supported OS (``scenarios.py``): the fake connector
answers gpuhost's fact script like that host, and every command an operation sends is
recorded (fact commands are not part of the plan). Once the driver packages are "installed"
the host answers like a converged host, so the verification step passes, as it would on a
real host. Runs in its own process: pyinfra's API needs gevent's monkey-patching.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pyinfra.api import Config, Inventory, State  # noqa: E402
from pyinfra.api import facts as pyinfra_facts  # noqa: E402
from pyinfra.api.connect import connect_all  # noqa: E402
from pyinfra.api.operations import run_ops  # noqa: E402
from pyinfra.api.state import StateStage  # noqa: E402
from pyinfra.connectors.fake import FakeConnector  # noqa: E402
from pyinfra.context import ctx_config, ctx_inventory, ctx_state  # noqa: E402
from pyinfra_cli.util import load_deploy_file  # noqa: E402

import scenarios  # noqa: E402

RECORD: list[str] = []
IN_FACT = [0]
INSTALLED = [False]
_INSTALL = re.compile(r"(apt-get|dnf)\b.*\binstall\b.*(nvidia-open|cuda-drivers)")
_INSTALL_TOOLKIT = re.compile(r"(apt-get|dnf)\b.*\binstall\b.*nvidia-container-toolkit")
TOOLKIT = [False]

_original_get_fact = pyinfra_facts._get_fact
_original_run = FakeConnector.run_shell_command
_original_lookup = FakeConnector._lookup_response


def _get_fact(*args, **kwargs):
    IN_FACT[0] += 1
    try:
        return _original_get_fact(*args, **kwargs)
    finally:
        IN_FACT[0] -= 1


def _run(self, command, *args, **kwargs):
    text = command if isinstance(command, str) else command.get_masked_value()
    if not IN_FACT[0]:
        RECORD.append(text)
        if _INSTALL.search(text):
            INSTALLED[0] = True
        if _INSTALL_TOOLKIT.search(text):
            TOOLKIT[0] = True
    return _original_run(self, command, *args, **kwargs)


def _put(self, filename_or_io, remote_filename, *args, **kwargs):
    if not IN_FACT[0]:
        RECORD.append(f"upload {remote_filename}")
    return True


def _lookup(self, command_str):
    if INSTALLED[0] and "_gh()" in command_str:
        scenario = self.host.data.get("plan_scenario")
        return _original_lookup_with(self, command_str, scenarios.converged_output(scenario, toolkit=TOOLKIT[0]))
    return _original_lookup(self, command_str)


def _original_lookup_with(self, command_str, stdout):
    from pyinfra.connectors.util import CommandOutput, OutputLine

    return True, CommandOutput([OutputLine("stdout", line) for line in stdout.splitlines()])


pyinfra_facts._get_fact = _get_fact
FakeConnector.run_shell_command = _run
FakeConnector.put_file = _put
FakeConnector._lookup_response = _lookup

_NORMALISE = [
    (re.compile(r"\.gpuhost-\d{8}T\d{6}\.bak"), ".gpuhost-TIMESTAMP.bak"),
    (re.compile(r"/tmp/pyinfra-[0-9a-f]+"), "/tmp/pyinfra-TEMP"),
]


def normalise(line: str) -> str:
    for pattern, replacement in _NORMALISE:
        line = pattern.sub(replacement, line)
    return line


def plan(name: str, deploy: str = "deploys/gpu_host.py", extra_data: dict | None = None) -> list[str]:
    os.chdir(ROOT)
    data = scenarios.host_data(name, extra_data or {})
    inventory = Inventory(([("@fake/" + name, data)], {}))
    state = State(inventory=inventory, config=Config(PARALLEL=1))
    ctx_state.set(state)
    ctx_inventory.set(inventory)
    ctx_config.set(state.config)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    load_deploy_file(state, deploy)
    state.set_stage(StateStage.Execute)
    run_ops(state)
    failed = [h.name for h in inventory if h in state.failed_hosts]
    if failed:
        RECORD.append(f"FAILED {', '.join(failed)}")
    return [normalise(line) for line in RECORD]


if __name__ == "__main__":
    extra = json.loads(os.environ.get("GPUHOST_PLAN_DATA", "{}"))
    for line in plan(sys.argv[1], *(sys.argv[2:3]), extra_data=extra):
        print(line)
