"""Merge the nvidia runtime into Docker's daemon.json without losing anything (pure).

Principles (users of nvidia-ctk and config-management tools have been bitten by each):

- every key the user had stays, with its value, unless gpuhost is asked to set that key;
- an nvidia runtime already present counts as ours whether written ``args`` style
  (``nvidia-ctk``) or ``runtimeArgs`` style (older packages, hand-written), with a relative
  or an absolute path: it is left as written, not rewritten into our style;
- ``default-runtime`` is set to ``nvidia`` only when asked; when not asked, an existing
  ``default-runtime`` is left alone;
- comparison is on the parsed structure, so formatting and key order never cause a change.
"""

from __future__ import annotations

import copy
import json
from typing import Any

RUNTIME_NAME = "nvidia"
RUNTIME_BINARY = "nvidia-container-runtime"


def is_nvidia_runtime(entry: Any) -> bool:
    """An entry of ``runtimes`` that runs nvidia-container-runtime (any path, any args style)."""
    if not isinstance(entry, dict):
        return False
    path = entry.get("path")
    return isinstance(path, str) and path.rstrip().rsplit("/", 1)[-1] == RUNTIME_BINARY


def merge(
    existing: dict[str, Any],
    *,
    default_runtime: bool,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The daemon.json gpuhost wants, starting from ``existing`` (which is not modified).

    + existing: the parsed current file (``{}`` when absent)
    + default_runtime: make ``nvidia`` the default runtime
    + extra: keys from the ``docker_daemon_settings`` inventory setting; dicts are merged
      one level deep, other values replace the user's value for that key
    """
    merged = copy.deepcopy(existing)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy.deepcopy(value)}
        else:
            merged[key] = copy.deepcopy(value)
    runtimes = merged.get("runtimes")
    if not isinstance(runtimes, dict):
        runtimes = {}
    if not is_nvidia_runtime(runtimes.get(RUNTIME_NAME)):
        runtimes[RUNTIME_NAME] = {"args": [], "path": RUNTIME_BINARY}
    merged["runtimes"] = runtimes
    if default_runtime:
        merged["default-runtime"] = RUNTIME_NAME
    return merged


def mode_settings(settings: dict[str, Any] | None, mode: str) -> dict[str, Any]:
    """``docker_daemon_settings`` plus what ``container_runtime_mode`` needs: in ``cdi`` mode
    ``"features": {"cdi": true}`` (Docker 25.0 to 28.1 need it for CDI devices; 28.2 and newer
    enable CDI by default, where it changes nothing). A ``features.cdi`` the user set in the
    inventory wins. The nvidia runtime entry is written in every mode (``merge``)."""
    out = copy.deepcopy(settings or {})
    if mode == "cdi":
        features = out.get("features") if isinstance(out.get("features"), dict) else {}
        out["features"] = {"cdi": True, **features}
    return out


def render(config: dict[str, Any]) -> str:
    """The file's text: stable, readable, newline-terminated."""
    return json.dumps(config, indent=4, sort_keys=True) + "\n"


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Top-level keys whose value differs (for messages and diffs)."""
    keys = set(before) | set(after)
    return sorted(key for key in keys if before.get(key) != after.get(key))


def invalid_message(path: str, error: str) -> str:
    """What gpuhost says about a daemon.json that is not valid JSON: the parser's reason
    alone (``Expecting ',' delimiter at line 3 column 2``), that nothing was changed, and
    what to do."""
    reason = str(error)
    if "is not valid JSON: " in reason:
        reason = reason.split("is not valid JSON: ", 1)[1]
    reason = reason.removesuffix("; fix or remove the file")
    return (f"{path} is not valid JSON ({reason}); gpuhost left it untouched. "
            "Fix the file (or move it away) and run again.")


# --- docker_daemon_settings: Docker's documented option types -----------------------------
# Source: Docker's dockerd reference, "Daemon configuration file" (the full example of the
# allowed options on Linux: https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file)
# and "Configure the Docker daemon" (https://docs.docker.com/engine/daemon/). Types as the
# example writes them: "str", "bool", "int", "[str]" (list of strings), "{str}" (object of
# strings, e.g. log-opts "max-size": "10m"), "{}" (object), "[{}]" (list of objects).
OPTION_TYPES: dict[str, str] = {
    "allow-nondistributable-artifacts": "[str]", "api-cors-header": "str",
    "authorization-plugins": "[str]", "bip": "str", "bip6": "str", "bridge": "str",
    "builder": "{}", "cdi-spec-dirs": "[str]", "cgroup-parent": "str", "containerd": "str",
    "containerd-namespace": "str", "containerd-plugins-namespace": "str", "data-root": "str",
    "debug": "bool", "default-address-pools": "[{}]", "default-cgroupns-mode": "str",
    "default-gateway": "str", "default-gateway-v6": "str", "default-ipc-mode": "str",
    "default-network-opts": "{}", "default-shm-size": "str", "default-ulimits": "{}",
    "dns": "[str]", "dns-opts": "[str]", "dns-search": "[str]", "exec-opts": "[str]",
    "exec-root": "str", "experimental": "bool", "features": "{}", "fixed-cidr": "str",
    "fixed-cidr-v6": "str", "group": "str", "host-gateway-ip": "str", "hosts": "[str]",
    "icc": "bool", "init": "bool", "init-path": "str", "insecure-registries": "[str]",
    "ip": "str", "ip-forward": "bool", "ip-masq": "bool", "ip6tables": "bool",
    "iptables": "bool", "ipv6": "bool", "labels": "[str]", "live-restore": "bool",
    "log-driver": "str", "log-format": "str", "log-level": "str", "log-opts": "{str}",
    "max-concurrent-downloads": "int", "max-concurrent-uploads": "int",
    "max-download-attempts": "int", "metrics-addr": "str", "mtu": "int",
    "no-new-privileges": "bool", "node-generic-resources": "[str]",
    "oom-score-adjust": "int", "pidfile": "str", "proxies": "{str}", "raw-logs": "bool",
    "registry-mirrors": "[str]", "runtimes": "{}", "seccomp-profile": "str",
    "selinux-enabled": "bool", "shutdown-timeout": "int", "storage-driver": "str",
    "storage-opts": "[str]", "swarm-default-advertise-addr": "str", "tls": "bool",
    "tlscacert": "str", "tlscert": "str", "tlskey": "str", "tlsverify": "bool",
    "userland-proxy": "bool", "userland-proxy-path": "str", "userns-remap": "str",
}

_TYPE_WORDS = {"str": "a string", "bool": "true or false", "int": "an integer",
               "[str]": "a list of strings", "{str}": "an object of string values",
               "{}": "an object", "[{}]": "a list of objects"}


def _has_type(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "{str}":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if kind == "{}":
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)  # "[{}]"


def option_problems(settings: dict[str, Any], allow_unknown: bool = False) -> list[str]:
    """Problems of ``docker_daemon_settings`` against Docker's documented option types
    (``OPTION_TYPES``): a wrong type, or a key Docker does not document (refused unless
    ``allow_unknown``, because dockerd refuses unknown keys and would not start)."""
    problems = []
    for key, value in settings.items():
        kind = OPTION_TYPES.get(key)
        if kind is None:
            if not allow_unknown:
                problems.append(
                    f"{key!r} is not a daemon.json option gpuhost knows (Docker's dockerd "
                    "reference, \"Daemon configuration file\"); a typo makes dockerd refuse to "
                    "start. Fix the key, or set docker_daemon_allow_unknown_keys: true")
        elif not _has_type(value, kind):
            problems.append(f"{key!r} must be {_TYPE_WORDS[kind]} (Docker's dockerd reference), "
                            f"got {json.dumps(value)}")
    return problems


# --- keys gpuhost wrote, so that removing a setting removes it from the file -------------

def apply_settings(
    existing: dict[str, Any],
    *,
    default_runtime: bool,
    extra: dict[str, Any] | None,
    previous: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``merge`` plus the removal of what gpuhost itself set on an earlier run and the
    inventory no longer asks for. Returns (new config, what gpuhost manages now).

    + previous: the record of the last run (``{"settings": {...}, "default-runtime": bool}``;
      None or {} when there is none). A key (or, in an object, a sub-key) is removed only
      when it still has the value gpuhost wrote: a value changed by hand is the user's.
    """
    config = copy.deepcopy(existing)
    extra = extra or {}
    before = (previous or {}).get("settings") or {}
    for key, old in before.items():
        if key not in config:
            continue
        if isinstance(old, dict) and isinstance(config[key], dict):
            keep = extra.get(key) if isinstance(extra.get(key), dict) else {}
            for sub, value in old.items():
                if sub not in keep and config[key].get(sub) == value:
                    del config[key][sub]
            if not config[key] and key not in extra:
                del config[key]
        elif key not in extra and config[key] == old:
            del config[key]
    if ((previous or {}).get("default-runtime") and not default_runtime
            and config.get("default-runtime") == RUNTIME_NAME):
        del config["default-runtime"]
    merged = merge(config, default_runtime=default_runtime, extra=extra)
    managed = {"settings": copy.deepcopy(extra), "default-runtime": bool(default_runtime)}
    return merged, managed


# --- keys set both as a dockerd flag and in the file --------------------------------------
# dockerd's flags for the keys gpuhost checks (dockerd reference; a flag and the same key in
# daemon.json make dockerd refuse to start: "the following directives are specified both
# as a flag and in the configuration file").
FLAG_KEYS: dict[str, str] = {
    "-H": "hosts", "--host": "hosts", "--containerd": "containerd", "-D": "debug",
    "--debug": "debug", "-l": "log-level", "--log-level": "log-level", "-G": "group",
    "--group": "group", "--data-root": "data-root", "--exec-root": "exec-root",
    "-p": "pidfile", "--pidfile": "pidfile", "-s": "storage-driver",
    "--storage-driver": "storage-driver", "--iptables": "iptables", "--ip6tables": "ip6tables",
    "--bridge": "bridge", "-b": "bridge", "--bip": "bip", "--ip-forward": "ip-forward",
    "--ip-masq": "ip-masq", "--live-restore": "live-restore", "--log-driver": "log-driver",
    "--default-runtime": "default-runtime", "--tls": "tls", "--tlsverify": "tlsverify",
    "--userland-proxy": "userland-proxy", "--mtu": "mtu", "--dns": "dns",
    "--registry-mirror": "registry-mirrors", "--insecure-registry": "insecure-registries",
    "--exec-opt": "exec-opts", "--storage-opt": "storage-opts", "--log-opt": "log-opts",
    "--label": "labels", "--init": "init", "--icc": "icc", "--ipv6": "ipv6",
}


def dockerd_flags(exec_start: str, environment: dict[str, str]) -> list[str]:
    """dockerd's command line as its unit starts it: ``ExecStart``'s argv with ``$VAR`` /
    ``${VAR}`` replaced by the unit's environment (split on whitespace, as systemd does for
    an unbraced ``$VAR``)."""
    import re
    import shlex

    def expand(match: re.Match) -> str:
        return environment.get(match.group(1) or match.group(2), "")

    text = re.sub(r"\$\{(\w+)\}|\$(\w+)", expand, exec_start)
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def flag_clashes(config: dict[str, Any], argv: list[str]) -> list[tuple[str, str]]:
    """(daemon.json key, flag) pairs set both in ``config`` and on dockerd's command line."""
    out = []
    for arg in argv[1:]:
        flag = arg.split("=", 1)[0]
        key = FLAG_KEYS.get(flag)
        if key and key in config and (key, flag) not in out:
            out.append((key, flag))
    return out


def clash_message(path: str, clashes: list[tuple[str, str]], unit: str = "docker.service") -> str:
    shown = ", ".join(f"\"{key}\" (flag {flag})" for key, flag in clashes)
    return (f"{path} sets {shown}, which {unit} also passes to dockerd: dockerd refuses to "
            "start with an option set both as a flag and in daemon.json (Docker's \"Configure "
            "the Docker daemon\"). gpuhost changed nothing: remove the key from the file (or "
            "the flag from the unit) and run again.")
