"""Run a gpuhost deploy against pyinfra's ``@fake`` connector and print its exact command plan.

    python tests/plans/harness.py SCENARIO [DEPLOY]     # one command per line on stdout

A scenario is a bare host of one supported OS (``scenarios.py``): the fake connector
answers gpuhost's fact script like that host, and every command an operation sends is
recorded (fact commands are not part of the plan). Once the driver packages are "installed"
the host answers like a converged host, so the verification step passes, as it would on a
real host. Runs in its own process: pyinfra's API needs gevent's monkey-patching.

Only pyinfra's public API: ``Inventory``/``State``/``connect_all``/``run_ops`` as in
pyinfra's "Using the API" docs, a ``FakeConnector`` subclass that overrides its public
``run_shell_command``/``put_file`` (set as the host's ``connector_cls`` before the State
is made) and the deploy file executed per host with pyinfra's context set, as the CLI does.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # a script run from anywhere: roles/, facts/, gpuhost/

from pyinfra.api import Config, Inventory, State  # noqa: E402
from pyinfra.api.connect import connect_all  # noqa: E402
from pyinfra.api.operations import run_ops  # noqa: E402
from pyinfra.connectors.fake import FakeConnector  # noqa: E402
from pyinfra.connectors.util import CommandOutput, OutputLine  # noqa: E402
from pyinfra.context import ctx_config, ctx_inventory, ctx_state  # noqa: E402

from gpuhost.facts.pyinfra_api import StateStage, host_failed, use_host  # noqa: E402

import scenarios  # noqa: E402  (this script's folder is sys.path[0])

RECORD: list[str] = []
_INSTALL = re.compile(r"(apt-get|dnf)\b.*\binstall\b.*(nvidia-open|cuda-drivers|nvidia-headless-no-dkms)")
_INSTALL_TOOLKIT = re.compile(r"(apt-get|dnf)\b.*\binstall\b.*nvidia-container-toolkit")
# the run lock's commands (gpuhost/runlock.py; tested in tests/unit/test_runlock.py): they
# name this controller, user, pid and time, so the plan shows only which one ran
_LOCK_ACTION = re.compile(r"^sh -c .* gpuhost-lock-(take|renew|release) ")
_CDI_GENERATE = re.compile(r"nvidia-ctk cdi generate --output=(\S+)")


def output(stdout: str = "", stderr: str = "") -> CommandOutput:
    return CommandOutput([OutputLine("stdout", line) for line in stdout.splitlines()]
                         + [OutputLine("stderr", line) for line in stderr.splitlines()])


class PlanConnector(FakeConnector):
    """The ``@fake`` connector, recording what operations send (into ``RECORD``).

    pyinfra runs fact commands with ``print_input=state.print_fact_input`` and operation
    commands with ``print_input=state.print_input``; ``plan()`` sets the first to True and
    the second to False, so ``print_input`` tells a fact's command from an operation's here
    (nothing is printed: this connector does not echo). Answers: ``answer()`` first, then
    the host's ``fake_responses`` data (FakeConnector's own lookup).
    """

    def __init__(self, state, host) -> None:
        super().__init__(state, host)
        self.installed = False  # the driver packages went in: answer like the converged host
        self.toolkit = False  # ... with the toolkit too
        self.cdi_spec: str | None = None  # where `nvidia-ctk cdi generate` wrote a spec

    def answer(self, command: str) -> tuple[bool, CommandOutput] | None:
        """The answer to ``command`` when it depends on the plan so far, else None."""
        if "s=/var/lib/gpuhost/docker-daemon-json-keys.json;" in command:  # DockerDaemonView
            # Docker is installed by then (roles/docker_engine): Debian's/Docker's unit,
            # running with runc only
            return True, output(
                "realpath=/etc/docker/daemon.json\nunit=yes\nexecstart={ path=/usr/bin/dockerd ; "
                "argv[]=/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock ; }\n"
                'daemon={"runc":{}}|runc|false|0')
        if ": gpuhost-package-available;" in command:  # facts.kernel.PackageAvailable
            meta = re.search(r"linux-headers|kernel-(uek-)?devel", command)
            return True, output("no" if meta and self.host.data.get("plan_no_meta_headers")
                                else "yes")
        if self.installed and "_gh()" in command:
            scenario = self.host.data.get("plan_scenario")
            return True, output(scenarios.converged_output(
                scenario, toolkit=self.toolkit, cdi_spec=self.cdi_spec,
                driver=self.host.data.get("plan_converged_driver")))
        if self.installed and scenarios.EL_PACKAGING.search(command):
            scenario = self.host.data.get("plan_scenario")
            return True, output(scenarios.el_packaging_output(scenario, installed=True))
        return None

    def run_shell_command(self, command, print_output=False, print_input=False, **arguments):
        text = command if isinstance(command, str) else command.get_masked_value()
        lock = _LOCK_ACTION.search(text)
        if print_input and lock:  # roles/runlock.py's fact channel: part of the plan
            RECORD.append(f"gpuhost run lock: {lock.group(1)} (roles/runlock.py)")
            return True, output("gpuhost-lock-rc=0")
        if not print_input:  # an operation's command
            RECORD.append(text)
            if _INSTALL.search(text):
                self.installed = True
            if _INSTALL_TOOLKIT.search(text):
                self.toolkit = True
            generated = _CDI_GENERATE.search(text)
            if generated:
                self.cdi_spec = generated.group(1)
        answer = self.answer(text)
        if answer is not None:
            self.executed_commands.append(text)
            return answer
        return super().run_shell_command(command, print_output=False, print_input=False,
                                         **arguments)

    def put_file(self, filename_or_io, remote_filename, *args, **kwargs):
        RECORD.append(f"upload {remote_filename}")
        return True


_NORMALISE = [
    (re.compile(r"\.gpuhost-\d{8}T\d{6}\.bak"), ".gpuhost-TIMESTAMP.bak"),
    (re.compile(r"/tmp/pyinfra-[0-9a-f]+"), "/tmp/pyinfra-TEMP"),
    # roles/stamp.py's writer: its script is tested in tests/unit/test_stamp.py, and its
    # digest covers gpuhost's own code (it changes with every commit)
    (re.compile(r"^sh -c 'umask 077; mkdir -p /var/lib/gpuhost; .* gpuhost-stamp [0-9a-f]{64} \S+$"),
     "record the converged stamp /var/lib/gpuhost/converged (roles/stamp.py)"),
]


def normalise(line: str) -> str:
    for pattern, replacement in _NORMALISE:
        line = pattern.sub(replacement, line)
    return line


def load_deploy_file(state: State, filename: str) -> None:
    """Execute the deploy file once per host with pyinfra's context set, as ``pyinfra
    INVENTORY DEPLOY`` does; ``current_deploy_filename`` orders operations by its lines."""
    code = compile(Path(filename).read_text(encoding="utf-8"), filename, "exec")
    state.current_deploy_filename = filename
    state.current_exec_filename = filename
    for host in state.inventory.get_active_hosts():
        with ctx_config.use(state.config.copy()), use_host(host):
            exec(code, {"__file__": filename})


def plan(name: str, deploy: str = "deploys/gpu_host.py", extra_data: dict | None = None,
         host_data=scenarios.host_data, connector: type[PlanConnector] = PlanConnector,
         ) -> list[str]:
    os.chdir(ROOT)
    data = host_data(name, extra_data or {})
    inventory = Inventory(([("@fake/" + name, data)], {}))
    for host in inventory:
        host.connector_cls = connector
    state = State(inventory=inventory, config=Config(PARALLEL=1))
    state.print_fact_input = True  # see PlanConnector
    state.print_input = False
    ctx_state.set(state)
    ctx_inventory.set(inventory)
    ctx_config.set(state.config)
    connect_all(state)
    state.set_stage(StateStage.Prepare)
    load_deploy_file(state, deploy)
    state.set_stage(StateStage.Execute)
    run_ops(state)
    failed = [h.name for h in inventory if host_failed(state, h)]
    if failed:
        RECORD.append(f"FAILED {', '.join(failed)}")
    return [normalise(line) for line in RECORD]


if __name__ == "__main__":
    extra = json.loads(os.environ.get("GPUHOST_PLAN_DATA", "{}"))
    for line in plan(sys.argv[1], *(sys.argv[2:3]), extra_data=extra):
        print(line)
