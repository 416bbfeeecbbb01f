"""nvidia-ctk of the gpuhost sandbox: a simulation of NVIDIA Container Toolkit CLI @VERSION@.

Installed as /usr/lib/nvidia-container-toolkit/nvidia_ctk.py; /usr/bin/nvidia-ctk
(templates/nvidia-ctk) imports it, so its bytecode is cached instead of compiled at
every start.

Implements `--version` and `runtime configure --runtime=docker` the way the real tool
behaves: it merges the nvidia runtime into daemon.json and rewrites the file in place
(keys sorted, 4-space indent, no backup) and restarts nothing. `cdi generate [--output FILE]
[--format yaml|json]` writes a CDI spec of kind nvidia.com/gpu as the real generator names
its devices (index, UUID, `<gpu>:<mig>` and MIG UUID per MIG device, `all`; its default
output is stdout, nvidia-cdi-refresh.service sets NVIDIA_CTK_CDI_OUTPUT_FILE_PATH) with the
loaded driver's libraries that exist on the host; `cdi list` prints the device names of the
specs in /etc/cdi and /var/run/cdi (sources: sandbox/README.md, "Container toolkit").
Runs on python3-minimal (no json module there: falls back to the bundled jsonlite) under
`python3 -S` (standard library only: no site); os, re, subprocess and json are imported by
the commands that use them, so `--version` costs little more than the interpreter's start.
"""
import sys

_JSON = []  # (loads, dumps), chosen at the first use


def _json():
    if not _JSON:
        try:
            import json
            _JSON.append((json.loads, lambda value: json.dumps(value, indent=4, sort_keys=True)))
        except ImportError:
            sys.path.insert(0, "/usr/lib/nvidia-container-toolkit")
            import jsonlite
            _JSON.append((jsonlite.loads,
                          lambda value: jsonlite.dumps(sort_keys(value), indent=4)))
    return _JSON[0]


def loads(text):
    return _json()[0](text)


def dumps(value):
    return _json()[1](value)


VERSION = "@VERSION@"
COMMIT = "@COMMIT@"
USAGE = "Usage: nvidia-ctk runtime configure --runtime=docker [--config=FILE] [--set-as-default] [--dry-run]"


def sort_keys(value):
    if isinstance(value, dict):
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


def info(msg):
    print(f"INFO[0000] {msg}", file=sys.stderr)


def error(msg):
    print(f"ERRO[0000] {msg}", file=sys.stderr)
    return 1


def parse(argv):
    opts = {"runtime": "docker", "config": "", "dry-run": False, "set-as-default": False,
            "nvidia-runtime-name": "nvidia", "nvidia-runtime-path": "nvidia-container-runtime"}
    aliases = {"nvidia-set-as-default": "set-as-default", "runtime-name": "nvidia-runtime-name",
               "runtime-path": "nvidia-runtime-path"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise ValueError(f"unexpected argument {arg!r}")
        name, eq, value = arg[2:].partition("=")
        name = aliases.get(name, name)
        if name not in opts:
            raise ValueError(f"flag provided but not defined: -{name}")
        if isinstance(opts[name], bool):
            opts[name] = value.lower() not in ("false", "0") if eq else True
        else:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise ValueError(f"flag needs an argument: -{name}")
                value = argv[i]
            opts[name] = value
        i += 1
    return opts


def configure(opts):
    import os
    if opts["runtime"] != "docker":
        return error(f"unrecognized runtime '{opts['runtime']}' (the sandbox simulates docker only)")
    path = opts["config"] or "/etc/docker/daemon.json"
    config = {}
    if os.path.exists(path):
        try:
            with open(path) as f:
                text = f.read()
            config = loads(text) if text.strip() else {}
        except ValueError as exc:
            return error(f"unable to load config: unable to read config: {exc}")
        if not isinstance(config, dict):
            return error("unable to load config: unable to read config: json: cannot "
                         "unmarshal into Go value of type map[string]interface {}")
    else:
        info("Config file does not exist; creating new one")
    runtimes = config.get("runtimes") or {}
    runtimes[opts["nvidia-runtime-name"]] = {"args": [], "path": opts["nvidia-runtime-path"]}
    config["runtimes"] = runtimes
    if opts["set-as-default"]:
        config["default-runtime"] = opts["nvidia-runtime-name"]
    output = dumps(config)
    if opts["dry-run"]:
        print(output)
        return 0
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:  # truncates in place, like the real tool
        f.write(output)
    info(f"Wrote updated config to {path}")
    info("It is recommended that docker daemon be restarted.")
    return 0


LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
# the driver's user-space libraries nvidia-ctk looks for under their versioned names
DRIVER_LIBS = ("libnvidia-ml.so", "libcuda.so", "libnvidia-ptxjitcompiler.so")
# host files of the simulated driver user space the runtime mounts (nvidia-container-runtime)
SIM_MOUNTS = ("/usr/bin/nvidia-smi", "/usr/lib/gpusim", "/etc/gpusim", "/var/lib/gpusim")
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
PROC_VERSION = "/proc/driver/nvidia/version"


def loaded_driver():
    """The loaded module's version (the real tool asks NVML; same answer)."""
    import re
    try:
        with open(PROC_VERSION) as f:
            m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", f.read())
            return m.group(1) if m else None
    except OSError:
        return None


def smi_devices():
    """[(index, uuid, [(mig index, mig uuid)])] from nvidia-smi -L."""
    import re
    import subprocess
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stdout.strip() or out.stderr.strip() or "nvidia-smi failed")
    gpus = []
    for line in out.stdout.splitlines():
        m = re.match(r"^GPU (\d+): .*\(UUID: (GPU-[^)]+)\)", line)
        if m:
            gpus.append((int(m.group(1)), m.group(2), []))
            continue
        m = re.match(r"^\s+MIG .* Device\s+(\d+): \(UUID: (MIG-[^)]+)\)", line)
        if m and gpus:
            gpus[-1][2].append((int(m.group(1)), m.group(2)))
    return gpus


def build_spec(feature_flags=()):
    import os
    version = loaded_driver()
    if version is None:
        raise RuntimeError("failed to initialize NVML: Driver Not Loaded")
    gpus = smi_devices()
    devices = []

    def located(paths):
        # nvidia-ctk's char device discoverer: a node that does not exist is a
        # "Could not locate" warning and stays out of the spec
        found = []
        for p in paths:
            if os.path.exists(p):
                found.append({"path": p})
            else:
                print(f"WARN[0000] Could not locate {p}: pattern {p} not found",
                      file=sys.stderr)
        return found

    def node(index):
        return {"deviceNodes": located([f"/dev/nvidia{index}"])}

    for index, uuid, migs in gpus:
        devices.append({"name": str(index), "containerEdits": node(index)})
        devices.append({"name": uuid, "containerEdits": node(index)})
        for mig, mig_uuid in migs:
            devices.append({"name": f"{index}:{mig}", "containerEdits": node(index)})
            devices.append({"name": mig_uuid, "containerEdits": node(index)})
    devices.append({"name": "all", "containerEdits": {
        "deviceNodes": located([f"/dev/nvidia{index}" for index, _, _ in gpus])}})
    mounts = []
    for lib in DRIVER_LIBS:
        for d in LIB_DIRS:
            path = f"{d}/{lib}.{version}"
            if os.path.exists(path):
                mounts.append(path)
                break
        else:
            print(f"WARN[0000] Could not locate {lib}.{version}: pattern {lib}.{version} not "
                  "found", file=sys.stderr)
    mounts += [p for p in SIM_MOUNTS if os.path.exists(p)]
    return {
        "cdiVersion": spec_version(feature_flags),
        "kind": "nvidia.com/gpu",
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": located(["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]),
            "mounts": [{"hostPath": p, "containerPath": p,
                        "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]}
                       for p in mounts],
        },
    }


def yaml_scalar(value):
    text = str(value)
    if text == "" or text[0] in "-?:,[]{}#&*!|>'\"%@`0123456789" or ":" in text or text in (
            "all", "true", "false", "null", "yes", "no"):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def to_yaml(value, indent=0):
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(item, indent + (0 if isinstance(item, list) else 2)))
            else:
                lines.append(f"{pad}{key}: {yaml_scalar(item) if item != [] else '[]'}")
    else:
        for item in value:
            if isinstance(item, dict):
                body = to_yaml(item, indent + 2).splitlines()
                lines.append(f"{pad}- {body[0].lstrip()}")
                lines.extend(body[1:])
            else:
                lines.append(f"{pad}- {yaml_scalar(item)}")
    return "\n".join(lines)


# From 1.19.1 the spec is written with CDI schema 0.7.0 (toolkit#1860, cloud-native-docs PR
# #419); the feature flag no-additional-gids-for-device-nodes (pkg/nvcdi/api.go @v1.20.0)
# leaves out what needs 0.7.0, so the spec keeps the older schema.
NO_GIDS = "no-additional-gids-for-device-nodes"


def spec_version(feature_flags):
    release = tuple(int(p) for p in VERSION.split(".")[:3])
    return "0.7.0" if release >= (1, 19, 1) and NO_GIDS not in feature_flags else "0.5.0"


def cdi_generate(argv):
    import os
    output = os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", "")
    fmt = os.environ.get("NVIDIA_CTK_CDI_OUTPUT_FORMAT", "yaml")
    flags = [f for f in os.environ.get("NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS", "").split(",") if f]
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in ("--output", "--format", "--feature-flag", "--feature-flags"):
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if name == "--output":
                output = value
            elif name == "--format":
                fmt = value
            else:
                flags += [f for f in value.split(",") if f]
        else:
            return error(f"flag not simulated in the gpuhost sandbox: {argv[i]}")
        i += 1
    if output.endswith(".json"):
        fmt = "json"
    try:
        spec = build_spec(flags)
    except RuntimeError as exc:
        return error(f"failed to generate CDI spec: {exc}")
    text = (dumps(spec) if fmt == "json" else "---\n" + to_yaml(spec)) + "\n"
    if not output:
        sys.stdout.write(text)
        return 0
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    tmp = output + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, output)
    info(f"Generated CDI spec with version {spec['cdiVersion']}")
    return 0


def cdi_list():
    import os
    import re
    names = []
    for d in SPEC_DIRS:
        try:
            files = sorted(os.listdir(d))
        except OSError:
            continue
        for name in files:
            if not name.endswith((".yaml", ".json")):
                continue
            with open(os.path.join(d, name)) as f:
                text = f.read()
            kind = re.search(r'"?kind"?:\s*"?([^"\s,]+)', text)
            for dev in re.findall(r'"?name"?:\s*"?([^"\s,]+)"?', text):
                names.append(f"{kind.group(1) if kind else '?'}={dev}")
    info(f"Found {len(names)} CDI devices")
    for name in names:
        print(name)
    return 0


def main(argv):
    if argv[:2] == ["cdi", "generate"]:
        return cdi_generate(argv[2:])
    if argv[:2] == ["cdi", "list"]:
        return cdi_list()
    if argv[:1] in (["--version"], ["-v"], ["version"]):
        print(f"NVIDIA Container Toolkit CLI version {VERSION}\ncommit: {COMMIT}")
        return 0
    if argv[:2] == ["runtime", "configure"]:
        try:
            opts = parse(argv[2:])
        except ValueError as exc:
            print(f"{exc}\n{USAGE}", file=sys.stderr)
            return 1
        return configure(opts)
    return error(f"command not simulated in the gpuhost sandbox: {' '.join(argv) or '(none)'}\n{USAGE}")
