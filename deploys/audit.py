"""Read-only audit of a GPU fleet: one remote command per host, a report, an exit status.

    pyinfra -y INVENTORY deploys/audit.py
    pyinfra -y INVENTORY deploys/audit.py --data cuda=12.4 \\
        --data audit_json=/tmp/audit.json --data audit_html=/tmp/audit.html

Reads ``facts.host.GpuHostState`` once per host (the whole GPU stack in ONE remote command),
runs no operation, compares each host with its inventory settings (``nvidia_driver_version``,
``container_toolkit_version``, ``nvidia_default_runtime``, ``mig_mode``, ``mig_layout``) and,
when pyinfra is done with every host, prints the report and exits with:

    0  every host matches its settings
    2  at least one host drifts
    3  at least one host failed (its fact could not be read) or was unreachable (wins over 2)
    1  pyinfra's own errors and invalid options/settings (nothing was read from any host)

Options (``--data``, the same for the whole run): ``audit_json=PATH`` and ``audit_html=PATH``
write the JSON document (docs/audit-schema.md) and a self-contained HTML page;
``cuda=12.4`` adds "which hosts can run CUDA 12.4 images" to the report. pyinfra parses
``--data cuda=12.4`` as a float, which is accepted; quote CUDA updates as a string:
``--data 'cuda="12.8.1"'``. ``-y`` is optional (nothing is changed) but use it in scripts:
without it pyinfra asks before "executing" the empty plan, and asks again when a host cannot
be reached.

Why an ``atexit`` handler: pyinfra runs a deploy file once per connected host while it
prepares, and offers no "after all hosts" hook to a deploy file. Hosts that cannot be
reached never run this file at all; a host whose fact fails may end the run early ("No
hosts remaining!"); ``--dry`` and a declined prompt exit from the middle of the CLI. An
``atexit`` handler registered by the first host runs after every one of those paths, once,
when pyinfra has disconnected, and sees the whole inventory (so unreachable hosts are
listed). It prints the report, runs the exit handlers registered before it, and leaves with
``os._exit(code)``, the only way to set the process status after pyinfra's own
``sys.exit`` (an exception raised in an exit handler is ignored). A state callback
(``host_disconnect``)
would need the same ``os._exit`` and misses runs where no host connected.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys

import pyinfra
from pyinfra import host, logger
from pyinfra.api.exceptions import PyinfraError

from facts.host import GpuHostState
from gpuhost import audit, report

_ANSI = re.compile(r"\033\[[0-9;]*m")
_PREFIX = re.compile(r"^\[(?P<host>[^\]]+)\]\s*(?P<message>.*)$", re.S)


class _HostErrors(logging.Handler):
    """Keeps pyinfra's error lines per host ("[gpu-03] could not load fact ...") so the
    report says why a host failed."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.lines: dict[str, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = _PREFIX.match(_ANSI.sub("", record.getMessage()).strip())
        if match and match["message"]:
            self.lines.setdefault(match["host"], []).append(" ".join(match["message"].split()))


class _AuditRun:
    """Everything the audit collects during one pyinfra run (kept on pyinfra's State)."""

    def __init__(self, state) -> None:
        self.state = state
        data = host.data
        try:
            self.cuda = audit.parse_cuda(data.get("cuda"))
            self.desired = {h.name: audit.desired_settings(h.data.dict(), h.name)
                            for h in state.inventory if state.is_host_in_limit(h)}
        except audit.AuditError as error:
            raise PyinfraError(f"{error}\nNothing was read from any host.") from None
        self.json_path = self._path(data.get("audit_json"), "audit_json")
        self.html_path = self._path(data.get("audit_html"), "audit_html")
        self.results: dict[str, dict] = {}
        self.failures: dict[str, str] = {}
        self.errors = _HostErrors()
        logger.addHandler(self.errors)
        self.document: dict | None = None
        if pyinfra.is_cli:
            atexit.register(self.finish)

    @staticmethod
    def _path(value, key: str) -> str | None:
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise PyinfraError(f"{key}={value!r} is not a path: pass --data {key}=/path/file")
        directory = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(directory):
            raise PyinfraError(f"{key}: directory {directory} does not exist; create it first")
        return value

    def record(self) -> None:
        """Read the current host's state: exactly one remote command."""
        try:
            value = host.get_fact(GpuHostState)
        except PyinfraError as error:  # e.g. "No hosts remaining!" when this host failed
            self.failures[host.name] = str(error)
            return
        if host in self.state.failed_hosts:
            self.failures[host.name] = ""
        else:
            self.results[host.name] = value

    def _why(self, name: str, default: str) -> str:
        lines = self.errors.lines.get(name, []) + [self.failures.get(name) or ""]
        text = "; ".join(line for line in lines if line)
        return text or default

    def collect(self) -> dict[str, object]:
        state = self.state
        results: dict[str, object] = {}
        for each in state.inventory:
            if not state.is_host_in_limit(each):
                continue
            if each.name in self.results:
                results[each.name] = self.results[each.name]
            elif each in state.activated_hosts:
                results[each.name] = audit.HostError("failed", self._why(
                    each.name, "the audit did not finish on this host (the run stopped early)"))
            else:
                address = each.data.get("ssh_hostname") or each.name
                port = each.data.get("ssh_port") or 22
                results[each.name] = audit.HostError("unreachable", self._why(
                    each.name, f"cannot connect to {address} port {port} "
                               "(see pyinfra's connection error above)"))
        return results

    def build(self) -> dict:
        results = self.collect()
        desired = {name: self.desired[name] for name in results}
        self.document = audit.build(results, desired, cuda=self.cuda)
        return self.document

    def finish(self) -> None:
        """atexit: print and write the report, then exit with the audit's status."""
        try:
            document = self.build()
            if self.json_path:
                with open(self.json_path, "w", encoding="utf-8") as handle:
                    handle.write(report.render_json(document))
            if self.html_path:
                with open(self.html_path, "w", encoding="utf-8") as handle:
                    handle.write(report.render_html(document))
            out = sys.stderr if "--json" in sys.argv else sys.stdout
            out.write("\n" + report.render_table(document, colour=report.use_colour(out)))
            for path in (self.json_path, self.html_path):
                if path:
                    out.write(f"report written to {path}\n")
            code = audit.exit_code(document)
        except Exception as error:  # never die silently with pyinfra's status
            sys.stderr.write(f"gpuhost audit: could not build the report: {error!r}\n")
            code = audit.EXIT_USAGE
        # os._exit skips the exit handlers registered before this one (logging's flush,
        # wrappers that count commands): run them now, this one taken out first.
        atexit.unregister(self.finish)
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run() -> _AuditRun:
    state = host.state
    run = getattr(state, "gpuhost_audit", None)
    if run is None:
        run = _AuditRun(state)
        state.gpuhost_audit = run
    return run


_run().record()
