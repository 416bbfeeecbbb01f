"""`--query-gpu=...` and `--query-compute-apps=...` with `--format=csv[,noheader][,nounits]`.

Each field: header name (canonical, as nvidia-smi prints it even when an alias was
queried), unit ("" or "MiB", "%", "W", "MHz") and a getter. A getter returning None
prints "[N/A]". Unknown fields fail like the real tool: `Field "x" is not a valid field
to query.` plus an empty line, exit code 2.
"""

import time

from . import host

NA = "[N/A]"


def _mig_mode(key):
    return lambda v: v[key] if v["mig_capable"] else NA


GPU_FIELDS = {
    "timestamp": ("timestamp", "", lambda v: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "driver_version": ("driver_version", "", lambda v: v["driver_version"]),
    "count": ("count", "", lambda v: v["count"]),
    "name": ("name", "", lambda v: v["name"]),
    "serial": ("serial", "", lambda v: v["serial"]),
    "uuid": ("uuid", "", lambda v: v["uuid"]),
    "pci.bus_id": ("pci.bus_id", "", lambda v: v["bus_id"]),
    "pci.domain": ("pci.domain", "", lambda v: "0x0000"),
    "pci.bus": ("pci.bus", "", lambda v: "0x" + v["pci_bus"]),
    "pci.device_id": ("pci.device_id", "", lambda v: "0x" + v["pci_device_id"]),
    "pci.sub_device_id": ("pci.sub_device_id", "", lambda v: "0x" + v["pci_subsys_id"]),
    "index": ("index", "", lambda v: v["index"]),
    "display_mode": ("display_mode", "", lambda v: "Disabled"),
    "persistence_mode": ("persistence_mode", "", lambda v: v["persistence"]),
    "vbios_version": ("vbios_version", "", lambda v: v["vbios"]),
    "pstate": ("pstate", "", lambda v: v["pstate"]),
    "fan.speed": ("fan.speed", "%", lambda v: NA),
    "memory.total": ("memory.total", "MiB", lambda v: v["mem_total"]),
    "memory.reserved": ("memory.reserved", "MiB", lambda v: v["mem_reserved"]),
    "memory.used": ("memory.used", "MiB", lambda v: v["mem_used"]),
    "memory.free": ("memory.free", "MiB", lambda v: v["mem_free"]),
    "compute_mode": ("compute_mode", "", lambda v: "Default"),
    "compute_cap": ("compute_cap", "", lambda v: v["compute_cap"]),
    "utilization.gpu": ("utilization.gpu", "%", lambda v: v["util_gpu"]),
    "utilization.memory": ("utilization.memory", "%", lambda v: v["util_mem"]),
    "ecc.mode.current": ("ecc.mode.current", "", lambda v: "Enabled"),
    "temperature.gpu": ("temperature.gpu", "", lambda v: v["temp"]),
    "power.draw": ("power.draw", "W", lambda v: f"{v['power_draw']:.2f}"),
    "power.limit": ("power.limit", "W", lambda v: f"{v['power_limit']:.2f}"),
    "clocks.current.graphics": ("clocks.current.graphics", "MHz", lambda v: v["clock_cur"]),
    "clocks.max.graphics": ("clocks.max.graphics", "MHz", lambda v: v["clock_max"]),
    "clocks.current.memory": ("clocks.current.memory", "MHz", lambda v: v["clock_mem"]),
    "mig.mode.current": ("mig.mode.current", "", _mig_mode("mig_current")),
    "mig.mode.pending": ("mig.mode.pending", "", _mig_mode("mig_pending")),
}
GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_serial": "serial",
               "gpu_bus_id": "pci.bus_id", "persistence.mode": "persistence_mode"}

APP_FIELDS = {
    "timestamp": ("timestamp", "", lambda a: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "gpu_name": ("gpu_name", "", lambda a: a["gpu"]["name"]),
    "gpu_bus_id": ("gpu_bus_id", "", lambda a: a["gpu"]["bus_id"]),
    "gpu_serial": ("gpu_serial", "", lambda a: a["gpu"]["serial"]),
    "gpu_uuid": ("gpu_uuid", "", lambda a: a["gpu"]["uuid"]),
    "pid": ("pid", "", lambda a: a["pid"]),
    "process_name": ("process_name", "", lambda a: a["name"]),
    "used_gpu_memory": ("used_gpu_memory", "MiB", lambda a: a["mem"]),
}
APP_ALIASES = {"used_memory": "used_gpu_memory", "name": "process_name"}


class QueryError(host.SimError):
    pass


def parse_format(spec):
    parts = [p.strip() for p in (spec or "").split(",") if p.strip()]
    unknown = [p for p in parts if p not in ("csv", "noheader", "nounits")]
    if "csv" not in parts or unknown:
        raise QueryError('"--format=" requires "csv" and optionally "noheader" and '
                         '"nounits", separated by commas.\n', 2)
    return "noheader" in parts, "nounits" in parts


def _resolve(names, table, aliases):
    fields = []
    for raw in names.split(","):
        name = raw.strip()
        key = aliases.get(name, name)
        if key not in table:
            raise QueryError(f'Field "{name}" is not a valid field to query.\n\n', 2)
        fields.append(table[key])
    return fields


def _cell(value, unit, nounits):
    if value is None:
        return NA
    text = str(value)
    if text.startswith("["):
        return text
    return text if nounits or not unit else f"{text} {unit}"


def render(names, fmt, rows, table, aliases):
    noheader, nounits = parse_format(fmt)
    fields = _resolve(names, table, aliases)
    out = []
    if not noheader:
        out.append(", ".join(h + (f" [{u}]" if u else "") for h, u, _ in fields))
    for row in rows:
        out.append(", ".join(_cell(get(row), unit, nounits) for _h, unit, get in fields))
    return "".join(line + "\n" for line in out)


def gpu_rows(views, driver_version, attached):
    return [dict(v, driver_version=driver_version, count=attached) for v in views]


def app_rows(views):
    return [dict(p, gpu=v) for v in views for p in v["processes"]]
