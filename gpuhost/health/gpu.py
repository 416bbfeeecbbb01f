"""The per-GPU health findings (``gpu_findings``): memory (ECC, row remapping), PCIe,
clock throttling, the fabric, NVLink, persistence. Ids and severities: docs/health.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost import fabric, policy
from gpuhost.health import xid
from gpuhost.health.finding import finding as _finding


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
    if health.get("sram_threshold_exceeded"):
        found.append(_finding("ecc-sram-threshold-exceeded", "critical", gpu, (
            "uncorrectable SRAM errors passed NVIDIA's threshold (nvidia-smi -q: SRAM "
            "Threshold Exceeded: Yes): drain the GPU and run NVIDIA's field diagnostics; "
            "NVIDIA's Xid catalog (WORKFLOW_XID_48) says follow the RMA flow; a GPU reset does "
            "not return it to service")))
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


def _ecc_handled(finding: dict[str, Any], health: Mapping[str, Any],
                 done: Mapping[str, Any] | None) -> dict[str, Any]:
    """The volatile ECC count of a GPU ``gpuhost recover`` reset this boot, not grown since:
    information, so the advice "reset it" never asks again for what a reset already handled
    (the count starts again at a driver load; gpuhost.health.recover verifies it did not grow)."""
    count = health.get("ecc_volatile_uncorrectable") or 0
    if finding["id"] != "ecc-volatile-uncorrectable" or not done or \
            count > (done.get("ecc_volatile") or 0):
        return finding
    return {**finding, "severity": "info", "recovered": True,
            "message": "handled: gpuhost recover reset this GPU during this boot and the count "
                       "did not grow since. Was: " + finding["message"]}


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
    where = f" ({nvswitches} NVSwitches on the bus)" if nvswitches else ""
    status = fabric.failed_status(health)
    if status:
        return [_finding("fabric-probe-failed", "critical", gpu, (
            f"NVLink fabric state 'Completed' with status '{status}'{where}: the GPU's fabric "
            "registration failed (NVML: the status is to be checked once the state is "
            "Completed), so NVLink peer traffic through the fabric does not work; restart "
            "nvidia-fabricmanager (its version must equal the driver's) and reboot if the "
            "status does not become Success"))]
    if state is None or state.strip().lower() in ("n/a", "completed"):
        return []
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
    recovered = (state.get("health") or {}).get("recovered") or {}
    found: list[dict[str, Any]] = []
    for entry in state.get("gpus") or []:
        gpu = xid.slot(entry.get("pci_bus_id"))
        health = entry.get("health")
        if entry.get("source") == "nvidia-smi":
            found += _persistence(gpu, entry)
        if not isinstance(health, Mapping):
            continue
        found += [_ecc_handled(f, health, recovered.get(gpu or "")) for f in _memory(gpu, health)]
        found += _pcie(gpu, health) + _throttle(gpu, health)
        found += _fabric(gpu, health, nvswitches) + _nvlink(gpu, entry, health, nvswitches)
    return found
