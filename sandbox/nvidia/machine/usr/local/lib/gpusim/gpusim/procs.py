"""CUDA processes of the simulated host that die: ``gpusim process add`` keeps the start
time of a live pid; once that process is gone the driver tears its channels down and logs
Xid 45 (sandbox/nvidia/README.md, "Control CLI")."""

from . import health


def process_start(pid):
    """The start time of a live process (field 22 of /proc/PID/stat), else None."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def reap(state, machine):
    """CUDA processes (added alive, ``gpusim process add``) that died since: the driver
    tears their channels down and logs Xid 45 (NVIDIA's Xid catalog, Xid 45: "Control-C,
    GPU resets, sigkill are all examples where the application is aborted and this event is
    created"). True when one was reaped."""
    gone = [p for p in state["processes"]
            if p.get("start") and process_start(p["pid"]) != p["start"]]
    if not gone:
        return False
    state["processes"] = [p for p in state["processes"] if p not in gone]
    if state.get("driver"):
        health.kmsg_append([health.xid_line(machine, p["gpu"], 45, "Ch 00000008", pid=p["pid"],
                                            name=p.get("name"), gi=p.get("gi"), ci=p.get("ci"))
                            for p in gone], health.KERN_ERR)
    return True
