"""One GPU as every output format sees it: identity, modes, memory, load, MIG devices.

Numbers that real hardware measures (temperature, power, clocks, memory in use) are
modelled simply: idle values per model, higher while simulated processes run.
"""

import time

from . import health, host, mig, models


def onoff(flag):
    if flag is None:
        return "N/A"
    return "Enabled" if flag else "Disabled"


def visible(machine, faults):
    """The GPUs nvidia-smi lists: all but those the driver failed to initialise."""
    return [i for i in range(machine["gpu_count"])
            if not health.gpu_faults(faults, i).get("gpu_missing")]


def gpu_view(machine, state, index, faults=None):
    """GPU `index` of the machine; view["index"] is nvidia-smi's number for it."""
    faults = host.load_faults() if faults is None else faults
    shown = visible(machine, faults)
    info = models.model(machine["gpu_model"])
    gpu = state["gpus"][index]
    procs = host.gpu_processes(state, index)
    busy = bool(procs)
    mig_on = bool(gpu["mig_current"])
    bus = host.bus_id(machine, index)
    view = {
        "index": shown.index(index) if index in shown else index, "info": info, "name": info["name"], "brand": info["brand"],
        "arch": info["arch"], "uuid": host.gpu_uuid(machine, index),
        "serial": host.gpu_serial(machine, index), "bus_id": bus,
        "pci_bus": bus[9:11], "pci_device": bus[12:14], "pci_domain": "0000",
        "pci_device_id": (info["pci_device"] + "10de").upper(),
        "pci_subsys_id": (info["pci_subsys"] + "10de").upper(),
        "minor": index, "vbios": info["vbios"], "part": info["part"],
        "persistence": onoff(host.persistence_on(state, index)),
        "mig_capable": models.mig_supported(info, (state.get("driver") or {}).get("version")),
        "mig_enabled": mig_on,
        "mig_current": onoff(gpu["mig_current"]), "mig_pending": onoff(gpu["mig_pending"]),
        "compute_cap": info["compute_cap"],
        "temp": 30 + index % 3 + (22 if busy else 0),
        "power_limit": info["power_limit"],
        "power_draw": info["power_idle"] + (int(info["power_limit"] * 0.55) if busy else 0),
        "pstate": "P0" if busy or info["mig"] else "P8",
        "util_gpu": None if mig_on else (100 if busy else 0),
        "util_mem": None if mig_on else (37 if busy else 0),
        "clock_max": info["clocks"][0], "clock_mem": info["clocks"][1],
    }
    view["clock_cur"] = view["clock_max"] if busy else 210
    view["bar1_total"] = info["bar1_mib"]
    view["bar1_used"] = 1 if not busy else 5
    devices = []
    gi_used = {}
    if mig_on:
        for gi in gpu["gis"]:
            prof = mig.profile(info, gi["profile_id"])
            gi_used[gi["id"]] = prof["mem_slices"] * 9 + sum(
                p["mem"] for p in procs if p.get("gi") == gi["id"])
        for number, dev in enumerate(mig.devices(info, gpu)):
            prof, gi, ci = dev["gprof"], dev["gi"], dev["ci"]
            used = gi_used[gi["id"]]
            share = mig.ci_slices(ci) / prof["compute"]
            devices.append({
                "index": number, "gi": gi["id"], "ci": ci["id"], "uuid": ci["uuid"],
                "name": dev["name"], "mem_total": prof["mib"], "mem_used": used,
                "mem_free": prof["mib"] - used,
                "bar1_total": models.bar1_mig_mib(info, prof["mem_slices"]),
                "sm": int(prof["sm"] * share), "ce": prof["ce"], "dec": prof["dec"],
                "enc": prof["enc"], "jpeg": prof["jpeg"], "ofa": prof["ofa"],
            })
        used = sum(gi_used.values())
    else:
        used = 1 + sum(p["mem"] for p in procs)
    view["mig_devices"] = devices
    view["mem_total"] = info["memory_mib"]
    view["mem_reserved"] = info["reserved_mib"]
    view["mem_used"] = used
    view["mem_free"] = max(0, info["memory_mib"] - info["reserved_mib"] - used)
    view["processes"] = [{
        "pid": p["pid"], "name": p["name"], "mem": p["mem"], "type": p.get("type", "C"),
        "gi": p.get("gi"), "ci": p.get("ci")} for p in procs]
    view["health"] = health.gpu_health(machine, state, index, faults,
                                       (state.get("driver") or {}).get("version", ""),
                                       idle=view["pstate"] == "P8")
    return view


def all_views(machine, state, indexes, faults=None):
    faults = host.load_faults() if faults is None else faults
    return [gpu_view(machine, state, i, faults) for i in indexes]


def timestamp():
    """As nvidia-smi prints it: day of month padded with a space ("Fri Jul  3 ...")."""
    now = time.localtime()
    return time.strftime(f"%a %b {now.tm_mday:2d} %H:%M:%S %Y", now)


def driver_info(state):
    version = state["driver"]["version"]
    return version, models.cuda_version(version)
