"""The shell side of gpuhost's facts: named read-only sections, run in one remote command.

Every fact is a set of *sections*. A section is a constant piece of POSIX shell (no user
value ever reaches it) whose output and exit status are printed behind a marker line
``@@gpuhost@@ NAME rc=N``; ``facts.parsers.split_sections`` reads them back. The composite
fact (``facts.host.GpuHostState``) runs every section in one command, so a full audit of a
host costs one round trip; the single facts run only the sections they need.

Exit status conventions inside a section: 127 = the tool is not installed, 3 = the file is
absent, 124 = timed out (``timeout``), anything else is the tool's own status.
"""

from __future__ import annotations

MARKER = "@@gpuhost@@ "

# nvidia-smi can hang on a GPU that fell off the bus; never let a fact hang a fleet run.
_SMI = "timeout 20 nvidia-smi"


def _tool(name: str, command: str) -> str:
    """Run ``command`` when ``name`` is installed, else exit 127."""
    return f"if command -v {name} >/dev/null 2>&1; then {command}; else exit 127; fi"


def _file(path: str) -> str:
    """Print a file, or exit 3 when it does not exist."""
    return f"if test -e {path}; then cat {path}; else exit 3; fi"


SECTIONS: dict[str, str] = {
    "os_release": _file("/etc/os-release"),
    "kernel": "uname -r; uname -m",
    "proc_version": _file("/proc/driver/nvidia/version"),
    "smi_xml": _tool("nvidia-smi", f"{_SMI} -q -x"),
    "smi_list": _tool("nvidia-smi", f"{_SMI} -L"),
    "mig_lgi": _tool("nvidia-smi", f"{_SMI} mig -lgi"),
    "mig_lci": _tool("nvidia-smi", f"{_SMI} mig -lci"),
    "lspci": _tool("lspci", "lspci -mm -nn -d 10de:"),
    "dpkg": _tool(
        "dpkg-query",
        "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' 2>/dev/null"
        " | grep -E '^(nvidia|libnvidia|cuda-drivers|linux-headers|docker|containerd|runc"
        "|dkms|unattended-upgrades)'; true",
    ),
    "rpm": _tool(
        "rpm",
        "rpm -qa --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n' 2>/dev/null"
        " | grep -E '^(nvidia|kmod-nvidia|libnvidia|cuda-drivers|kernel|docker|containerd"
        "|runc|dkms|gcc-toolset)'; true",
    ),
    "headers_build": 'd="/lib/modules/$(uname -r)/build"; if test -e "$d/Makefile"; '
    'then readlink -f "$d"; else exit 3; fi',
    "nouveau": "if test -d /sys/module/nouveau; then echo loaded; fi; "
    "grep -rhsE '^[[:space:]]*blacklist[[:space:]]+nouveau' /etc/modprobe.d /usr/lib/modprobe.d"
    " /lib/modprobe.d 2>/dev/null | head -n 1 | sed 's/^/modprobe: /'; "
    "grep -oE '(rd\\.driver\\.blacklist|modprobe\\.blacklist)=[^ ]*nouveau' /proc/cmdline"
    " 2>/dev/null | sed 's/^/cmdline: /'; true",
    "dkms": _tool("dkms", "dkms status 2>&1"),
    "secure_boot": _tool("mokutil", "mokutil --sb-state 2>&1"),
    "daemon_json": _file("/etc/docker/daemon.json"),
    "docker_version": _tool("dockerd", "dockerd --version"),
    "docker_info": _tool(
        "docker",
        "timeout 10 docker info --format "
        "'{{json .Runtimes}}\t{{.DefaultRuntime}}\t{{.ServerVersion}}'",
    ),
    "nvidia_ctk": _tool("nvidia-ctk", "nvidia-ctk --version"),
    "nvidia_container_cli": _tool("nvidia-container-cli", "nvidia-container-cli --version"),
}

_RUNNER = (
    "_gh() { _o=$(eval \"$2\" 2>&1); _r=$?; "
    f"printf '{MARKER}%s rc=%d\\n%s\\n' \"$1\" \"$_r\" \"$_o\"; }}; "
)


def _shell_single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def build_script(names: list[str] | tuple[str, ...]) -> str:
    """One POSIX shell command running the named sections in order; always exits 0."""
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise KeyError(f"unknown fact sections: {', '.join(unknown)}")
    parts = [_RUNNER]
    for name in names:
        parts.append(f"_gh {name} {_shell_single_quote(SECTIONS[name])}; ")
    parts.append("true")
    return "".join(parts)


ALL_SECTIONS: tuple[str, ...] = tuple(SECTIONS)
