"""Kubernetes node profiles (``kubernetes_profile``, docs/kubernetes.md): what a node must
show for NVIDIA's DRA driver or for the GPU Operator running on the host's own driver and
toolkit (pure, no pyinfra).

- ``none``: gpuhost's own choices (containerd, IMEX as their settings say).
- ``dra``: CDI on in containerd's CRI plugin (gpuhost's drop-in, ``enable_cdi = true``) and,
  on NVL hosts, ``nvidia-imex.service`` disabled, stopped and masked: the DRA driver runs one
  IMEX daemon per ComputeDomain (kubernetes-sigs/dra-driver-nvidia-gpu @95932046,
  ``site/content/docs/prerequisites.md``: "the ``nvidia-imex.service`` systemd unit must be
  disabled", ``systemctl disable --now`` then ``systemctl mask``).
- ``dra-host-managed-imex``: CDI on as above, and IMEX run by the host (the driver's alpha
  ``imex.mode=hostManaged``, same page): ``nvidia-imex.service`` running with
  ``IMEX_CMD_ENABLED=1`` and ``IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock`` in
  ``/etc/nvidia-imex/config.cfg``.
- ``gpu-operator``: the GPU Operator installed with ``driver.enabled=false`` and
  ``toolkit.enabled=false`` ("set this value to false when using the Operator on systems
  with pre-installed drivers", NVIDIA's "Install NVIDIA GPU Operator" page): the driver
  loaded, the toolkit installed and containerd's nvidia runtime configured (gpuhost's
  drop-in), all of which gpuhost does; IMEX stays as ``nvidia_fabric`` says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PROFILES = ("none", "dra", "dra-host-managed-imex", "gpu-operator")
MEANING = (
    "Kubernetes node profile (docs/kubernetes.md): none; dra (NVIDIA's DRA driver: CDI on in "
    "containerd, on NVL hosts nvidia-imex.service disabled and masked); "
    "dra-host-managed-imex (CDI on, IMEX run by the host with IMEX_CMD_ENABLED=1 and its "
    "control socket: the DRA driver's imex.mode=hostManaged); gpu-operator (GPU Operator with "
    "driver.enabled=false, toolkit.enabled=false); every profile but none needs "
    "containerd_nvidia_runtime: true")
IMEX_SERVICE = "nvidia-imex"
IMEX_CONFIG = "/etc/nvidia-imex/config.cfg"
# dra-driver-nvidia-gpu prerequisites (hostManaged): the keys the plugin needs in config.cfg
HOST_MANAGED_IMEX = (("IMEX_CMD_ENABLED", "1"),
                     ("IMEX_CMD_UNIX_DOMAIN_PATH", "/etc/nvidia-imex/imex_ctrl.sock"))


def cdi_in_containerd(profile: str) -> bool:
    """The DRA profiles need CDI enabled in the runtime (DRA-allocated devices are injected
    through CDI)."""
    return profile in ("dra", "dra-host-managed-imex")


def imex_masked(profile: str) -> bool:
    """The DRA driver owns IMEX (its default mode): the host's unit is masked."""
    return profile == "dra"


def settings_problems(v: Mapping[str, Any]) -> list[str]:
    """Contradictions known before any host is read (gpuhost.settings_cross)."""
    profile = v.get("kubernetes_profile") or "none"
    if profile == "none":
        return []
    problems = []
    if not v.get("containerd_nvidia_runtime"):
        what = "CDI enabled in containerd" if cdi_in_containerd(profile) else \
            "containerd's nvidia runtime"
        problems.append(f"kubernetes_profile: {profile} needs {what}, through gpuhost's "
                        "containerd drop-in: set containerd_nvidia_runtime: true (or "
                        "kubernetes_profile: none)")
    if profile == "dra-host-managed-imex" and v.get("nvidia_fabric") != "nvl":
        problems.append("kubernetes_profile: dra-host-managed-imex runs IMEX on the host, which "
                        f"only NVL hosts have, but nvidia_fabric is {v.get('nvidia_fabric')}: "
                        "set nvidia_fabric: nvl with nvidia_imex_peers, or kubernetes_profile: dra")
    return problems


# containerd's CRI plugin reads enable_cdi (default false) and cdi_spec_dirs from 1.7.0 on:
# containerd PR #6654 "CRI: add support for CDI device injection" (merged 2022), listed under
# "Runtime Features" in containerd's releases/v1.7.0.toml; on by default from 2.0 (containerd
# commit c8e8a093, named in kubernetes-sigs/kind PR #3530). Debian 12's 1.6 CRI config has no
# such key and ignores it, so DRA's devices would never reach a pod on 1.6. Schema 0.7.0 specs
# need 1.7.16 (gpuhost.runtime.cdi_schema).
CONTAINERD_CDI_FROM = (1, 7)


def containerd_problem(profile: str, containerd_version: str | None) -> str | None:
    """A DRA profile on a containerd that cannot inject CDI devices (refused on the host
    before gpuhost's drop-in is written); ``containerd_version``: ``containerd --version``."""
    if not cdi_in_containerd(profile):
        return None
    for word in (containerd_version or "").split()[2:3]:
        found = re.match(r"v?(\d+)\.(\d+)", word)
        if found and (int(found.group(1)), int(found.group(2))) < CONTAINERD_CDI_FROM:
            return (f"kubernetes_profile: {profile} needs CDI in containerd, which containerd "
                    f"{word} does not have (CDI came with containerd 1.7): install containerd "
                    "1.7 or newer (Docker's containerd.io, or your cluster's), or set "
                    "kubernetes_profile: none; nothing changed")
    return None


def drift(state: Mapping[str, Any], profile: str, fabric_kind: str) -> list[tuple[str, str, str, str]]:
    """(item, have, want, message) where the host's IMEX contradicts ``profile`` (read from
    the ``fabric_services`` section: ``systemctl is-enabled``/``is-active``). CDI and the
    runtime are judged by the containerd drop-in's own drift (``enable_cdi`` per profile)."""
    services = (state.get("fabric") or {}).get("services") or {}
    unit = services.get(IMEX_SERVICE)
    if unit is None:
        return []
    enabled, active = unit.get("enabled") or "unknown", unit.get("active") or "unknown"
    have = f"{enabled}/{active}"
    if imex_masked(profile):
        if enabled != "masked" or active == "active":
            return [("kubernetes_imex", have, "masked/inactive",
                     f"kubernetes_profile: dra, but nvidia-imex.service is {enabled} and "
                     f"{active}: the DRA driver runs one IMEX daemon per ComputeDomain and the "
                     "host's must be disabled and masked; run the deploy")]
        return []
    if fabric_kind == "nvl" and (enabled != "enabled" or active != "active"):
        return [("kubernetes_imex", have, "enabled/active",
                 f"kubernetes_profile: {profile}, nvidia_fabric: nvl, but nvidia-imex.service "
                 f"is {enabled} and {active}: IMEX must run on this host; run the deploy")]
    return []
