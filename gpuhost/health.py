"""Is this GPU host healthy, will it survive its next boot, is its driver branch supported?

Pure: ``findings(state)`` reads one host's ``facts.host.GpuHostState`` value (the per-GPU
``health`` dicts, ``state["health"]``, the kernel fact, the driver) and returns findings::

    {"id": "row-remap-failure", "severity": "critical" | "warning" | "info",
     "gpu": "0000:07:00.0" | None, "message": "one line: what is wrong and what to do"}

sorted critical first. Every id, its severity and what it reads are in docs/health.md.
A state without the health fields (read by a gpuhost before them, or a GPU seen only on the
PCI bus) gives no finding for what it lacks. Also used by the upgrade's health gate:
``new_findings(before, after)`` is what appeared between two reads of a host.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost import boot, fabric, lifecycle, policy, slurm, xid

SEVERITIES = ("critical", "warning", "info")
HEALTH_STATUSES = ("healthy", "warning", "critical")
_ORDER = {name: index for index, name in enumerate(SEVERITIES)}

# Clock throttle / event reasons: which are findings, under which id and severity.
# Not findings: gpu_idle, applications_clocks_setting, display_clocks_setting (settings or
# an idle GPU), sync_boost (a deliberate setting of grouped GPUs).
THROTTLE = {
    "hw_thermal_slowdown": ("throttle-thermal", "warning"),
    "sw_thermal_slowdown": ("throttle-thermal", "warning"),
    "hw_slowdown": ("throttle-hw-slowdown", "warning"),
    "hw_power_brake_slowdown": ("throttle-power-brake", "warning"),
    "sw_power_cap": ("throttle-power-cap", "info"),
}
THROTTLE_ADVICE = {
    "throttle-thermal": "the GPU is too hot: check the fans, airflow, inlet temperature and "
                        "nvidia-smi -q -d TEMPERATURE",
    "throttle-hw-slowdown": "hardware slowdown (overheating or a power supply that cannot "
                            "deliver): check cooling and the power cables and supplies",
    "throttle-power-brake": "the power brake is asserted (an external signal from the system's "
                            "power supplies): check the chassis' power supplies",
    "throttle-power-cap": "the GPU runs at its power limit (nvidia-smi -q -d POWER); normal under "
                          "full load, a problem when the limit was lowered by mistake",
}


def _finding(ident: str, severity: str, gpu: str | None, message: str) -> dict[str, Any]:
    return {"id": ident, "severity": severity, "gpu": gpu, "message": " ".join(message.split())}


def sort_key(finding: Mapping[str, Any]) -> tuple:
    return (_ORDER[finding["severity"]], finding["id"], finding["gpu"] or "")


# --- per GPU ---------------------------------------------------------------------------------

def _memory(gpu: str, health: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    volatile = health.get("ecc_volatile_uncorrectable")
    aggregate = health.get("ecc_aggregate_uncorrectable")
    if volatile:
        found.append(_finding("ecc-volatile-uncorrectable", "warning", gpu, (
            f"{volatile} uncorrectable ECC error(s) since the driver loaded: drain the GPU and "
            "reset it (gpuhost recover INVENTORY --limit HOST --gpu N, docs/recover.md) or "
            "reboot so the memory is remapped or retired; run NVIDIA's field diagnostics if the "
            "count keeps growing")))
    if aggregate:
        found.append(_finding("ecc-aggregate-uncorrectable", "info", gpu, (
            f"{aggregate} uncorrectable ECC error(s) over the GPU's lifetime: watch the count; "
            "NVIDIA's memory error management guide gives the RMA thresholds")))
    if health.get("retired_pages_pending"):
        found.append(_finding("retired-pages-pending", "warning", gpu, (
            "memory pages are waiting to be retired: reboot the host (or reload the driver) "
            "when convenient; they are retired when the driver loads again (NVIDIA, Dynamic "
            "Page Retirement)")))
    if health.get("remapped_rows_failure"):
        found.append(_finding("row-remap-failure", "critical", gpu, (
            "row remapping failed: the GPU cannot repair its memory any more; drain it and "
            "follow NVIDIA's RMA process (nvidia-smi -q -d ROW_REMAPPER)")))
    elif health.get("remapped_rows_pending"):
        found.append(_finding("row-remap-pending", "warning", gpu, (
            "a row remap is pending: reset the GPU (gpuhost recover INVENTORY --limit HOST, "
            "docs/recover.md) or reboot when convenient to apply it; running applications are "
            "not affected")))
    return found


def _pcie(gpu: str, health: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    width, width_max = health.get("pcie_width_current"), health.get("pcie_width_max")
    if width and width_max and width < width_max:
        found.append(_finding("pcie-width-degraded", "warning", gpu, (
            f"PCIe link x{width} of x{width_max}: a degraded link (less bandwidth, often a "
            "loose card, riser or slot); reseat the GPU or check the slot and BIOS "
            "bifurcation settings")))
    gen, gen_max = health.get("pcie_gen_current"), health.get("pcie_gen_max")
    reasons = health.get("throttle_reasons_active")
    busy = reasons is not None and "gpu_idle" not in reasons
    if gen and gen_max and gen < gen_max and busy:  # idle GPUs lower the generation
        found.append(_finding("pcie-gen-below-max", "info", gpu, (
            f"PCIe gen {gen} of {gen_max} while the GPU is not idle: check the slot and the "
            "BIOS link speed if it stays there under load")))
    return found


def _throttle(gpu: str, health: Mapping[str, Any]) -> list[dict[str, Any]]:
    by_id: dict[str, tuple[str, list[str]]] = {}
    for reason in health.get("throttle_reasons_active") or []:
        if reason in THROTTLE:
            ident, severity = THROTTLE[reason]
            by_id.setdefault(ident, (severity, []))[1].append(reason)
    return [_finding(ident, severity, gpu, f"clocks slowed now ({', '.join(reasons)}): "
                     f"{THROTTLE_ADVICE[ident]}")
            for ident, (severity, reasons) in by_id.items()]


def _fabric(gpu: str, health: Mapping[str, Any], nvswitches: int | None) -> list[dict[str, Any]]:
    state = health.get("fabric_state")
    if state is None or state.strip().lower() in ("n/a", "completed"):
        return []
    where = f" ({nvswitches} NVSwitches on the bus)" if nvswitches else ""
    return [_finding("fabric-not-completed", "critical", gpu, (
        f"NVLink fabric state '{state}'{where}: the GPU cannot run fabric jobs; check "
        "nvidia-fabricmanager (systemctl status nvidia-fabricmanager, its version must equal "
        "the driver's) and restart it; reboot if the state does not reach Completed"))]


def _nvlink(gpu: str, entry: Mapping[str, Any], health: Mapping[str, Any],
            nvswitches: int | None) -> list[dict[str, Any]]:
    """NVLink state and error counters (``nvidia-smi nvlink -s/-e``, since the driver loaded).

    The link state is not judged on a GPU in MIG mode (MIG does not use NVLink), and all
    links down is a finding only where an NVSwitch fabric says they should be up (a PCIe
    card without an NVLink bridge has them all inactive by design)."""
    link = health.get("nvlink")
    if not isinstance(link, Mapping):
        return []
    found = []
    inactive = link.get("links_inactive") or []
    if entry.get("mig_current") != "enabled":
        if link.get("all_inactive") and nvswitches:
            found.append(_finding("nvlink-down", "critical", gpu, (
                f"every NVLink of this GPU is inactive on a host with {nvswitches} NVSwitches: "
                "it is cut off from the fabric (NCCL falls back to PCIe or fails); check "
                "nvidia-fabricmanager, reset the GPU or reboot; if the links stay down, reseat "
                "the GPU or contact the hardware vendor")))
        elif inactive and link.get("links_active"):
            shown = ", ".join(str(n) for n in inactive)
            found.append(_finding("nvlink-link-inactive", "warning", gpu, (
                f"NVLink {shown} inactive ({link['links_active']} of {link.get('links_total')} "
                "active): less GPU-to-GPU bandwidth; reset the GPU or reboot; if the links stay "
                "down, reseat the GPU or its NVLink bridge or contact the hardware vendor")))
    if link.get("recovery_errors"):
        found.append(_finding("nvlink-recovery-errors", "warning", gpu, (
            f"{link['recovery_errors']} NVLink recovery error(s) since the driver loaded (a link "
            "went down and retrained): watch nvidia-smi nvlink -e; a count that keeps growing "
            "is a failing link: drain the host and run NVIDIA's field diagnostics")))
    crc, replay = link.get("crc_errors") or 0, link.get("replay_errors") or 0
    if crc or replay:
        found.append(_finding("nvlink-crc-replay-errors", "info", gpu, (
            f"{crc} NVLink CRC and {replay} replay error(s) since the driver loaded (corrected "
            "by retransmission): harmless when rare; a count that keeps growing between audits "
            "(--baseline) is a marginal link")))
    return found


def _persistence(gpu: str, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    if entry.get("persistence_mode") != "disabled":
        return []
    model = policy.lookup_model(entry.get("model")) if entry.get("model") else None
    if not model or not model.get("data_center"):
        return []
    return [_finding("persistence-mode-off", "warning", gpu, (
        f"persistence mode is off on this {entry.get('name') or 'data-center GPU'}: enable "
        "nvidia-persistenced (systemctl enable --now nvidia-persistenced); without it the "
        "driver tears the GPU down between jobs and the next job waits for it"))]


def gpu_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Findings of every GPU that nvidia-smi lists with a ``health`` dict."""
    nvswitches = fabric.switch_count(state) or None  # NVLink 5 switches too (issue 25)
    found: list[dict[str, Any]] = []
    for entry in state.get("gpus") or []:
        gpu = xid.slot(entry.get("pci_bus_id"))
        health = entry.get("health")
        if entry.get("source") == "nvidia-smi":
            found += _persistence(gpu, entry)
        if not isinstance(health, Mapping):
            continue
        found += _memory(gpu, health) + _pcie(gpu, health) + _throttle(gpu, health)
        found += _fabric(gpu, health, nvswitches) + _nvlink(gpu, entry, health, nvswitches)
    return found


# --- host --------------------------------------------------------------------------------------

def host_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GPUs missing from nvidia-smi and the kernel log's Xid/SXid events."""
    health = state.get("health")
    if not isinstance(health, Mapping):
        return []
    found = []
    for missing in health.get("gpus_missing") or []:
        found.append(_finding("gpu-missing", "critical", xid.slot(missing), (
            "an NVIDIA GPU on the PCI bus that nvidia-smi does not list (fallen off the bus or "
            "failed to initialise): drain the host and reboot it; if it stays missing, reseat "
            "it or contact the hardware vendor")))
    if health.get("xid_source") is None and "xid_source" in health:
        found.append(_finding("xid-log-unreadable", "info", None, (
            "the kernel log of this boot could not be read (no kernel messages in the journal, "
            "dmesg refused): Xid errors are not checked on this host")))
    found += [_recovered(f, health) for f in xid.findings(health.get("xid_events") or [])]
    return found


def _recovered(finding: dict[str, Any], health: Mapping[str, Any]) -> dict[str, Any]:
    """An Xid of a GPU that ``gpuhost recover`` reset this boot, with no new Xid on it since:
    the kernel keeps the line until the next boot, so it becomes information (the same id,
    for the record; the metrics say ``recovered="true"``)."""
    done = (health.get("recovered") or {}).get(finding["gpu"] or "")
    if not done or not finding["id"].startswith("xid-"):
        return finding
    count = sum(1 for e in health.get("xid_events") or []
                if "xid" in e and xid.slot(e.get("pci_bus_id")) == finding["gpu"])
    if count > done.get("xid_count", 0):
        return finding
    return {**finding, "severity": "info", "recovered": True,
            "message": "handled: gpuhost recover reset this GPU during this boot and no Xid came "
                       "since (the kernel log keeps the line until the next boot). Was: "
                       + finding["message"]}


def cdi_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An NVIDIA CDI spec that no longer matches the host (gpuhost.cdi.judge; issue 16)."""
    from gpuhost import cdi

    judged = cdi.judge(state)
    if judged["status"] != "stale":
        return []
    route = cdi.state_gpus_route(state)
    fix = ("regenerate it (nvidia-ctk cdi generate --output=PATH, or run gpuhost's deploy, "
           "which does)")
    if route["via"] == "cdi":
        # Docker 29.2+ with nvidia-cdi-hook: --gpus goes through this spec (moby/moby#50228)
        return [_finding("cdi-spec-stale", "critical", None, (
            f"the NVIDIA CDI spec is stale ({'; '.join(judged['problems'])}) and {route['why']}:"
            " every `docker run --gpus` container gets the wrong devices or the old driver's "
            f"libraries, in any container_runtime_mode; {fix}; until then "
            f"`docker run --gpus {cdi.ESCAPE_HATCH.removeprefix('--gpus ')}` uses the prestart "
            "hook instead"))]
    return [_finding("cdi-spec-stale", "warning", None, (
        f"the NVIDIA CDI spec is stale ({'; '.join(judged['problems'])}): containers asking for "
        f"--device nvidia.com/gpu=... get the wrong devices or libraries, or fail; {fix}"))]


def rdma_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """GPUDirect RDMA readiness on hosts with RDMA NICs (gpuhost.rdma; docs/rdma.md)."""
    from gpuhost import rdma as gdr

    facts = state.get("rdma") or {}
    if not facts.get("nics") or not facts.get("gpus"):
        return []
    found = []
    if facts.get("peermem_loaded") is False and gdr.dmabuf_possible(state) is False:
        found.append(_finding("rdma-peermem-missing", "warning", None, (
            f"the host has RDMA NICs, {gdr.MODULE} is not loaded and DMA-BUF cannot be used "
            "(it needs NVIDIA's open kernel module and Linux 5.12+): NCCL cannot use GPUDirect "
            "RDMA and stages GPU memory through host memory; set nvidia_gpudirect_rdma: auto "
            f"and run the deploy (modprobe {gdr.MODULE}, loaded at boot from {gdr.MODULES_LOAD})")))
    for hit in gdr.acs_redirects(facts):
        found.append(_finding("rdma-acs-redirect", "warning", xid.slot(hit["gpu"]), (
            f"PCIe ACS redirect is on at bridge {hit['bridge']} between this GPU and RDMA NIC "
            f"{hit['nic']} ({' '.join(hit['flags'])}): their peer traffic is sent up to the root "
            "complex (NCCL's troubleshooting guide: hangs or low bandwidth with GPUDirect); "
            "disable ACS / IO virtualisation (VT-d, IOMMU) in the BIOS, or clear it at every "
            f"boot with setpci -s {hit['bridge']} ECAP_ACS+0x6.w=0000 where the host needs "
            "no device isolation (VMs, passthrough)")))
    switches = set(facts.get("switches", {}).values())
    by_index = {f"GPU{g.get('index')}": g.get("pci_bus_id") for g in state.get("gpus") or []}
    for row, (nic, link) in gdr.nearest_nics(facts.get("topo") or {}, switches).items():
        if link not in ("SYS", "NODE"):
            continue
        where = ("across the CPU interconnect between NUMA nodes (SYS)" if link == "SYS"
                 else "across PCIe host bridges within its NUMA node (NODE)")
        found.append(_finding("rdma-nic-across-cpu", "warning" if link == "SYS" else "info",
                              xid.slot(by_index.get(row)) if by_index.get(row) else None, (
            f"{row}'s nearest RDMA NIC {nic} is {where} (nvidia-smi topo -m): GPUDirect RDMA "
            "traffic crosses the CPU, NCCL may not use it at all for this GPU; move the NIC or "
            "GPU to slots under one PCIe switch (PIX/PXB), or bind jobs to the NIC nearest "
            "each GPU (NCCL_IB_HCA)")))
    return found


def next_boot_findings(state: Mapping[str, Any], module_signing_cert: str | None = None,
                       ) -> list[dict[str, Any]]:
    """Will the NVIDIA module load after the next boot (gpuhost.boot's answers)?"""
    kernel, driver = state.get("kernel") or {}, state.get("driver") or {}
    version = driver.get("installed_version")
    if not version or "next_boot" not in kernel:
        return []
    found = []
    release = kernel["next_boot"]["kernel_release"]
    if boot.dkms_builds_nvidia(kernel):
        answer = boot.next_boot_module(kernel, version)
        fix = {"buildable": f"build it before rebooting (dkms install -m nvidia -v {version} "
                            f"-k {release}; gpuhost's deploy does)",
               "no_headers": f"that kernel has no headers ("
                             f"{', '.join(answer['missing_headers']) or 'not found'}): install "
                             "them and build the module, or make the running kernel the "
                             "default boot entry, before rebooting",
               "not_built": f"rebuild it (dkms install -m nvidia -v {version} -k {release}) and "
                            f"read /var/lib/dkms/nvidia/{version}/build/make.log before "
                            "rebooting"}.get(answer["case"])
        if fix:
            found.append(_finding("next-boot-module-missing", "critical", None, (
                f"the next boot starts kernel {release} and DKMS has no NVIDIA module "
                f"{version} installed for it: the host would come up without its GPU driver; "
                f"{fix}")))
    elif kernel["next_boot"].get("differs"):
        found.append(_finding("next-boot-module-unknown", "info", None, (
            f"the next boot starts kernel {release} (not the running one) and the NVIDIA module "
            "does not come from DKMS: gpuhost cannot tell whether that kernel has it; check its "
            "packaged module before rebooting")))
    if kernel.get("secure_boot") != "enabled":
        return found
    if boot.secure_boot_refuses(kernel):
        found.append(_finding("secure-boot-signer-not-enrolled", "critical", None, (
            "Secure Boot is on and no Machine Owner Key is enrolled, so the kernel refuses the "
            "NVIDIA module DKMS builds (Key was rejected by service): enrol the signing key "
            "(mokutil --import, confirmed at the console on the next boot) before rebooting")))
    elif module_signing_cert:
        try:
            fp = boot.cert_fingerprint(module_signing_cert)
        except OSError as error:
            found.append(_finding("secure-boot-cert-unreadable", "warning", None, (
                f"Secure Boot is on and nvidia_module_signing_cert cannot be read on this "
                f"controller ({error}): gpuhost cannot tell whether its key is enrolled")))
        else:
            if not boot.enrolled(kernel, fp):
                found.append(_finding("secure-boot-signer-not-enrolled", "critical", None, (
                    f"Secure Boot is on and the module signing certificate {module_signing_cert}"
                    f" (SHA1 {fp}) is not enrolled: the kernel will refuse the module DKMS signs "
                    "with it; enrol it (mokutil --import, confirmed at the console on the next "
                    "boot) before rebooting")))
    return found


def findings(state: Mapping[str, Any], *, today: _dt.date | None = None,
             module_signing_cert: str | None = None) -> list[dict[str, Any]]:
    """Every finding of one host, critical first (docs/health.md).

    + state: the host's ``facts.host.GpuHostState`` value
    + today: the date the driver branch lifecycle is judged on (default: today, UTC)
    + module_signing_cert: the inventory's ``nvidia_module_signing_cert`` (a path on this
      controller), to tell whether its key is enrolled on a Secure Boot host
    """
    today = today or _dt.datetime.now(_dt.timezone.utc).date()
    driver = state.get("driver") or {}
    found = gpu_findings(state) + host_findings(state) + cdi_findings(state)
    found += rdma_findings(state)
    found += next_boot_findings(state, module_signing_cert)
    found += slurm.findings(state)  # issue 26 item 4 (gpuhost/slurm.py)
    branch = lifecycle.finding(driver.get("loaded_version") or driver.get("installed_version"),
                               today)
    if branch:
        found.append(branch)
    return sorted(found, key=sort_key)


def status(found: Iterable[Mapping[str, Any]]) -> str:
    """'critical', 'warning' or 'healthy' (info findings do not count)."""
    severities = {f["severity"] for f in found}
    return "critical" if "critical" in severities else (
        "warning" if "warning" in severities else "healthy")


def key(finding: Mapping[str, Any]) -> tuple[str, str]:
    """What makes a finding the same one in two audits: its id and its GPU."""
    return (finding["id"], finding["gpu"] or "")


def new_findings(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
                 severities: Iterable[str] = SEVERITIES) -> list[dict[str, Any]]:
    """Findings of ``after`` (of the given severities) that ``before`` did not have: e.g. the
    upgrade's gate, ``new_findings(findings(old), findings(new), ("critical",))``."""
    seen = {key(f) for f in before}
    wanted = set(severities)
    return [dict(f) for f in after if f["severity"] in wanted and key(f) not in seen]


# --- the audit document's health blocks (gpuhost.audit) --------------------------------------

def block(found: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A host's ``health`` block: its findings, their counts and its status (None: the host
    produced no state, nothing was judged)."""
    if found is None:
        return {"status": None, "counts": {s: 0 for s in SEVERITIES}, "findings": []}
    counts = Counter(f["severity"] for f in found)
    return {"status": status(found),
            "counts": {s: counts.get(s, 0) for s in SEVERITIES}, "findings": found}


def unhealthy(host: Mapping[str, Any], fail_on: str) -> bool:
    """Whether an audit document's ``host`` counts as unhealthy for the exit status
    (``fail_on``: critical, warning or never)."""
    worst = host["health"]["status"]
    if fail_on == "never" or worst is None:
        return False
    return worst == "critical" or (fail_on == "warning" and worst == "warning")


def fleet_summary(hosts: list[Mapping[str, Any]], fail_on: str) -> dict[str, Any]:
    """Hosts per health status (``not_read``: failed or unreachable) and, per finding id, on
    how many hosts it was found."""
    statuses = Counter(h["health"]["status"] or "not_read" for h in hosts)
    ids = Counter(i for h in hosts for i in {f["id"] for f in h["health"]["findings"]})
    severities = Counter(f["severity"] for h in hosts for f in h["health"]["findings"])
    return {**{s: statuses.get(s, 0) for s in (*HEALTH_STATUSES, "not_read")},
            "fail_on": fail_on, "unhealthy": sum(unhealthy(h, fail_on) for h in hosts),
            "findings": {s: severities.get(s, 0) for s in SEVERITIES},
            "finding_ids": dict(sorted(ids.items()))}
