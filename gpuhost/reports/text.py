"""The audit report in three forms of one document (``gpuhost.reports.audit.build``): a terminal
table, JSON (schema ``gpuhost.audit/2``, docs/audit-schema.md) and a self-contained HTML page
(``gpuhost.reports.html``). Pure: the caller decides where the text goes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from gpuhost.health import NOT_READ
from gpuhost.reports import audit
from gpuhost.reports.groups import cuda_groups, drift_groups, finding_groups, hosts_text

_ANSI = {"green": "32", "yellow": "33", "red": "31", "bold": "1", "dim": "2"}
STATUS_COLOUR = {"ok": "green", "drift": "yellow", "failed": "red", "unreachable": "red"}
HEALTH_COLOUR = {"healthy": "green", "warning": "yellow", "critical": "red",
                 "not_read": "yellow", None: "red"}
SEVERITY_COLOUR = {"critical": "red", "warning": "yellow", "info": "dim"}
# SETTINGS: does the host match its inventory settings (drift), or could it not be read;
# HEALTH: its worst finding. Two judgements, two columns (issue 26 item 5: a column called
# STATUS said "ok" beside a critical host).
COLUMNS = ("HOST", "OS", "KERNEL", "DRIVER loaded/pkg", "STATE", "CUDA<=", "GPUS", "MIG",
           "TOOLKIT", "RUNTIME nv/default", "HEALTH", "SETTINGS")
HEALTH_COLUMN = COLUMNS.index("HEALTH")


def use_colour(stream: Any) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


def _paint(text: str, colour: str | None, enabled: bool) -> str:
    if not enabled or not colour:
        return text
    return f"\033[{_ANSI[colour]}m{text}\033[0m"


ANSI_RE = re.compile(r"\033\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """``text`` without its ANSI colour codes (gpuhost's one ANSI-stripping helper)."""
    return ANSI_RE.sub("", text)


def _visible_len(text: str) -> int:
    return len(strip_ansi(text))


def _dash(value: Any) -> str:
    return "-" if value in (None, "", []) else str(value)


def os_label(observed: Mapping[str, Any]) -> str:
    info = observed["os"]  # "release": since audit reports name it (older ones: ID VERSION_ID)
    label = info.get("release") or f"{info['id']} {info['version_id']}".strip() or "unknown"
    return label if info["supported"] else f"{label} (unsupported)"


def driver_label(observed: Mapping[str, Any]) -> str:
    driver = observed["driver"]
    loaded, installed = driver["loaded_version"], driver["installed_version"]
    if loaded is None and installed is None:
        return "-"
    if loaded == installed:
        return f"{loaded} {driver['flavor'] or ''}".strip()
    return f"{_dash(loaded)}/{_dash(installed)}"


def gpus_label(observed: Mapping[str, Any]) -> str:
    return ", ".join(f"{g['model']} x{g['count']}" for g in observed["gpus"]) or "-"


def mig_label(observed: Mapping[str, Any]) -> str:
    mig = observed["mig"]
    if mig["mode"] is None:
        return "n/a" if observed["gpu_count"] else "-"
    text = mig["mode"] + (" (pending)" if mig["pending"] else "")
    layouts = {"+".join(profiles) or "empty" for profiles in mig["layout"].values()}
    if layouts:
        text += ": " + "; ".join(sorted(layouts))
    return text


def toolkit_label(observed: Mapping[str, Any]) -> str:
    toolkit = observed["toolkit"]
    if not toolkit["installed"]:
        return "-"
    return toolkit["version"] or "mixed!"


def runtime_label(observed: Mapping[str, Any]) -> str:
    docker = observed["docker"]
    if not docker["installed"]:
        return "no docker"
    return f"{'yes' if docker['nvidia_runtime'] else 'no'}/{docker['default_runtime'] or 'runc'}"


def status_label(host: Mapping[str, Any]) -> str:
    """The SETTINGS cell: 'as wanted', 'drift: driver,toolkit', 'failed' or 'unreachable'."""
    if host["status"] == "drift":
        items = sorted({item["item"] for item in host["drift"]})
        return "drift: " + ",".join(items)
    return "as wanted" if host["status"] == "ok" else host["status"]


def _ids(block: Mapping[str, Any], severity: str) -> str:
    ids = list(dict.fromkeys(f["id"] for f in block["findings"] if f["severity"] == severity
                             and f["id"] != NOT_READ))
    return ",".join(ids[:3]) + (f",+{len(ids) - 3}" if len(ids) > 3 else "")


def health_label(host: Mapping[str, Any]) -> str:
    """'ok', 'warning: lifecycle-eol' or 'CRITICAL: xid-79,gpu-missing' (the ids of the worst
    severity, three at most); 'not read' (its GPUs could not be read; '; warning: ...' when
    it has warnings too); '?' when nothing was read."""
    block = host["health"]
    if block["status"] is None:
        return "?"
    if block["status"] == "healthy":
        return "ok"
    if block["status"] == "not_read":
        warnings = _ids(block, "warning")
        return "not read" + (f"; warning: {warnings}" if warnings else "")
    label = "CRITICAL" if block["status"] == "critical" else "warning"
    return f"{label}: {_ids(block, block['status'])}"


def row(host: Mapping[str, Any]) -> list[str]:
    """The table cells of one host (plain text)."""
    obs = host["observed"]
    if obs is None:
        return ([host["name"]] + ["?"] * (len(COLUMNS) - 3) + [health_label(host),
                                                               status_label(host)])
    return [host["name"], os_label(obs), _dash(obs["kernel_release"]), driver_label(obs),
            obs["driver"]["state"], _dash(obs["driver"]["newest_cuda"]), gpus_label(obs),
            mig_label(obs), toolkit_label(obs), runtime_label(obs), health_label(host),
            status_label(host)]


def summary_line(document: Mapping[str, Any]) -> str:
    s = document["summary"]
    parts = [f"{s[k]} {k}" for k in ("ok", "drift", "failed", "unreachable")]
    h = s["health"]
    health = [f"{h[k]} {k}" for k in ("healthy", "warning", "critical")]
    if h["not_read"]:
        health.append(f"{h['not_read']} not read")
    meaning = audit.EXIT_MEANING.get(s["exit_code"], "?")
    hosts = f"{s['hosts']} host" + ("" if s["hosts"] == 1 else "s")
    return (f"{hosts}: {', '.join(parts)}; health: {', '.join(health)} "
            f"-> exit {s['exit_code']} ({meaning})")


def grouped_finding_lines(document: Mapping[str, Any], colour: bool = False) -> list[str]:
    """One line per group of identical findings (``finding_groups``): severity, id, how many
    hosts, which, what is wrong and what to do."""
    lines = []
    for group in finding_groups(document):
        tag = _paint(group["severity"].upper().ljust(8), SEVERITY_COLOUR[group["severity"]],
                     colour)
        count = len({n for n, _ in group["hosts"]})
        example = "e.g. " if (group["severity"] == "info" and group["id"] != NOT_READ
                              and count > 1) else ""
        lines.append(f"  {tag} [{group['id']}] {count} host{'s' if count > 1 else ''}: "
                     f"{hosts_text(group['hosts'])}")
        lines.append(f"           {example}{group['message']}")
    return lines


def finding_lines(document: Mapping[str, Any], colour: bool = False) -> list[str]:
    """(``--details``) One line per critical or warning finding (host, severity, id, GPU,
    what to do), then one line per info id: its host, or on how many hosts and one
    example."""
    rows = [(h["name"], f) for h in document["hosts"] for f in h["health"]["findings"]
            if f["severity"] != "info"]
    infos: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for h in document["hosts"]:
        for f in h["health"]["findings"]:
            if f["severity"] == "info":
                infos.setdefault(f["id"], []).append((h["name"], f))
    if not rows and not infos:
        return []
    width = max([len(name) for name, _ in rows] + [len(h["name"]) for h in document["hosts"]])
    lines = []
    for name, f in rows:
        tag = _paint(f["severity"].upper().ljust(8), SEVERITY_COLOUR[f["severity"]], colour)
        gpu = f"GPU {f['gpu']}: " if f["gpu"] else ""
        lines.append(f"  {name.ljust(width)}  {tag} [{f['id']}] {gpu}{f['message']}")
    for ident, found in sorted(infos.items()):
        tag = _paint("INFO".ljust(8), SEVERITY_COLOUR["info"], colour)
        name, f = found[0]
        gpu = f"GPU {f['gpu']}: " if f["gpu"] else ""
        if len(found) == 1:
            lines.append(f"  {name.ljust(width)}  {tag} [{ident}] {gpu}{f['message']}")
        else:
            hosts = len({n for n, _ in found})
            lines.append(f"  {f'({hosts} hosts)'.ljust(width)}  {tag} [{ident}] e.g. {name}: "
                         f"{gpu}{f['message']}")
    return lines


def problem_lines(document: Mapping[str, Any], colour: bool = False) -> list[str]:
    """(``--details``) One line per host and drift item, and per host not read (its error)."""
    hosts = document["hosts"]
    problems = [(h, item["message"]) for h in hosts for item in h["drift"]]
    problems += [(h, h["error"]) for h in hosts if h["status"] in ("failed", "unreachable")]
    if not problems:
        return []
    width = max(len(h["name"]) for h, _ in problems)
    lines = []
    for h, message in problems:
        tag = _paint(h["status"].ljust(11), STATUS_COLOUR[h["status"]], colour)
        lines.append(f"  {h['name'].ljust(width)}  {tag} {message}")
    return lines


def grouped_problem_lines(document: Mapping[str, Any], colour: bool = False) -> list[str]:
    """One entry per group of identical drift items or errors (``groups.drift_groups``):
    status, item, how many hosts, which, then the message."""
    lines = []
    for group in drift_groups(document):
        tag = _paint(group["status"].ljust(11), STATUS_COLOUR[group["status"]], colour)
        count = len(group["hosts"])
        item = f"[{group['item']}] " if group["item"] else ""
        lines.append(f"  {tag} {item}{count} host{'s' if count > 1 else ''}: "
                     f"{hosts_text(group['hosts'])}")
        lines.append(f"              {group['message']}")
    return lines


def change_lines(change: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, sign in (("status", "status"), ("health_status", "health")):
        if change[key]:
            lines.append(f"    {sign}: {change[key]['was']} -> {change[key]['now']}")
    lines += [f"    + drift: {i['message']}" for i in change["drift_new"]]
    lines += [f"    - drift resolved: {i['message']}" for i in change["drift_resolved"]]
    lines += [f"    + {f['severity']} [{f['id']}] {f['message']}" for f in change["findings_new"]]
    lines += [f"    - resolved [{f['id']}]{' GPU ' + f['gpu'] if f['gpu'] else ''}"
              for f in change["findings_resolved"]]
    for event in change["xids_new"]:
        kind = "SXid" if "sxid" in event else "Xid"
        number = event.get("sxid", event.get("xid"))
        lines.append(f"    + new {kind} {number} ({event.get('pci_bus_id')}): {event.get('text')}")
    return lines


def baseline_lines(document: Mapping[str, Any]) -> list[str]:
    """What changed since the ``--baseline`` audit (none without one)."""
    base = document.get("baseline")
    if not base:
        return []
    lines = [f"Since {base['generated_at']} ({base['schema']}"
             + ("" if base["health_compared"] else ": it has no health, so health and Xids "
                                                   "are not compared") + "):"]
    lines += [f"  + new host {name}" for name in base["hosts_new"]]
    lines += [f"  - host gone {name}" for name in base["hosts_gone"]]
    for change in base["hosts"]:
        lines += [f"  {change['name']}:"] + change_lines(change)
    if len(lines) == 1:
        lines.append("  nothing changed")
    return lines


def render_table(document: Mapping[str, Any], colour: bool = False,
                 details: bool = False) -> str:
    """The terminal report: one row per host, then drift details, the health findings
    (identical ones across hosts as one entry; ``details``: one line per host and finding),
    CUDA answers, summary."""
    hosts = document["hosts"]
    rows = [list(COLUMNS)] + [row(h) for h in hosts]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = []
    for index, cells in enumerate(rows):
        painted = []
        for i, cell in enumerate(cells):
            text = cell.ljust(widths[i]) if i < len(cells) - 1 else cell
            if index == 0:
                text = _paint(text, "bold", colour)
            elif i == len(cells) - 1:
                text = _paint(text, STATUS_COLOUR[hosts[index - 1]["status"]], colour)
            elif i == HEALTH_COLUMN:
                text = _paint(text, HEALTH_COLOUR[hosts[index - 1]["health"]["status"]], colour)
            painted.append(text)
        lines.append("  ".join(painted).rstrip())
    problems = (problem_lines if details else grouped_problem_lines)(document, colour)
    if problems:
        title = "Problems:" if details else "Problems (identical ones once; --details: per host):"
        lines += ["", _paint(title, "bold", colour)] + problems
    health = (finding_lines if details else grouped_finding_lines)(document, colour)
    if health:
        title = "Health:" if details else "Health (identical findings once; --details: per host):"
        lines += ["", _paint(title, "bold", colour)] + health
    changes = baseline_lines(document)
    if changes:
        lines += ["", _paint(changes[0], "bold", colour)] + changes[1:]
    cuda = document["summary"].get("cuda")
    if cuda:
        lines += ["", _paint(f"CUDA {cuda['version']} (native needs driver >= "
                             f"{cuda['driver_needed']}):", "bold", colour)]
        for group in cuda_groups(document):
            count = len(group["hosts"])
            lines.append(f"  {group['verdict']:<21} {count} host{'s' if count > 1 else ''}: "
                         f"{hosts_text(group['hosts'])}")
            if group["verdict"] not in ("native", "not audited"):
                lines.append(f"    {group['message']}")
    colour_of = STATUS_COLOUR["ok"] if document["summary"]["exit_code"] == 0 else (
        "yellow" if document["summary"]["exit_code"] == audit.EXIT_DRIFT else "red")
    lines += ["", _paint(summary_line(document), colour_of, colour)]
    return "\n".join(lines) + "\n"


INDENTED_UP_TO = 1000  # hosts; larger documents are written one host per line


def render_json(document: Mapping[str, Any]) -> str:
    """The document as JSON (stable key order, newline-terminated). Up to INDENTED_UP_TO
    hosts it is indented throughout; a larger one (a merged fleet) keeps the indented
    head and writes each host compactly on its own line, ``"hosts"`` last: the same data,
    several times faster to write (the json module's C encoder does not indent) and
    smaller, and still one host per line for grep."""
    hosts = document["hosts"]
    if len(hosts) <= INDENTED_UP_TO:
        return json.dumps(document, indent=2, sort_keys=True) + "\n"
    head = json.dumps({k: v for k, v in document.items() if k != "hosts"}, indent=2,
                      sort_keys=True)
    lines = ",\n".join("    " + json.dumps(h, sort_keys=True, separators=(",", ":"))
                       for h in hosts)
    return head[:-2] + ',\n  "hosts": [\n' + lines + "\n  ]\n}\n"


def render_html(document: Mapping[str, Any]) -> str:
    """A self-contained HTML page (inline CSS and SVG, no script, no network)."""
    from gpuhost.reports import html as report_html

    return report_html.render(document)
