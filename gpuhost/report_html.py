"""The audit report as one self-contained HTML page: inline CSS, an inline SVG bar chart of
the driver versions across the fleet, the drift summary and a per-host table. No script, no
external resource: the file opens the same from a mail attachment or an air-gapped host."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from gpuhost import report

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
"""
BAR_COLOURS = {"match": "#2da44e", "other": "#d4a72c", "none": "#8c959f", "down": "#cf222e"}


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


def _drift_section(document: Mapping[str, Any]) -> str:
    summary = document["summary"]
    hosts = document["hosts"]
    if not summary["drift"] and not summary["failed"] and not summary["unreachable"]:
        return '<section id="drift"><h2>Drift</h2><p>Every host matches its settings.</p></section>'
    items = "".join(f"<li><code>{_e(k)}</code>: {v} host(s)</li>"
                    for k, v in summary["drift_items"].items())
    rows = []
    for host in hosts:
        messages = [item["message"] for item in host["drift"]]
        if host["error"]:
            messages.append(host["error"])
        if messages:
            rows.append(f'<tr class="{_e(host["status"])}"><td>{_e(host["name"])}</td>'
                        f'<td class="status">{_e(host["status"])}</td><td><ul>'
                        + "".join(f"<li>{_e(m)}</li>" for m in messages) + "</ul></td></tr>")
    return ('<section id="drift"><h2>Drift</h2>'
            + (f"<ul>{items}</ul>" if items else "")
            + '<table><thead><tr><th>host</th><th>status</th><th>what is, what is wanted</th>'
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>")


def _cuda_section(document: Mapping[str, Any]) -> str:
    cuda = document["summary"].get("cuda")
    if not cuda:
        return ""
    rows = []
    for host in document["hosts"]:
        answer = host["cuda"]
        if answer is None:
            rows.append(f"<tr><td>{_e(host['name'])}</td><td>not audited</td><td></td></tr>")
        else:
            rows.append(f"<tr><td>{_e(host['name'])}</td><td>{_e(answer['verdict'])}</td>"
                        f"<td>{_e(answer['message'])}</td></tr>")
    return (f'<section id="cuda"><h2>CUDA {_e(cuda["version"])}: native needs driver &gt;= '
            f'{_e(cuda["driver_needed"])}</h2><table><thead><tr><th>host</th><th>verdict</th>'
            "<th>why</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>")


def _host_table(document: Mapping[str, Any]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in report.COLUMNS)
    rows = []
    for host in document["hosts"]:
        cells = report.row(host)
        tds = "".join(f"<td>{_e(c)}</td>" for c in cells[:-1])
        rows.append(f'<tr class="{_e(host["status"])}" data-host="{_e(host["name"])}">{tds}'
                    f'<td class="status">{_e(cells[-1])}</td></tr>')
    return (f'<section id="hosts"><h2>Hosts</h2><table><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></section>")


def render(document: Mapping[str, Any]) -> str:
    summary = document["summary"]
    cards = "".join(f'<div class="card {k}"><b>{summary[k]}</b>{k}</div>'
                    for k in ("hosts", "ok", "drift", "failed", "unreachable"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>gpuhost audit {_e(document['generated_at'])}</title><style>{CSS}</style></head>"
        f"<body><h1>gpuhost fleet audit</h1><p class=\"meta\">{_e(document['generated_at'])} "
        f"&middot; schema {_e(document['schema'])} &middot; "
        f"<span id=\"summary-line\">{_e(report.summary_line(document))}</span></p>"
        f'<div class="cards">{cards}</div>'
        f'<section id="drivers"><h2>Driver versions</h2>{driver_chart(document)}{_legend()}'
        f"</section>{_drift_section(document)}{_cuda_section(document)}{_host_table(document)}"
        "</body></html>\n"
    )
