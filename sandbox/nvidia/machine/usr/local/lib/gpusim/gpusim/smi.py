"""`nvidia-smi`: its main() is what the driver utils package's launcher runs (`python3 -S -c`
importing it: templates/nvidia-smi); `python3 -m gpusim.smi ARGS` does the same.

Exit codes follow nvidia-smi's (NVML's) numbering: 0 ok, 2 invalid argument, 3 not
supported, 6 not found / no devices, 9 driver not loaded, 12 NVML library missing,
15 GPU is lost, 18 driver/library version mismatch, 19 in use, 23 insufficient resources,
255 other (a refused --gpu-reset). See sandbox/nvidia/README.md for which ones are guesses.
"""

import sys
import time

# what only some commands use is imported where they run (mig_cli, nvlink, query, textout,
# topo, xmlout): each call pays for its own path only
from . import health, host, models, view

NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.\n\n")
NO_NVML = ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure "
           "that the NVIDIA Display Driver is properly installed and present in your system.\n"
           "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n")
BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
HELP = """NVIDIA System Management Interface -- v{version} (gpusim)

Supported here: -L, -q [-x], -i ID, --query-gpu=F --format=csv[,noheader][,nounits],
--query-compute-apps=F, -pm 0|1, -mig 0|1, -r/--gpu-reset, --version, and
"nvidia-smi mig" with -lgip -lgipp -lgi -lci -cgi [-C] -cci -dci -dgi -gi -ci,
"nvidia-smi nvlink" with -s/--status or -e/--errorcounters, "nvidia-smi topo -m".
"""
IN_USE_LONG = ("is currently being used by one or more other processes (e.g. CUDA application "
               "or a monitoring application such as another instance of nvidia-smi). Please "
               "first kill all processes using the device and retry the command or reboot the "
               "system to make MIG mode effective.")
RESET_BUSY = ("{n} {devices} currently being used by one or more other processes (e.g., Fabric "
              "Manager, CUDA application, graphics application such as an X server, or a "
              "monitoring application such as another instance of nvidia-smi). Please first kill "
              "all processes using {this} and all compute applications running in the system.\n")
PM_WARNING = ("Warning: persistence mode is disabled on device {bus}. See the Known Issues "
              "section of the nvidia-smi(1) man page for more information. Run with "
              "[--help | -h] switch to get more information on how to enable persistence mode.")

VALUE_OPTS = {"-i": "id", "--id": "id", "-pm": "pm", "--persistence-mode": "pm",
              "-mig": "mig", "--multi-instance-gpu": "mig", "--query-gpu": "query_gpu",
              "--query-compute-apps": "query_apps", "--format": "format",
              "-gi": "gi", "--gpu-instance-id": "gi", "-ci": "ci", "--compute-instance-id": "ci",
              "-cgi": "cgi", "--create-gpu-instance": "cgi"}
FLAG_OPTS = {"-q": "q", "--query": "q", "-a": "q", "-x": "x", "--xml-format": "x",
             "-L": "L", "--list-gpus": "L", "-r": "reset", "--gpu-reset": "reset",
             "--version": "version", "-h": "help", "--help": "help",
             "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
             "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp",
             "-lgi": "lgi", "--list-gpu-instances": "lgi",
             "-lci": "lci", "--list-compute-instances": "lci",
             "-C": "C", "--default-compute-instance": "C",
             "-dci": "dci", "--destroy-compute-instance": "dci",
             "-dgi": "dgi", "--destroy-gpu-instance": "dgi"}
NVLINK_OPTS = {"-s": "nvlink_status", "--status": "nvlink_status",
               "-e": "nvlink_errors", "--errorcounters": "nvlink_errors"}
OPTIONAL_VALUE = {"-cci": "cci", "--create-compute-instance": "cci"}


def parse(argv):
    opts = {"mig_cmd": False}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg == "mig" and not opts["mig_cmd"]:
            opts["mig_cmd"] = True
        elif arg == "nvlink" and not opts.get("nvlink_cmd"):
            opts["nvlink_cmd"] = True
        elif arg == "topo" and not opts.get("topo_cmd"):
            opts["topo_cmd"] = True
        elif opts.get("topo_cmd") and arg in ("-m", "--matrix"):
            opts["topo_m"] = True
        elif opts.get("nvlink_cmd") and arg in NVLINK_OPTS:
            opts[NVLINK_OPTS[arg]] = True
        elif name in VALUE_OPTS:
            if not eq:
                if not args:
                    raise host.SimError(BAD_ARGS, 2)
                value = args.pop(0)
            opts[VALUE_OPTS[name]] = value
        elif name in OPTIONAL_VALUE:
            if not eq and args and not args[0].startswith("-"):
                value = args.pop(0)
            opts[OPTIONAL_VALUE[name]] = value if (eq or value) else ""
        elif arg in FLAG_OPTS:
            opts[FLAG_OPTS[arg]] = True
        else:
            raise host.SimError(BAD_ARGS, 2)
    return opts


def select(machine, spec, faults=None):
    """Machine GPU indexes for `-i` (nvidia-smi's index, UUID or bus id), in its order.

    nvidia-smi numbers only the GPUs the driver initialised: with one missing, the
    indexes after it shift down (NVML enumerates the GPUs it attached)."""
    shown = view.visible(machine, host.load_faults() if faults is None else faults)
    if not shown:
        raise host.SimError("No devices were found\n", 6)
    if spec is None:
        return shown
    chosen = []
    for token in spec.split(","):
        token = token.strip()
        found = None
        for number, i in enumerate(shown):
            bus = host.bus_id(machine, i)
            if token in (str(number), host.gpu_uuid(machine, i), bus, bus[4:], bus[9:]):
                found = i
        if found is None:
            raise host.SimError("No devices were found\n", 6)
        chosen.append(found)
    return chosen


def lost_check(machine, faults, indexes):
    """A GPU that fell off the bus: NVML cannot get its handle, nvidia-smi stops there."""
    for i in indexes:
        if health.gpu_faults(faults, i).get("gpu_lost"):
            raise host.SimError(f"Unable to determine the device handle for GPU"
                                f"{host.bus_id(machine, i)[4:]}: GPU is lost. Reboot the "
                                "system to recover this GPU\n", 15)


def ids(spec):
    if not spec:
        return None
    try:
        return {int(x) for x in spec.split(",")}
    except ValueError:
        raise host.SimError(BAD_ARGS, 2) from None


def run(argv, out):
    opts = parse(argv)
    if opts.get("help"):
        out.write(HELP.format(version="570"))
        return 0
    hang = host.fault("smi_hang")
    if hang:
        number = isinstance(hang, (int, float)) and not isinstance(hang, bool)
        time.sleep(hang if number else 3600)  # a hung GPU: callers must use a timeout
    userspace = host.load_userspace()
    if userspace is None:
        raise host.SimError(NO_NVML, 12)
    mutating = any(opts.get(k) is not None for k in ("pm", "mig", "cgi", "cci")) or any(
        opts.get(k) for k in ("reset", "dci", "dgi"))
    with host.Session(write=mutating) as s:
        status = host.driver_status(s.state, userspace)
        if status == "not_loaded":
            raise host.SimError(NOT_LOADED, 9)
        if status == "mismatch":
            raise host.SimError("Failed to initialize NVML: Driver/library version mismatch\n"
                                f"NVML library version: "
                                f"{models.nvml_version(userspace['version'])}\n", 18)
        faults = host.load_faults()
        indexes = select(s.machine, opts.get("id"), faults)
        if not opts.get("version"):
            lost_check(s.machine, faults, indexes)
        return dispatch(s, opts, indexes, out, faults)


def dispatch(s, opts, indexes, out, faults):
    machine, state = s.machine, s.state
    attached = len(view.visible(machine, faults))
    version, cuda = view.driver_info(state)
    if opts["mig_cmd"]:
        return mig_command(s, opts, indexes, out)
    if opts.get("topo_cmd"):  # only -m (gpusim/topo.py)
        if not opts.get("topo_m"):
            raise host.SimError(BAD_ARGS, 2)
        from . import topo
        out.write(topo.render(machine, indexes))
        return 0
    if opts.get("nvlink_cmd"):
        if opts.get("nvlink_status") == opts.get("nvlink_errors"):  # none or both
            raise host.SimError(BAD_ARGS, 2)
        from . import nvlink
        out.write(nvlink.render(view.all_views(machine, state, indexes, faults), machine,
                                faults, errors=bool(opts.get("nvlink_errors"))))
        return 0
    if opts.get("version"):
        from . import textout
        out.write(textout.version(version, cuda))
        return 0
    if opts.get("pm") is not None:
        return persistence(s, opts["pm"], indexes, out)
    if opts.get("mig") is not None:
        return mig_mode(s, opts["mig"], indexes, out)
    if opts.get("reset"):
        return gpu_reset(s, indexes, out)
    views = view.all_views(machine, state, indexes, faults)
    if opts.get("query_gpu") is not None:
        from . import query
        out.write(query.render(opts["query_gpu"], opts.get("format"),
                               query.gpu_rows(views, version, attached),
                               query.GPU_FIELDS,
                               query.GPU_ALIASES))
    elif opts.get("query_apps") is not None:
        from . import query
        out.write(query.render(opts["query_apps"], opts.get("format"), query.app_rows(views),
                               query.APP_FIELDS, query.APP_ALIASES))
    elif opts.get("L"):
        from . import textout
        out.write(textout.list_gpus(views))
    elif opts.get("q") and opts.get("x"):
        from . import xmlout
        out.write(xmlout.render(views, attached, version, cuda, view.timestamp()))
    elif opts.get("q"):
        from . import textout
        out.write(textout.query(views, attached, version, cuda, view.timestamp()))
    elif len(opts) == 1 or set(opts) == {"mig_cmd", "id"}:
        from . import textout
        out.write(textout.table(views, version, cuda, view.timestamp()))
    else:
        raise host.SimError(BAD_ARGS, 2)
    return 0


def persistence(s, value, indexes, out):
    enable = {"1": True, "ENABLED": True, "0": False, "DISABLED": False}.get(value.upper())
    if enable is None:
        raise host.SimError(BAD_ARGS, 2)
    daemon = s.state.get("persistenced_pid")
    for i in indexes:
        gpu, bus = s.state["gpus"][i], host.bus_id(s.machine, i)
        now = host.persistence_on(s.state, i)
        if now == enable:
            out.write(f"Persistence mode is already {'Enabled' if enable else 'Disabled'} "
                      f"for GPU {bus}.\n")
        elif enable and daemon:
            gpu["persistence_daemon"] = True
            out.write(f"Enabled persistence mode for GPU {bus}.\n")
        elif enable:
            gpu["persistence_legacy"] = True
            out.write(f"Enabled Legacy persistence mode for GPU {bus}.\n")
        else:
            gpu["persistence_legacy"] = gpu["persistence_daemon"] = False
            out.write(f"Disabled persistence mode for GPU {bus}.\n")
    out.write("All done.\n")
    return 0


def mig_mode(s, value, indexes, out):
    enable = {"1": True, "ENABLED": True, "0": False, "DISABLED": False}.get(value.upper())
    if enable is None:
        raise host.SimError(BAD_ARGS, 2)
    info = models.model(s.machine["gpu_model"])
    word, state_word = ("Enabled", "enable") if enable else ("Disabled", "disable")
    supported = models.mig_supported(info, (s.state.get("driver") or {}).get("version"))
    for i in indexes:
        gpu, bus = s.state["gpus"][i], host.bus_id(s.machine, i)
        if not supported:  # not a MIG GPU, or a driver older than its first MIG driver
            out.write(f"Unable to {state_word} MIG Mode for GPU {bus}: Not Supported\n"
                      "Treating as warning and moving on.\n")
            continue
        if not enable and gpu["gis"]:
            out.write(f"Unable to {state_word} MIG Mode for GPU {bus}: In use by another "
                      "client\nTreating as warning and moving on.\n")
            continue
        gpu["mig_pending"] = enable
        if info["arch"] not in models.MIG_MODE_PERSISTS:  # Hopper+: no reset needed
            if host.gpu_processes(s.state, i):
                gpu["mig_pending"] = gpu["mig_current"]
                out.write(f"Unable to {state_word} MIG Mode for GPU {bus}: In use by another "
                          "client\nTreating as warning and moving on.\n")
                continue
            gpu["mig_current"] = enable
            out.write(f"{word} MIG Mode for GPU {bus}\n")
            if not host.persistence_on(s.state, i):
                out.write("\n" + PM_WARNING.format(bus=bus) + "\n")
            continue
        if gpu["mig_current"] == enable:  # nothing to reset for
            out.write(f"{word} MIG Mode for GPU {bus}\n")
        elif host.fault("gpu_reset_unsupported"):
            out.write(f"Warning: MIG mode is in pending {state_word} state for GPU {bus}:Not "
                      f"Supported\nReboot the system or try nvidia-smi --gpu-reset to make MIG "
                      f"mode effective on GPU {bus}\n")
        elif host.holders(s.state, i):
            out.write(f"Warning: MIG mode is in pending {state_word} state for GPU {bus}:In use "
                      f"by another client\n{bus} {IN_USE_LONG}\n")
        else:  # the driver resets the GPU itself and the mode takes effect at once
            gpu["mig_current"] = enable
            out.write(f"{word} MIG Mode for GPU {bus}\n")
    out.write("All done.\n")
    return 0


def gpu_reset(s, indexes, out):
    if host.fault("gpu_reset_unsupported"):
        for i in indexes:
            out.write(f"Resetting GPU {host.bus_id(s.machine, i)} is not supported.\n")
        return 3
    busy = [i for i in indexes if host.holders(s.state, i)]
    reset_faults = []
    for i in indexes:
        if i in busy:
            continue
        gpu = s.state["gpus"][i]
        gpu["gis"] = []
        if gpu["mig_pending"] is not None:
            gpu["mig_current"] = gpu["mig_pending"]
        reset_faults.append(i)
        out.write(f"GPU {host.bus_id(s.machine, i)} was successfully reset.\n")
    if reset_faults:  # pending row remappings take effect at the reset
        faults = host.load_faults()
        for i in reset_faults:
            health.settle_at_reset((faults.get("gpus") or {}).get(str(i), {}))
        health.save_faults(faults)
    if not busy:
        return 0
    out.write("The following GPUs could not be reset:\n")
    for i in busy:
        out.write(f"  GPU {host.bus_id(s.machine, i)}: In use by another client\n")
    many = len(busy) > 1
    out.write("\n" + RESET_BUSY.format(n=len(busy), devices="devices are" if many else
                                       "device is", this="these devices" if many else
                                       "this device"))
    return 255


def mig_command(s, opts, indexes, out):
    from . import mig_cli
    info = models.model(s.machine["gpu_model"])
    if not (indexes and models.mig_supported(info, (s.state.get("driver") or {}).get("version"))):
        raise host.SimError("No MIG-supported devices found.\n", 6)
    if opts.get("lgipp"):
        out.write(mig_cli.list_placements(s.machine, indexes))
        return 0
    enabled = [i for i in indexes if s.state["gpus"][i]["mig_current"]]
    if not enabled:
        raise host.SimError("No MIG-enabled devices found.\n", 6)
    gi_filter, ci_filter = ids(opts.get("gi")), ids(opts.get("ci"))
    if opts.get("lgip"):
        out.write(mig_cli.list_profiles(s.machine, s.state, enabled))
        return 0
    if opts.get("lgi"):
        text = mig_cli.list_gpu_instances(s.machine, s.state, enabled, gi_filter)
        if text is None:
            raise host.SimError("No GPU instances found: Not Found\n", 6)
        out.write(text)
        return 0
    if opts.get("lci"):
        text = mig_cli.list_compute_instances(s.machine, s.state, enabled, gi_filter, ci_filter)
        if text is None:
            raise host.SimError("No compute instances found: Not Found\n", 6)
        out.write(text)
        return 0
    if opts.get("cgi") is not None:
        text, rc = mig_cli.create_gpu_instances(s.machine, s.state, enabled,
                                                opts["cgi"].split(","), opts.get("C"))
    elif opts.get("cci") is not None:
        tokens = [t for t in opts["cci"].split(",") if t.strip()]
        text, rc = mig_cli.create_compute_instances(s.machine, s.state, enabled, tokens,
                                                    gi_filter)
    elif opts.get("dci"):
        text, rc = mig_cli.destroy_compute_instances(s.state, enabled, gi_filter, ci_filter)
    elif opts.get("dgi"):
        text, rc = mig_cli.destroy_gpu_instances(s.state, enabled, gi_filter)
    else:
        raise host.SimError(BAD_ARGS, 2)
    out.write(text)
    return rc


def main(argv=None):
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout)
    except host.SimError as err:
        sys.stdout.write(err.message if err.message.endswith("\n") else err.message + "\n")
        return err.rc


if __name__ == "__main__":
    sys.exit(main())
