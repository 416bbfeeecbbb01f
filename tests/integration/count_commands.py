"""Run the pyinfra CLI and count the remote commands and uploads it sends to each host.

    python tests/integration/count_commands.py OUT.json -- PYINFRA ARGS...

It wraps pyinfra's SSH connector (the real one, over real SSH): every
``run_shell_command`` is one exec channel, i.e. one round trip to the host. The counts
per host land in OUT.json: ``{"host": {"commands": N, "uploads": M}}``. This is how the
"one remote command per host" of the composite fact and the cost of a converged host are
measured, not estimated.
"""

import pyinfra_cli  # noqa: F401  (first: it monkey-patches the process with gevent)

import atexit  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from pyinfra.connectors.ssh import SSHConnector  # noqa: E402

COUNTS: dict[str, dict[str, int]] = defaultdict(lambda: {"commands": 0, "uploads": 0})
_run = SSHConnector.run_shell_command
_put = SSHConnector.put_file


COMMANDS: list = []  # (seconds, host, first 120 characters), in the order sent


def _counted_run(self, *args, **kwargs):
    COUNTS[self.host.name]["commands"] += 1
    started = time.monotonic()
    try:
        return _run(self, *args, **kwargs)
    finally:
        command = args[0] if args else kwargs.get("command")
        text = command if isinstance(command, str) else command.get_masked_value()
        COMMANDS.append((round(time.monotonic() - started, 3), self.host.name, text[:120]))


def _counted_put(self, *args, **kwargs):
    COUNTS[self.host.name]["uploads"] += 1
    return _put(self, *args, **kwargs)


SSHConnector.run_shell_command = _counted_run
SSHConnector.put_file = _counted_put


def main() -> None:
    out = sys.argv[1]
    separator = sys.argv.index("--")
    sys.argv = ["pyinfra", *sys.argv[separator + 1:]]
    def write() -> None:
        slowest = sorted(COMMANDS, reverse=True)[:15]
        with open(out, "w") as handle:
            json.dump({"hosts": COUNTS, "slowest": slowest, "commands": COMMANDS}, handle, indent=1,
                      sort_keys=True)

    atexit.register(write)
    from pyinfra_cli.main import main as pyinfra_main

    sys.exit(pyinfra_main())


if __name__ == "__main__":
    main()
