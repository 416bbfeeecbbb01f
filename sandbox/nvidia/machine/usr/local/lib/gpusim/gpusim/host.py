"""The simulated host: files under GPUSIM_ROOT, the state file, the driver's load state.

Files (all relative to GPUSIM_ROOT, default "/"):
  etc/gpusim/machine.json        the machine (written by the sandbox; read only here)
  etc/gpusim/faults.json         active faults {"name": truthy value}
  var/lib/gpusim/state.json      runtime state (ours; created on first use)
  usr/lib/gpusim/userspace.json  user-space driver version (driver utils package)
  lib/modules/<kr>/updates/dkms/nvidia.ko   "gpusim-module version=V flavor=F" (DKMS)
  proc/driver/nvidia/version     mirror of the loaded module, in the real format
"""

import fcntl
import os
import stat
import sys

from . import jsonlite, models

MACHINE = "etc/gpusim/machine.json"
FAULTS = "etc/gpusim/faults.json"
STATE = "var/lib/gpusim/state.json"
LOCK = "var/lib/gpusim/state.lock"
USERSPACE = "usr/lib/gpusim/userspace.json"
PROC_NVIDIA = "proc/driver/nvidia"
PERSISTENCED_PIDFILES = ("run/nvidia-persistenced/nvidia-persistenced.pid",
                         "var/run/nvidia-persistenced/nvidia-persistenced.pid")
# Fabric Manager's pid file as NVIDIA's driver container names it (gpu-driver-container
# rhel9/nvidia-driver: /var/run/nvidia-fabricmanager/nv-fabricmanager.pid); the fake daemon
# writes the version it runs beside it (sandbox/nvidia/README.md, "Fabric Manager").
FABRICMANAGER_PIDFILES = ("run/nvidia-fabricmanager/nv-fabricmanager.pid",
                          "var/run/nvidia-fabricmanager/nv-fabricmanager.pid")
FABRICMANAGER_VERSION = "gpusim-version"
# NVLSM's pid file as the driver container passes it to nvidia-fabricmanager-start.sh
# (--nvlsm-pid-file /var/run/nvidia-fabricmanager/nvlsm.pid, gpu-driver-container@06a208c).
NVLSM_PIDFILES = ("run/nvidia-fabricmanager/nvlsm.pid", "var/run/nvidia-fabricmanager/nvlsm.pid")
MODULE_DIRS = ("updates/dkms", "extra", "kernel/drivers/video", "updates")
KNOWN_FAULTS = ("dkms_build_fail", "smi_hang", "gpu_reset_unsupported", "scriptlet_ignores_dkms")
SIM_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm")


class SimError(Exception):
    """A failure to report as `message` (already in the simulated tool's words) with `rc`."""

    def __init__(self, message, rc=1):
        super().__init__(message)
        self.message = message
        self.rc = rc


def root():
    return os.environ.get("GPUSIM_ROOT") or "/"


def under_test():
    """True when GPUSIM_ROOT points somewhere else than "/": never touch the real /proc."""
    return root() != "/"


def path(rel):
    return os.path.join(root(), rel)


def read_json(rel, what):
    full = path(rel)
    try:
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        return jsonlite.loads(text)
    except ValueError as exc:
        raise SimError(f"gpusim: {full} ({what}) is not valid JSON: {exc}. Fix or rewrite it.",
                       1) from None


def write_text(rel, text):
    full = path(rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tmp = f"{full}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, full)


def load_machine():
    data = read_json(MACHINE, "the simulated machine")
    if data is None:
        raise SimError(f"gpusim: {path(MACHINE)} is missing: the sandbox writes it when it "
                       "creates the host (keys hostname, os, kernel_release, gpu_model, "
                       "gpu_count, nvswitch).", 1)
    missing = [k for k in ("hostname", "os", "kernel_release", "gpu_model", "gpu_count")
               if k not in data]
    if missing:
        raise SimError(f"gpusim: {path(MACHINE)} lacks {', '.join(missing)}.", 1)
    try:
        models.model(data["gpu_model"])
    except ValueError as exc:
        raise SimError(f"gpusim: {exc}", 1) from None
    count = data["gpu_count"]
    if not isinstance(count, int) or not 1 <= count <= 8:
        raise SimError(f"gpusim: gpu_count in {path(MACHINE)} must be 1 to 8, not {count!r}.", 1)
    data.setdefault("nvswitch", False)
    return data


def kernel_release(machine):
    """The running kernel: `uname -r` on a host (the sandbox shims it), machine.json in tests."""
    if not under_test():
        import subprocess  # only on a host: keeps every other nvidia-smi call quicker
        try:
            out = subprocess.run(["uname", "-r"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return machine["kernel_release"]


def find_module(kver):
    """The built nvidia module for kernel `kver`: {"version", "flavor", "path"} or None."""
    base = path(f"lib/modules/{kver}")
    from . import modfile
    files_ = modfile.names("nvidia")
    candidates = [os.path.join(base, d, f) for d in MODULE_DIRS for f in files_]
    for dirpath, _dirs, files in os.walk(base):
        candidates += [os.path.join(dirpath, f) for f in files_ if f in files]
    for cand in candidates:
        try:
            text = modfile.read(cand)[:4096].decode("utf-8", errors="replace")
        except OSError:
            continue
        # the first line only: a signed module carries a signature trailer after it
        fields = dict(tok.split("=", 1) for tok in text.split("\n", 1)[0].split() if "=" in tok)
        if text.startswith("gpusim-module") and "version" in fields:
            return {"version": fields["version"], "flavor": fields.get("flavor", "proprietary"),
                    "path": cand}
    return None


def load_userspace():
    data = read_json(USERSPACE, "user-space driver version")
    if data is not None and "version" not in data:
        raise SimError(f"gpusim: {path(USERSPACE)} has no \"version\" key.", 1)
    return data


def load_faults():
    data = read_json(FAULTS, "active faults") or {}
    if not isinstance(data, dict):
        raise SimError(f"gpusim: {path(FAULTS)} must hold a JSON object.", 1)
    return data


def fault(name):
    return load_faults().get(name) or None


try:  # the builtin module: importing hashlib (OpenSSL) costs more than the rest of a call
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover - interpreters without the builtin
    from hashlib import sha1 as _sha1


def _hex_id(*parts):
    return _sha1("|".join(str(p) for p in parts).encode()).hexdigest()


def gpu_uuid(machine, index):
    h = _hex_id("gpu", machine["hostname"], machine["gpu_model"], index)
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_uuid(gpu_uuid_, gi, ci, serial):
    """MIG UUIDs look like name-based UUIDs (version 5, variant 10xx), new per creation."""
    h = _hex_id("mig", gpu_uuid_, gi, ci, serial)
    variant = "89ab"[int(h[16], 16) % 4]
    return f"MIG-{h[0:8]}-{h[8:12]}-5{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def gpu_serial(machine, index):
    return str(int(_hex_id("serial", machine["hostname"], index)[:12], 16))[:13].rjust(13, "1")


def bus_id(machine, index):
    """nvidia-smi form, e.g. 00000000:07:00.0."""
    return "0000" + lspci_slot(machine, index, domain=True).upper()


def lspci_slot(machine, index, domain=False):
    slot = models.model(machine["gpu_model"])["bus_ids"][index].lower() + ".0"
    return "0000:" + slot if domain else slot


def default_gpu(info):
    mig = info["mig"]
    return {"mig_current": False if mig else None, "mig_pending": False if mig else None,
            "persistence_legacy": False, "persistence_daemon": True, "gis": []}


def normalize(state, machine):
    info = models.model(machine["gpu_model"])
    state.setdefault("schema", 1)
    state.setdefault("boots", 0)
    state.setdefault("driver", None)
    state.setdefault("modules", [])
    state.setdefault("processes", [])
    state.setdefault("persistenced_pid", None)
    state.setdefault("serial", 0)
    gpus = state.setdefault("gpus", [])
    if state.get("gpu_model") != machine["gpu_model"]:
        gpus.clear()
        state["gpu_model"] = machine["gpu_model"]
    del gpus[machine["gpu_count"]:]
    while len(gpus) < machine["gpu_count"]:
        gpus.append(default_gpu(info))
    state["processes"] = [p for p in state["processes"] if p["gpu"] < machine["gpu_count"]]
    return state


class Session:
    """Load machine + state under an exclusive lock; save on clean exit when `write`."""

    def __init__(self, write=True):
        self.write = write
        self.lock_fh = None
        self.machine = None
        self.state = None

    def __enter__(self):
        self.machine = load_machine()
        lock = path(LOCK)
        try:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            self.lock_fh = open(lock, "a+")
            fcntl.flock(self.lock_fh, fcntl.LOCK_EX)
        except OSError as exc:
            if self.write:
                raise SimError(f"gpusim: cannot lock {lock}: {exc.strerror}; run as root.",
                               4) from None
            self.lock_fh = None
        self.state = normalize(read_json(STATE, "simulator state") or {}, self.machine)
        sync_persistenced(self.state)
        from . import procs  # procs imports health, which imports this module

        if self.lock_fh and procs.reap(self.state, self.machine):
            self.save()  # the driver tore them down: kept even by a read-only session
        return self

    def save(self):
        write_text(STATE, jsonlite.dumps(self.state) + "\n")

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self.write:
                self.save()
        finally:
            if self.lock_fh:
                self.lock_fh.close()
        return False


# ----- persistence -------------------------------------------------------------------
def _live_pid(pidfiles, name):
    """PID of a running daemon (one of its pid files, alive, ``name`` in its command
    line), else (None, None); the second value is the pid file's path."""
    for rel in pidfiles:
        try:
            with open(path(rel), encoding="utf-8") as fh:
                pid = int(fh.read().strip() or "0")
        except (OSError, ValueError):
            continue
        if pid <= 0:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if name not in fh.read():
                    continue
        except OSError:
            pass
        return pid, path(rel)
    return None, None


def persistenced_pid():
    """PID of a running nvidia-persistenced (its pid file, alive, named so), else None."""
    return _live_pid(PERSISTENCED_PIDFILES, b"persistenced")[0]


def fabricmanager_version():
    """The version of the running Fabric Manager (its pid file, alive, named so, and the
    version it wrote beside it), else None."""
    pid, pidfile = _live_pid(FABRICMANAGER_PIDFILES, b"fabricmanager")
    if pid is None:
        return None
    try:
        with open(os.path.join(os.path.dirname(pidfile), FABRICMANAGER_VERSION),
                  encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def nvlsm_running():
    """Whether an NVLink Subnet Manager runs (its pid file, alive, named so)."""
    return _live_pid(NVLSM_PIDFILES, b"nvlsm")[0] is not None


def sync_persistenced(state):
    """A (re)started daemon enables persistence on every GPU, as the real one does."""
    pid = persistenced_pid()
    if pid != state.get("persistenced_pid"):
        if pid is not None:
            for gpu in state["gpus"]:
                gpu["persistence_daemon"] = True
        state["persistenced_pid"] = pid


def persistence_on(state, index):
    gpu = state["gpus"][index]
    return bool(gpu["persistence_legacy"] or
                (state.get("persistenced_pid") and gpu["persistence_daemon"]))


def gpu_processes(state, index):
    return [p for p in state["processes"] if p["gpu"] == index]


def holders(state, index):
    """Why GPU `index` cannot be reset / the driver cannot be unloaded (empty: free)."""
    why = []
    if gpu_processes(state, index):
        why.append("processes")
    if persistence_on(state, index):
        why.append("persistence")
    if "nvidia_drm" in state["modules"]:
        why.append("nvidia_drm")
    return why


# ----- driver load state ---------------------------------------------------------------
def driver_status(state, userspace):
    """'not_loaded' | 'mismatch' | 'no_devices' | 'loaded'."""
    drv = state.get("driver")
    if not drv:
        return "not_loaded"
    if userspace and userspace.get("version") != drv.get("version"):
        return "mismatch"
    return "loaded"


def load_driver(state, machine):
    """modprobe nvidia: returns None, or the error text of modprobe (rc 1)."""
    if state.get("driver"):
        return None
    kver = kernel_release(machine)
    mod = find_module(kver)
    if mod is None:
        return f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{kver}"
    info = models.model(machine["gpu_model"])
    if mod["flavor"] == "open" and info["arch"] not in models.OPEN_MODULE_ARCHS:
        return "modprobe: ERROR: could not insert 'nvidia': No such device"
    # NVIDIA: Blackwell GPUs need the open kernel modules (the proprietary ones do not probe).
    if mod["flavor"] != "open" and info["arch"] in models.OPEN_ONLY_ARCHS:
        return "modprobe: ERROR: could not insert 'nvidia': No such device"
    from . import firmware  # Secure Boot: only a module signed by an enrolled key loads
    if firmware.secure_boot():
        refused = firmware.signed_by_enrolled(mod["path"])
        if refused:
            return f"modprobe: ERROR: could not insert 'nvidia': {refused}"
    state["driver"] = {"version": mod["version"], "flavor": mod["flavor"]}
    if "nvidia" not in state["modules"]:
        state["modules"].insert(0, "nvidia")
    for gpu in state["gpus"]:
        if gpu["mig_pending"] is not None:  # the GPU initialises: pending mode takes effect
            gpu["mig_current"] = gpu["mig_pending"]
    write_proc(state, machine)
    make_device_nodes(machine)
    from . import health  # the load's kernel lines, the faults a load clears or arms
    health.on_driver_load(state, machine)
    return None


def unload_driver(state, machine):
    """rmmod nvidia (callers checked holders): what leaving the kernel does to the GPUs."""
    info = models.model(machine["gpu_model"])
    state["driver"] = None
    state["modules"] = []
    for gpu in state["gpus"]:
        gpu["gis"] = []
        gpu["persistence_legacy"] = False
        if gpu["mig_current"] is not None and info["arch"] not in models.MIG_MODE_PERSISTS:
            gpu["mig_current"] = gpu["mig_pending"] = False
    write_proc(state, machine)


# NVIDIA's character devices: major 195, /dev/nvidiaN minor N, /dev/nvidiactl minor 255, mode
# 0666 (nvidia-modprobe: nvidia-modprobe-utils.h NV_MAJOR_DEVICE_NUMBER, NV_CTL_DEVICE_MINOR;
# the driver README "Device node creation"). nvidia-uvm's major is dynamic (/proc/devices):
# the simulated kernel gives it 510, minors 0 (nvidia-uvm) and 1 (nvidia-uvm-tools).
NV_MAJOR, NV_CTL_MINOR, UVM_MAJOR = 195, 255, 510


def _mknod(rel, major, minor):
    node = path(rel)
    if os.path.exists(node):
        return
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(node, 0o666)  # the umask applies to mknod's mode
    except OSError as exc:
        print(f"gpusim: warning: cannot create {node}: {exc.strerror}", file=sys.stderr)


def make_device_nodes(machine):
    """What nvidia-modprobe does when the driver loads (the udev rules of NVIDIA's packages
    call it): /dev/nvidiactl and one /dev/nvidiaN per GPU. Sandbox hosts' /dev is nspawn's
    tmpfs, so the nodes go with a reboot and come back with the next load; opening one
    fails (ENXIO: no real driver), the simulator reads its state files instead."""
    if os.geteuid() != 0:
        return
    os.makedirs(path("dev"), exist_ok=True)
    _mknod("dev/nvidiactl", NV_MAJOR, NV_CTL_MINOR)
    for index in range(machine["gpu_count"]):
        _mknod(f"dev/nvidia{index}", NV_MAJOR, index)


def make_uvm_nodes():
    """nvidia-modprobe -u: /dev/nvidia-uvm and /dev/nvidia-uvm-tools once nvidia_uvm loads."""
    if os.geteuid() != 0:
        return
    _mknod("dev/nvidia-uvm", UVM_MAJOR, 0)
    _mknod("dev/nvidia-uvm-tools", UVM_MAJOR, 1)


def proc_version_text(drv, machine):
    version, date = drv["version"], models.BUILD_DATES.get(drv["version"],
                                                           "Mon Jun  2 12:00:00 UTC 2025")
    gcc = models.GCC_BY_OS.get(machine.get("os"), models.GCC_BY_OS["debian12"])
    if drv["flavor"] == "open":
        head = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  "
                f"Release Build  (dvs-builder@U22-I3-AE18-23-3)  {date}")
    else:
        head = f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  {date}"
    return f"{head}\nGCC version:  {gcc}\n"


def write_proc(state, machine):
    """Mirror the module into /proc/driver/nvidia (a tmpfs inside sandbox hosts)."""
    base = path(PROC_NVIDIA)
    try:
        if not state.get("driver"):
            for dirpath, dirs, files in os.walk(base, topdown=False):
                for name in files:
                    os.remove(os.path.join(dirpath, name))
                for name in dirs:
                    os.rmdir(os.path.join(dirpath, name))
            if os.path.isdir(base):
                os.rmdir(base)  # the module's /proc/driver/nvidia goes with it
            return
        write_text(f"{PROC_NVIDIA}/version", proc_version_text(state["driver"], machine))
        info = models.model(machine["gpu_model"])
        for index in range(machine["gpu_count"]):
            slot = lspci_slot(machine, index, domain=True)
            write_text(f"{PROC_NVIDIA}/gpus/{slot}/information", (
                f"Model: \t\t {info['name']}\nIRQ:   \t\t {150 + index}\n"
                f"GPU UUID: \t {gpu_uuid(machine, index)}\nVideo BIOS: \t {info['vbios']}\n"
                f"Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
                f"Bus Location: \t {slot}\nDevice Minor: \t {index}\nGPU Excluded:\t No\n"))
    except OSError as exc:
        print(f"gpusim: warning: cannot update {base}: {exc.strerror}. Inside a sandbox host "
              "/proc/driver must be a tmpfs (gpusim-boot mounts one when run as root).",
              file=sys.stderr)
