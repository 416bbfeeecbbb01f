"""`gpusim` (test control) and `gpusim-boot` (what happens to the GPUs at every boot).

  gpusim process add --gpu 0 --pid 4242 --name python3 [--mem 1024] [--gi 9 --ci 0]
  gpusim process remove --pid 4242 | process clear | process list
  gpusim fault set dkms_build_fail|smi_hang|gpu_reset_unsupported|scriptlet_ignores_dkms [VALUE]
  gpusim fault set GPU_FAULT [VALUE] [--gpu N|all] [--next-load]
  gpusim fault clear [NAME] [--gpu N|all] | fault list | fault check NAME [--gpu N]
  gpusim xid NUMBER [--gpu N] [--gi G [--ci C]] [--pid P --name NAME] [--text TEXT] [--next-load]
  gpusim sxid NUMBER [--switch N] [--text TEXT] [--next-load]
  gpusim kmsg TEXT [--level err|warn|info]
  gpusim state        dump machine, driver status and state as JSON
  gpusim boot         same as gpusim-boot

GPU faults: ecc_volatile_uncorrectable [N], ecc_aggregate_uncorrectable [N], retired_pages [N],
retired_pages_pending [N], row_remap_pending [N], row_remap_failure, pcie_degraded [WIDTH],
throttle [REASON,...], fabric_in_progress, gpu_missing, gpu_lost, nvlink_inactive [LINKS|all],
nvlink_replay_errors [N], nvlink_recovery_errors [N], nvlink_crc_errors [N]. --next-load arms a fault
or an Xid for the next load of the nvidia module (the next boot, or modprobe nvidia).
"""

import os
import sys

from . import health, host, jsonlite, kmod, mig, models, procs


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
    import subprocess
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "gpusim",
                          "/proc/driver"], capture_output=True, text=True)
    if res.returncode != 0:
        return f"cannot mount a tmpfs on /proc/driver: {res.stderr.strip() or res.returncode}"
    return None


def _boot_loader(machine, boots):
    """The kernel this boot runs: from the second boot on, the boot loader's default entry
    when the host has one (sandbox/traits/boot.py writes GRUB/BLS files: a kernel installed
    while the first boot ran), recorded in machine.json for uname."""
    from . import firmware
    kver = host.kernel_release(machine)
    want = firmware.default_kernel() if boots > 1 else None
    if want and want != machine["kernel_release"] and os.path.isdir(host.path(f"lib/modules/{want}")) \
            and os.path.isfile(host.path(f"boot/vmlinuz-{want}")):
        machine["kernel_release"] = want
        host.write_text(host.MACHINE, jsonlite.dumps(machine) + "\n")
        print(f"gpusim-boot: the boot loader's default entry boots kernel {want}")
        return want
    return kver


def boot():
    problem = _mount_proc_driver()
    if problem:
        print(f"gpusim-boot: warning: {problem}", file=sys.stderr)
    with host.Session() as s:
        state, machine = s.state, s.machine
        info = models.model(machine["gpu_model"])
        health.kmsg_clear()  # a new boot, a new kernel ring buffer
        faults = host.load_faults()
        if health.on_boot(faults):
            health.save_faults(faults)
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
        kver = _boot_loader(machine, state["boots"])
        err = host.load_driver(state, machine)
        if err:
            host.write_proc(state, machine)
            print(f"gpusim-boot: kernel {kver}: nvidia driver not loaded ({err})")
        else:
            drv = state["driver"]
            print(f"gpusim-boot: kernel {kver}: nvidia {drv['version']} ({drv['flavor']}) "
                  f"loaded, {machine['gpu_count']} x {machine['gpu_model']}")
            for line in kmod.load_at_boot(s):  # modules-load.d (nvidia_peermem, ...)
                print(f"gpusim-boot: {line}")
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
        gf = health.gpu_faults(host.load_faults(), args.gpu)
        if gf.get("gpu_missing") or gf.get("gpu_lost"):
            raise host.SimError(f"gpusim: GPU {args.gpu} is not usable (fault "
                                f"{'gpu_missing' if gf.get('gpu_missing') else 'gpu_lost'}): "
                                "CUDA cannot see it.", 1)
        gpu = state["gpus"][args.gpu]
        proc = {"gpu": args.gpu, "pid": args.pid, "name": args.name, "mem": args.mem,
                "type": args.type, "gi": None, "ci": None}
        start = procs.process_start(args.pid)  # a live process: reaped (Xid 45) when it dies
        if start:
            proc["start"] = start
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


def _gpu_indexes(machine, spec):
    if spec in (None, ""):
        return [0]
    if spec == "all":
        return list(range(machine["gpu_count"]))
    try:
        indexes = [int(x) for x in spec.split(",")]
    except ValueError:
        raise host.SimError(f"gpusim: --gpu takes a GPU index, a comma list or 'all', not "
                            f"{spec!r}.", 2) from None
    bad = [i for i in indexes if not 0 <= i < machine["gpu_count"]]
    if bad:
        raise host.SimError(f"gpusim: --gpu {spec}: this machine has GPUs 0.."
                            f"{machine['gpu_count'] - 1}.", 2)
    return indexes


def inject(state, machine, args):
    """The injections that need the simulated machine: GPU faults, Xid, SXid."""
    if args.cmd == "xid":
        for index in _gpu_indexes(machine, args.gpu_spec):
            health.inject_xid(state, machine, args.number, index, args.text, args.pid,
                              args.name, args.gi, args.ci)
    elif args.cmd == "sxid":
        health.inject_sxid(machine, state, args.number, args.switch or 0, args.text)
    else:
        health.set_gpu_fault(state, machine, args.name,
                             health.parse_value(args.name, args.value),
                             _gpu_indexes(machine, args.gpu_spec))


def _arm(argv):
    """--next-load: keep the command (without the flag) for the next driver load."""
    faults = host.load_faults()
    faults.setdefault("next_load", []).append([a for a in argv if a != "--next-load"])
    health.save_faults(faults)
    return 0


def fault_cmd(args, argv):
    faults = host.load_faults()
    known = host.KNOWN_FAULTS + tuple(health.GPU_FAULTS)
    if args.name and args.name not in known:
        raise host.SimError(f"gpusim: unknown fault {args.name!r} (known: "
                            f"{', '.join(known)}).", 2)
    per_gpu = args.name in health.GPU_FAULTS
    if args.action == "check":
        if per_gpu:
            with host.Session(write=False) as s:
                indexes = _gpu_indexes(s.machine, args.gpu_spec)
            return 0 if all(health.gpu_faults(faults, i).get(args.name) for i in indexes) else 1
        return 0 if faults.get(args.name) else 1
    if args.action == "list":
        print(jsonlite.dumps(faults))
        return 0
    if args.action == "set":
        if not args.name:
            raise host.SimError("gpusim: fault set needs a NAME.", 2)
        if per_gpu:
            if args.next_load:
                health.parse_value(args.name, args.value)  # refuse a bad value now
                return _arm(argv)
            with host.Session() as s:
                inject(s.state, s.machine, args)
            return 0
        if args.next_load or args.gpu_spec is not None:
            raise host.SimError(f"gpusim: {args.name} is a host fault: no --gpu/--next-load.", 2)
        value = True
        if args.value is not None:
            try:
                value = float(args.value) if "." in args.value else int(args.value)
            except ValueError:
                value = args.value
        faults[args.name] = value
    elif args.name and per_gpu:
        with host.Session(write=False) as s:
            indexes = _gpu_indexes(s.machine, args.gpu_spec) if args.gpu_spec else \
                range(s.machine["gpu_count"])
        for index in indexes:
            (faults.get("gpus") or {}).get(str(index), {}).pop(args.name, None)
    elif args.name:
        faults.pop(args.name, None)
    else:
        faults = {}
    health.save_faults(faults)
    return 0


def xid_cmd(args, argv):
    if args.next_load:
        return _arm(argv)
    with host.Session() as s:
        inject(s.state, s.machine, args)
    return 0


def kmsg_cmd(args):
    if args.level not in health.LEVELS:
        raise host.SimError(f"gpusim: --level is one of {', '.join(health.LEVELS)}.", 2)
    with host.Session():
        health.kmsg_append([args.text], health.LEVELS.index(args.level))
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


USAGE = __doc__.split("\n\n", 1)[0].strip() + "\n"
PROCESS_OPTS = {"--gpu": int, "--pid": int, "--name": str, "--mem": int, "--type": str,
                "--gi": int, "--ci": int}
INJECT_OPTS = {"fault": {"--gpu": ("gpu_spec", str)},
               "xid": {"--gpu": ("gpu_spec", str), "--gi": ("gi", int), "--ci": ("ci", int),
                       "--pid": ("pid", int), "--name": ("name", str), "--text": ("text", str)},
               "sxid": {"--switch": ("switch", int), "--text": ("text", str)},
               "kmsg": {"--level": ("level", str)}}


class Args:
    """Parsed command line (argparse needs gettext/shutil, which python3-minimal lacks)."""

    def __init__(self, argv):
        if not argv or argv[0] in ("-h", "--help"):
            raise host.SimError(USAGE, 0 if argv else 2)
        self.cmd, rest = argv[0], list(argv[1:])
        self.gpu, self.pid, self.name, self.mem, self.type = 0, None, "python3", 1024, "C"
        self.gi = self.ci = self.value = self.gpu_spec = self.text = self.switch = None
        self.number, self.level, self.next_load = None, "err", False
        if "--next-load" in rest and self.cmd in ("fault", "xid", "sxid"):
            rest.remove("--next-load")
            self.next_load = True
        if self.cmd in ("xid", "sxid", "kmsg"):
            self.action, self.name = None, None
            positional = self._options(rest, INJECT_OPTS[self.cmd])
            if len(positional) != 1:
                raise host.SimError(f"gpusim: {self.cmd} takes one "
                                    f"{'TEXT' if self.cmd == 'kmsg' else 'NUMBER'}.\n{USAGE}", 2)
            if self.cmd == "kmsg":
                self.text = positional[0]
            elif positional[0].isdigit():
                self.number = int(positional[0])
            else:
                raise host.SimError(f"gpusim: {self.cmd} NUMBER, not {positional[0]!r}.", 2)
            if self.ci is not None and self.gi is None:
                raise host.SimError("gpusim: --ci needs --gi.", 2)
            return
        self.action = rest.pop(0) if rest and not rest[0].startswith("-") else None
        choices = {"process": ("add", "remove", "clear", "list"),
                   "fault": ("set", "clear", "list", "check"), "state": (None,), "boot": (None,)}
        if self.cmd not in choices or self.action not in choices[self.cmd]:
            raise host.SimError(f"gpusim: unknown command {' '.join(argv[:2])!r}.\n{USAGE}", 2)
        if self.cmd == "fault":
            positional = self._options(rest, INJECT_OPTS["fault"])
            self.name = positional.pop(0) if positional else None
            self.value = positional.pop(0) if positional else None
            rest = positional
        while self.cmd == "process" and rest:
            opt, eq, value = rest.pop(0).partition("=")
            if opt not in PROCESS_OPTS or (not eq and not rest):
                raise host.SimError(f"gpusim: bad option {opt!r} for process {self.action}.", 2)
            value = value if eq else rest.pop(0)
            try:
                setattr(self, opt[2:], PROCESS_OPTS[opt](value))
            except ValueError:
                raise host.SimError(f"gpusim: {opt} needs a number, not {value!r}.", 2) from None
        if rest:
            raise host.SimError(f"gpusim: unexpected arguments {rest}.", 2)
        if self.type not in ("C", "G", "C+G"):
            raise host.SimError("gpusim: --type is C, G or C+G.", 2)

    def _options(self, rest, opts):
        """Take `--opt VALUE` / `--opt=VALUE` of `opts` out of `rest`; return the others."""
        positional = []
        while rest:
            arg = rest.pop(0)
            opt, eq, value = arg.partition("=")
            if opt in opts:
                if not eq:
                    if not rest:
                        raise host.SimError(f"gpusim: {opt} needs a value.", 2)
                    value = rest.pop(0)
                attr, kind = opts[opt]
                try:
                    setattr(self, attr, kind(value))
                except ValueError:
                    raise host.SimError(f"gpusim: {opt} needs a number, not {value!r}.",
                                        2) from None
            elif arg.startswith("--"):
                raise host.SimError(f"gpusim: unknown option {arg!r} for {self.cmd}.\n{USAGE}", 2)
            else:
                positional.append(arg)
        return positional


_Args = Args


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = Args(argv)
        if args.cmd == "process":
            if args.action in ("add", "remove") and args.pid is None:
                raise host.SimError(f"gpusim: process {args.action} needs --pid.", 2)
            return process_cmd(args)
        if args.cmd == "fault":
            return fault_cmd(args, argv)
        if args.cmd in ("xid", "sxid"):
            return xid_cmd(args, argv)
        if args.cmd == "kmsg":
            return kmsg_cmd(args)
        if args.cmd == "state":
            return state_cmd(args)
        return boot()
    except host.SimError as err:
        print(err.message.rstrip("\n"), file=sys.stdout if err.rc == 0 else sys.stderr)
        return err.rc


def boot_main(argv=None):
    try:
        return boot()
    except host.SimError as err:
        print(err.message.rstrip("\n"), file=sys.stderr)
        return err.rc
