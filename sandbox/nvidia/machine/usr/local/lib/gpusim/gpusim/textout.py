"""Human-readable nvidia-smi outputs: `-L`, the default table, `-q`, `--version`.

Column positions are those of real outputs of the same era (checked against the team's
corpus of real captures by sandbox/tests/test_gpusim.py): the table of 550-575 drivers (inner
separator line "|---+", narrow PID column before 570), the -q key column 42 wide.
"""

from . import models

RULE = "+" + "-" * 89 + "+"
GPU_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
MIG_RULE = "+" + "-" * 18 + "+" + "-" * 34 + "+" + "-" * 11 + "+" + "-" * 23 + "+"


def list_gpus(views):
    out = []
    for v in views:
        out.append(f"GPU {v['index']}: {v['name']} (UUID: {v['uuid']})")
        for dev in v["mig_devices"]:
            out.append(f"  MIG {dev['name']:<11} Device {dev['index']:>2}: (UUID: {dev['uuid']})")
    return "\n".join(out) + "\n"


def _box(text):
    return "| " + text.ljust(88) + "|"


def table(views, driver_version, cuda_version, timestamp):
    br = models.branch(driver_version)
    out = [timestamp + "       ", RULE,
           "| NVIDIA-SMI " + f"{driver_version:<23}Driver Version: {driver_version:<15}"
           f"CUDA Version: {cuda_version:<9}|",
           GPU_RULE if br >= 580 else "|" + GPU_RULE[1:],
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for v in views:
        name = v["name"] if len(v["name"]) <= 27 else v["name"][:24] + "..."
        pm = "On  " if v["persistence"] == "Enabled" else "Off "
        ecc = "On" if v["mig_enabled"] else str(v["health"]["ecc_volatile_unc"])
        util = "N/A" if v["util_gpu"] is None else f"{v['util_gpu']}%"
        out.append(f"|{v['index']:>4}  {name:<31}{pm}|   {v['bus_id']} Off |{ecc:>21} |")
        out.append(f"| N/A {v['temp']:>4}C {v['pstate']:>5}{v['power_draw']:>15}W / "
                   f"{v['power_limit']:>4}W |{v['mem_used']:>8}MiB / {v['mem_total']:>6}MiB |"
                   f"{util:>8}      Default |")
        mig = v["mig_current"]
        out.append(f"|{'':41}|{'':24}|{mig:>21} |")
        out.append(GPU_RULE)
    out.append("" if br >= 580 else " " * 89)
    if any(v["mig_enabled"] for v in views):
        out += _mig_table(views, br)
        out.append("" if br >= 580 else " " * 89)
    out += _processes(views, br)
    return "\n".join(out) + "\n"


def _mig_table(views, br):
    shared = "Shared " if br >= 580 else ""
    out = [RULE, _box("MIG devices:"), MIG_RULE,
           f"| GPU  GI  CI  MIG |{shared + 'Memory-Usage':>33} |        Vol|        Shared         |",
           f"|      ID  ID  Dev |{shared + 'BAR1-Usage':>33} | SM     Unc| CE ENC  DEC  OFA  JPG |",
           "|                  |                                  |        ECC|                       |",
           "|" + "=" * 18 + "+" + "=" * 34 + "+" + "=" * 11 + "+" + "=" * 23 + "|"]
    devices = [(v, d) for v in views if v["mig_enabled"] for d in v["mig_devices"]]
    if not devices:
        out += [_box("No MIG devices found"), RULE]
        return out
    for v, d in devices:
        out.append(f"|{v['index']:>3}{d['gi']:>5}{d['ci']:>4}{d['index']:>4}  |"
                   f"{str(d['mem_used']) + 'MiB':>19} / {str(d['mem_total']) + 'MiB':>8}    |"
                   f" {d['sm']:<3}{0:>6} |{d['ce']:>3}{d['enc']:>4}{d['dec']:>5}{d['ofa']:>5}"
                   f"{d['jpeg']:>5} |")
        bar1 = f"{'0MiB':>19} / {str(d['bar1_total']) + 'MiB':>8}    " if br >= 580 else \
            f"{'0MiB':>21} / {str(d['bar1_total']) + 'MiB':>8}  "
        out.append(f"|{'':18}|{bar1}|{'':11}|{'':23}|")
        out.append(MIG_RULE)
    return out


def _processes(views, br):
    wide = br >= 570
    pid_end, name_at = (32, 42) if wide else (26, 36)
    head = ("  GPU   GI   CI              PID   Type   Process name                        "
            "GPU Memory" if wide else
            "  GPU   GI   CI        PID   Type   Process name                              "
            "GPU Memory")
    out = [RULE, _box("Processes:"), "|" + head + " |",
           "|        ID   ID                                                               Usage      |",
           "|" + "=" * 89 + "|"]
    rows = []
    for v in views:
        for p in v["processes"]:
            if p["gi"] is None:
                prefix = f"{v['index']:>5}   N/A  N/A"
            else:
                prefix = f"{v['index']:>5}{p['gi']:>5}{p['ci']:>5}"
            line = prefix + f"{p['pid']:>{pid_end - len(prefix)}}{p['type']:>7}   "
            mem = f"{p['mem']}MiB"
            room = 88 - name_at - len(mem) - 1
            name = p["name"] if len(p["name"]) <= room else "..." + p["name"][-(room - 3):]
            rows.append("|" + line + name.ljust(88 - name_at - len(mem)) + mem + " |")
    out += rows or [_box(" No running processes found")]
    out.append(RULE)
    return out


def version(driver_version, cuda_version):
    return (f"NVIDIA-SMI version  : {driver_version}\n"
            f"NVML version        : {models.nvml_version(driver_version)}\n"
            f"DRIVER version      : {driver_version}\n"
            f"CUDA Version        : {cuda_version}\n")


# ----- nvidia-smi -q -------------------------------------------------------------------
class _Q:
    def __init__(self, width):
        self.width = width
        self.lines = []

    def kv(self, level, key, value=None):
        text = "    " * level + key
        self.lines.append(text if value is None else text.ljust(self.width) + f": {value}")


def query(views, attached, driver_version, cuda_version, timestamp):
    q = _Q(55 if models.branch(driver_version) >= 590 else 42)
    q.lines += ["", "==============NVSMI LOG==============", ""]
    q.kv(0, "Timestamp", timestamp)
    q.kv(0, "Driver Version", driver_version)
    q.kv(0, "CUDA Version", cuda_version)
    q.lines.append("")
    q.kv(0, "Attached GPUs", attached)
    for v in views:
        _query_gpu(q, v, driver_version)
        q.lines.append("")
    return "\n".join(q.lines) + "\n"


REASON_KEYS = (("gpu_idle", "Idle", 2), ("applications_clocks_setting",
                                        "Applications Clocks Setting", 2),
               ("sw_power_cap", "SW Power Cap", 2), ("hw_slowdown", "HW Slowdown", 2),
               ("hw_thermal_slowdown", "HW Thermal Slowdown", 3),
               ("hw_power_brake_slowdown", "HW Power Brake Slowdown", 3),
               ("sync_boost", "Sync Boost", 2), ("sw_thermal_slowdown", "SW Thermal Slowdown", 2),
               ("display_clocks_setting", "Display Clock Setting", 2))
BIT_UNITS = (("Device Memory", "device_memory"), ("Register File", 0), ("L1 Cache", 0),
             ("L2 Cache", 0), ("Texture Memory", 0), ("Texture Shared", "N/A"), ("CBU", "N/A"),
             ("Total", "total"))


def _yes(flag):
    return "Yes" if flag else "No"


def _query_link(q, h, br):
    q.kv(2, "GPU Link Info")
    q.kv(3, "PCIe Generation")
    q.kv(4, "Max", h["gen_max"])
    q.kv(4, "Current", h["gen_current"])
    if br >= 525:
        q.kv(4, "Device Current", h["gen_current"])
        q.kv(4, "Device Max", h["gen_max"])
        q.kv(4, "Host Max", h["gen_max"])
    q.kv(3, "Link Width")
    q.kv(4, "Max", f"{h['width_max']}x")
    q.kv(4, "Current", f"{h['width_current']}x")


def _query_ecc(q, h, br):
    q.kv(1, "ECC Errors")
    for kind, n in (("Volatile", h["ecc_volatile_unc"]), ("Aggregate", h["ecc_aggregate_unc"])):
        q.kv(2, kind)
        if h["ecc_layout"] == "bits":
            for bits, count in (("Single Bit", 0), ("Double Bit", n)):
                q.kv(3, bits)
                for key, val in BIT_UNITS:
                    q.kv(4, key, count if val in ("device_memory", "total") else val)
            continue
        if h["ecc_layout"] == "sram_dram":
            rows = (("SRAM Correctable", 0), ("SRAM Uncorrectable", 0))
        else:
            rows = (("SRAM Correctable", 0), ("SRAM Uncorrectable Parity", 0),
                    ("SRAM Uncorrectable SEC-DED", 0))
        for key, val in rows + (("DRAM Correctable", 0), ("DRAM Uncorrectable", n)):
            q.kv(3, key, val)
        if h["ecc_layout"] == "split" and kind == "Aggregate":
            q.kv(3, "SRAM Threshold Exceeded", "No")
    if h["ecc_layout"] == "split":
        q.kv(2, "Aggregate Uncorrectable SRAM Sources")
        for key in ("SRAM L2", "SRAM SM", "SRAM Microcontroller", "SRAM PCIE", "SRAM Other"):
            q.kv(3, key, 0)
        if br >= 590:
            for key in ("Channel Repair Pending", "TPC Repair Pending", "Unrepairable Memory"):
                q.kv(2, key, "No")
    q.kv(1, "Retired Pages")
    r = h["retired"]
    q.kv(2, "Single Bit ECC", "N/A" if r is None else r["single_bit"])
    q.kv(2, "Double Bit ECC", "N/A" if r is None else r["double_bit"])
    q.kv(2, "Pending Page Blacklist", "N/A" if r is None else _yes(r["pending"]))
    m = h["remap"]
    if m is None:
        q.kv(1, "Remapped Rows", "N/A")
        return
    q.kv(1, "Remapped Rows")
    q.kv(2, "Correctable Error", m["corr"])
    q.kv(2, "Uncorrectable Error", m["unc"])
    q.kv(2, "Pending", _yes(m["pending"]))
    q.kv(2, "Remapping Failure Occurred", _yes(m["failure"]))
    q.kv(2, "Bank Remap Availability Histogram")
    for key, count in zip(("Max", "High", "Partial", "Low", "None"), m["hist"], strict=True):
        q.kv(3, key, f"{count} bank(s)")


def _query_fabric(q, h, br):
    done = h["fabric"] == "Completed"
    q.kv(1, "Fabric")
    q.kv(2, "State", h["fabric"] or "N/A")
    q.kv(2, "Status", h.get("fabric_status") or "N/A")
    if br < 550:
        return
    q.kv(2, "CliqueId", 0 if done else "N/A")
    q.kv(2, "ClusterUUID", "00000000-0000-0000-0000-000000000000" if done else "N/A")
    q.kv(2, "Health")
    keys = ("Summary", "Bandwidth", "Route Recovery in progress", "Route Unhealthy",
            "Access Timeout Recovery", "Incorrect Configuration") if br >= 590 else ("Bandwidth",)
    for key in keys:
        q.kv(3, key, "N/A")


def _query_gpu(q, v, driver_version):
    h, br = v["health"], models.branch(driver_version)
    q.kv(0, f"GPU {v['bus_id']}")
    for key, val in (("Product Name", v["name"]), ("Product Brand", v["brand"]),
                     ("Product Architecture", v["arch"]), ("Display Mode", "Disabled"),
                     ("Display Active", "Disabled"), ("Persistence Mode", v["persistence"]),
                     ("Addressing Mode", "None")):
        q.kv(1, key, val)
    q.kv(1, "MIG Mode")
    q.kv(2, "Current", v["mig_current"])
    q.kv(2, "Pending", v["mig_pending"])
    for d in v["mig_devices"]:
        q.kv(1, "MIG Device")
        q.kv(2, "Index", d["index"])
        q.kv(2, "GPU Instance ID", d["gi"])
        q.kv(2, "Compute Instance ID", d["ci"])
        q.kv(2, "Device Attributes")
        q.kv(3, "Shared")
        for key, val in (("Multiprocessor count", d["sm"]), ("Copy Engine count", d["ce"]),
                         ("Encoder count", d["enc"]), ("Decoder count", d["dec"]),
                         ("OFA count", d["ofa"]), ("JPG count", d["jpeg"])):
            q.kv(4, key, val)
        q.kv(2, "ECC Errors")
        q.kv(3, "Volatile")
        q.kv(4, "SRAM Uncorrectable", 0)
        q.kv(2, "FB Memory Usage")
        for key, val in (("Total", d["mem_total"]), ("Reserved", 0), ("Used", d["mem_used"]),
                         ("Free", d["mem_free"])):
            q.kv(3, key, f"{val} MiB")
        q.kv(2, "BAR1 Memory Usage")
        for key, val in (("Total", d["bar1_total"]), ("Used", 0), ("Free", d["bar1_total"])):
            q.kv(3, key, f"{val} MiB")
    q.kv(1, "Accounting Mode", "Disabled")
    q.kv(1, "Accounting Mode Buffer Size", 4000)
    q.kv(1, "Driver Model")
    q.kv(2, "Current", "N/A")
    q.kv(2, "Pending", "N/A")
    for key, val in (("Serial Number", v["serial"]), ("GPU UUID", v["uuid"]),
                     ("Minor Number", v["minor"]), ("VBIOS Version", v["vbios"]),
                     ("MultiGPU Board", "No"), ("GPU Part Number", v["part"]),
                     ("Module ID", v["index"] + 1)):
        q.kv(1, key, val)
    q.kv(1, "GSP Firmware Version", driver_version)
    q.kv(1, "PCI")
    for key, val in (("Bus", "0x" + v["pci_bus"]), ("Device", "0x" + v["pci_device"]),
                     ("Domain", "0x0000"), ("Device Id", "0x" + v["pci_device_id"]),
                     ("Bus Id", v["bus_id"]), ("Sub System Id", "0x" + v["pci_subsys_id"])):
        q.kv(2, key, val)
    _query_link(q, h, br)
    q.kv(1, "Fan Speed", "N/A")
    q.kv(1, "Performance State", v["pstate"])
    q.kv(1, "Clocks Event Reasons" if br >= 535 else "Clocks Throttle Reasons")
    for key, label, level in REASON_KEYS:
        q.kv(level, label, "Active" if key in h["throttle"] else "Not Active")
    q.kv(1, "FB Memory Usage")
    for key, val in (("Total", v["mem_total"]), ("Reserved", v["mem_reserved"]),
                     ("Used", v["mem_used"]), ("Free", v["mem_free"])):
        q.kv(2, key, f"{val} MiB")
    q.kv(1, "BAR1 Memory Usage")
    for key, val in (("Total", v["bar1_total"]), ("Used", v["bar1_used"]),
                     ("Free", v["bar1_total"] - v["bar1_used"])):
        q.kv(2, key, f"{val} MiB")
    q.kv(1, "Compute Mode", "Default")
    q.kv(1, "Utilization")
    util = (lambda x: "N/A" if x is None else f"{x} %")  # noqa: E731
    q.kv(2, "Gpu", util(v["util_gpu"]))
    q.kv(2, "Memory", util(v["util_mem"]))
    q.kv(1, "ECC Mode")
    q.kv(2, "Current", "Enabled")
    q.kv(2, "Pending", "Enabled")
    _query_ecc(q, h, br)
    q.kv(1, "Temperature")
    q.kv(2, "GPU Current Temp", f"{v['temp']} C")
    q.kv(1, "GPU Power Readings")
    q.kv(2, "Power Draw", f"{v['power_draw']:.2f} W")
    q.kv(2, "Current Power Limit", f"{v['power_limit']:.2f} W")
    q.kv(1, "Clocks")
    q.kv(2, "Graphics", f"{v['clock_cur']} MHz")
    q.kv(2, "Memory", f"{v['clock_mem']} MHz")
    if br >= 525:
        _query_fabric(q, h, br)
    if not v["processes"]:
        q.kv(1, "Processes", "None")
    else:
        q.kv(1, "Processes")
        for p in v["processes"]:
            q.kv(2, "GPU instance ID", "N/A" if p["gi"] is None else p["gi"])
            q.kv(2, "Compute instance ID", "N/A" if p["ci"] is None else p["ci"])
            q.kv(2, "Process ID", p["pid"])
            q.kv(3, "Type", p["type"])
            q.kv(3, "Name", p["name"])
            q.kv(3, "Used GPU Memory", f"{p['mem']} MiB")
    q.kv(1, "Capabilities")
    q.kv(2, "EGM", "disabled")
