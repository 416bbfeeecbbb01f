"""Read-only audit, host by host, as a pyinfra deploy.

    pyinfra -y INVENTORY deploys/audit.py [--data cuda=12.4]

For the fleet report (table, JSON, HTML, exit status 0 ok / 2 drift / 4 unhealthy / 3
failed or unreachable) use ``gpuhost audit INVENTORY [--json OUT] [--html OUT] [--cuda 12.4]``:
it runs this file and builds the report from what every host wrote.

Every host runs ONE remote command (the script of ``facts.host.GpuHostState``, read with
pyinfra's ``server.Command`` fact and processed by ``GpuHostState.process``, so output that
cannot be parsed is reported with the parser's message), no other command and no upload.
Then, as each host's facts arrive:

* under pyinfra alone: its row and its health findings are printed (and, with ``--data
  cuda=12.4``, its CUDA answer); a host that drifts from its inventory settings
  (``nvidia_driver_version``, ``container_toolkit_version``, ``nvidia_default_runtime``,
  ``mig_mode``, ``mig_layout``), has a critical health finding (docs/health.md) or whose
  output cannot be read gets one operation that fails on the controller
  (``python.raise_exception``, no remote command) with the reason, so pyinfra's exit status
  is non-zero. Unreachable hosts fail as pyinfra fails them. ``--dry`` shows the failing
  operations without running them (exit 0). Invalid settings or options stop the run
  before any fact is read (exit 1).
* with ``--data gpuhost_audit_dir=DIR`` (set by ``gpuhost audit``): it writes
  ``DIR/<id>.json`` = ``{"host"}`` when the host is reached, then ``{"host", "state"}`` or
  ``{"host", "error"}``, and adds no operation.

pyinfra parses ``--data cuda=12.4`` as a float, which is accepted; quote CUDA updates as a
string: ``--data 'cuda="12.8.1"'``.
"""

from __future__ import annotations

import hashlib
import json
import os

from pyinfra import host, state
from pyinfra.api.exceptions import FactProcessError, PyinfraError
from pyinfra.facts.server import Command
from pyinfra.operations import python

from facts import pyinfra_api
from facts.host import GpuHostState
from gpuhost import audit, report

DIR_KEY = "gpuhost_audit_dir"
REPORT_KEYS = ("audit_json", "audit_html")


class AuditProblem(Exception):
    """Raised on the controller by the failing operation of a host that drifts or failed."""


def read_state() -> tuple[dict | None, str | None]:
    """This host's GpuHostState, or why it could not be read. One remote command."""
    fact = GpuHostState()
    try:
        output = host.get_fact(Command, command=fact.command())
    except PyinfraError as error:  # e.g. "No hosts remaining!" when this host failed
        return None, f"could not run the audit command: {error}"
    if pyinfra_api.host_failed(state, host):
        return None, "could not run the audit command (see pyinfra's error above)"
    try:
        return fact.process(output.split("\n")) if output else fact.default(), None
    except FactProcessError as error:
        return None, str(error)


def write_record(directory: str, record: dict) -> None:
    """``DIR/<sha256 of the host name>.json``, replaced atomically."""
    name = hashlib.sha256(host.name.encode()).hexdigest()[:24]
    path = os.path.join(directory, f"{name}.json")
    with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
        json.dump({"host": host.name, **record}, handle)
    os.replace(f"{path}.tmp", path)


def row_lines(entry: dict) -> list[str]:
    """One host's row (the report's columns) and its problems."""
    cells = report.row(entry)
    labels = report.COLUMNS[1:-1]
    lines = [f"{entry['name']}: {entry['status'].upper()}  "
             + "  ".join(f"{label} {cell}" for label, cell in zip(labels, cells[1:-1],
                                                                  strict=True))]
    lines += [f"    {item['message']}" for item in entry["drift"]]
    lines += [f"    {f['severity']} [{f['id']}]{' GPU ' + f['gpu'] if f['gpu'] else ''}: "
              f"{f['message']}" for f in entry["health"]["findings"]]
    if entry["error"]:
        lines.append(f"    {entry['error']}")
    if entry["cuda"]:
        lines.append(f"    CUDA {entry['cuda']['version']}: {entry['cuda']['verdict']} "
                     f"({entry['cuda']['message']})")
    return lines


def audit_host() -> None:
    directory = host.data.get(DIR_KEY)
    if directory:
        write_record(str(directory), {})  # reached: without a result it counts as failed
        state, error = read_state()
        write_record(str(directory), {"state": state} if error is None else {"error": error})
        return
    given = [key for key in REPORT_KEYS if host.data.get(key) not in (None, "")]
    if given:
        raise PyinfraError(f"--data {given[0]}: the fleet report is written by `gpuhost audit "
                           "INVENTORY --json OUT --html OUT`; this deploy audits host by host. "
                           "Nothing was read from any host.")
    try:
        cuda = audit.parse_cuda(host.data.get("cuda"))
        desired = audit.desired_settings(host.data.dict(), host.name)
    except audit.AuditError as error:
        raise PyinfraError(f"{error}\nNothing was read from any host.") from None
    state, error = read_state()
    result = state if error is None else audit.HostError("failed", error)
    entry = audit.host_entry(host.name, result, desired, cuda)
    print("\n".join(row_lines(entry)), flush=True)
    critical = [f"{f['id']}: {f['message']}" for f in entry["health"]["findings"]
                if f["severity"] == "critical"]
    if entry["status"] != "ok" or critical:
        status = entry["status"] if entry["status"] != "ok" else "unhealthy"
        reasons = [item["message"] for item in entry["drift"]] + critical or [entry["error"]]
        python.raise_exception(
            AuditProblem, f"{host.name} {status}: " + "; ".join(reasons),
            name=f"gpuhost audit: {status} (see `gpuhost audit` for the fleet report)")


audit_host()
