"""pyinfra inventory of the sandbox fleet (`make sandbox-up HOSTS=N`).

Reads fleet.json from $GPUHOST_SANDBOX_DIR (default /run/gpuhost-sandbox), written by
`python -m sandbox up`. Groups: debian_hosts, ol_hosts, el_hosts (every Enterprise Linux host), ubuntu_hosts, docker_hosts (each a pyinfra
`(hosts, data)` tuple) and `all`, whose data is `sandbox_settings(fleet, manifest)`.

    .venv/bin/pyinfra inventories/sandbox.py fact server.LinuxDistribution --json
"""
import json
import os
import sys
from pathlib import Path

_RUN_DIR = Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))
# the fake NVIDIA artifacts (sandbox/nvidia/pkg/common.py: GPUHOST_NVIDIA_OUT, for a
# private fleet beside the default one)
_CACHE = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost"))
_MANIFEST = Path(os.environ.get("GPUHOST_NVIDIA_OUT", _CACHE / "nvidia")) / "manifest.json"
# Enterprise Linux hosts of the sandbox (sandbox/spec.py OL_KERNELS): Oracle, Rocky, RHEL
_EL_PREFIXES = ("ol", "rocky", "rhel", "alma")
_DEFAULT_MIRROR = "http://127.77.0.1:8000"


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
        **_signing_key(h),
    })


def _signing_key(h: dict) -> dict:
    """Hosts with the secure-boot-enrolled trait: the sandbox's test MOK, which that trait
    enrolled (sandbox/traits/boot.py)."""
    if "secure-boot-enrolled" not in h.get("traits", []):
        return {}
    mok = Path(os.environ.get("GPUHOST_SANDBOX_STATE", "/var/lib/gpuhost-sandbox")) / "secure-boot"
    return {"nvidia_module_signing_key": str(mok / "gpuhost-sandbox-mok.key"),
            "nvidia_module_signing_cert": str(mok / "gpuhost-sandbox-mok.der")}


def sandbox_settings(fleet: dict, manifest: dict | None) -> dict:
    """gpuhost settings for the whole sandbox fleet (merged into the `all` group data).

    Everything comes from the sandbox's own mirror (offline): the fake NVIDIA local repos
    and toolkit repo from the manifest (NVIDIA's network repository where a distribution
    has no local repo package), Docker from Debian (docker.io). The driver version
    is the manifest's default_driver (the newest fake one in a manifest without it) unless
    GPUHOST_SANDBOX_DRIVER names another (e.g. 550.163.01 for the upgrade tests).
    """
    mirror = fleet["mirror"]
    settings = {"sandbox_mirror_url": mirror}
    if not manifest:
        # the fake NVIDIA packages are built by `make nvidia-artifacts` (and by `make
        # sandbox-up`); without them there is no driver to install: say so, not "missing"
        sys.exit(f"sandbox: no fake NVIDIA packages in {_MANIFEST.parent}: "
                 "run `make nvidia-artifacts` (or `make sandbox-up`)")
    version = (os.environ.get("GPUHOST_SANDBOX_DRIVER") or manifest.get("default_driver")
               or manifest["driver_versions"][-1])
    repos = manifest["local_repos"].get(version)
    if repos is None:
        sys.exit(f"sandbox: no fake driver {version}; built: {', '.join(manifest['driver_versions'])}")
    # only the distributions this gpuhost knows: the sandbox may serve packages for one it
    # does not support yet (its tag would be refused as inventory data)
    from gpuhost.distro import DISTRO_TAGS
    repos = {tag: r for tag, r in repos.items() if tag in DISTRO_TAGS}
    toolkit = manifest["toolkit"]
    # container_toolkit_version is not set: the hosts take gpuhost's default, which the fake
    # repositories serve (manifest "toolkit" "version"; sandbox/tests/test_fake_packages.py)
    settings.update(
        nvidia_driver_version=version,
        nvidia_local_repo={tag: {"url": r["url"], "sha256": r["sha256"]} for tag, r in repos.items()},
        nvidia_driver_repo=_network_repos(manifest, repos),
        nvidia_artifact_cache=str(_CACHE / "controller"),
        container_toolkit_source="mirror",
        container_toolkit_repo_url={"apt": toolkit["apt"]["url"], "rpm": toolkit["rpm"]["url"]},
        container_toolkit_gpgkey={"apt": toolkit["apt"]["gpgkey"], "rpm": toolkit["rpm"]["gpgkey"]},
        docker_source="distro",
        reboot_policy="when_needed",
        offline=True,
        offline_mirror_urls=[mirror],
    )
    image = manifest.get("verify_image")
    if image:
        settings.update(verify_image=image["name"], verify_image_archive=image["archive"])
    return settings


def _network_repos(manifest: dict, local_repos: dict) -> dict:
    """NVIDIA's network repository (the sandbox's copy, sandbox/nvidia/pkg/netrepo.py) for each
    distribution gpuhost knows that has no local repo package (Ubuntu 26.04): gpuhost's
    nvidia_driver_source "auto" takes it there and the local repo package elsewhere."""
    from gpuhost.distro import DISTRO_TAGS
    return {tag: {"url": r["url"], "key": r["gpgkey"], "fingerprint": r["fingerprint"]}
            for tag, r in manifest.get("network_repos", {}).items()
            if tag in DISTRO_TAGS and tag not in local_repos and r.get("fingerprint")
            and r.get("gpgkey")}


def _ol_settings(manifest: dict | None, os_name: str) -> dict:
    """Enterprise Linux hosts take Docker from the sandbox's stand-in of Docker's RHEL repo."""
    repo = (manifest or {}).get("ol_repos", {}).get(os_name)
    if not repo:
        return {}
    return {"docker_source": "docker", "docker_repo_url": {"rhel": repo["url"]},
            "docker_repo_gpgkey": {"rhel": repo["gpgkey"]}}


def _docker_ce_settings(manifest: dict | None, copy: str = "debian") -> dict:
    """Docker CE 26 ("debian") or 28.5 with containerd.io 2.1 ("debian-28") from the
    sandbox's stand-in of Docker's Debian repository (download.docker.com/linux/debian;
    sandbox/nvidia/pkg/dockerce.py): host data for a Debian host that should run Docker's
    packages instead of Debian's docker.io 20.10."""
    repo = (manifest or {}).get("docker_repos", {}).get(copy)
    if not repo:
        return {}
    return {"docker_source": "docker", "docker_repo_url": {"debian": repo["url"]},
            "docker_repo_gpgkey": {"debian": repo["gpgkey"]}}


def _load_manifest(mirror: str) -> dict | None:
    try:
        manifest = json.loads(_MANIFEST.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return _moved(manifest, mirror)


def _moved(value, mirror: str):
    """The manifest's URLs name the default fleet's server; a private fleet (another
    GPUHOST_SANDBOX_HTTP_PORT) serves the same files on its own."""
    if isinstance(value, str):
        return value.replace(_DEFAULT_MIRROR + "/", mirror + "/")
    if isinstance(value, dict):
        return {k: _moved(v, mirror) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, mirror) for v in value]
    return value


_fleet = _load_fleet()
_manifest = _load_manifest(_fleet["mirror"])
# Oracle Linux hosts take Docker from the sandbox's RHEL-style repo: host data, which
# outranks every group's data.
_hosts = [
    (name, {**data, **_ol_settings(_manifest, data["sandbox_os"])})
    if data["sandbox_os"].startswith(_EL_PREFIXES) else (name, data)
    for name, data in (_host(_fleet, h) for h in _fleet["hosts"])
]
# OL8 hosts with the container-tools trait (podman, buildah, runc): Docker replaces them,
# as Docker's RHEL guide does (without it gpuhost stops such a host; see docs/settings.md).
_hosts = [(name, {**data, "docker_replace_podman": True})
          if "container-tools" in h.get("traits", []) else (name, data)
          for (name, data), h in zip(_hosts, _fleet["hosts"], strict=True)]
_by_name = {h["name"]: h for h in _fleet["hosts"]}
# Host data that puts a Debian host on docker-ce 26 (Docker's repository): for an
# inventory that wraps this one and adds it to a host's data (tests/integration/test_cdi.py
# does); empty when the fake artifacts predate the Docker CE repository.
docker_ce_debian = _docker_ce_settings(_manifest)
# The same for Docker CE 28.5 and containerd.io 2.1 (tests/integration/test_engines.py)
docker_ce_28_debian = _docker_ce_settings(_manifest, "debian-28")

debian_hosts = ([t for t in _hosts if _by_name[t[0]]["os"] in ("debian12", "debian13")], {})
ol_hosts = ([t for t in _hosts if _by_name[t[0]]["os"] in ("ol8", "ol9", "ol10")], {})
el_hosts = ([t for t in _hosts if _by_name[t[0]]["os"].startswith(_EL_PREFIXES)], {})
ubuntu_hosts = ([t for t in _hosts
                 if _by_name[t[0]]["os"] in ("ubuntu2204", "ubuntu2404", "ubuntu2604")], {})
docker_hosts = ([t for t in _hosts if _by_name[t[0]].get("docker")], {})
# gpuhost's settings for the whole fleet. Not in the `all` group: group_data/all.py holds
# gpuhost's documented defaults, and pyinfra lets it override an inventory's `all` data.
sandbox_fleet = (_hosts, sandbox_settings(_fleet, _manifest))
