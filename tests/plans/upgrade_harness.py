"""The exact command plan of deploys/upgrade_driver.py against pyinfra's ``@fake`` connector.

    python tests/plans/upgrade_harness.py debian12            # a 550 host moved to 570
    python tests/plans/upgrade_harness.py debian12:busy       # a python3 process on GPU 0
    python tests/plans/upgrade_harness.py debian12:at570      # already at the target

Reuses tests/plans/harness.py (its recording fake connector) with the 550 hosts of
``upgrade_scenarios``; ``GPUHOST_PLAN_DATA`` (JSON) adds host data. Runs in its own process.
"""

import harness  # noqa: I001  (first: gevent monkey-patching and the recording connector)

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from pyinfra.connectors.fake import FakeConnector  # noqa: E402
from pyinfra.connectors.util import CommandOutput, OutputLine  # noqa: E402
from pyinfra.api.exceptions import PyinfraError  # noqa: E402
from pyinfra.api.state import StateStage  # noqa: E402
from pyinfra.operations import server  # noqa: E402

import upgrade_scenarios  # noqa: E402

_previous_lookup = FakeConnector._lookup_response


def _lookup(self, command_str):
    if command_str.startswith("echo 'gpuhost: ") and command_str.endswith(">&2; exit 1"):
        # roles.common.fail_command: fails the host, as on a real one
        return False, CommandOutput([OutputLine("stderr", command_str[5:-11])])
    answer = upgrade_scenarios.respond(self.host.data.dict(), command_str, harness.RECORD)
    if answer is not None:
        return True, CommandOutput([OutputLine("stdout", line) for line in answer.splitlines()])
    return _previous_lookup(self, command_str)


def _run_ops(state, *args, **kwargs):
    # as the pyinfra CLI does: operations that check facts only when executing
    # (roles.common.executing) do their real work here too
    state.set_stage(StateStage.Execute)
    return _original_run_ops(state, *args, **kwargs)


_original_run_ops = harness.run_ops
harness.run_ops = _run_ops
FakeConnector._lookup_response = _lookup
server.sleep = lambda seconds: None  # server.reboot's wait before reconnecting
harness.scenarios.host_data = upgrade_scenarios.host_data


if __name__ == "__main__":
    extra = json.loads(os.environ.get("GPUHOST_PLAN_DATA", "{}"))
    try:
        lines = harness.plan(sys.argv[1], "deploys/upgrade_driver.py", extra_data=extra)
    except PyinfraError as error:  # a failed host ends the run: print what ran until then
        for line in harness.RECORD:
            print(harness.normalise(line))
        print("FAILED " + " | ".join(str(error).splitlines()))
        sys.exit(1)
    for line in lines:
        print(line)
