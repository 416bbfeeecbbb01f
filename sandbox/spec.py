"""Which hosts a fleet has: names, OS, simulated kernel and GPUs (deterministic by index).

Host N (1-based) is `gpu-NN` (Debian 12) for the first `hosts - ol` indexes, then
`ol8-NN` and `ol9-NN` (the `ol` count split between the two, OL8 gets the odd one), then
`u22-NN` and `u24-NN` (Ubuntu 22.04/24.04, the `ubuntu` count split, 24.04 gets the odd one).
`"os"` in a host's override moves it to another OS (`debian13`: `d13-NN`, `ubuntu2604`:
`u26-NN`, or any of the others), keeping its index.
GPU model cycles A100-SXM4-40GB, H100-80GB-HBM3, L4 and the count cycles 1..8 with the
index; an 8-GPU A100/H100 host has NVSwitch. The first `docker_hosts` Debian hosts are the
docker hosts. Each host gets the default traits (sandbox/traits) unless its override names
`traits`. `overrides` (from --spec) change any of this per host name or index; `faults`
(a list of `gpusim` fault/xid/sxid commands) are set in the host at its creation.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import debian13, paths, traits, ubuntu as ubuntu_os
from .util import SandboxError

GPU_CYCLE = ["A100-SXM4-40GB", "H100-80GB-HBM3", "L4"]
GPU_MODELS = GPU_CYCLE + ["V100-SXM2-16GB", "T4", "V100-PCIE-16GB", "P100-PCIE-16GB", "B200",
                          "RTX-PRO-6000-Blackwell-Server"]
# Simulated kernels of the Oracle Linux hosts (RHCK on OL8, UEK 8 on OL9: both code paths,
# and UEK 8's gcc-toolset-14). The fake OL repos (sandbox/nvidia) carry their devel packages.
OL_KERNELS = {
    "ol8": "4.18.0-553.el8_10.x86_64",
    "ol9": "6.12.0-100.28.2.2.el9uek.x86_64",
}
OVERRIDABLE = {"gpu_model": str, "gpu_count": int, "nvswitch": bool, "kernel_release": str,
               "docker": bool, "traits": list, "faults": list, "os": str}
# Host OSes and their name prefixes (Ubuntu's: sandbox/ubuntu.py RELEASES).
DEBIAN_PREFIX = {"debian12": "gpu", debian13.OS_NAME: debian13.PREFIX}
OSES = ("debian12", debian13.OS_NAME, *OL_KERNELS, *ubuntu_os.RELEASES)


def load_overrides(text: str | None) -> dict[str, dict]:
    """--spec value: JSON text, or @path to a JSON file: {"gpu-01" or "1": {key: value}}."""
    if not text:
        return {}
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as e:
            raise SandboxError(f"--spec: cannot read {text[1:]}: {e.strerror}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SandboxError(f"--spec is not valid JSON ({e}): pass e.g. "
                           '\'{"gpu-01": {"gpu_model": "H100-80GB-HBM3", "gpu_count": 8}}\'') from e
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SandboxError('--spec must map a host name or index to settings, e.g. '
                           '{"gpu-01": {"gpu_count": 4}}')
    for host, settings in data.items():
        for key, value in settings.items():
            if key not in OVERRIDABLE:
                raise SandboxError(f"--spec {host}: unknown key {key!r}; "
                                   f"allowed: {', '.join(sorted(OVERRIDABLE))}")
            if not isinstance(value, OVERRIDABLE[key]) or (
                    OVERRIDABLE[key] is int and isinstance(value, bool)):
                raise SandboxError(f"--spec {host}: {key} must be {OVERRIDABLE[key].__name__}, "
                                   f"got {value!r}")
        if "gpu_model" in settings and settings["gpu_model"] not in GPU_MODELS:
            raise SandboxError(f"--spec {host}: gpu_model {settings['gpu_model']!r} is not one "
                               f"of {', '.join(GPU_MODELS)}")
        if "traits" in settings and not all(isinstance(t, str) for t in settings["traits"]):
            raise SandboxError(f"--spec {host}: traits must be a list of trait names")
        if "faults" in settings and not all(
                isinstance(f, str) and f.split()[:1] in (["fault"], ["xid"], ["sxid"])
                for f in settings["faults"]):
            raise SandboxError(f"--spec {host}: faults must be a list of gpusim commands, e.g. "
                               '["fault set row_remap_pending --gpu 1", '
                               '"xid 79 --gpu 0 --next-load"] (sandbox/nvidia/README.md)')
        if "os" in settings and settings["os"] not in OSES:
            raise SandboxError(f"--spec {host}: os {settings['os']!r} is not one of "
                               f"{', '.join(OSES)}")
        if "gpu_count" in settings and not 0 <= settings["gpu_count"] <= 16:
            raise SandboxError(f"--spec {host}: gpu_count must be 0..16")
    return data


def _default_os(i: int, hosts: int, ol: int, ubuntu: int) -> str:
    n_debian, n_ol8, n_u22 = hosts - ol - ubuntu, (ol + 1) // 2, ubuntu // 2
    if i <= n_debian:
        return "debian12"
    if i <= n_debian + n_ol8:
        return "ol8"
    if i <= n_debian + ol:
        return "ol9"
    return "ubuntu2204" if i <= n_debian + ol + n_u22 else "ubuntu2404"


def _prefix(os_name: str) -> str:
    if ubuntu_os.is_ubuntu(os_name):
        return ubuntu_os.RELEASES[os_name]["prefix"]
    return DEBIAN_PREFIX.get(os_name, os_name)


def oses(hosts: int, ol: int, ubuntu: int, overrides: dict[str, dict]) -> set[str]:
    """The OSes a fleet's hosts will run (what its bases and mirrors must provide)."""
    out = set()
    for i in range(1, hosts + 1):
        name = _default_os(i, hosts, ol, ubuntu)
        settings = {**overrides.get(f"{_prefix(name)}-{i:02d}", {}), **overrides.get(str(i), {})}
        out.add(settings.get("os", name))
    return out


def plan(hosts: int, ol: int, docker_hosts: int, overrides: dict[str, dict],
         debian_kernel: str, ubuntu: int = 0, kernels: dict[str, str] | None = None) -> list[dict]:
    """The fleet's hosts. ``debian_kernel``: Debian 12 hosts' simulated kernel; ``kernels``:
    other OSes' where they come from a mirror (Debian 13's)."""
    if not 1 <= hosts <= paths.MAX_HOSTS:
        raise SandboxError(f"--hosts must be 1..{paths.MAX_HOSTS}, got {hosts}")
    if not 0 <= ol <= hosts:
        raise SandboxError(f"--ol must be 0..{hosts} (the OL hosts are part of --hosts)")
    if not 0 <= ubuntu <= hosts - ol:
        raise SandboxError(f"--ubuntu must be 0..{hosts - ol} (the Ubuntu hosts are part of "
                           "--hosts, beside the OL hosts)")
    n_debian = hosts - ol - ubuntu
    if not 0 <= docker_hosts <= n_debian:
        raise SandboxError(f"--docker-hosts must be 0..{n_debian} (docker hosts are Debian hosts)")
    kernels = {"debian12": debian_kernel, **OL_KERNELS, **(kernels or {})}
    out = []
    for i in range(1, hosts + 1):
        os_name = _default_os(i, hosts, ol, ubuntu)
        default_name = f"{_prefix(os_name)}-{i:02d}"
        os_name = {**overrides.get(default_name, {}), **overrides.get(str(i), {})}.get(
            "os", os_name)
        prefix = _prefix(os_name)
        if ubuntu_os.is_ubuntu(os_name):
            kernel = ubuntu_os.kernel_release(os_name)
        elif os_name in kernels:
            kernel = kernels[os_name]
        else:
            raise SandboxError(f"no kernel known for {os_name} hosts: build its mirror first "
                               "(`python -m sandbox up` does)")
        model = GPU_CYCLE[(i - 1) % len(GPU_CYCLE)]
        count = (i - 1) % 8 + 1
        h = {
            "name": f"{prefix}-{i:02d}",
            "address": paths.host_address(i),
            "port": paths.SSH_PORT,
            "os": os_name,
            "kernel_release": kernel,
            "gpu_model": model,
            "gpu_count": count,
            "nvswitch": count == 8 and model != "L4",
            "docker": os_name == "debian12" and i <= docker_hosts,
        }
        h["traits"] = traits.defaults(h)
        h.update(overrides.get(default_name, {}))
        h.update(overrides.get(h["name"], {}))
        h.update(overrides.get(str(i), {}))
        h["default_name"] = default_name
        h["traits"] = sorted(set(h["traits"]))
        traits.check(h)
        if h["docker"] and os_name not in DEBIAN_PREFIX:
            raise SandboxError(f"--spec {h['name']}: docker hosts must be Debian hosts")
        out.append(h)
    known = {n for h in out for n in (h["name"], h.pop("default_name"))}
    unknown = set(overrides) - known - {str(i) for i in range(1, hosts + 1)}
    if unknown:
        raise SandboxError(f"--spec names hosts this fleet does not have: {', '.join(sorted(unknown))}")
    return out


def machine_json(h: dict) -> dict:
    """/etc/gpusim/machine.json of a host (docs/architecture.md)."""
    return {"hostname": h["name"]} | {
        k: h[k] for k in ("os", "kernel_release", "gpu_model", "gpu_count", "nvswitch", "traits")}


def fleet_json(hosts: list[dict], rundir: Path) -> dict:
    return {
        "ssh_key": str(rundir / "id_ed25519"),
        "known_hosts": str(rundir / "known_hosts"),
        "mirror": paths.MIRROR_URL,
        "hosts": [{k: h[k] for k in ("name", "address", "port", "os", "kernel_release",
                                     "gpu_model", "gpu_count", "nvswitch", "docker", "traits")}
                  for h in hosts],
    }
