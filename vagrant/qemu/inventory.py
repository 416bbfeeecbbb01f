"""pyinfra inventory for the QEMU VM started by vagrant/qemu/vm.py (run from the repo root):

    python vagrant/qemu/vm.py up
    pyinfra -y vagrant/qemu/inventory.py deploys/gpu_host.py
    pyinfra vagrant/qemu/inventory.py fact gpuhost.facts.host.GpuHostState --json

Connection settings come from $GPUHOST_VM_DIR/vm.json (default /run/gpuhost-vm). gpuhost
data comes from the sandbox's fake NVIDIA artifacts (/var/cache/gpuhost/nvidia/manifest.json,
whose URLs name the sandbox server http://127.77.0.1:8000). vm.py serves the same files on
its own server (vm.json "controller_mirror", http://127.77.0.3:PORT): downloads done on the
controller (the local repo package, signing keys) use that URL; repositories the VM's apt
reads use the reverse tunnel to it, http://127.0.0.1:18000 inside the VM. Docker is Debian's docker.io (docker_source "distro")
from the sandbox mirror. Override the driver with GPUHOST_VM_DRIVER=550.163.01, and any
gpuhost key with GPUHOST_VM_DATA='{"nvidia_default_runtime": true}' (JSON, merged last).
"""

import json
import os
from pathlib import Path

from inventories.preflight import check

_RUN_DIR = Path(os.environ.get("GPUHOST_VM_DIR", "/run/gpuhost-vm"))
_MANIFEST = Path(os.environ.get("GPUHOST_NVIDIA_MANIFEST", os.environ.get(
    "GPUHOST_NVIDIA_OUT", os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia") + "/manifest.json"))
_SANDBOX_MIRROR = "http://127.77.0.1:8000"  # what the manifest's URLs name


def _load(path: Path, what: str) -> dict:
    if not path.is_file():
        raise SystemExit(f"vagrant/qemu/inventory.py: {path} is missing ({what})")
    return json.loads(path.read_text())


_vm = _load(_RUN_DIR / "vm.json", "start the VM: python vagrant/qemu/vm.py up")
_manifest = _load(_MANIFEST, "build the fake NVIDIA artifacts: make nvidia-artifacts")
_driver = (os.environ.get("GPUHOST_VM_DRIVER") or _manifest.get("default_driver")
           or _manifest["driver_versions"][-1])
if _driver not in _manifest["local_repos"]:
    raise SystemExit(f"vagrant/qemu/inventory.py: driver {_driver} is not in {_MANIFEST} "
                     f"(have {', '.join(_manifest['local_repos'])})")
_toolkit = _manifest["toolkit"]
_CONTROLLER_MIRROR = _vm.get("controller_mirror", _SANDBOX_MIRROR)
_GUEST_MIRROR = _vm["mirror"]


def _controller(url: str) -> str:
    return url.replace(_SANDBOX_MIRROR, _CONTROLLER_MIRROR)


def _guest(url: str) -> str:
    return url.replace(_SANDBOX_MIRROR, _GUEST_MIRROR)


qemu_vm = (
    [(_vm["name"], {
        "ssh_hostname": "127.0.0.1",
        "ssh_port": _vm["port"],
        "ssh_user": "root",
        "ssh_key": _vm["ssh_key"],
        "ssh_known_hosts_file": _vm["known_hosts"],
        "ssh_strict_host_key_checking": "yes",
        "ssh_connect_retries": 3,
    })],
    {
        "nvidia_driver_version": _driver,
        "nvidia_local_repo": {
            "debian12": {"url": _controller(_manifest["local_repos"][_driver]["debian12"]["url"]),
                         "sha256": _manifest["local_repos"][_driver]["debian12"]["sha256"]},
        },
        "nvidia_artifact_cache": os.environ.get("GPUHOST_VM_CACHE", os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/vm") + "/artifacts",
        "container_toolkit_version": _toolkit["version"],
        "container_toolkit_source": "mirror",
        "container_toolkit_repo_url": {
            "apt": _guest(_toolkit["apt"]["url"]),
            "rpm": _guest(_toolkit["rpm"]["url"]),
        },
        "container_toolkit_gpgkey": {"apt": _controller(_toolkit["apt"]["gpgkey"]),
                                     "rpm": _controller(_toolkit["rpm"]["gpgkey"])},
        "docker_source": "distro",
        "reboot_policy": "when_needed",
        "offline": True,
        "offline_mirror_urls": [_CONTROLLER_MIRROR, _GUEST_MIRROR],
        "verify_image": _manifest["verify_image"]["name"],
        "verify_image_archive": _manifest["verify_image"]["archive"],
        **json.loads(os.environ.get("GPUHOST_VM_DATA") or "{}"),
    },
)

check(__file__)
