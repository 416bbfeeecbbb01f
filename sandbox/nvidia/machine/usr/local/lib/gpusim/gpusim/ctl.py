"""`gpusim` (test control) and `gpusim-boot` (what happens to the GPUs at every boot).

  gpusim process add --gpu 0 --pid 4242 --name python3 [--mem 1024] [--gi 9 --ci 0]
  gpusim process remove --pid 4242 | process clear | process list
  gpusim fault set dkms_build_fail|smi_hang|gpu_reset_unsupported [VALUE]
  gpusim fault clear [NAME] | fault list | fault check NAME (exit 0 when active)
  gpusim state        dump machine, driver status and state as JSON
  gpusim boot         same as gpusim-boot
"""

import argparse
import os
import subprocess
import sys

from . import host, jsonlite, mig, models


def _mount_proc_driver():
    """Inside a host (GPUSIM_ROOT unset, root): make /proc/driver a tmpfs we can write."""
    if host.under_test() or os.geteuid() != 0:
        return None
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 2 and parts[1] == "/proc/driver" and parts[2] == "tmpfs":
                    return None
    except OSError as exc:
        return f"cannot read /proc/mounts ({exc.strerror}): is /proc mounted in this host?"
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "gpusim",
                          "/proc/driver"], capture_output=True, text=True)
    if res.returncode != 0:
        return f"cannot mount a tmpfs on /proc/driver: {res.stderr.strip() or res.returncode}"
    return None


def boot():
    problem = _mount_proc_driver()
    if problem:
        print(f"gpusim-boot: warning: {problem}", file=sys.stderr)
    with host.Session() as s:
        state, machine = s.state, s.machine
        info = models.model(machine["gpu_model"])
        state["boots"] += 1
        state["processes"] = []
        state["modules"] = []
        state["driver"] = None
        for gpu in state["gpus"]:
            gpu["gis"] = []
            gpu["persistence_legacy"] = False
            gpu["persistence_daemon"] = True
            if gpu["mig_pending"] is not None:
                if info["arch"] in models.MIG_MODE_PERSISTS:
                    gpu["mig_current"] = gpu["mig_pending"]  # InfoROM bit, applied at reset
                else:
                    gpu["mig_current"] = gpu["mig_pending"] = False
        kver = host.kernel_release(machine)
        err = host.load_driver(state, machine)
        if err:
            host.write_proc(state, machine)
            print(f"gpusim-boot: kernel {kver}: nvidia driver not loaded ({err})")
        else:
            drv = state["driver"]
            print(f"gpusim-boot: kernel {kver}: nvidia {drv['version']} ({drv['flavor']}) "
                  f"loaded, {machine['gpu_count']} x {machine['gpu_model']}")
    return 0


def process_add(args):
    with host.Session() as s:
        state, machine = s.state, s.machine
        if host.driver_status(state, host.load_userspace()) != "loaded":
            raise host.SimError("gpusim: cannot start a CUDA process: the NVIDIA driver is not "
                                "usable (not loaded, or user-space/kernel version mismatch). "
                                "Check `nvidia-smi`; reboot or `modprobe nvidia` first.", 1)
        if not 0 <= args.gpu < machine["gpu_count"]:
            raise host.SimError(f"gpusim: --gpu {args.gpu}: this machine has GPUs 0.."
                                f"{machine['gpu_count'] - 1}.", 2)
        if any(p["gpu"] == args.gpu and p["pid"] == args.pid for p in state["processes"]):
            raise host.SimError(f"gpusim: pid {args.pid} already runs on GPU {args.gpu}.", 2)
        gpu = state["gpus"][args.gpu]
        proc = {"gpu": args.gpu, "pid": args.pid, "name": args.name, "mem": args.mem,
                "type": args.type, "gi": None, "ci": None}
        if gpu["mig_current"]:
            info = models.model(machine["gpu_model"])
            devs = mig.devices(info, gpu)
            if args.gi is not None:
                devs = [d for d in devs if d["gi"]["id"] == args.gi and
                        (args.ci is None or d["ci"]["id"] == args.ci)]
            if not devs:
                raise host.SimError(f"gpusim: GPU {args.gpu} is in MIG mode and has no such MIG "
                                    "device (GPU instance + compute instance): a CUDA process "
                                    "cannot run there. Create instances first "
                                    "(nvidia-smi mig -cgi ... -C).", 2)
            proc["gi"], proc["ci"] = devs[0]["gi"]["id"], devs[0]["ci"]["id"]
        elif args.gi is not None or args.ci is not None:
            raise host.SimError(f"gpusim: GPU {args.gpu} is not in MIG mode: drop --gi/--ci.", 2)
        state["processes"].append(proc)
        if "nvidia_uvm" not in state["modules"]:
            state["modules"].append("nvidia_uvm")  # CUDA loads it on first use
        where = f" (GI {proc['gi']}, CI {proc['ci']})" if proc["gi"] is not None else ""
        print(f"gpusim: process {args.pid} ({args.name}, {args.mem} MiB) runs on GPU "
              f"{args.gpu}{where}")
    return 0


def process_cmd(args):
    if args.action == "add":
        return process_add(args)
    with host.Session(write=args.action != "list") as s:
        if args.action == "clear":
            s.state["processes"] = []
        elif args.action == "remove":
            before = len(s.state["processes"])
            s.state["processes"] = [p for p in s.state["processes"] if p["pid"] != args.pid]
            if len(s.state["processes"]) == before:
                raise host.SimError(f"gpusim: no simulated process has pid {args.pid}.", 1)
        else:
            print(jsonlite.dumps(s.state["processes"]))
    return 0


def fault_cmd(args):
    faults = host.load_faults()
    if args.name and args.name not in host.KNOWN_FAULTS:
        raise host.SimError(f"gpusim: unknown fault {args.name!r} (known: "
                            f"{', '.join(host.KNOWN_FAULTS)}).", 2)
    if args.action == "check":
        return 0 if faults.get(args.name) else 1
    if args.action == "list":
        print(jsonlite.dumps(faults))
        return 0
    if args.action == "set":
        if not args.name:
            raise host.SimError("gpusim: fault set needs a NAME.", 2)
        value = True
        if args.value is not None:
            value = int(args.value) if args.value.isdigit() else args.value
        faults[args.name] = value
    elif args.name:
        faults.pop(args.name, None)
    else:
        faults = {}
    host.write_text(host.FAULTS, jsonlite.dumps(faults) + "\n")
    return 0


def state_cmd(_args):
    with host.Session(write=False) as s:
        userspace = host.load_userspace()
        dump = {"machine": s.machine, "kernel_release": host.kernel_release(s.machine),
                "built_module": host.find_module(host.kernel_release(s.machine)),
                "userspace": userspace,
                "driver_status": host.driver_status(s.state, userspace),
                "faults": host.load_faults(), "state": s.state}
    print(jsonlite.dumps(dump))
    return 0


def parser():
    p = argparse.ArgumentParser(prog="gpusim", description="Control the simulated GPUs.")
    sub = p.add_subparsers(dest="cmd", required=True)
    proc = sub.add_parser("process", help="simulated GPU processes")
    proc.add_argument("action", choices=("add", "remove", "clear", "list"))
    proc.add_argument("--gpu", type=int, default=0)
    proc.add_argument("--pid", type=int)
    proc.add_argument("--name", default="python3")
    proc.add_argument("--mem", type=int, default=1024, help="MiB of GPU memory")
    proc.add_argument("--type", default="C", choices=("C", "G", "C+G"))
    proc.add_argument("--gi", type=int)
    proc.add_argument("--ci", type=int)
    fault = sub.add_parser("fault", help="injected faults")
    fault.add_argument("action", choices=("set", "clear", "list", "check"))
    fault.add_argument("name", nargs="?")
    fault.add_argument("value", nargs="?")
    sub.add_parser("state", help="dump everything as JSON")
    sub.add_parser("boot", help="what happens at boot (same as gpusim-boot)")
    return p


def main(argv=None):
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.cmd == "process":
            if args.action in ("add", "remove") and args.pid is None:
                raise host.SimError(f"gpusim: process {args.action} needs --pid.", 2)
            return process_cmd(args)
        if args.cmd == "fault":
            return fault_cmd(args)
        if args.cmd == "state":
            return state_cmd(args)
        return boot()
    except host.SimError as err:
        print(err.message.rstrip("\n"), file=sys.stderr)
        return err.rc


def boot_main(argv=None):
    try:
        return boot()
    except host.SimError as err:
        print(err.message.rstrip("\n"), file=sys.stderr)
        return err.rc
