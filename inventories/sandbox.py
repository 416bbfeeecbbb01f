"""pyinfra inventory of the sandbox fleet (`make sandbox-up HOSTS=N`).

Reads fleet.json from $GPUHOST_SANDBOX_DIR (default /run/gpuhost-sandbox), written by
`python -m sandbox up`. Groups: debian_hosts, ol_hosts, docker_hosts (each a pyinfra
`(hosts, data)` tuple) and `all`, whose data is `sandbox_settings(fleet, manifest)`.

    .venv/bin/pyinfra inventories/sandbox.py fact server.LinuxDistribution --json
"""
import json
import os
import sys
from pathlib import Path

_RUN_DIR = Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))
_MANIFEST = Path("/var/cache/gpuhost/nvidia/manifest.json")


def _load_fleet() -> dict:
    try:
        fleet = json.loads((_RUN_DIR / "fleet.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        fleet = None
    if not fleet or not fleet.get("hosts"):
        # One line, no traceback: pyinfra prints the message of SystemExit and exits 1.
        sys.exit("sandbox is not running: run `make sandbox-up`")
    return fleet


def _host(fleet: dict, h: dict) -> tuple:
    return (h["name"], {
        "ssh_hostname": h["address"],
        "ssh_port": h["port"],
        "ssh_user": "root",
        "ssh_key": fleet["ssh_key"],
        "ssh_known_hosts_file": fleet["known_hosts"],
        "ssh_strict_host_key_checking": "yes",
        "ssh_allow_agent": False,
        "ssh_look_for_keys": False,
        "sandbox_os": h["os"],
        "sandbox_kernel_release": h["kernel_release"],
        "gpu_model": h["gpu_model"],
        "gpu_count": h["gpu_count"],
        "gpu_nvswitch": h.get("nvswitch", False),
    })


def sandbox_settings(fleet: dict, manifest: dict | None) -> dict:
    """gpuhost settings for the whole sandbox fleet (merged into the `all` group data).

    LEAD: fill in from docs/architecture.md "Inventory data keys", e.g.
    nvidia_driver_version / nvidia_local_repo (URLs + sha256 from `manifest`),
    container_toolkit_*, docker_source, offline=True. The sandbox provides:
      fleet["mirror"]                  http://127.77.0.1:8000
      {mirror}/debian                  Debian bookworm mirror (hosts' only apt source)
      {mirror}/debian/gpuhost-sandbox-archive.gpg  its keyring (already on every host in
                                       /etc/apt/keyrings/)
      {mirror}/nvidia/...              the fake NVIDIA artifacts (manifest URLs)
    """
    settings = {"sandbox_mirror_url": fleet["mirror"]}
    if manifest:
        settings["sandbox_nvidia_manifest"] = manifest
    return settings


def _load_manifest() -> dict | None:
    try:
        return json.loads(_MANIFEST.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


_fleet = _load_fleet()
_hosts = [_host(_fleet, h) for h in _fleet["hosts"]]
_by_name = {h["name"]: h for h in _fleet["hosts"]}

debian_hosts = ([t for t in _hosts if _by_name[t[0]]["os"] == "debian12"], {})
ol_hosts = ([t for t in _hosts if _by_name[t[0]]["os"] in ("ol8", "ol9")], {})
docker_hosts = ([t for t in _hosts if _by_name[t[0]].get("docker")], {})
all = (_hosts, sandbox_settings(_fleet, _load_manifest()))  # noqa: A001
