"""`modprobe`, `rmmod` and `lsmod` for the simulated kernel: only the nvidia modules exist.

modprobe nvidia loads the module DKMS built for the running kernel (its version and
flavour become the loaded driver); nvidia_uvm / nvidia_modeset / nvidia_drm /
nvidia_peermem depend on nvidia (nvidia_drm on nvidia_modeset) and are taken to be built
alongside it (nvidia-peermem ships with the driver since R470). GDRCopy's gdrdrv uses
nvidia too but comes from its own package (gdrdrv-dkms / the gdrcopy kmod): it loads only
when a gdrdrv.ko is under /lib/modules/<kernel>/. A loaded user holds the module it uses:
unloading is refused while a user module, a process or persistence mode holds it, with
kmod's own messages (sandbox/nvidia/README.md, "Kernel modules").
"""

import os
import sys

from . import host

DEPENDS = {"nvidia": (), "nvidia_uvm": ("nvidia",), "nvidia_modeset": ("nvidia",),
           "nvidia_drm": ("nvidia_modeset", "nvidia"), "nvidia_peermem": ("nvidia",),
           "gdrdrv": ("nvidia",)}
SIZES = {"nvidia": 60887040, "nvidia_uvm": 1990656, "nvidia_modeset": 1626112,
         "nvidia_drm": 110592, "nvidia_peermem": 16384, "gdrdrv": 36864}
SEPARATE = ("gdrdrv",)  # built by another package: needs its .ko for the running kernel


def _built(name, kver):
    from . import modfile
    for _dirpath, _dirs, files in os.walk(host.path(f"lib/modules/{kver}")):
        if any(f in files for f in modfile.names(name)):
            return True
    return False


def _canon(name):
    return name.replace("-", "_")


def _users(state, name):
    return [m for m in state["modules"] if name in DEPENDS.get(m, ())]


def _not_simulated(tool, name):
    level = "FATAL" if tool == "modprobe" else "ERROR"
    return host.SimError(f"{tool}: {level}: Module {name} cannot be handled here: this is the "
                         "gpusim simulated kernel, which only has "
                         + ", ".join(DEPENDS) + ".", 1)


def _in_use(state, name):
    """Why `name` cannot be unloaded: None, or a reason for the message."""
    users = _users(state, name)
    if users:
        return "by: " + " ".join(users)
    if name in ("nvidia", "nvidia_uvm") and state["processes"]:
        return ""
    if name == "nvidia" and any(host.persistence_on(state, i) for i in range(len(state["gpus"]))):
        return ""
    return None


def load(s, name):
    """Load `name` and what it depends on; returns an error line or None."""
    state = s.state
    kver = host.kernel_release(s.machine)
    if name in SEPARATE and name not in state["modules"] and not _built(name, kver):
        return f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{kver}"
    for dep in reversed(DEPENDS[name]):
        if dep not in state["modules"]:
            err = load(s, dep)
            if err:
                return err
    if name in state["modules"]:
        return None
    if name == "nvidia":
        return host.load_driver(state, s.machine)
    if not state.get("driver"):
        return f"modprobe: ERROR: could not insert '{name}': Unknown symbol in module"
    if name == "nvidia_peermem" and "rdma-inbox" in (s.machine.get("traits") or []):
        # an inbox ib_core has no peer-memory API: nv_mem_client_init() returns -EINVAL
        # (open-gpu-kernel-modules nvidia-peermem.c; trait rdma-inbox, sandbox/README.md)
        return f"modprobe: ERROR: could not insert '{name}': Invalid argument"
    state["modules"].append(name)
    if name == "nvidia_uvm":
        host.make_uvm_nodes()
    return None


def unload(s, name, tool):
    state = s.state
    if name not in state["modules"]:
        if tool == "rmmod":
            return f"rmmod: ERROR: Module {name} is not currently loaded"
        return None
    reason = _in_use(state, name)
    if reason is not None:
        if tool == "rmmod":
            return f"rmmod: ERROR: Module {name} is in use" + (f" {reason}" if reason else "")
        return f"modprobe: FATAL: Module {name} is in use."
    if name == "nvidia":
        host.unload_driver(state, s.machine)
    else:
        state["modules"].remove(name)
    return None


def modprobe(argv):
    remove, quiet, names = False, False, []
    for arg in argv:
        if arg in ("-r", "--remove"):
            remove = True
        elif arg in ("-q", "--quiet"):
            quiet = True
        elif arg in ("-v", "--verbose", "-b", "--use-blacklist", "-s", "--syslog"):
            continue
        elif arg.startswith("-"):
            raise host.SimError(f"modprobe: ERROR: gpusim's modprobe does not support {arg}", 1)
        else:
            names.append(_canon(arg))
    if not names:
        raise host.SimError("modprobe: ERROR: missing module name.", 1)
    if not remove:
        names = names[:1]  # modprobe NAME [PARAM=VALUE...]: parameters are ignored
    with host.Session() as s:
        for name in names:
            if name not in DEPENDS:
                if quiet and remove:
                    continue
                raise _not_simulated("modprobe", name)
            err = unload(s, name, "modprobe") if remove else load(s, name)
            if err:
                if quiet and not remove and "not found" in err:
                    raise host.SimError("", 1)
                raise host.SimError(err, 1)
    return 0


def rmmod(argv):
    names = [_canon(a) for a in argv if not a.startswith("-")]
    if not names:
        raise host.SimError("rmmod: ERROR: missing module name.", 1)
    with host.Session() as s:
        for name in names:
            if name not in DEPENDS:
                raise _not_simulated("rmmod", name)
            err = unload(s, name, "rmmod")
            if err:
                raise host.SimError(err, 1)
    return 0


MODULES_LOAD_DIRS = ("etc/modules-load.d", "run/modules-load.d", "usr/lib/modules-load.d",
                     "lib/modules-load.d")


def load_at_boot(s):
    """systemd-modules-load at boot: the modules that modules-load.d files name (one per
    line, "#" and ";" start comments; modules-load.d(5)), the simulated ones only (nspawn
    skips the real service: its ConditionCapability=CAP_SYS_MODULE fails). A file of the
    same name in an earlier directory hides the later ones. Returns the error lines."""
    seen, errors = set(), []
    for directory in MODULES_LOAD_DIRS:
        base = host.path(directory)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            if not name.endswith(".conf") or name in seen:
                continue
            seen.add(name)
            with open(os.path.join(base, name)) as handle:
                for line in handle:
                    module = _canon(line.strip())
                    if module and module[0] not in "#;" and module in DEPENDS:
                        err = load(s, module)
                        if err:
                            errors.append(err)
    return errors


def lsmod(_argv):
    with host.Session(write=False) as s:
        lines = ["Module                  Size  Used by"]
        for name in reversed(s.state["modules"]):
            users = _users(s.state, name)
            count = len(users) + (len(s.state["processes"]) if name == "nvidia_uvm" else 0)
            lines.append(f"{name:<19} {SIZES[name]:>8}  {count}" +
                         (" " + ",".join(users) if users else ""))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(tool, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        return {"modprobe": modprobe, "rmmod": rmmod, "lsmod": lsmod}[tool](argv)
    except host.SimError as err:
        if err.message:
            sys.stderr.write(err.message.rstrip("\n") + "\n")
        return err.rc
