"""The audit report as one self-contained HTML page: inline CSS, inline SVG charts (the
fleet's health, the driver versions), the health findings, the drift summary, what changed
since a baseline audit and a per-host table. No script, no external resource: the file opens
the same from a mail attachment or an air-gapped host."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from gpuhost.health import NOT_READ
from gpuhost.reports import groups as grouping, text as report

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.meta{color:#5b6475}.cards{display:flex;gap:12px;margin:16px 0}
.card{border:1px solid #d5d9e0;border-radius:6px;padding:8px 14px;min-width:90px}
.card b{display:block;font-size:22px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e3e6eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f8}tr.ok td.status{color:#1a7f37}tr.drift td.status{color:#9a6700}
tr.failed td.status,tr.unreachable td.status{color:#cf222e}
td.status{font-weight:600}ul{margin:4px 0 0 18px;padding:0}code{font-size:12px}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
td.health.healthy,.sev-info{color:#57606a}td.health.warning,.sev-warning{color:#9a6700}
td.health.critical,.sev-critical{color:#cf222e;font-weight:600}td.health{font-weight:600}
td.health.not_read,.card.health-not_read b{color:#57606a}
td:first-child{white-space:nowrap}summary{margin:8px 0;cursor:pointer}td.count{text-align:right}
td code{white-space:nowrap}td.hosts{min-width:14em}
"""
BAR_COLOURS = {"match": "#2da44e", "other": "#d4a72c", "none": "#8c959f", "down": "#cf222e"}
HEALTH_COLOURS = {"healthy": "#2da44e", "warning": "#d4a72c", "critical": "#cf222e",
                  "not_read": "#8c959f"}
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
HEALTH_LABELS = {"healthy": "healthy", "warning": "warning", "critical": "critical",
                 "not_read": "not read (GPUs not readable, or host failed / unreachable)"}
HOSTS_SHOWN = 24  # ranges of a group's hostlist in a cell; every name is in its title


def _e(value: Any) -> str:
    return escape("-" if value is None else str(value), quote=True)


def _bars(document: Mapping[str, Any]) -> list[tuple[str, int, str, list[str]]]:
    """(label, host count, colour key, host names) per driver version, newest first."""
    groups: dict[str, dict[str, Any]] = {}
    for host in document["hosts"]:
        obs = host["observed"]
        if obs is None:
            label, kind = host["status"], "down"
        elif obs["driver"]["loaded_version"] is None:
            label, kind = "not loaded", "none"
        else:
            label = obs["driver"]["loaded_version"]
            kind = "match" if host["desired"]["nvidia_driver_version"] == label else "other"
        group = groups.setdefault(label, {"kinds": set(), "names": []})
        group["kinds"].add(kind)
        group["names"].append(host["name"])

    def order(label: str) -> tuple:
        parts = label.split(".")
        if all(p.isdigit() for p in parts):
            return (0, [-int(p) for p in parts])
        return (1, ["not loaded", "failed", "unreachable"].index(label))

    bars = []
    for label in sorted(groups, key=order):
        kinds = groups[label]["kinds"]
        kind = "match" if kinds == {"match"} else next(
            (k for k in ("down", "none", "other") if k in kinds), "other")
        bars.append((label, len(groups[label]["names"]), kind, groups[label]["names"]))
    return bars


def driver_chart(document: Mapping[str, Any]) -> str:
    """Inline SVG: one horizontal bar per loaded driver version (and not loaded / failed /
    unreachable), its length the number of hosts; each bar's title lists the hosts."""
    bars = _bars(document)
    total = max([count for _, count, _, _ in bars] + [1])
    label_w, bar_w, row_h = 120, 460, 26
    height = row_h * max(len(bars), 1) + 30
    parts = [f'<svg id="driver-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'width="{label_w + bar_w + 60}" height="{height}" '
             f'viewBox="0 0 {label_w + bar_w + 60} {height}" aria-labelledby="chart-title">',
             '<title id="chart-title">NVIDIA driver versions loaded across the fleet</title>']
    for i, (label, count, kind, names) in enumerate(bars):
        y = 10 + i * row_h
        width = max(2, round(bar_w * count / total))
        parts.append(
            f'<g class="bar" data-version="{_e(label)}"><title>{_e(label)}: {count} host(s): '
            f'{_e(", ".join(names))}</title>'
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" font-size="12">{_e(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width}" height="{row_h - 8}" rx="2" '
            f'fill="{BAR_COLOURS[kind]}"/>'
            f'<text x="{label_w + width + 6}" y="{y + 16}" font-size="12">{count}</text></g>')
    axis_y = 10 + len(bars) * row_h
    parts.append(f'<line x1="{label_w}" y1="8" x2="{label_w}" y2="{axis_y}" stroke="#57606a"/>')
    parts.append(f'<text x="{label_w}" y="{axis_y + 16}" font-size="11" fill="#57606a">'
                 f'hosts per loaded driver version (of {len(document["hosts"])})</text></svg>')
    return "".join(parts)


def _legend() -> str:
    names = {"match": "the wanted version", "other": "another version", "none": "not loaded",
             "down": "failed / unreachable"}
    return '<p class="legend">' + "".join(
        f'<span style="background:{BAR_COLOURS[k]}"></span>{v}' for k, v in names.items()) + "</p>"


def _hosts_cell(hosts: list) -> str:
    """A group's hosts: by name, or for many their hostlist; every name in the title."""
    return (f'<td class="hosts" title="{_e(grouping.hosts_text(hosts, None))}">'
            f"{_e(grouping.hosts_text(hosts, HOSTS_SHOWN))}</td>")


def _drift_section(document: Mapping[str, Any]) -> str:
    """Identical drift items (and errors of hosts not read) as one row each; the per-host
    list one click away."""
    summary = document["summary"]
    if not summary["drift"] and not summary["failed"] and not summary["unreachable"]:
        return '<section id="drift"><h2>Drift</h2><p>Every host matches its settings.</p></section>'
    body = []
    for group in grouping.drift_groups(document):
        body.append(f'<tr class="group {_e(group["status"])}" data-item="{_e(group["item"])}" '
                    f'data-hosts="{len(group["hosts"])}"><td class="status">'
                    f'{_e(group["status"])}</td><td><code>{_e(group["item"])}</code></td>'
                    f'<td class="count">{len(group["hosts"])}</td>{_hosts_cell(group["hosts"])}'
                    f'<td>{_e(group["message"])}</td></tr>')
    rows = []
    for host in document["hosts"]:
        messages = [item["message"] for item in host["drift"]]
        if host["error"]:
            messages.append(host["error"])
        if messages:
            rows.append(f'<tr class="{_e(host["status"])}"><td>{_e(host["name"])}</td>'
                        f'<td class="status">{_e(host["status"])}</td><td><ul>'
                        + "".join(f"<li>{_e(m)}</li>" for m in messages) + "</ul></td></tr>")
    return ('<section id="drift"><h2>Drift</h2><table class="grouped"><thead><tr>'
            "<th>status</th><th>item</th><th>hosts</th><th>which</th>"
            "<th>what is, what is wanted</th></tr></thead><tbody>" + "".join(body)
            + f'</tbody></table><details id="drift-by-host"><summary>every drift item and '
            f"error per host ({len(rows)} host(s))</summary><table><thead><tr><th>host</th>"
            "<th>status</th><th>what is, what is wanted</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></details></section>")


def _cuda_section(document: Mapping[str, Any]) -> str:
    cuda = document["summary"].get("cuda")
    if not cuda:
        return ""
    rows = [f'<tr class="group" data-verdict="{_e(g["verdict"])}" data-hosts="{len(g["hosts"])}">'
            f'<td>{_e(g["verdict"])}</td><td class="count">{len(g["hosts"])}</td>'
            f'{_hosts_cell(g["hosts"])}<td>{_e(g["message"])}</td></tr>'
            for g in grouping.cuda_groups(document)]
    return (f'<section id="cuda"><h2>CUDA {_e(cuda["version"])}: native needs driver &gt;= '
            f'{_e(cuda["driver_needed"])}</h2><table class="grouped"><thead><tr><th>verdict</th>'
            "<th>hosts</th><th>which</th><th>why</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></section>")


def health_chart(document: Mapping[str, Any]) -> str:
    """Inline SVG: the fleet's hosts as one stacked bar by health status (healthy, warning,
    critical, not read), then one bar per finding id with the number of hosts that have it."""
    summary = document["summary"]["health"]
    total = max(len(document["hosts"]), 1)
    ids = sorted(summary["finding_ids"].items(), key=lambda kv: (-kv[1], kv[0]))[:12]
    label_w, bar_w, row_h = 190, 420, 22
    height = 64 + row_h * len(ids) + 24
    parts = [f'<svg id="health-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'width="{label_w + bar_w + 60}" height="{height}" '
             f'viewBox="0 0 {label_w + bar_w + 60} {height}" aria-labelledby="health-title">',
             '<title id="health-title">Health of the fleet: hosts by status and by finding'
             '</title>']
    x = label_w
    for status in ("healthy", "warning", "critical", "not_read"):
        count = summary[status]
        if not count:
            continue
        width = max(2, round(bar_w * count / total))
        parts.append(f'<g class="segment" data-health="{status}"><title>{count} host(s) '
                     f'{_e(HEALTH_LABELS[status])}</title><rect x="{x}" y="8" width="{width}" '
                     f'height="26" fill="{HEALTH_COLOURS[status]}"/>'
                     f'<text x="{x + 4}" y="26" font-size="12" fill="#fff">{count}</text></g>')
        x += width
    parts.append(f'<text x="{label_w - 8}" y="26" text-anchor="end" font-size="12">'
                 f'hosts ({len(document["hosts"])})</text>')
    worst: dict[str, str] = {}  # colour of a finding id: its worst severity
    for host in document["hosts"]:
        for f in host["health"]["findings"]:
            if f["id"] not in worst or _SEVERITY[f["severity"]] < _SEVERITY[worst[f["id"]]]:
                worst[f["id"]] = f["severity"]
    top = max([count for _, count in ids] + [1])
    for i, (ident, count) in enumerate(ids):
        y = 52 + i * row_h
        width = max(2, round(bar_w * count / top))
        colour = HEALTH_COLOURS.get(worst.get(ident, "info"), "#8c959f")
        parts.append(f'<g class="finding" data-finding="{_e(ident)}"><title>{_e(ident)}: {count} '
                     f'host(s)</title><text x="{label_w - 8}" y="{y + 14}" text-anchor="end" '
                     f'font-size="12">{_e(ident)}</text><rect x="{label_w}" y="{y + 2}" '
                     f'width="{width}" height="{row_h - 6}" rx="2" fill="{colour}"/>'
                     f'<text x="{label_w + width + 6}" y="{y + 14}" font-size="12">{count}</text>'
                     "</g>")
    parts.append(f'<text x="{label_w}" y="{height - 6}" font-size="11" fill="#57606a">'
                 "hosts per health status; hosts per finding id (the 12 most frequent)</text>"
                 "</svg>")
    return "".join(parts)


def _health_legend() -> str:
    return '<p class="legend">' + "".join(
        f'<span style="background:{HEALTH_COLOURS[k]}"></span>{_e(v)}'
        for k, v in HEALTH_LABELS.items()) + "</p>"


def _grouped_table(groups: list[dict[str, Any]]) -> str:
    """One row per group of identical findings (``report.finding_groups``)."""
    body = []
    for group in groups:
        count = len({name for name, _ in group["hosts"]})
        body.append(f'<tr class="group" data-finding="{_e(group["id"])}" data-hosts="{count}">'
                    f'<td class="sev-{_e(group["severity"])}">{_e(group["severity"])}</td>'
                    f'<td><code>{_e(group["id"])}</code></td><td class="count">{count}</td>'
                    f'{_hosts_cell(group["hosts"])}'
                    f'<td>{_e(group["message"])}</td></tr>')
    return ('<table class="grouped"><thead><tr><th>severity</th><th>id</th><th>hosts</th>'
            '<th>which</th><th>what is wrong, what to do</th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def _health_section(document: Mapping[str, Any]) -> str:
    """Identical findings across hosts as one row, criticals first, and why hosts were not
    read (``gpus-not-read``, even as info: it decides their status); the other info findings
    and the per-host list one click away (``<details>``)."""
    groups = grouping.finding_groups(document)
    main = [g for g in groups if g["severity"] != "info" or g["id"] == NOT_READ]
    infos = [g for g in groups if g not in main]
    rows: list[str] = []
    for host in document["hosts"]:
        for f in host["health"]["findings"]:
            rows.append(
                f'<tr data-finding="{_e(f["id"])}"><td>{_e(host["name"])}</td>'
                f'<td class="sev-{_e(f["severity"])}">{_e(f["severity"])}</td>'
                f'<td><code>{_e(f["id"])}</code></td><td>{_e(f["gpu"])}</td>'
                f'<td>{_e(f["message"])}</td></tr>')
    text = "" if any(g["severity"] != "info" for g in main) else (
        "<p>No critical or warning finding.</p>")
    text += _grouped_table(main) if main else ""
    if infos:
        count = sum(len(g["hosts"]) for g in infos)
        text += (f'<details id="info-findings"><summary>{count} info finding(s)</summary>'
                 f"{_grouped_table(infos)}</details>")
    if rows:
        text += (f'<details id="findings-by-host"><summary>every finding per host '
                 f'({len(rows)})</summary><table><thead><tr><th>host</th><th>severity</th>'
                 '<th>id</th><th>GPU</th><th>what is wrong, what to do</th></tr></thead>'
                 f'<tbody>{"".join(rows)}</tbody></table></details>')
    return (f'<section id="health"><h2>Health</h2>{health_chart(document)}{_health_legend()}'
            f"{text}</section>")


def _baseline_section(document: Mapping[str, Any]) -> str:
    base = document.get("baseline")
    if not base:
        return ""
    title = report.baseline_lines(document)[0].rstrip(":")
    items = [f"<li>new host <b>{_e(name)}</b></li>" for name in base["hosts_new"]]
    items += [f"<li>host gone <b>{_e(name)}</b></li>" for name in base["hosts_gone"]]
    for change in base["hosts"]:
        inner = "".join(f"<li><code>{_e(line.strip())}</code></li>"
                        for line in report.change_lines(change))
        items.append(f'<li data-host="{_e(change["name"])}"><b>{_e(change["name"])}</b>'
                     f"<ul>{inner}</ul></li>")
    body = f"<ul>{''.join(items)}</ul>" if items else "<p>Nothing changed.</p>"
    return f'<section id="baseline"><h2>{_e(title)}</h2>{body}</section>'


def _host_table(document: Mapping[str, Any]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in report.COLUMNS)
    rows = []
    for host in document["hosts"]:
        cells = report.row(host)
        health = host["health"]["status"] or "not_read"
        tds = "".join(f'<td class="health {health}">{_e(c)}</td>' if i == report.HEALTH_COLUMN
                      else f"<td>{_e(c)}</td>" for i, c in enumerate(cells[:-1]))
        rows.append(f'<tr class="{_e(host["status"])}" data-host="{_e(host["name"])}">{tds}'
                    f'<td class="status">{_e(cells[-1])}</td></tr>')
    return (f'<section id="hosts"><h2>Hosts</h2><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></section>")


def render(document: Mapping[str, Any]) -> str:
    summary = document["summary"]
    cards = "".join(f'<div class="card {k}"><b>{summary[k]}</b>{k}</div>'
                    for k in ("hosts", "ok", "drift", "failed", "unreachable"))
    cards += "".join(f'<div class="card health-{k}"><b>{summary["health"][k]}</b>'
                     f'{k.replace("_", " ")}</div>'
                     for k in ("healthy", "warning", "critical", "not_read"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>gpuhost audit {_e(document['generated_at'])}</title><style>{CSS}</style></head>"
        f"<body><h1>gpuhost fleet audit</h1><p class=\"meta\">{_e(document['generated_at'])} "
        f"&middot; schema {_e(document['schema'])} &middot; "
        f"<span id=\"summary-line\">{_e(report.summary_line(document))}</span></p>"
        f'<div class="cards">{cards}</div>{_health_section(document)}'
        f'<section id="drivers"><h2>Driver versions</h2>{driver_chart(document)}{_legend()}'
        f"</section>{_drift_section(document)}{_baseline_section(document)}"
        f"{_cuda_section(document)}{_host_table(document)}"
        "</body></html>\n"
    )
