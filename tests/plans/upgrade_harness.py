"""The exact command plan of deploys/upgrade_driver.py against pyinfra's ``@fake`` connector.

    python tests/plans/upgrade_harness.py debian12            # a 550 host moved to 570
    python tests/plans/upgrade_harness.py debian12:busy       # a python3 process on GPU 0
    python tests/plans/upgrade_harness.py debian12:at570      # already at the target

Reuses tests/plans/harness.py (its recording connector, subclassed here) with the 550 hosts
of ``upgrade_scenarios``; ``GPUHOST_PLAN_DATA`` (JSON) adds host data. Runs in its own process.
"""

import harness  # noqa: I001  (first: gevent monkey-patching)

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from pyinfra.api.exceptions import PyinfraError  # noqa: E402

import upgrade_scenarios  # noqa: E402


class UpgradePlanConnector(harness.PlanConnector):
    """Also fails ``roles.common.fail_command`` (as a real host does) and answers what
    depends on the plan so far (``upgrade_scenarios.respond``)."""

    def answer(self, command):
        if command.startswith("echo 'gpuhost: ") and command.endswith(">&2; exit 1"):
            return False, harness.output(stderr=command[5:-11])
        answer = upgrade_scenarios.respond(self.host.data.dict(), command, harness.RECORD)
        if answer is not None:
            return True, harness.output(answer)
        return super().answer(command)


def skip_reboot_wait() -> None:
    """server.reboot waits ``delay`` seconds (then ``interval`` between reconnects) before
    it reconnects; the fake host is back at once. pyinfra offers no switch for this, so the
    ``sleep`` that pyinfra.operations.server imported is replaced (its module-level name,
    not a public API: checked on pyinfra 3.10)."""
    from pyinfra.operations import server

    server.sleep = lambda seconds: None


if __name__ == "__main__":
    skip_reboot_wait()
    extra = json.loads(os.environ.get("GPUHOST_PLAN_DATA", "{}"))
    try:
        lines = harness.plan(sys.argv[1], "deploys/upgrade_driver.py", extra_data=extra,
                             host_data=upgrade_scenarios.host_data,
                             connector=UpgradePlanConnector)
    except PyinfraError as error:  # a failed host ends the run: print what ran until then
        for line in harness.RECORD:
            print(harness.normalise(line))
        print("FAILED " + " | ".join(str(error).splitlines()))
        sys.exit(1)
    for line in lines:
        print(line)
