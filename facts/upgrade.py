"""What a driver upgrade reads from a host besides ``gpuhost.facts.host.GpuHostState``: one fact.
(The decisions made from it are in ``gpuhost.upgrade``; the operations in ``roles/upgrade/``.)

``UpgradeProbe`` runs one read-only shell command: the state of the GPU client services, a
stand-alone ``nv-hostengine``, the nvidia kernel modules (``lsmod``), running GPU
containers, the sha256 of ``/etc/docker/daemon.json``, gpuhost's upgrade marker (the
resume point written on the host while an upgrade is under way), the apt pin and the dnf
module stream.
"""

from __future__ import annotations

import json
from typing import Any

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpuhost.el_packages import VERSIONLOCK_LIST
from gpuhost.packages import APT_PIN
from gpuhost.upgrade import MARKER

DAEMON_JSON = "/etc/docker/daemon.json"
DNF_MODULE_FILE = "/etc/dnf/modules.d/nvidia-driver.module"

_SYSTEMD = "[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1"

_SERVICE_LOOP_BODY = (
    f"; do if {_SYSTEMD}; then"
    ' if systemctl is-active --quiet "$s"; then st=running;'
    ' elif systemctl cat "$s" >/dev/null 2>&1; then st=stopped; else st=absent; fi;'
    ' else st=absent; fi; echo "service $s $st"; done;'
)

_REST = (
    "if { pidof nv-hostengine || pgrep -x nv-hostengine; } >/dev/null 2>&1;"
    " then echo 'hostengine running'; fi;"
    " if command -v lsmod >/dev/null 2>&1; then"
    " lsmod | awk 'NR > 1 && ($1 ~ /^nvidia/ || $1 == \"gdrdrv\") {print \"module \" $1}'; fi;"
    " if command -v docker >/dev/null 2>&1 && ids=$(timeout 10 docker ps -q 2>/dev/null)"
    ' && [ -n "$ids" ]; then timeout 10 docker inspect --format'
    " 'container {{.Id}} {{.Name}} {{.HostConfig.Runtime}} {{json .HostConfig.DeviceRequests}}'"
    " $ids 2>/dev/null; fi;"
    f" if [ -e {DAEMON_JSON} ]; then echo \"daemon_json_sha256 $(sha256sum {DAEMON_JSON}"
    " | cut -d' ' -f1)\"; fi;"
    f" if [ -e {MARKER} ]; then printf 'marker '; head -c 65536 {MARKER} | tr -d '\\n'; echo; fi;"
    f" if [ -e {APT_PIN} ]; then echo \"apt_pin_sha256 $(sha256sum {APT_PIN} | cut -d' ' -f1)\";"
    " fi;"
    f" if [ -e {DNF_MODULE_FILE} ]; then sed -n 's/^stream=/dnf_stream /p; s/^state=/dnf_state /p'"
    f" {DNF_MODULE_FILE}; fi;"
    f" if [ -r {VERSIONLOCK_LIST} ]; then"
    f" sed -n 's/^\\([^#[:space:]]*nvidia[^[:space:]]*\\)$/dnf_lock \\1/p' {VERSIONLOCK_LIST}; fi; true"
)


def empty() -> dict[str, Any]:
    return {"init": None, "services": {}, "hostengine": False, "modules": [],
            "containers": [], "daemon_json_sha256": None, "marker": None, "marker_error": None,
            "apt_pin_sha256": None, "dnf_stream": None, "dnf_state": None, "dnf_locks": []}


def parse(lines: list[str]) -> dict[str, Any]:
    """The probe's output as a dict (see ``UpgradeProbe``); unknown lines are ignored."""
    result = empty()
    for line in lines:
        key, _, value = line.strip().partition(" ")
        if key == "init":
            result["init"] = value.strip()
        elif key == "service":
            name, _, status = value.rpartition(" ")
            result["services"][name] = status
        elif key == "hostengine":
            result["hostengine"] = value.strip() == "running"
        elif key == "module":
            result["modules"].append(value.strip())
        elif key == "container":
            cid, name, runtime, requests = (value.split(" ", 3) + ["", "", ""])[:4]
            if runtime == "nvidia" or '"gpu"' in requests:
                result["containers"].append({"id": cid, "name": name.lstrip("/"),
                                             "runtime": runtime})
        elif key in ("daemon_json_sha256", "apt_pin_sha256", "dnf_stream", "dnf_state"):
            result[key] = value.strip() or None
        elif key == "dnf_lock" and value.strip():
            result["dnf_locks"].append(value.strip())
        elif key == "marker":
            result.update(parse_marker(value, MARKER))
    return result


def parse_marker(value: str, path: str) -> dict[str, Any]:
    """A resume marker's JSON line: ``{"marker": {...}}``, or ``{"marker_error": why}``
    naming ``path`` when it is not a JSON object (shared by the upgrade and recover probes)."""
    try:
        marker = json.loads(value)
        if not isinstance(marker, dict):
            raise ValueError("not a JSON object")
    except ValueError as error:
        return {"marker_error": f"{path} is not valid JSON ({error})"}
    return {"marker": marker}


class UpgradeProbe(FactBase):
    """
    Read-only state a driver upgrade needs, in one command.

    + services: systemd unit names whose state is reported (``absent`` for all of them when
      the host did not boot with systemd: ``init`` is then ``"none"``, and
      ``gpuhost.upgrade.assess`` refuses the host, as every supported distribution boots
      systemd)

    .. code:: python

        {"init": "systemd" | "none" | None,      # None: the probe printed nothing
         "services": {"nvidia-persistenced": "running" | "stopped" | "absent"},
         "hostengine": bool,                       # a nv-hostengine process runs
         "modules": ["nvidia_uvm", "nvidia"],      # nvidia modules and GDRCopy's gdrdrv (lsmod)
         "containers": [{"id": ..., "name": ..., "runtime": "nvidia"}],  # GPU containers
         "daemon_json_sha256": "..." | None,
         "marker": {...} | None, "marker_error": str | None,
         "apt_pin_sha256": "..." | None,
         "dnf_stream": "570-open" | None, "dnf_state": "enabled" | None,
         "dnf_locks": ["nvidia-open-3:570.172.08-1.el10.*", ...]}  # versionlock.list, *nvidia*
    """

    @override
    def command(self, services: list[str] | tuple[str, ...]) -> StringCommand:
        return StringCommand(
            f"if {_SYSTEMD}; then echo 'init systemd'; else echo 'init none'; fi;",
            "for s in", *[QuoteString(name) for name in services], _SERVICE_LOOP_BODY, _REST,
        )

    @override
    def process(self, output: list[str]) -> dict[str, Any]:
        return parse(output)

    @override
    def default(self) -> dict[str, Any]:  # type: ignore[override]
        return empty()
