"""Assemble gpuhost's fact values from the sections of ``facts.script`` (pure, no pyinfra).

Each ``*_state`` function takes the dict returned by ``facts.parsers.split_sections``
(name -> {"rc": int, "out": str}, read through ``facts.sections``) and returns plain data.
A section that is missing or whose tool is absent is a normal state (nothing installed),
never an error. Output that a tool printed successfully but that cannot be parsed raises
``ValueError``; the fact classes turn that into pyinfra's ``FactProcessError`` so only that
host fails.
"""

from __future__ import annotations

import json
import re
from typing import Any

from facts import assemble_fabric, assemble_rdma, assemble_slurm, boot_parsers, parsers
from facts.assemble_recover import recovered_state
from facts.dkms_names import is_nvidia_module
from facts.sections import (
    NOT_INSTALLED,
    TIMED_OUT,
    Sections,
    installed_specs,
    is_installed,
    ok,
    packages,
    section,
    upstream_version,
)
from gpuhost import distro, policy
from gpuhost.packages import EL_CONTAINER_TOOLS

TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)

# Packages that carry the driver itself (not the local repo, not the container toolkit).
_DRIVER_PACKAGE = re.compile(
    # (the branch in apt names before 590, none from 590: nvidia-dkms-open, nvidia-utils)
    r"^(cuda-drivers(-\d+)?|nvidia-open(-\d+)?|nvidia-driver(-\d+)?(-open)?"
    r"|nvidia-dkms(-\d+)?(-open)?|nvidia-utils(-\d+)?|nvidia-kernel-common(-\d+)?"
    r"|nvidia-persistenced|nvidia-driver-cuda|kmod-nvidia-[a-z-]+"
    r"|nvidia-kmod-common|nvidia-fabricmanager-\d+|nvidia-fabric-manager"
    # Debian's names, which NVIDIA's Debian repository uses (gpuhost/packages.py)
    r"|nvidia-(open-)?kernel(-open)?-(dkms|support)|nvidia-driver-libs|libcuda1|nvidia-smi"
    r"|firmware-nvidia-gsp)$"
)
_COMPANION = re.compile(r"^(nvidia-fabricmanager|nvidia-fabric-manager|libnvidia-nscq|nvidia-imex"
                        r"|libnvsdm)(-\d{3})?$")
_LOCAL_REPO = re.compile(r"^nvidia-driver-local-repo-(?P<distro>[a-z]+\d+)-(?P<version>[\d.]+)$")


def os_state(sections: Sections) -> dict[str, Any]:
    """``{"id", "version_id", "pretty_name", "family", "distro_tag", "supported", "error"}``."""
    text = ok(sections, "os_release") or ""
    release = parsers.parse_os_release(text) if text.strip() else {}
    kernel_out = (ok(sections, "kernel") or "").split()
    result: dict[str, Any] = {
        "id": release.get("ID", ""),
        "version_id": release.get("VERSION_ID", ""),
        "pretty_name": release.get("PRETTY_NAME", ""),
        "kernel_release": kernel_out[0] if kernel_out else "",
        "arch": kernel_out[1] if len(kernel_out) > 1 else "",
        "family": None,
        "distro_tag": None,
        "supported": False,
        "error": None,
    }
    try:
        info = distro.identify(release)
    except ValueError as error:
        result["error"] = str(error)
    else:
        result.update(family=info["family"], distro_tag=info["distro_tag"], supported=True)
    return result


def kernel_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.kernel.KernelHeaders``."""
    os_info = os_state(sections)
    release = os_info["kernel_release"]
    specs = installed_specs(sections)
    wanted: list[str] = []
    toolset = None
    flavour = None
    problem = None
    try:
        if release:
            flavour = distro.kernel_flavour(release, os_info["family"])
        if os_info["distro_tag"] and release:
            wanted = distro.headers_packages(os_info["distro_tag"], release, flavour)
            toolset = distro.needs_gcc_toolset(os_info["distro_tag"], release)
    except ValueError as error:  # e.g. a non-EL kernel on an EL host: a state, not a crash
        problem = str(error)
    build_rc, build_out = section(sections, "headers_build")
    nouveau_out = ok(sections, "nouveau") or ""
    dkms_out = ok(sections, "dkms")
    sb_out = ok(sections, "secure_boot")
    secure_boot = None
    if sb_out is not None:
        lowered = sb_out.lower()
        secure_boot = "enabled" if "enabled" in lowered else "disabled" if "disabled" in lowered else None
    dkms = parsers.parse_dkms_status(dkms_out) if dkms_out else []
    boot = boot_parsers.parse_boot_loader(ok(sections, "boot_loader") or "")
    next_release = boot["default_kernel"] or release
    next_headers: list[str] = []
    try:
        if os_info["distro_tag"] and next_release:
            next_headers = distro.headers_packages(
                os_info["distro_tag"], next_release,
                distro.kernel_flavour(next_release, os_info["family"]))
    except ValueError:
        next_headers = []
    mok_rc, mok_out = section(sections, "mok")
    next_boot = {
        "kernel_release": next_release,
        "source": boot["source"],            # grubby | grub | None (unknown: the running one)
        "differs": bool(next_release) and next_release != release,
        "headers_packages": next_headers,
        "headers_packages_missing": [n for n in next_headers if not is_installed(n, specs)],
        "headers_installed": boot["modules"].get(next_release, build_rc == 0)
        if next_release != release else build_rc == 0,
        "nvidia_module": sorted({e["version"] for e in dkms if is_nvidia_module(e["module"])
                                 and e["kernel"] == next_release and e["status"] == "installed"}),
    }
    return {
        "kernel_release": release,
        "flavour": flavour,
        "distro_tag": os_info["distro_tag"],
        "headers_packages": wanted,
        "headers_packages_missing": [name for name in wanted if not is_installed(name, specs)],
        "headers_installed": build_rc == 0,
        "build_dir": build_out.strip() if build_rc == 0 else None,
        "gcc_toolset": toolset,
        "gcc_toolset_installed": bool(toolset) and toolset in specs,
        "nouveau": {
            "loaded": "loaded" in nouveau_out.splitlines(),
            "blacklisted": any(
                line.startswith(("modprobe:", "cmdline:")) for line in nouveau_out.splitlines()
            ),
        },
        "dkms": dkms,
        "dkms_installed": section(sections, "dkms")[0] not in (None, NOT_INSTALLED),
        "secure_boot": secure_boot,
        "mok_enrolled": boot_parsers.parse_mok_fingerprints(mok_out)
        if mok_rc not in (None, NOT_INSTALLED) else None,
        "next_boot": next_boot,
        "dkms_logs": boot_parsers.parse_dkms_logs(ok(sections, "dkms_log") or ""),
        "problem": problem,
    }


def _smi_xml(sections: Sections) -> tuple[dict[str, Any] | None, str | None]:
    """Parsed ``nvidia-smi -q -x`` and the classified error, if nvidia-smi ran at all.

    The driver, GPU, MIG and health states all read it: the parse is kept in the section's
    entry (with the text it came from) so a host's XML is parsed once per state. Read only.
    """
    rc, out = section(sections, "smi_xml")
    if rc in (None, NOT_INSTALLED):
        return None, None
    if rc == TIMED_OUT:
        return None, "timed_out"
    if rc != 0:
        return None, parsers.classify_smi_error(out) or "failed"
    entry = sections["smi_xml"]
    cached = entry.get("parsed")
    if cached is None or cached[0] is not out:
        cached = entry["parsed"] = (out, parsers.parse_smi_xml(out))
    return cached[1], None


def driver_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.nvidia.NvidiaDriver``."""
    installed = packages(sections)
    driver_packages = {
        name: info["version"] for name, info in installed.items() if _DRIVER_PACKAGE.match(name)
    }
    held = sorted(name for name in driver_packages if installed[name].get("held"))
    versions = sorted({upstream_version(v) for v in driver_packages.values()})
    installed_version = versions[-1] if versions else None
    installed_flavor = None
    if driver_packages:
        installed_flavor = (
            "open" if any("open" in name for name in driver_packages) else "proprietary"
        )
    local_repos = []
    for name in installed:
        match = _LOCAL_REPO.match(name)
        if match:
            local_repos.append({"package": name, **match.groupdict()})
    proc_out = ok(sections, "proc_version")
    loaded = parsers.parse_driver_version_file(proc_out) if proc_out else None
    smi, smi_error = _smi_xml(sections)
    userspace = smi["driver_version"] if smi else None
    if not installed_version and not loaded and smi_error is None and smi is None:
        state = "not_installed"
    elif smi_error == "library_mismatch" or (
        loaded and installed_version and loaded["version"] != installed_version
    ):
        state = "library_mismatch"
    elif loaded:
        state = "loaded"
    else:
        state = "installed_not_loaded"
    loaded_version = loaded["version"] if loaded else None
    return {
        "state": state,
        "loaded": loaded,
        "loaded_version": loaded_version,
        "installed_version": installed_version,
        "installed_versions": versions,
        "installed_flavor": installed_flavor,
        "userspace_version": userspace,
        "packages": driver_packages,
        "held_packages": held,
        # the branch's companions (Fabric Manager, NSCQ, IMEX, NVSDM): moved by an upgrade
        "companions": sorted(name for name in installed if _COMPANION.match(name)),
        # ... and their versions: each must be the driver's (issue 25)
        "companion_versions": {name: upstream_version(info["version"])
                               for name, info in sorted(installed.items())
                               if _COMPANION.match(name)},
        "local_repos": sorted(local_repos, key=lambda repo: repo["package"]),
        "cuda_version": smi["cuda_version"] if smi else None,
        "newest_cuda": policy.newest_cuda(loaded_version) if loaded_version else None,
        "smi_error": smi_error,
        "reboot_required": state in ("installed_not_loaded", "library_mismatch"),
    }


def _slot(slot: str | None) -> str | None:
    """'00000000:07:00.0' (nvidia-smi), '0000:07:00.0' (sysfs), '07:00.0' (lspci without
    a domain) -> '0000:07:00.0'."""
    if not slot:
        return None
    text = str(slot).strip().lower()
    if text.count(":") == 1:
        text = "0000:" + text
    return text[-12:]


def _pci_gpus(sections: Sections) -> tuple[list[dict[str, Any]], str]:
    """NVIDIA GPU functions (3D controller / VGA class; NVSwitch bridges and audio functions
    are not GPUs) with their PCI ids: from /sys/bus/pci/devices when the host has it (the
    kernel's ids, no pciutils needed), else from lspci; lspci's names are added when present.
    Returns (devices, source)."""
    lspci = ok(sections, "lspci")
    listed = parsers.parse_lspci_nvidia(lspci) if lspci else []
    names = {_slot(d["slot"]): d.get("device_name") for d in listed}
    rc, sysfs = section(sections, "pci_sysfs")
    if rc == 0:
        devices = [
            {**d, "device_name": names.get(_slot(d["slot"]))}
            for d in parsers.parse_pci_sysfs(sysfs)
            if (d.get("class") or "").startswith(("0302", "0300"))
        ]
        return devices, "sysfs"
    devices = [d for d in listed if d.get("class", "").startswith(("3D controller", "VGA"))]
    return devices, "lspci"


def _classified(device_id: str | None) -> dict[str, Any]:
    info = policy.classify_pci(device_id)
    return {"pci_device_id": info["device_id"], "generation": info["generation"],
            "legacy_branch": info["legacy_branch"], "classified_by": info["known_by"]}


def _nvlink_counts(links: dict[int, dict[str, Any]]) -> dict[str, int]:
    """Replay, recovery and CRC error counts summed over a GPU's links (the counter names of
    every NVLink generation: "Replay Errors", "Recovery Errors", "CRC Errors", "CRC FLIT/Data
    Errors", NVLink 5's "Link recovery failed events")."""
    totals = {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}
    for counters in links.values():
        for name, value in counters.items():
            low = name.lower()
            if not isinstance(value, int):
                continue
            if "replay" in low:
                totals["replay_errors"] += value
            elif "recovery" in low and ("error" in low or "failed" in low):
                totals["recovery_errors"] += value
            elif "crc" in low:
                totals["crc_errors"] += value
    return totals


def nvlink_state(sections: Sections) -> dict[str, dict[str, Any]]:
    """Each GPU's NVLink summary by UUID (else ``#INDEX``) from ``nvidia-smi nvlink -s/-e``:
    ``links_total``, ``links_active``, ``links_inactive`` (link numbers), ``all_inactive``
    (NVML's "all links are inActive"), and the error counts (None when -e did not run).
    GPUs that print no link and no note (no NVLink) are left out."""
    status = ok(sections, "nvlink_status")
    if status is None:
        return {}
    errors_out = ok(sections, "nvlink_errors")
    try:
        gpus = parsers.parse_nvlink_status(status)
        errors = parsers.parse_nvlink_errors(errors_out) if errors_out is not None else []
    except ValueError:
        return {}
    by_key = {(e["uuid"] or f"#{e['index']}"): e["links"] for e in errors}
    result = {}
    for gpu in gpus:
        if not gpu["links"] and gpu["note"] != "all_inactive":
            continue
        key = gpu["uuid"] or f"#{gpu['index']}"
        links = gpu["links"]
        counts = _nvlink_counts(by_key[key]) if key in by_key else {
            "replay_errors": None, "recovery_errors": None, "crc_errors": None}
        result[key] = {
            "links_total": len(links),
            "links_active": sum(1 for link in links if link["state"] == "active"),
            "links_inactive": [link["link"] for link in links if link["state"] == "inactive"],
            "all_inactive": gpu["note"] == "all_inactive" or bool(links) and all(
                link["state"] == "inactive" for link in links),
            **counts,
        }
    return result


def _with_nvlink(health: dict[str, Any] | None, nvlink: dict[str, dict[str, Any]],
                 gpu: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU's health dict with its ``nvlink`` summary (None: no NVLink seen)."""
    if health is None:
        return None
    found = nvlink.get(gpu.get("uuid") or "") or nvlink.get(f"#{gpu['index']}")
    return {**health, "nvlink": found}


def gpus_state(sections: Sections) -> list[dict[str, Any]]:
    """See ``facts.nvidia.NvidiaGpus``."""
    smi, _error = _smi_xml(sections)
    result = []
    pci, pci_source = _pci_gpus(sections)
    ids_by_slot = {_slot(d["slot"]): d["device_id"] for d in pci}
    if smi and smi["gpus"]:
        nvlink = nvlink_state(sections)
        for gpu in smi["gpus"]:
            model = policy.lookup_model(name=gpu["name"])
            capability = gpu.get("compute_capability") or (model or {}).get("compute_capability")
            mig_capable = gpu.get("mig_capable")
            if mig_capable is None and model is not None:
                mig_capable = model.get("mig") is not None
            device_id = ids_by_slot.get(_slot(gpu["pci_bus_id"]))
            classified = _classified(device_id)
            architecture = gpu.get("architecture") or (model or {}).get("architecture")
            if architecture and architecture.strip().lower() in policy.ARCHITECTURES + (
                    "ada lovelace",):
                classified["generation"] = ("turing-or-newer" if policy.open_module_supported(
                    architecture) else "pre-turing")
            result.append(
                {
                    "index": gpu["index"],
                    "name": gpu["name"],
                    "model": model["key"] if model else None,
                    "architecture": architecture,
                    "uuid": gpu["uuid"],
                    "pci_bus_id": gpu["pci_bus_id"],
                    "memory_total_mib": gpu["memory_total_mib"],
                    "persistence_mode": gpu["persistence_mode"],
                    "mig_current": gpu["mig_current"],
                    "mig_pending": gpu["mig_pending"],
                    "mig_capable": mig_capable,
                    "compute_capability": capability,
                    "processes": gpu.get("processes") or [],
                    **classified,
                    "health": _with_nvlink(gpu["health"], nvlink, gpu),
                    "source": "nvidia-smi",
                }
            )
        return result
    for index, device in enumerate(pci):
        info = policy.classify_pci(device["device_id"])
        model = policy.lookup_model(info["model"]) if info["model"] else None
        listed = device.get("device_name")
        if listed in (None, "", "Device"):  # lspci without the id in its pci.ids: "Device [2901]"
            listed = None
        name = info["name"] or listed or f"NVIDIA device 10de:{device['device_id']}"
        result.append(
            {
                "index": index,
                "name": name,
                "model": model["key"] if model else None,
                "architecture": (model or {}).get("architecture"),
                "uuid": None,
                "pci_bus_id": device["slot"],
                "memory_total_mib": (model or {}).get("memory_mib"),
                "persistence_mode": None,
                "mig_current": None,
                "mig_pending": None,
                "mig_capable": (model.get("mig") is not None) if model else None,
                "compute_capability": (model or {}).get("compute_capability"),
                "processes": [],
                **_classified(device["device_id"]),
                "health": None,  # seen on the PCI bus only: nothing read from the GPU
                "source": pci_source,
            }
        )
    return result


def _mig_table(sections: Sections, name: str, parse) -> list[dict[str, Any]]:
    out = ok(sections, name)
    if not out:
        return []
    try:
        return parse(out)
    except ValueError:
        # nvidia-smi prints "No MIG-enabled devices found" and similar with rc 0 on some
        # drivers; a real table that fails to parse is caught by the structure tests.
        if "|" in out and "GPU" in out and "instance" in out.lower():
            raise
        return []


def mig_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.mig.MigState``."""
    gpus = [gpu for gpu in gpus_state(sections) if gpu["source"] == "nvidia-smi"]
    listing = ok(sections, "smi_list")
    devices_by_index = {}
    if listing:
        for entry in parsers.parse_smi_list(listing):
            devices_by_index[entry["index"]] = entry.get("mig_devices") or []
    any_enabled = any(gpu["mig_current"] == "enabled" for gpu in gpus)
    instances = _mig_table(sections, "mig_lgi", parsers.parse_mig_gpu_instances) if any_enabled else []
    computes = (
        _mig_table(sections, "mig_lci", parsers.parse_mig_compute_instances) if any_enabled else []
    )
    result = []
    for gpu in gpus:
        index = gpu["index"]
        result.append(
            {
                "index": index,
                "name": gpu["name"],
                "uuid": gpu["uuid"],
                "mig_capable": gpu["mig_capable"],
                "mode_current": gpu["mig_current"],
                "mode_pending": gpu["mig_pending"],
                "pending_change": gpu["mig_pending"] is not None
                and gpu["mig_current"] != gpu["mig_pending"],
                "gpu_instances": [i for i in instances if i["gpu"] == index],
                "compute_instances": [c for c in computes if c["gpu"] == index],
                "devices": devices_by_index.get(index, []),
            }
        )
    return {
        "gpus": result,
        "enabled_gpus": [g["index"] for g in result if g["mode_current"] == "enabled"],
        "layout": {
            str(g["index"]): sorted(i["profile"] for i in g["gpu_instances"]) for g in result
        },
    }


def _nvidia_runtime(config: dict[str, Any]) -> dict[str, Any]:
    runtimes = config.get("runtimes")
    entry = runtimes.get("nvidia") if isinstance(runtimes, dict) else None
    if not isinstance(entry, dict):
        return {"defined": False, "path": None, "style": None, "args": []}
    style = "runtimeArgs" if "runtimeArgs" in entry else "args" if "args" in entry else None
    args = entry.get("runtimeArgs", entry.get("args", [])) or []
    path = entry.get("path")
    return {
        "defined": isinstance(path, str) and path.rsplit("/", 1)[-1] == "nvidia-container-runtime",
        "path": path,
        "style": style,
        "args": args if isinstance(args, list) else [],
    }


def docker_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.container.DockerDaemonConfig``."""
    rc, text = section(sections, "daemon_json")
    exists = rc == 0
    config: dict[str, Any] = {}
    error = None
    if exists:
        try:
            config = parsers.parse_daemon_json(text)
        except ValueError as problem:
            error = str(problem)
    runtime = _nvidia_runtime(config)
    default_runtime = config.get("default-runtime") if isinstance(config, dict) else None
    dockerd_path = ok(sections, "docker_version")
    info_rc, info_out = section(sections, "docker_info")
    daemon: dict[str, Any] = {"running": False, "runtimes": [], "default_runtime": None}
    if info_rc == 0 and info_out.strip():
        runtimes_json, _, rest = info_out.strip().partition("\t")
        default, _, server_version = rest.partition("\t")
        try:
            runtimes = json.loads(runtimes_json) or {}
        except ValueError:
            runtimes = {}
        daemon = {
            "running": True,
            "runtimes": sorted(runtimes) if isinstance(runtimes, dict) else [],
            "default_runtime": default or None,
            "version": server_version or None,
        }
    return {
        "path": "/etc/docker/daemon.json",
        "exists": exists,
        "valid": error is None,
        "error": error,
        "config": config,
        "nvidia_runtime": runtime,
        "default_runtime": default_runtime,
        "nvidia_is_default": default_runtime == "nvidia" and runtime["defined"],
        "docker_installed": dockerd_path is not None,
        # EL container-tools that stop Docker's containerd.io (rpm hosts only)
        "el_container_tools": sorted(
            name for name in packages(sections)
            if name in EL_CONTAINER_TOOLS and ok(sections, "rpm") is not None),
        "docker_version": daemon.get("version"),
        "daemon": daemon,
    }


def containerd_state(sections: Sections) -> dict[str, Any]:
    """containerd's version, config.toml and gpuhost's drop-in (gpuhost.containerd_config)."""
    from gpuhost import containerd_config

    return containerd_config.parse_section(*section(sections, "containerd"))


def cdi_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.container.CdiSpecs``."""
    from gpuhost import cdi

    rc, text = section(sections, "cdi_specs")
    unit_rc, unit_text = section(sections, "cdi_boot_unit")
    return {"specs": cdi.parse_specs(text) if rc == 0 else [],
            "boot_unit": cdi.parse_boot_unit(unit_rc, unit_text)}


def toolkit_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.container.ContainerToolkit``."""
    installed = packages(sections)
    versions = {
        name: upstream_version(installed[name]["version"]) if name in installed else None
        for name in TOOLKIT_PACKAGES
    }
    ctk_out = ok(sections, "nvidia_ctk")
    cli_out = ok(sections, "nvidia_container_cli")
    ctk = parsers.parse_tool_version(ctk_out) if ctk_out else None
    cli = parsers.parse_tool_version(cli_out) if cli_out else None
    seen = sorted({v for v in versions.values() if v} | {v for v in (ctk, cli) if v})
    any_installed = bool(seen)
    return {
        "installed": any_installed,
        "packages": versions,
        "nvidia_ctk": ctk,
        "nvidia_container_cli": cli,
        "version": seen[0] if len(seen) == 1 else None,
        "versions_seen": seen,
        "consistent": len(seen) <= 1 and (not any_installed or all(versions.values())),
        "held_packages": sorted(
            name for name in TOOLKIT_PACKAGES if installed.get(name, {}).get("held")
        ),
    }


_XID_SOURCES = ("journal", "dmesg")


def _kernel_xid(sections: Sections) -> tuple[list[dict[str, Any]], str | None]:
    """(Xid/SXid events of this boot, their source) from the kernel_xid section; ([], None)
    when no kernel log was readable or the section did not run."""
    out = ok(sections, "kernel_xid")
    if out is None:
        return [], None
    first, _, rest = out.partition("\n")
    first = first.strip()
    source = first.removeprefix("source=")
    if not first.startswith("source=") or source not in _XID_SOURCES:
        return [], None
    return parsers.parse_xid_lines(rest), source


def _nvswitch_count(sections: Sections) -> int:
    """NVIDIA functions of PCI class 0x0680 (other bridge): the NVSwitches of an HGX board."""
    if section(sections, "pci_sysfs")[0] == 0:
        devices = parsers.parse_pci_sysfs(ok(sections, "pci_sysfs") or "")
        return sum(1 for d in devices if (d.get("class") or "").startswith("0680"))
    lspci = ok(sections, "lspci")
    devices = parsers.parse_lspci_nvidia(lspci) if lspci else []
    return sum(1 for d in devices if d.get("class_id") == "0680")


def health_state(sections: Sections) -> dict[str, Any]:
    """The host-wide health facts (``state["health"]`` of ``facts.host.GpuHostState``); the
    per-GPU ones are each GPU's ``health``."""
    events, source = _kernel_xid(sections)
    smi, smi_error = _smi_xml(sections)
    missing = None
    # nvidia-smi answered with its list, or said it found no device although the driver
    # runs: every NVIDIA GPU on the bus that it does not list is missing (fallen off the
    # bus, failed to initialise). Without an answer (no driver, timeout) nobody is missing:
    # the driver's state says what is wrong.
    if smi is not None or smi_error == "no_devices":
        listed = {_slot(gpu["pci_bus_id"]) for gpu in (smi or {}).get("gpus", [])}
        pci, _source = _pci_gpus(sections)
        missing = [d["slot"] for d in pci if _slot(d["slot"]) not in listed]
    return {"xid_events": events, "xid_source": source, "gpus_missing": missing,
            "nvswitch_count": _nvswitch_count(sections), "recovered": recovered_state(sections)}


def fabric_state(sections: Sections) -> dict[str, Any]:
    """The fabric daemons' units (issue 25): ``{"services": {"nvidia-fabricmanager":
    {"enabled": "enabled", "active": "active"}, ...}}`` for the units the host has, as
    ``systemctl is-enabled`` / ``is-active`` print them."""
    services: dict[str, dict[str, str]] = {}
    for line in (ok(sections, "fabric_services") or "").splitlines():
        parts = line.split()
        if len(parts) == 3:
            services[parts[0]] = {"enabled": parts[1], "active": parts[2]}
    return {"services": services, "nvlsm": assemble_fabric.nvlsm_state(sections)}


SCHEMA_VERSION = 2  # 2: state["health"] and each GPU's "health" (issue 15)


def host_state(sections: Sections) -> dict[str, Any]:
    """See ``facts.host.GpuHostState``."""
    return {
        "schema": SCHEMA_VERSION,
        "os": os_state(sections),
        "kernel": kernel_state(sections),
        "driver": driver_state(sections),
        "gpus": gpus_state(sections),
        "mig": mig_state(sections),
        "docker": docker_state(sections),
        "toolkit": toolkit_state(sections),
        "health": health_state(sections),
        "cdi": cdi_state(sections),
        "containerd": containerd_state(sections),
        "fabric": fabric_state(sections),
        "rdma": assemble_rdma.rdma_state(sections),  # issue 25 item 5 (facts/assemble_rdma.py)
        "slurm": assemble_slurm.slurm_state(sections),  # issue 26 item 4 (facts/assemble_slurm.py)
    }
