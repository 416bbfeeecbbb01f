"""`nvidia-smi nvlink -s` (link status) and `nvidia-smi nvlink -e` (error counters).

Layout of real outputs (sandbox/README.md "NVLink"): one `GPU N: NAME (UUID: GPU-...)` line,
then one line per link behind a tab and a space: `Link 0: 25 GB/s` or `Link 0: <inactive>`
for -s; `Link 0: Replay Errors: 0`, `Recovery Errors`, `CRC Errors` and an empty line per
link for -e (the three counters of the NVLink 2-4 GPUs the sandbox models). A GPU without
NVLink (the PCIe models) prints its header line only.
"""

from . import health, models

COUNTERS = (("Replay Errors", "nvlink_replay_errors"),
            ("Recovery Errors", "nvlink_recovery_errors"),
            ("CRC Errors", "nvlink_crc_errors"))


def links(info):
    """(number of links, speed text of an active link); (0, None) without NVLink."""
    return info.get("nvlink") or (0, None)


def inactive(gpu_faults, count):
    """The link numbers the `nvlink_inactive` fault takes down on this GPU."""
    value = gpu_faults.get("nvlink_inactive")
    if not value:
        return set()
    if value == "all":
        return set(range(count))
    return {int(n) for n in str(value).split(",") if n.strip().isdigit()}


def render(views, machine, faults, errors):
    info = models.model(machine["gpu_model"])
    count, speed = links(info)
    out = []
    for v in views:
        out.append(f"GPU {v['index']}: {v['name']} (UUID: {v['uuid']})")
        f = health.gpu_faults(faults, v["minor"])
        down = inactive(f, count)
        for link in range(count):
            if errors:
                for label, key in COUNTERS:
                    value = f.get(key, 0) if link == 0 else 0
                    out.append(f"\t Link {link}: {label}: {value}")
                out.append("")
            else:
                out.append(f"\t Link {link}: {'<inactive>' if link in down else speed}")
    return "\n".join(out) + "\n"
