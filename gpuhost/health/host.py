"""The host-wide health findings: GPUs missing from nvidia-smi and the kernel log's Xid/SXid
events (``host_findings``), GPUs nvidia-smi could not read (``gpus_not_read``), a stale CDI spec, GPUDirect RDMA readiness, whether the NVIDIA
module loads after the next boot. Ids and severities: docs/health.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost import boot
from gpuhost.health import xid
from gpuhost.health.finding import finding as _finding


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


NOT_READ = "gpus-not-read"  # the finding that makes a host's health status "not_read"


def gpus_read(state: Mapping[str, Any]) -> bool | None:
    """Could the host's GPUs be read? None: the host has no NVIDIA GPU (nothing to read).
    False: it has NVIDIA GPUs (nvidia-smi's list, else the PCI bus) and nvidia-smi gave no
    answer about any of them: no driver installed or loaded, a driver/library mismatch,
    nvidia-smi timed out, failed or is missing. True otherwise. An nvidia-smi that answers
    without some GPU is ``gpu-missing``, not this."""
    gpus = state.get("gpus") or []
    if not gpus:
        return None
    if any(gpu.get("source") == "nvidia-smi" for gpu in gpus):
        return True
    return bool((state.get("health") or {}).get("gpus_missing"))


def _why_not_read(driver: Mapping[str, Any]) -> tuple[str, str]:
    """(why nvidia-smi did not answer, what to do) from the driver fact."""
    state, error = driver.get("state"), driver.get("smi_error")
    installed = driver.get("installed_version")
    if state == "not_installed":
        return "no NVIDIA driver is installed", "install it (gpuhost's deploy), then audit again"
    if state == "installed_not_loaded":
        return (f"driver {installed or '?'} is installed but not loaded",
                "reboot the host or load the module (modprobe nvidia), then audit again")
    if state == "library_mismatch":
        return ("the loaded NVIDIA module is not the installed driver (nvidia-smi: "
                "driver/library version mismatch)", "reboot the host to load the installed one")
    fix = ("run nvidia-smi on the host; if it hangs or fails, drain the host, read the kernel "
           "log for Xid errors and reboot it")
    if error == "timed_out":
        return "the driver is loaded but nvidia-smi timed out", fix
    if error:
        return f"the driver is loaded but nvidia-smi failed ({error})", fix
    return ("the driver is loaded but nvidia-smi did not run (is it installed?)",
            "install the driver's utilities (gpuhost's deploy does)")


def gpus_not_read(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``gpus-not-read`` when ``gpus_read`` is False: info when no driver is loaded (the
    drift items say what to do), warning when one is loaded and nvidia-smi still does not
    answer."""
    if gpus_read(state) is not False:
        return []
    driver = state.get("driver") or {}
    why, fix = _why_not_read(driver)
    severity = "warning" if driver.get("state") == "loaded" else "info"
    return [_finding(NOT_READ, severity, None, (
        f"NVIDIA GPUs on the PCI bus that nvidia-smi could not read ({why}): their health "
        f"(memory, PCIe, throttling, NVLink, missing GPUs) is not checked; {fix}"))]


def _recovered(finding: dict[str, Any], health: Mapping[str, Any]) -> dict[str, Any]:
    """An Xid of a GPU that ``gpuhost recover`` reset this boot, with no new Xid on it since:
    the kernel keeps the line until the next boot, so it becomes information (the same id,
    for the record; the metrics say ``recovered="true"``)."""
    done = (health.get("recovered") or {}).get(finding["gpu"] or "")
    if not done or not finding["id"].startswith("xid-"):
        return finding
    if xid.new_since(health.get("xid_events") or [], finding["gpu"], done):
        return finding
    return {**finding, "severity": "info", "recovered": True,
            "message": "handled: gpuhost recover reset this GPU during this boot and no Xid came "
                       "since (the kernel log keeps the line until the next boot). Was: "
                       + finding["message"]}


def cdi_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An NVIDIA CDI spec that no longer matches the host (gpuhost.runtime.cdi.judge; issue 16);
    NVIDIA's refresh unit left failed (issue 37)."""
    from gpuhost.runtime import cdi

    found = []
    unit = cdi.refresh_unit_failed(state)
    if unit is not None:
        found.append(_finding("cdi-refresh-failed", "warning", None, (
            f"{cdi.REFRESH_UNIT} is failed (result {unit['result']}): NVIDIA's unit gave up, "
            "typically started before the driver was active, so it will not rewrite the CDI "
            "spec after a driver or toolkit change; run gpuhost's deploy (it resets and reruns "
            f"the unit once the driver is loaded) or `systemctl reset-failed {cdi.REFRESH_UNIT}"
            f" && systemctl start {cdi.REFRESH_UNIT}`")))
    from gpuhost.runtime import cdi_schema

    podman = cdi_schema.podman_problem(state)
    if podman is not None:
        found.append(_finding("cdi-spec-podman-unreadable", "warning", None, podman))
    assumed = cdi.gpus_route_assumed((state.get("docker") or {}).get("docker_version"))
    if assumed is not None:
        found.append(_finding("docker-gpus-assumed", "info", None, assumed))
    return found + _stale_spec_findings(state)


def _stale_spec_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    from gpuhost.runtime import cdi

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
    if gdr.inbox(facts):
        dmabuf = gdr.dmabuf_possible(state)
        found.append(_finding("rdma-peermem-unusable", "info" if dmabuf else "warning", None, (
            f"{gdr.INBOX_WHY}: " + (
                "GPUDirect RDMA goes through DMA-BUF instead (NVIDIA's open kernel module on "
                "Linux 5.12+, which this host has; NCCL uses it where it can, NCCL_DMABUF_ENABLE)"
                if dmabuf else
                "and DMA-BUF, the inbox stack's way, needs NVIDIA's open kernel module and Linux "
                "5.12+, which this host lacks: NCCL stages GPU memory through host memory; use "
                "the open module on a 5.12+ kernel (DMA-BUF), or install MLNX_OFED/DOCA-OFED and "
                "rebuild the NVIDIA module after it (peermem)"))))
    elif facts.get("peermem_loaded") is False and gdr.dmabuf_possible(state) is False:
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
    nearest = gdr.nearest_nics(facts.get("topo") or {}, switches)
    matrix = (facts.get("topo") or {}).get("matrix") or {}
    for row, (nic, link) in nearest.items():
        if link not in gdr.GDR_OFF:
            continue
        peers = [p for p, via in (matrix.get(row) or {}).items()
                 if p in nearest and via.startswith("NV") and nearest[p][1] not in gdr.GDR_OFF]
        if peers:  # NCCL's PXN: through an NVLink peer whose NIC is close
            continue
        where = {"SYS": "across the CPU interconnect between NUMA nodes (SYS)",
                 "NODE": "across PCIe host bridges within its NUMA node (NODE)",
                 "PHB": "through the CPU's PCIe host bridge (PHB)"}[link]
        found.append(_finding("rdma-nic-across-cpu", "warning",
                              xid.slot(by_index.get(row)) if by_index.get(row) else None, (
            f"{row}'s nearest RDMA NIC {nic} is {where} (nvidia-smi topo -m), and no NVLink "
            "peer of it has a NIC under its PCIe switch: NCCL turns GPUDirect RDMA off beyond "
            "PXB by default (NCCL_NET_GDR_LEVEL) and stages this GPU's traffic through host "
            "memory; move the NIC or GPU to slots under one PCIe switch (PIX/PXB), or bind "
            "jobs to the NIC nearest each GPU (NCCL_IB_HCA)")))
    return found


def kernel_offered_findings(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A newer kernel the host's package manager offers, and whether gpuhost proved the
    NVIDIA module on it (info: nothing is wrong)."""
    offer = (state.get("kernel") or {}).get("offered") or {}
    if not offer.get("newer"):
        return []
    proof = ("held back: DKMS could not build the NVIDIA module for it" if offer["held_back"]
             else "the NVIDIA module does not come from DKMS: not proven by gpuhost"
             if offer["proven"] is None else "proven: DKMS built the NVIDIA module for it"
             if offer["proven"] else "not proven: no NVIDIA module built for it yet")
    return [_finding("kernel-newer-offered", "info", None, (
        f"the package manager offers a newer kernel, {offer['newest']} ("
        f"{'installed' if offer.get('installed') else 'not installed'}; {proof}); "
        "gpuhost kernel-update moves the host to it with the module built first"))]


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
    held = kernel.get("held_back")
    if held:
        found.append(_finding("kernel-held-back", "warning", None, (
            f"kernel {held['kernel']} is installed and held back: DKMS could not build the "
            f"NVIDIA module {held['driver'] or '?'} for it ({held['reason'] or 'see make.log'}); "
            "the host boots its running kernel. Move to a driver that builds for it, or name "
            "another kernel to gpuhost kernel-update (--kernel)")))
    if kernel.get("secure_boot") != "enabled":
        return found
    if kernel.get("module_signer"):  # issue 39: which key signed it, and does the kernel trust it
        loaded = driver.get("state") == "loaded"
        found.append(_finding("secure-boot-module-signer", "info", None, (
            f"Secure Boot is on and the NVIDIA module is signed by \"{kernel['module_signer']}\"" + (
                ": it is loaded, so the kernel trusts that key" if loaded else
                ": it is not loaded; if modprobe says \"Key was rejected by service\", that "
                "key is neither the distribution's nor an enrolled MOK"))))
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
