"""Slurm's view of a host (issue 26 item 4): the ``slurm`` section of ``facts.script`` read back.

Pure (no pyinfra, no I/O). The section prints ``node=``, ``enabled=``, ``active=`` (the
``slurmd`` unit), then ``slurmd_G_rc=N`` and what ``slurmd -G`` printed (the GPUs its
gres.conf gives this node), then ``scontrol_rc=N`` and ``scontrol show node -o NODE``
(slurmctld's record of the node: state, reason, configured Gres). Formats checked against
Debian 12's slurm-wlm 22.05.8 (tests/fixtures/slurm/SOURCE.md).
"""

from __future__ import annotations

import re
from typing import Any

from gpuhost.facts.sections import NOT_INSTALLED, Sections, section

# "slurmd: Gres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 File=/dev/nvidia[0-1] (null)"
_GRES_LINE = re.compile(r"^(?:slurmd: )?Gres Name=(\S+) Type=(\S+) Count=(\d+)(.*)$")
_FILE = re.compile(r"\bFile=(\S+)")
# key=value fields of `scontrol show node -o` (values may hold spaces: OS=Linux 6.1 #1 ...)
_KEY = re.compile(r"(?:^|\s)([A-Za-z_]+)=")
# " [root@2026-11-27T17:14:44]" after the reason; SchedMD/slurm src/api/node_info.c
# slurm_sprint_node_table prints the optional Comment=, Extra=, InstanceId=, InstanceType=
# and ReservationName= after it (one line in -o mode)
_REASON_STAMP = re.compile(r"\s*\[[^\]@\s]*@[^\]\s]*\]")
_AFTER_REASON = re.compile(r"\s(?:Comment|Extra|InstanceId|InstanceType|ReservationName)=")
DRAIN_FLAGS = ("DRAIN", "DRAINING", "DRAINED")
BUSY = ("ALLOCATED", "MIXED", "COMPLETING")


def parse_slurmd_gres(text: str) -> dict[str, Any]:
    """``slurmd -G`` output -> ``{"gpus": N | None, "lines": [...], "error": str | None}``.

    ``gpus`` sums ``Count`` of the ``Name=gpu`` records (None on a fatal error)."""
    lines, errors = [], []
    for raw in text.splitlines():
        line = raw.strip()
        match = _GRES_LINE.match(line)
        if match:
            name, gtype, count, rest = match.groups()
            file = _FILE.search(rest)
            lines.append({"name": name, "type": None if gtype == "(null)" else gtype,
                          "count": int(count), "file": file.group(1) if file else None})
        elif re.match(r"^(slurmd: )?(fatal|error):", line):
            errors.append(line.removeprefix("slurmd: "))
    fatal = next((e for e in errors if e.startswith("fatal:")), None)
    gpus = None if fatal else sum(g["count"] for g in lines if g["name"] == "gpu")
    return {"gpus": gpus, "lines": lines, "error": fatal or (errors[0] if errors and not lines
                                                             else None)}


def parse_node_line(text: str) -> dict[str, Any]:
    """One ``scontrol show node -o`` line -> name, state, flags, reason, gres, gpus.

    Raises ValueError for text that is not a node record."""
    line = next((raw.strip() for raw in text.splitlines() if raw.startswith("NodeName=")), None)
    if line is None:
        raise ValueError(f"not a `scontrol show node -o` record: {text.strip()[:120]!r}")
    reason = None
    if " Reason=" in line:
        line, rest = line.split(" Reason=", 1)
        cut = _REASON_STAMP.search(rest) or _AFTER_REASON.search(rest)
        reason, tail = (rest[:cut.start()], rest[cut.end() if cut.re is _REASON_STAMP
                                                else cut.start():]) if cut else (rest, "")
        reason = reason.strip() or None
        line = f"{line} {tail.strip()}".strip()
    keys = list(_KEY.finditer(line))
    fields = {}
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        fields[match.group(1)] = line[match.end():end].strip()
    state = fields.get("State", "")
    base, *flags = state.split("+")
    gres = fields.get("Gres", "(null)")
    return {"name": fields.get("NodeName"), "state": base or None, "flags": flags,
            "reason": reason, "gres": None if gres == "(null)" else gres,
            "gpus": gres_gpu_count(gres)}


def gres_gpu_count(gres: str | None) -> int | None:
    """GPUs in a node's Gres value: ``gpu:2``, ``gpu:a100:4(S:0-1)``, ``gpu:a:2,gpu:b:1,
    mps:200`` -> 2, 4, 3; ``(null)`` or no gpu entry -> 0."""
    if not gres or gres == "(null)":
        return 0
    total = 0
    for entry in re.split(r",(?![^()]*\))", gres):
        name, *rest = re.sub(r"\(.*\)$", "", entry.strip()).split(":")
        if name != "gpu":
            continue
        last = rest[-1] if rest else "1"
        total += int(last) if last.isdigit() else 1
    return total


def drained(node: dict[str, Any] | None) -> bool:
    """The node is drained or draining (any DRAIN flag), or down."""
    if not node:
        return False
    return node["state"] == "DOWN" or any(f in DRAIN_FLAGS for f in node["flags"])


def busy(node: dict[str, Any] | None) -> bool:
    """Jobs still run on the node (allocated, mixed or completing)."""
    if not node:
        return False
    return node["state"] in BUSY or "COMPLETING" in node["flags"]


def parse_section(out: str) -> dict[str, Any]:
    """The ``slurm`` section's output -> the ``slurm`` value of the host state."""
    head: dict[str, str] = {}
    parts: dict[str, list[str]] = {"slurmd_G": [], "scontrol": []}
    current = None
    for line in out.splitlines():
        match = re.match(r"^(node|enabled|active)=(.*)$", line)
        if current is None and match:
            head[match.group(1)] = match.group(2).strip()
            continue
        match = re.match(r"^(slurmd_G|scontrol)_rc=(\d+)$", line)
        if match:
            current = match.group(1)
            head[f"{current}_rc"] = match.group(2)
            continue
        if current:
            parts[current].append(line)
    gres_text, node_text = "\n".join(parts["slurmd_G"]), "\n".join(parts["scontrol"]).strip()
    gres = parse_slurmd_gres(gres_text)
    if head.get("slurmd_G_rc") == "124":
        gres = {"gpus": None, "lines": [], "error": "slurmd -G timed out (10 s)"}
    node, node_error = None, None
    rc = head.get("scontrol_rc")
    if rc == "0":
        try:
            node = parse_node_line(node_text)
        except ValueError as error:
            node_error = str(error)
    elif rc == "124":
        node_error = "scontrol timed out (10 s): slurmctld does not answer"
    else:
        node_error = node_text.splitlines()[-1] if node_text else f"scontrol exit {rc}"
    return {"node_name": head.get("node") or None, "enabled": head.get("enabled") or None,
            "active": head.get("active") or None, "gres": gres, "node": node,
            "node_error": node_error}


def slurm_state(sections: Sections) -> dict[str, Any] | None:
    """The host state's ``slurm`` value: None when slurmd is not installed (or the section
    did not run), else ``parse_section``'s dict."""
    rc, out = section(sections, "slurm")
    if rc is None or rc == NOT_INSTALLED:
        return None
    if rc != 0:
        return {"node_name": None, "enabled": None, "active": None,
                "gres": {"gpus": None, "lines": [], "error": f"section exit {rc}"},
                "node": None, "node_error": f"section exit {rc}"}
    return parse_section(out)
