"""What connects a host's GPUs, and what that needs from gpuhost (pure, no pyinfra).

``nvidia_fabric`` (docs/fabric.md) names it: ``none`` (PCIe GPUs, NVLink bridges),
``nvswitch`` (HGX/DGX boards whose GPUs talk through NVSwitches: Fabric Manager and NSCQ at
the driver's exact version, NVIDIA's ``/fm`` profile "Fabric Manager and NSCQ"), ``nvl``
(GB200/GB300 NVL racks: IMEX with its peer list, and NVSDM), or ``auto`` (nvswitch where
the host shows NVSwitch bridges on its PCI bus, else none). ``nvidia_fabricmanager: true``
is the older spelling of ``nvswitch``.

Sources (docs/fabric.md has each with its date): NVIDIA's Fabric Manager user guide (a
GPU of an NVSwitch system registers with the fabric once Fabric Manager of the driver's
version configured the NVSwitches; fabric state "Completed", status "Success"); NVML
``nvmlGpuFabricInfo_t`` ("status ... Must be checked only if state returns complete");
NVIDIA/gpu-driver-container (@06a208c, 2026-08-17) ``*/install.sh``: Fabric Manager, NSCQ,
NVSDM and IMEX installed at ``${DRIVER_VERSION}`` and held, ``nvlsm`` and
``infiniband-diags`` unversioned for NVLink 5.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost import packages

CHOICES = ("auto", "none", "nvswitch", "nvl")
FM_SERVICE = "nvidia-fabricmanager"
IMEX_SERVICE = "nvidia-imex"
IMEX_NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"
# gpuhost's ordering of Fabric Manager: started before whatever runs CUDA work (containers,
# DCGM, kubelet, Slurm). NVIDIA's unit orders itself after nothing of those; a drop-in keeps
# the vendor's file untouched.
FM_DROP_IN = "/etc/systemd/system/nvidia-fabricmanager.service.d/gpuhost-order.conf"
FM_BEFORE = ("docker.service", "containerd.service", "nvidia-dcgm.service", "dcgm.service",
             "kubelet.service", "slurmd.service", "gpuhost-mig-layout.service",
             "gpuhost-cdi-spec.service")
# How long verify waits for every GPU's fabric state to reach Completed (the guide: Fabric
# Manager trains the NVLinks and registers every GPU; real HGX H100 hosts took 27-30 s from
# "Starting" to "Started" in a public 590.48.01 capture).
FABRIC_WAIT_S = 180


# NVLink 5 HGX (B200/B300): the NVLink Subnet Manager, started by Fabric Manager's own start
# script, and the InfiniBand tools NVIDIA installs with it; neither is versioned with the
# driver (gpu-driver-container@06a208c */install.sh nvlink5_pkgs_install: "nvlsm
# infiniband-diags" without a version; ubuntu26.04/install.sh: "versioned independently of
# the driver"), so neither is pinned, held or moved by the rolling upgrade.
NVLINK5_PACKAGES = ("nvlsm", "infiniband-diags")


def nvlink5_switches(state: Mapping[str, Any]) -> list[str]:
    """The PCI slots of the host's NVLink 5 switch management functions: a VPD saying
    ``SW_MNG`` (how NVIDIA's driver container tells an NVLink 5 system: gpu-driver-container
    @06a208c ``_assert_nvlink5_system`` greps /sys/class/infiniband/*/device/vpd), read by
    the ``rdma`` section (``state["rdma"]["switches"]``)."""
    return sorted((state.get("rdma") or {}).get("switches") or {})


def switch_count(state: Mapping[str, Any]) -> int:
    """NVSwitches of every generation the host shows: NVIDIA 0x0680 bridges (NVLink 4 and
    older) plus NVLink 5 switch management functions."""
    return ((state.get("health") or {}).get("nvswitch_count") or 0) + len(nvlink5_switches(state))


def resolve(setting: str, fabricmanager: bool, nvswitch_count: int | None) -> str:
    """The host's fabric: ``none``, ``nvswitch`` or ``nvl`` (``auto`` decided by the
    NVSwitches the host shows, ``switch_count``; ``nvidia_fabricmanager: true`` means
    nvswitch)."""
    if fabricmanager and setting in ("auto", "nvswitch"):
        return "nvswitch"
    if setting != "auto":
        return setting
    return "nvswitch" if (nvswitch_count or 0) > 0 else "none"


def settings_problems(setting: str, fabricmanager: bool, peers: tuple | list) -> list[str]:
    """Misfits known before any host is read (gpuhost.settings' cross checks)."""
    problems = []
    if fabricmanager and setting in ("none", "nvl"):
        problems.append(f"nvidia_fabricmanager: true (Fabric Manager, i.e. nvidia_fabric: "
                        f"nvswitch) contradicts nvidia_fabric: {setting}; drop "
                        "nvidia_fabricmanager (it is the older spelling of nvidia_fabric: "
                        "nvswitch) or set nvidia_fabric to nvswitch")
    if setting == "nvl" and not peers:
        problems.append("nvidia_fabric: nvl needs nvidia_imex_peers (the IP address of every "
                        "node of the NVLink domain, this one included): IMEX without its "
                        "peers cannot import memory from another node")
    if peers and setting != "nvl":
        problems.append(f"nvidia_imex_peers: set, but nvidia_fabric is {setting} (IMEX runs "
                        "on NVL hosts only: set nvidia_fabric: nvl or drop the peers)")
    return problems


def host_problem(setting: str, fabricmanager: bool, nvswitch_count: int | None,
                 gpus: list) -> str | None:
    """A fabric asked for that this host cannot have (refused before anything changes)."""
    if (setting == "nvswitch" or fabricmanager) and not nvswitch_count:
        models = sorted({g.get("model") or g.get("name") or "?" for g in gpus}) or ["no GPU"]
        return (f"nvidia_fabric: nvswitch (or nvidia_fabricmanager: true), but the host shows "
                f"no NVSwitch on its PCI bus (GPUs: {', '.join(models)}) (no NVIDIA 0x0680 "
                "bridge, no NVLink 5 switch function with SW_MNG in its VPD): Fabric Manager "
                "fails there (NV_WARN_NOTHING_TO_DO) and its unit stays failed; set "
                "nvidia_fabric: auto or none for this host")
    if setting == "nvl" and nvswitch_count:
        # GB200/GB300 NVL compute trays reach NVLink switch trays outside the host (managed
        # by NVIDIA's NMX); an HGX board's own NVSwitches need this host's Fabric Manager,
        # without which every GPU's fabric state stays In Progress (FM user guide)
        return (f"nvidia_fabric: nvl, but the host shows {nvswitch_count} NVSwitch(es) on its "
                "own PCI bus (an HGX board): its GPUs need Fabric Manager on this host, which "
                "nvl does not install, so their fabric would stay In Progress; set "
                "nvidia_fabric: nvswitch or auto for this host (nvl is for GB200/GB300 NVL "
                "compute trays, whose NVLink switches are in other trays)")
    return None


def fabric_packages(distro_tag: str, version: str, fabric: str,
                    nvlink5: bool = False) -> list[str]:
    """The companions of ``fabric`` besides the driver, named as the branch names them
    (Fabric Manager itself comes from ``packages.driver_packages``); on an NVLink 5 board
    (``nvlink5``) also NVLSM and infiniband-diags, unversioned."""
    br = int(packages.branch(version))
    unbranched = br >= packages.COMPANIONS_UNVERSIONED_FROM

    def name(base: str) -> str:
        # the branch in the name before 580, on apt and dnf (gpu-driver-container
        # rhel9/precompiled/Dockerfile: libnvidia-nscq-${DRIVER_BRANCH}, nvidia-imex-..., libnvsdm-...)
        return base if unbranched else f"{base}-{br}"

    if fabric == "nvswitch":
        return [name("libnvidia-nscq"), *(NVLINK5_PACKAGES if nvlink5 else ())]
    if fabric == "nvl":
        return [name("nvidia-imex"), name("libnvsdm")]
    return []


def fm_drop_in() -> str:
    return ("# Managed by gpuhost (nvidia_fabric: nvswitch): Fabric Manager must have set up\n"
            "# the NVSwitch fabric before anything runs CUDA work on this host.\n"
            "[Unit]\n"
            f"Before={' '.join(FM_BEFORE)}\n")


def imex_nodes_config(peers: tuple | list) -> str:
    """/etc/nvidia-imex/nodes_config.cfg: one IP address per line (NVIDIA's IMEX guide)."""
    return "".join(f"{peer}\n" for peer in peers)


# --- reading a host's state -------------------------------------------------------------------

def fabric_states(state: Mapping[str, Any]) -> dict[str, str]:
    """GPU bus id -> fabric state as nvidia-smi prints it, for GPUs that have one."""
    found = {}
    for gpu in state.get("gpus") or []:
        value = (gpu.get("health") or {}).get("fabric_state")
        if value and value.strip().lower() != "n/a":
            found[gpu.get("pci_bus_id") or f"GPU {gpu.get('index')}"] = value
    return found


def failed_status(health: Mapping[str, Any]) -> str | None:
    """The fabric status of a GPU whose state is Completed and whose status is printed and
    is not Success (NVML nvmlGpuFabricInfo_t: the status "Must be checked only if Probe state
    returns complete"), else None."""
    state, status = health.get("fabric_state"), health.get("fabric_status")
    if (state or "").strip() != "Completed" or not status:
        return None
    return None if status.strip().lower() in ("success", "n/a") else status.strip()


def incomplete(state: Mapping[str, Any]) -> dict[str, str]:
    """The GPUs whose fabric state is printed and is not Completed, or is Completed with a
    failed status (``"Completed (status Insufficient Resources)"``)."""
    found = {bus: value for bus, value in fabric_states(state).items() if value != "Completed"}
    for gpu in state.get("gpus") or []:
        status = failed_status(gpu.get("health") or {})
        if status:
            found[gpu.get("pci_bus_id") or f"GPU {gpu.get('index')}"] = \
                f"Completed (status {status})"
    return found


def companion_versions(state: Mapping[str, Any]) -> dict[str, str]:
    """Installed companion package -> its upstream version (``580.95.05``)."""
    return dict((state.get("driver") or {}).get("companion_versions") or {})


def drift(state: Mapping[str, Any], fabric: str) -> list[tuple[str, str, str, str]]:
    """(item, have, want, message) of the fabric stack against the driver: each companion
    at the driver's version (Fabric Manager refuses another one; NVIDIA's driver container
    holds all of them at ``${DRIVER_VERSION}``), and with nvswitch Fabric Manager installed,
    enabled and running."""
    driver = state.get("driver") or {}
    want = driver.get("installed_version")
    items = []
    for name, have in sorted(companion_versions(state).items()):
        if want and have != want:
            items.append(("fabric_package", f"{name} {have}", f"{name} {want}",
                          f"{name} is at {have}, the driver at {want}: they must be the same "
                          "version (Fabric Manager refuses another driver); run the deploy"))
    if fabric != "nvswitch" or not want:
        return items
    if not any("fabric" in name for name in companion_versions(state)):
        items.append(("fabric_manager", "not installed", "installed",
                      "Fabric Manager is not installed on a host with NVSwitches "
                      "(nvidia_fabric: nvswitch): its GPUs cannot run CUDA work; run the deploy"))
        return items
    service = ((state.get("fabric") or {}).get("services") or {}).get(FM_SERVICE) or {}
    enabled, active = service.get("enabled"), service.get("active")
    items += nvlsm_drift(state, active == "active")
    if enabled != "enabled" or active != "active":
        items.append(("fabric_manager_service", f"{enabled or 'unknown'}/{active or 'unknown'}",
                      "enabled/active",
                      f"{FM_SERVICE}.service is {enabled or 'unknown'} and "
                      f"{active or 'unknown'}: the fabric is not set up after a reboot; run "
                      "the deploy, or systemctl status nvidia-fabricmanager for its errors"))
    return items


def nvlsm_drift(state: Mapping[str, Any], fm_active: bool) -> list[tuple[str, str, str, str]]:
    """On an NVLink 5 board: NVLSM installed, and running while Fabric Manager runs (its
    start script starts NVLSM first; FM user guide, "What is NVLink Subnet Manager?")."""
    if not nvlink5_switches(state):
        return []
    nvlsm = (state.get("fabric") or {}).get("nvlsm") or {}
    if not nvlsm.get("version"):
        return [("nvlsm", "not installed", "installed",
                 "the NVLink Subnet Manager (package nvlsm) is not installed on an NVLink 5 "
                 "board (switches with SW_MNG: " + ", ".join(nvlink5_switches(state)) + "): "
                 "the fabric stays In Progress without it; run the deploy")]
    if fm_active and nvlsm.get("running") is False:
        return [("nvlsm_running", "stopped", "running",
                 "Fabric Manager runs but the NVLink Subnet Manager does not: Fabric Manager "
                 "starts it only when it starts itself; run the deploy (it restarts Fabric "
                 "Manager), or systemctl restart nvidia-fabricmanager")]
    return []


def wait_script(wait_s: int = FABRIC_WAIT_S) -> str:
    """A POSIX shell command that waits up to ``wait_s`` seconds for every GPU's fabric state
    (``nvidia-smi -q``, section Fabric) to be Completed and its status Success (NVML: the
    status is checked once the state is Completed); otherwise it prints them and
    Fabric Manager's own log lines of this boot on stderr and exits 1."""
    wait = int(wait_s)
    states = ("timeout 20 nvidia-smi -q 2>/dev/null | awk '/^ *Fabric *$/{f=1;next} "
              "f&&/^ *State /{sub(/^[^:]*: */,\"\");print \"state \" $0;next} "
              "f&&/^ *Status /{sub(/^[^:]*: */,\"\");print \"status \" $0;f=0}'")
    return (f"end=$(( $(date +%s) + {wait} )); while :; do s=$({states}); "
            "bad=$(printf '%s\\n' \"$s\" | grep -cvxE "
            "'state (Completed|N/A)|status (Success|N/A)|'); "
            "if [ -n \"$s\" ] && [ \"$bad\" -eq 0 ]; then exit 0; fi; "
            "[ \"$(date +%s)\" -ge \"$end\" ] && break; sleep 3; done; "
            f"echo \"gpuhost: the NVLink fabric is not ready after {wait} s: $bad fabric "
            "state/status line(s) not Completed/Success (seen: $(printf '%s' \"$s\" | tr '\\n' "
            "',')); Fabric Manager must run at the driver's version (systemctl status "
            "nvidia-fabricmanager). Its log:\" >&2; "
            "{ journalctl -u nvidia-fabricmanager -b --no-pager -o cat -n 20 2>/dev/null "
            "|| systemctl status nvidia-fabricmanager --no-pager -n 20; } | sed 's/^/  /' >&2; "
            "exit 1")
