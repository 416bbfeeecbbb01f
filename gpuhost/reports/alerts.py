"""The Prometheus alert rules gpuhost ships (alerts/gpuhost.rules.yml), from one source.

The rules read the series of ``gpuhost audit --prom`` (gpuhost.reports.prom, docs/metrics.md). Each
alert's ``description`` is the "what to do" text the audit prints: for Xids the catalog
bucket's action (``gpuhost.health.xid.ACTIONS``), for findings the advice of their message
(``ADVICE``; tests/unit/test_prom.py holds each equal to a part of the message
``gpuhost.health`` writes). The file is generated:

    .venv/bin/python -m gpuhost.reports.alerts > alerts/gpuhost.rules.yml

and a unit test fails when the file and this module disagree.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpuhost.health import lifecycle, xid

# What the audit's message of each critical finding family says to do (a part of it).
ADVICE = {
    "row-remap-failure": "drain it and follow NVIDIA's RMA process (nvidia-smi -q -d "
                         "ROW_REMAPPER)",
    "gpu-missing": "drain the host and reboot it; if it stays missing, reseat it or contact "
                   "the hardware vendor",
    "fabric-not-completed": "check nvidia-fabricmanager (systemctl status nvidia-fabricmanager, "
                            "its version must equal the driver's) and restart it; reboot if the "
                            "state does not reach Completed",
    "nvlink-down": "check nvidia-fabricmanager, reset the GPU or reboot; if the links stay "
                   "down, reseat the GPU or contact the hardware vendor",
    "next-boot-module-missing": "the host would come up without its GPU driver",
    "secure-boot-signer-not-enrolled": "enrol the signing key (mokutil --import, confirmed at "
                                       "the console on the next boot) before rebooting",
    "cdi-spec-stale": "regenerate it (nvidia-ctk cdi generate --output=PATH, or run gpuhost's "
                      "deploy, which does)",
    "sxid-fatal": "drain the host; the fabric needs a reset (restart nvidia-fabricmanager or "
                  "reboot); if it comes back, contact NVIDIA support",
    "lifecycle-eol-soon": "plan the move to a supported branch",
    "lifecycle-eol": "no more bug or security fixes; move to a supported branch",
    "gpus-not-read": "run nvidia-smi on the host; if it hangs or fails, drain the host, read "
                     "the kernel log for Xid errors and reboot it",
}
DRIFT_FOR = "6h"  # drift that lasts: an upgrade in progress does not page
AUDIT_STALE_SECONDS = 3 * 3600  # the timer runs every 15 minutes (docs/metrics.md)
HOST = "{{ $labels.host }}"
ON_GPU = "{{ $labels.host }} GPU {{ $labels.gpu }}"


def _rule(name: str, expr: str, severity: str, summary: str, description: str,
          duration: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def _finding(name: str, ident: str, summary: str, action: str) -> dict[str, Any]:
    return _rule(name, f'gpuhost_health_finding{{id="{ident}"}} == 1', "critical",
                 f"{summary} ({action})", f"gpuhost audit [{ident}]: {ADVICE[ident]}")


def rules() -> list[dict[str, Any]]:
    """Every alert rule: one per critical finding family and per Xid action (reboot, reset,
    replace), drift that lasts, the driver branch's end of life, a host or its GPUs not read,
    an audit gone quiet."""
    eol = "gpuhost_driver_branch_end_of_life_timestamp_seconds"
    return [
        _rule("GpuHostXidRebootRequired", 'gpuhost_xid_events{action="reboot"} > 0', "critical",
              f"Xid {{{{ $labels.xid }}}} on {ON_GPU} this boot: reboot the host",
              xid.ACTIONS["RESTART_BM"]),
        _rule("GpuHostXidGpuResetRequired",
              'gpuhost_xid_events{action="reset",recovered="false"} > 0', "critical",
              f"Xid {{{{ $labels.xid }}}} on {ON_GPU} this boot: reset the GPU",
              xid.ACTIONS["RESET_GPU"]),
        _rule("GpuHostXidGpuReplace", 'gpuhost_xid_events{action="replace"} > 0', "warning",
              f"Xid {{{{ $labels.xid }}}} on {ON_GPU} this boot: plan to replace the GPU",
              xid.NO_BUCKET[164]),
        _finding("GpuHostGpuMemoryRowRemapFailed", "row-remap-failure",
                 f"{ON_GPU} cannot repair its memory any more", "replace"),
        _finding("GpuHostGpuMissing", "gpu-missing",
                 f"{ON_GPU} is on the PCI bus but nvidia-smi does not list it", "reboot"),
        _finding("GpuHostNvlinkFabricNotCompleted", "fabric-not-completed",
                 f"{ON_GPU} cannot run NVLink fabric jobs", "restart Fabric Manager"),
        _finding("GpuHostNvlinkDown", "nvlink-down",
                 f"{ON_GPU} has every NVLink down on an NVSwitch host", "reset"),
        _finding("GpuHostNextBootWithoutDriver", "next-boot-module-missing",
                 f"{HOST} would boot its next kernel without the NVIDIA module",
                 "build it before rebooting"),
        _finding("GpuHostSecureBootSignerNotEnrolled", "secure-boot-signer-not-enrolled",
                 f"{HOST}: Secure Boot would refuse the NVIDIA module", "enrol the key"),
        _rule("GpuHostCdiSpecStaleForDockerGpus",
              'gpuhost_health_finding{id="cdi-spec-stale",severity="critical"} == 1', "critical",
              f"{HOST}: docker run --gpus uses a stale NVIDIA CDI spec (regenerate it)",
              f"gpuhost audit [cdi-spec-stale]: {ADVICE['cdi-spec-stale']}"),
        _rule("GpuHostNvswitchFatalError",
              'gpuhost_health_finding{id=~"sxid-.+",severity="critical"} == 1', "critical",
              f"{HOST}: fatal NVSwitch error {{{{ $labels.id }}}} this boot (fabric reset)",
              f"gpuhost audit [sxid-N]: {ADVICE['sxid-fatal']}"),
        _rule("GpuHostDriftPersists", "gpuhost_drift_items > 0", "warning",
              f"{HOST} has differed from its inventory settings for {DRIFT_FOR}",
              "gpuhost audit lists each drift item: run the deploy (pyinfra INVENTORY "
              "gpuhost.deploys.api.gpu_host --limit HOST) or gpuhost upgrade, or change "
              "the inventory",
              DRIFT_FOR),
        _rule("GpuHostDriverBranchEndOfLifeSoon",
              f"{eol} > time() and {eol} - time() < {lifecycle.SOON_DAYS} * 86400", "warning",
              f"{HOST}: driver branch {{{{ $labels.branch }}}} reaches end of life in "
              f"{{{{ $value | humanizeDuration }}}}",
              f"gpuhost audit [lifecycle-eol-soon]: {ADVICE['lifecycle-eol-soon']} (gpuhost "
              "upgrade, docs/upgrades.md)"),
        _rule("GpuHostDriverBranchEndOfLife", f"{eol} <= time()", "warning",
              f"{HOST}: driver branch {{{{ $labels.branch }}}} is end of life",
              f"gpuhost audit [lifecycle-eol]: {ADVICE['lifecycle-eol']} (gpuhost upgrade, "
              "docs/upgrades.md)"),
        _rule("GpuHostNotRead", "gpuhost_host_read == 0", "warning",
              f"gpuhost audit could not read {HOST} (failed or unreachable)",
              "the audit's error names the cause: check SSH to the host and run gpuhost audit "
              "INVENTORY --limit HOST", "30m"),
        # a warning only with the driver loaded (without one the drift items say what to do)
        _rule("GpuHostGpusNotRead",
              'gpuhost_health_finding{id="gpus-not-read",severity="warning"} == 1', "warning",
              f"{HOST}: the NVIDIA driver is loaded but nvidia-smi could not read the GPUs",
              f"gpuhost audit [gpus-not-read]: {ADVICE['gpus-not-read']}", "30m"),
        _rule("GpuHostAuditStale",
              f"time() - gpuhost_audit_timestamp_seconds > {AUDIT_STALE_SECONDS}", "warning",
              f"{HOST} has not been audited for 3 hours",
              "the scheduled gpuhost audit stopped: systemctl status gpuhost-audit.timer "
              "gpuhost-audit.service on the controller (docs/metrics.md)"),
    ]


def render() -> str:
    head = ("# Generated by `python -m gpuhost.reports.alerts` from gpuhost/reports/alerts.py: edit that, not "
            "this file.\n# The series: gpuhost audit --prom (docs/metrics.md).\n")
    body = yaml.safe_dump({"groups": [{"name": "gpuhost", "rules": rules()}]},
                          sort_keys=False, width=1000, allow_unicode=True)
    return head + body


if __name__ == "__main__":
    print(render(), end="")
