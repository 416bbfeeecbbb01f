"""GPU health faults and the simulated kernel log.

Faults live in etc/gpusim/faults.json next to the flat ones (`dkms_build_fail`, ...):

    {"gpus": {"0": {"row_remap_pending": 1, "pcie_degraded": 8}, ...},
     "next_load": [["xid", "79", "--gpu", "1"], ...]}

`--gpu` is the machine's GPU index (the order lspci lists them); nvidia-smi numbers the
GPUs it can see, so with a GPU missing its indexes shift. Each fault is what a real GPU
shows until something clears it; what clears which (driver load, GPU reset, reboot) and
the vendor source of each rule are in sandbox/README.md ("gpusim health faults").

The kernel log (`run/gpusim/kmsg`, a tmpfs inside a host, so per boot like the kernel's
ring buffer) holds records in /dev/kmsg's format, `PRIORITY,SEQUENCE,MICROSECONDS,-;TEXT`;
`dmesg` (gpusim/dmesg.py) prints them as util-linux does.
"""

import os

from . import host, models

KMSG = "run/gpusim/kmsg"
LEVELS = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")
KERN_ERR, KERN_WARNING, KERN_INFO = 3, 4, 6

THROTTLE_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                    "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
                    "sw_thermal_slowdown", "display_clocks_setting")
# NVML: HW Slowdown "is an indicator of: temperature being too high, External Power Brake
# Assertion ..."; nvidia-smi -q prints the two under it (L4 550.90.07 capture).
HW_SLOWDOWN_PARTS = ("hw_thermal_slowdown", "hw_power_brake_slowdown")

# name -> (value kind, default, one line of help)
GPU_FAULTS = {
    "ecc_volatile_uncorrectable": ("count", 1, "uncorrectable ECC errors since the driver "
                                   "loaded (also counted in the aggregate)"),
    "ecc_aggregate_uncorrectable": ("count", 1, "uncorrectable ECC errors of earlier driver "
                                    "loads (kept in the InfoROM)"),
    "retired_pages": ("count", 1, "pages retired after double-bit errors (pre-Ampere)"),
    "retired_pages_pending": ("count", 1, "pages waiting for a driver reload to be retired "
                              "(pre-Ampere)"),
    "row_remap_pending": ("count", 1, "rows remapped after uncorrectable errors, waiting "
                          "for a GPU reset (Ampere and newer)"),
    "row_remap_failure": ("flag", True, "a row remapping failed (Ampere and newer)"),
    "sram_threshold_exceeded": ("flag", True, "uncorrectable SRAM errors passed the RMA "
                                "threshold: <sram_threshold_exceeded>Yes in the aggregate "
                                "ECC block (drivers that print it)"),
    "pcie_degraded": ("width", 8, "the PCIe link trained below its x16 width"),
    "throttle": ("reasons", "hw_thermal_slowdown", "clock event (throttle) reasons active now"),
    "fabric_in_progress": ("flag", True, "NVLink fabric registration stuck 'In Progress' "
                           "(Hopper and newer on NVSwitch hosts)"),
    "fabric_status": ("status", "Insufficient Resources", "NVLink fabric state 'Completed' "
                      "with a failed probe status (Hopper and newer on NVSwitch hosts)"),
    "gpu_missing": ("flag", True, "on the PCI bus, but the driver failed to initialise it: "
                    "nvidia-smi does not list it"),
    "gpu_lost": ("flag", True, "fell off the bus (Xid 79): nvidia-smi fails until a reboot"),
    "nvlink_inactive": ("links", "0", "NVLinks that did not train (`<inactive>` in nvidia-smi "
                        "nvlink -s): link numbers, comma-separated, or all (SXM models)"),
    "nvlink_replay_errors": ("count", 1, "NVLink replay errors on link 0 since the driver "
                             "loaded (SXM models)"),
    "nvlink_recovery_errors": ("count", 1, "NVLink recovery errors on link 0 since the driver "
                               "loaded (SXM models)"),
    "nvlink_crc_errors": ("count", 1, "NVLink CRC errors on link 0 since the driver loaded "
                          "(SXM models)"),
}
# Failed fabric probe statuses seen with state Completed on real hosts: "Insufficient
# Resources" (Azure/azhpc-images PR #506, 2026-03), "Unknown Error" (NVIDIA/NVSentinel#883,
# 2026-02); NVML nvmlGpuFabricInfo_t: the status "Must be checked only if Probe state
# returns complete".
FABRIC_FAILED_STATUSES = ("Insufficient Resources", "Unknown Error")
NVLINK_COUNTERS = ("nvlink_replay_errors", "nvlink_recovery_errors", "nvlink_crc_errors")

# Default texts of injected Xid/SXid lines, from real logs (sandbox/README.md).
XID_TEXT = {
    79: "GPU has fallen off the bus.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
}
XID_TEXT_PAGE_RETIREMENT = {
    63: "Dynamic Page Retirement: New retired page, reload the driver to activate.",
}
SXID_TEXT = {
    12028: "Non-fatal, Link 32 egress non-posted PRIV error (First)",
    22013: "Non-fatal, Link 00 Minion Link DLREQ interrupt",
}


# ----- faults.json -----------------------------------------------------------------------
def gpu_faults(faults, index):
    return (faults.get("gpus") or {}).get(str(index)) or {}


def save_faults(faults):
    from . import jsonlite
    host.write_text(host.FAULTS, jsonlite.dumps(faults) + "\n")


def check_fault(machine, name, index):
    """Why fault `name` cannot exist on GPU `index` of this machine (None: it can)."""
    info = models.model(machine["gpu_model"])
    arch = info["arch"]
    if name in ("retired_pages", "retired_pages_pending") and \
            arch not in models.PAGE_RETIREMENT_ARCHS:
        return (f"{info['name']} ({arch}) remaps rows instead of retiring pages: use "
                "row_remap_pending / row_remap_failure")
    if name in ("row_remap_pending", "row_remap_failure") and \
            arch in models.PAGE_RETIREMENT_ARCHS:
        return (f"{info['name']} ({arch}) retires pages instead of remapping rows: use "
                "retired_pages / retired_pages_pending")
    if name.startswith("nvlink_") and not info.get("nvlink"):
        return f"{info['name']} has no NVLink (the SXM models do)"
    if name in ("fabric_in_progress", "fabric_status") and not fabric_capable(machine):
        return ("the NVLink fabric state exists on Hopper and newer GPUs of NVSwitch hosts "
                f"(this host: {info['name']}, nvswitch={bool(machine.get('nvswitch'))})")
    return None


def fabric_capable(machine):
    info = models.model(machine["gpu_model"])
    return bool(machine.get("nvswitch") and (info.get("nvswitch") or nvlink5(machine)) and
                info["arch"] in models.FABRIC_ARCHS)


def nvlink5(machine):
    """An NVLink 5 board (HGX B200/B300): its switches need NVLSM besides Fabric Manager."""
    return bool(machine.get("nvswitch") and
                models.model(machine["gpu_model"]).get("nvlink5_switches"))


def parse_value(name, text):
    kind, default, _doc = GPU_FAULTS[name]
    if text is None:
        return default
    if kind == "count":
        if not text.isdigit() or int(text) < 1:
            raise host.SimError(f"gpusim: {name} takes a count of 1 or more, not {text!r}.", 2)
        return int(text)
    if kind == "width":
        if text.rstrip("x") not in ("1", "2", "4", "8"):
            raise host.SimError(f"gpusim: pcie_degraded takes the link width the GPU trained "
                                f"at: 1, 2, 4 or 8 (x16 is the full width), not {text!r}.", 2)
        return int(text.rstrip("x"))
    if kind == "links":
        links = [n.strip() for n in text.split(",") if n.strip()]
        if text != "all" and (not links or not all(n.isdigit() and int(n) < 18 for n in links)):
            raise host.SimError(f"gpusim: nvlink_inactive takes link numbers (0-17), "
                                f"comma-separated, or all, not {text!r}.", 2)
        return text if text == "all" else ",".join(links)
    if kind == "reasons":
        reasons = [r.strip() for r in text.split(",") if r.strip()]
        bad = [r for r in reasons if r not in THROTTLE_REASONS]
        if bad or not reasons:
            raise host.SimError(f"gpusim: unknown throttle reason {','.join(bad) or text!r} "
                                f"(known: {', '.join(THROTTLE_REASONS)}).", 2)
        return ",".join(reasons)
    if kind == "status":
        if text not in FABRIC_FAILED_STATUSES:
            raise host.SimError(f"gpusim: fabric_status takes a failed status NVML names "
                                f"({', '.join(FABRIC_FAILED_STATUSES)}), not {text!r}.", 2)
        return text
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    raise host.SimError(f"gpusim: {name} takes no value.", 2)


# ----- the kernel log ----------------------------------------------------------------------
def uptime():
    """Seconds since boot (a sandbox host's /proc/uptime counts from its own boot)."""
    try:
        with open("/proc/uptime", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def kmsg_records():
    """[(level, seq, usec, text)] of this boot."""
    try:
        with open(host.path(KMSG), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        head, sep, text = line.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 3:
            continue
        try:
            out.append((int(fields[0]) & 7, int(fields[1]), int(fields[2]), text))
        except ValueError:
            continue
    return out


def kmsg_append(lines, level=KERN_ERR):
    """Append kernel messages (one record per line) stamped now."""
    records = kmsg_records()
    seq = records[-1][1] + 1 if records else 0
    usec = max(int(uptime() * 1e6), records[-1][2] if records else 0)
    full = host.path(KMSG)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "a", encoding="utf-8") as fh:
        for n, text in enumerate(lines):
            fh.write(f"{level},{seq + n},{usec + n},-;{text}\n")


def kmsg_clear():
    full = host.path(KMSG)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8"):
        pass


def xid_bus(machine, index):
    """`0000:07:00` as the driver prints it in Xid lines (%04x:%02x:%02x: lower-case hex)."""
    return host.lspci_slot(machine, index, domain=True)[:-2]


def dev_prefix(machine, index):
    """NV_DEV_PRINTF's `NVRM: GPU 0000:07:00.0: `."""
    return f"NVRM: GPU {host.lspci_slot(machine, index, domain=True)}: "


def nvswitch_slots(machine):
    info = models.model(machine["gpu_model"])
    if not (machine.get("nvswitch") and info.get("nvswitch")):
        return []
    return [f"0000:{0xc4 + n:02x}:00.0" for n in range(info["nvswitch"][2])]


def xid_line(machine, index, number, text, pid=None, name=None, gi=None, ci=None):
    """NVIDIA's krcReportXid format (open-gpu-kernel-modules kernel_rc.c)."""
    where = "PCI:" + xid_bus(machine, index)
    if gi is not None:
        where += f" GPU-I:{gi:02d}"
        if ci is not None:
            where += f" GPU-CI:{ci:02d}"
    pid_text = "'<unknown>'" if pid is None else str(pid)
    return f"NVRM: Xid ({where}): {number}, pid={pid_text}, name={name or '<unknown>'}, {text}"


def sxid_line(machine, switch, number, text):
    """NVSWITCH_PRINT_SXID's format: `nvidia-nvswitchN: SXid (PCI:...): %05d, ...`."""
    return f"nvidia-nvswitch{switch}: SXid (PCI:{nvswitch_slots(machine)[switch]}): {number:05d}, {text}"


def init_failed_lines(machine, index):
    """What RM logs when it cannot initialise a GPU (real logs: RmInitAdapter failed)."""
    prefix = dev_prefix(machine, index)
    return [prefix + "RmInitAdapter failed! (0x22:0x56:667)",
            prefix + f"rm_init_adapter failed, device minor number {index}"]


# ----- what driver loads, resets and boots do ----------------------------------------------
def on_boot(faults):
    """A reboot: the GPU that fell off the bus is back (until it falls again)."""
    changed = False
    for gpu in (faults.get("gpus") or {}).values():
        changed |= gpu.pop("gpu_lost", None) is not None
    return changed


def settle_at_load(gpu):
    """A driver load: volatile counters restart (ECC, NVLink errors), pending retirements and
    remaps apply."""
    for name in NVLINK_COUNTERS:
        gpu.pop(name, None)
    pending = gpu.pop("retired_pages_pending", 0)
    if pending:
        gpu["retired_pages"] = gpu.get("retired_pages", 0) + pending
    settle_at_reset(gpu)
    gpu.pop("gpu_lost", None)


def settle_at_reset(gpu):
    """A GPU reset (also part of every driver load): pending row remappings take effect
    (NVIDIA: "at the next GPU reset"); the volatile ECC count restarts, kept in the
    aggregate (nvidia-smi(1) -r: a reset "can be used to clear GPU HW and SW state ...
    Typically useful if a double bit ECC error has occurred"; NVML: volatile counts restart
    whenever the driver (re)initialises the GPU)."""
    vol = gpu.pop("ecc_volatile_uncorrectable", 0)
    if vol:
        gpu["ecc_aggregate_uncorrectable"] = gpu.get("ecc_aggregate_uncorrectable", 0) + vol
    pending = gpu.pop("row_remap_pending", 0)
    if pending:
        gpu["remapped_rows_uncorrectable"] = gpu.get("remapped_rows_uncorrectable", 0) + pending


def on_driver_load(state, machine):
    """Called by host.load_driver once the module is in: the kernel lines of a load, the
    faults a load clears, then the faults armed for this load (`--next-load`)."""
    faults = host.load_faults()
    for gpu in (faults.get("gpus") or {}).values():
        settle_at_load(gpu)
    armed = faults.pop("next_load", None) or []
    lines = []
    if state.get("kmsg_tainted") != state.get("boots"):
        state["kmsg_tainted"] = state.get("boots")
        kmsg_append(["nvidia: loading out-of-tree module taints kernel."], KERN_WARNING)
        if state["driver"]["flavor"] != "open":
            kmsg_append(["nvidia: module license 'NVIDIA' taints kernel.",
                         "Disabling lock debugging due to kernel taint"], KERN_WARNING)
    info = models.model(machine["gpu_model"])
    for n, slot in enumerate(nvswitch_slots(machine)):
        kmsg_append([f"nvidia-nvswitch: Probing device {slot}, Vendor Id = 0x10de, Device Id "
                     f"= 0x{info['nvswitch'][0]}, Class = 0x68000",
                     f"nvidia-nvswitch{n}: using MSI"], KERN_INFO)
    head = host.proc_version_text(state["driver"], machine).split("\n", 1)[0]
    lines.append("NVRM: loading " + head.split("NVRM version: ", 1)[1])
    kmsg_append(lines, KERN_ERR)
    for index in range(machine["gpu_count"]):
        if gpu_faults(faults, index).get("gpu_missing"):
            kmsg_append(init_failed_lines(machine, index), KERN_ERR)
    save_faults(faults)
    for argv in armed:
        apply(state, machine, list(argv))


# ----- injecting ---------------------------------------------------------------------------
def set_gpu_fault(state, machine, name, value, indexes):
    faults = host.load_faults()
    for index in indexes:
        why = check_fault(machine, name, index)
        if why:
            raise host.SimError(f"gpusim: cannot set {name} on GPU {index}: {why}.", 2)
    gpus = faults.setdefault("gpus", {})
    for index in indexes:
        gpu = gpus.setdefault(str(index), {})
        gpu[name] = value
        if name == "gpu_missing" and state.get("driver"):
            kmsg_append(init_failed_lines(machine, index), KERN_ERR)
        if name == "gpu_lost":
            if not state.get("driver"):
                raise host.SimError("gpusim: gpu_lost needs the NVIDIA driver loaded (the "
                                    "driver logs Xid 79); boot or modprobe nvidia first.", 1)
            kmsg_append([xid_line(machine, index, 79, XID_TEXT[79]),
                         dev_prefix(machine, index) + XID_TEXT[79]], KERN_ERR)
    save_faults(faults)


def inject_xid(state, machine, number, index, text=None, pid=None, name=None, gi=None,
               ci=None):
    if not state.get("driver"):
        raise host.SimError("gpusim: an Xid comes from the loaded NVIDIA driver, and it is not "
                            "loaded; boot or modprobe nvidia first (or arm it with "
                            "--next-load).", 1)
    if not 0 <= index < machine["gpu_count"]:
        raise host.SimError(f"gpusim: --gpu {index}: this machine has GPUs 0.."
                            f"{machine['gpu_count'] - 1}.", 2)
    if text is None:
        arch = models.model(machine["gpu_model"])["arch"]
        table = dict(XID_TEXT)
        if arch in models.PAGE_RETIREMENT_ARCHS:
            table.update(XID_TEXT_PAGE_RETIREMENT)
        text = table.get(number)
        if text is None:
            raise host.SimError(f"gpusim: no default text for Xid {number} (known: "
                                f"{', '.join(str(n) for n in sorted(table))}): give --text as "
                                "the driver would print it.", 2)
    if gi is not None:
        gpu = state["gpus"][index]
        if not gpu.get("mig_current") or not any(g["id"] == gi for g in gpu["gis"]):
            raise host.SimError(f"gpusim: GPU {index} has no GPU instance {gi} (MIG mode with "
                                "that instance is needed for an Xid attributed to it).", 2)
    kmsg_append([xid_line(machine, index, number, text, pid, name, gi, ci)], KERN_ERR)


def inject_sxid(machine, state, number, switch, text=None):
    slots = nvswitch_slots(machine)
    if not slots:
        raise host.SimError("gpusim: SXid lines come from NVSwitches, and this host has none "
                            "(machine.json nvswitch, an A100/H100/V100 SXM model).", 2)
    if not state.get("driver"):
        raise host.SimError("gpusim: the NVSwitch driver is part of the nvidia module, which "
                            "is not loaded; boot or modprobe nvidia first.", 1)
    if not 0 <= switch < len(slots):
        raise host.SimError(f"gpusim: --switch {switch}: this host has NVSwitches 0.."
                            f"{len(slots) - 1}.", 2)
    if text is None:
        text = SXID_TEXT.get(number)
        if text is None:
            raise host.SimError(f"gpusim: no default text for SXid {number} (known: "
                                f"{', '.join(str(n) for n in sorted(SXID_TEXT))}): give --text.",
                                2)
    kmsg_append([sxid_line(machine, switch, number, text)], KERN_ERR)


def apply(state, machine, argv):
    """Replay an armed injection (`gpusim ... --next-load`) inside a running session."""
    from . import ctl
    args = ctl.Args(argv)
    try:
        ctl.inject(state, machine, args)
    except host.SimError as err:  # an armed fault that no longer fits: say so, go on
        kmsg_append([f"gpusim: armed fault {' '.join(argv)!r} not applied: "
                     f"{err.message.strip()}"], KERN_WARNING)


# ----- what nvidia-smi shows ---------------------------------------------------------------
def ecc_layout(arch, branch):
    """'bits' (single/double-bit blocks), 'sram_dram', or 'split' (SRAM parity/SEC-DED)."""
    if arch in models.ECC_BIT_LAYOUT_ARCHS:
        return "bits"
    if arch == "Turing" or branch < 550:
        return "sram_dram"
    return "split"


def gpu_health(machine, state, index, faults, driver_version, idle):
    info = models.model(machine["gpu_model"])
    arch, branch = info["arch"], models.branch(driver_version)
    f = gpu_faults(faults, index)
    gpu = state["gpus"][index]
    vol = f.get("ecc_volatile_uncorrectable", 0)
    health = {
        "ecc_layout": ecc_layout(arch, branch),
        "ecc_volatile_unc": vol,
        "ecc_aggregate_unc": f.get("ecc_aggregate_uncorrectable", 0) + vol,
        "retired": None, "remap": None,
        "gen_max": info["max_link_gen"], "gen_current": 1 if idle else info["max_link_gen"],
        "width_max": 16, "width_current": f.get("pcie_degraded", 16),
        "fabric": None, "fabric_status": None,
        "sram_threshold": bool(f.get("sram_threshold_exceeded")),
    }
    if arch in models.PAGE_RETIREMENT_ARCHS:
        pending = f.get("retired_pages_pending", 0)
        health["retired"] = {"double_bit": f.get("retired_pages", 0) + pending,
                             "single_bit": 0, "pending": bool(pending)}
    # NVML: "On MIG-enabled GPUs with active instances, querying the number of remapped
    # rows is not supported" (N/A in the A100 535 and H100 590 MIG captures).
    elif not (gpu.get("mig_current") and gpu.get("gis")):
        pending = f.get("row_remap_pending", 0)
        unc = f.get("remapped_rows_uncorrectable", 0) + pending
        failed = bool(f.get("row_remap_failure"))
        banks = info.get("remap_banks", 192)
        none = 1 if failed else 0
        high = min(unc, banks - none)
        health["remap"] = {"corr": 0, "unc": unc, "pending": bool(pending), "failure": failed,
                           "hist": (banks - none - high, high, 0, 0, none)}
    reasons = set(f.get("throttle", "").split(",")) - {""}
    if reasons & set(HW_SLOWDOWN_PARTS):
        reasons.add("hw_slowdown")
    if idle:
        reasons.add("gpu_idle")
    health["throttle"] = reasons
    if fabric_capable(machine):
        # NVIDIA's Fabric Manager user guide: the GPUs of an NVSwitch system register with
        # the fabric only once Fabric Manager of the driver's exact version has configured
        # the NVSwitches; until then their fabric state stays "In Progress".
        # NVLink 5 (HGX B200/B300): the switches' NVLinks are trained by the NVLink Subnet
        # Manager, which Fabric Manager's start script runs first (FM user guide, "What is
        # NVLink Subnet Manager?"): without NVLSM the fabric stays In Progress.
        running = host.fabricmanager_version()
        done = (running == driver_version and not f.get("fabric_in_progress")
                and (not nvlink5(machine) or host.nvlsm_running()))
        health["fabric"] = "Completed" if done else "In Progress"
        health["fabric_status"] = (f.get("fabric_status") or "Success") if done else None
    return health
