"""The read-only audit of one host, as pyinfra deploy code (run by deploys/audit.py and
``gpuhost.deploys.api.audit``; the deploy's docstring says what it does).

With ``--data gpuhost_audit_dir=DIR`` (``gpuhost audit``) the first host of the run also
writes ``DIR/fleet.json`` (``write_fleet``): the hosts of this run (pyinfra's ``--limit``),
their groups, address and audited settings, or every invalid audited setting, in which case
no host is read. The CLI reads it after the run instead of asking pyinfra for the inventory
in a second process.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref

from pyinfra import host, inventory, state
from pyinfra.api import State
from pyinfra.api.exceptions import FactProcessError, PyinfraError
from pyinfra.facts.server import Command
from pyinfra.operations import python

from gpuhost import health
from gpuhost.reports import audit, text as report
from gpuhost.facts import pyinfra_api
from gpuhost.facts.host import AuditHostState

DIR_KEY = "gpuhost_audit_dir"
FLEET_FILE = "fleet.json"  # in DIR, beside the per-host records (which carry "host")
REPORT_KEYS = ("audit_json", "audit_html")
# the problems write_fleet found, once per run (per pyinfra State, gone with it); not
# roles.common.run_cache: importing roles.common costs the audit's pyinfra run ~0.1 s
_FLEETS: weakref.WeakKeyDictionary[State, list[str]] = weakref.WeakKeyDictionary()


class AuditProblem(Exception):
    """Raised on the controller by the failing operation of a host that drifts or failed."""


def read_state() -> tuple[dict | None, str | None]:
    """This host's AuditHostState, or why it could not be read. One remote command."""
    fact = AuditHostState()
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


def fleet_record(entries: list[tuple[str, list[str], dict]]) -> dict:
    """What ``gpuhost audit`` needs of this run's hosts, pure: ``entries`` are (name, groups,
    data) in inventory order. ``{"hosts": [{"name", "groups", "data": {"ssh_hostname",
    "ssh_port"}, "desired"}], "problems": [...]}``; ``problems`` lists every invalid audited
    setting of every host (``audit.desired_settings``), ``desired`` is None for such a host."""
    hosts, problems = [], []
    for name, groups, data in entries:
        entry = {"name": name, "groups": list(groups), "desired": None,
                 "data": {key: data.get(key) for key in ("ssh_hostname", "ssh_port")}}
        try:
            entry["desired"] = audit.desired_settings(data, name)
        except audit.AuditError as error:
            problems += str(error).splitlines()[1:]
        hosts.append(entry)
    return {"hosts": hosts, "problems": problems}


def write_fleet(directory: str, data: dict) -> list[str]:
    """Once per run: ``DIR/fleet.json`` (``fleet_record``) of the hosts pyinfra runs on
    (within ``--limit``/``--exclude``, reachable or not; ``data`` is the current host's);
    returns the problems. The first host's deploy code writes it before any host is read
    (pyinfra prepares hosts in greenlets; nothing here yields to another one)."""
    run = host.state
    if run not in _FLEETS:
        entries = [(other.name, list(other.groups or ()),
                    data if other.name == host.name else other.data.dict())
                   for other in inventory if pyinfra_api.in_limit(run, other)]
        record = fleet_record(entries)
        path = os.path.join(directory, FLEET_FILE)
        with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
            json.dump(record, handle, default=str)
        os.replace(f"{path}.tmp", path)
        _FLEETS[run] = record["problems"]
    return _FLEETS[run]


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
        if write_fleet(str(directory), data):  # gpuhost audit prints them; no host is read
            raise PyinfraError("invalid settings for the audit (gpuhost audit lists them). "
                               "Nothing was read from any host.")
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
    sick = health.unhealthy(entry, "critical")  # a critical finding, or GPUs not read
    why = [f"{f['id']}: {f['message']}" for f in entry["health"]["findings"]
           if sick and (f["severity"] == "critical" or f["id"] == health.NOT_READ)]
    if entry["status"] != "ok" or sick:
        status = entry["status"] if entry["status"] != "ok" else "unhealthy"
        reasons = [item["message"] for item in entry["drift"]] + why or [entry["error"]]
        python.raise_exception(
            AuditProblem, f"{host.name} {status}: " + "; ".join(reasons),
            name=f"gpuhost audit: {status} (see `gpuhost audit` for the fleet report)")
