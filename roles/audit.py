"""The read-only audit of one host, as pyinfra deploy code (run by deploys/audit.py and
``gpuhost.deploys.api.audit``; the deploy's docstring says what it does)."""

from __future__ import annotations

import hashlib
import json
import os

from pyinfra import host, state
from pyinfra.api.exceptions import FactProcessError, PyinfraError
from pyinfra.facts.server import Command
from pyinfra.operations import python

from gpuhost import audit, report
from gpuhost.facts import pyinfra_api
from gpuhost.facts.host import GpuHostState

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


def audit_host(overrides: dict | None = None) -> None:
    """Audit the current host (the deploy deploys/audit.py, and ``gpuhost.deploys.api.audit``
    with its keyword settings: ``overrides`` merged over the host's data)."""
    data = {**host.data.dict(), **(overrides or {})}
    directory = data.get(DIR_KEY)
    if directory:
        write_record(str(directory), {})  # reached: without a result it counts as failed
        state, error = read_state()
        write_record(str(directory), {"state": state} if error is None else {"error": error})
        return
    given = [key for key in REPORT_KEYS if data.get(key) not in (None, "")]
    if given:
        raise PyinfraError(f"--data {given[0]}: the fleet report is written by `gpuhost audit "
                           "INVENTORY --json OUT --html OUT`; this deploy audits host by host. "
                           "Nothing was read from any host.")
    try:
        cuda = audit.parse_cuda(data.get("cuda"))
        desired = audit.desired_settings(data, host.name)
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
