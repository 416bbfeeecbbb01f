"""The decisions of a driver upgrade, from facts (pure: no pyinfra).

``assess`` takes a host's validated settings, its ``gpuhost.facts.host.GpuHostState`` and its
``gpuhost.facts.upgrade.UpgradeProbe`` (read before anything changes) and returns what to do with
it and what was true before, so the result can be verified against it. While an upgrade is
under way the host carries a marker file holding that "before" (``MARKER``): a rerun after
an interruption reads it back instead of the half-changed host. ``refusal`` turns the plans
of every host of a run into the one message that stops it; ``old_packages`` names the
driver packages the switch removes. The operations are in ``roles/upgrade/``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from packaging.version import Version

from gpuhost import (aptdistros, converged, distro, el_packages, packages, policy, settings_cross,
                     signed_modules)

# GPU clients stopped before the switch, in this order (then upgrade_stop_services), started
# again in the reverse order: display managers first (an X or Wayland session holds
# nvidia_drm/nvidia_modeset: gdm is "gdm" on EL, "gdm3" on Debian/Ubuntu), then the DGX
# health monitor nvsm and DCGM (NVIDIA's MIG guide stops "nvsm" and "dcgm" before a GPU
# reset), IMEX (its daemon holds the GPUs' IMEX channels, packaged per branch like Fabric
# Manager), Fabric Manager, nvidia-persistenced. Units a host does not have are skipped.
CLIENT_SERVICES = ("gdm", "gdm3", "lightdm", "sddm", "nvsm", "nvidia-dcgm", "dcgm",
                   "nvidia-imex", "nvidia-fabricmanager", "nvidia-persistenced")
MARKER_SCHEMA = 1
# The resume point on the host while an upgrade is under way (read by facts.upgrade).
MARKER = "/var/lib/gpuhost/driver-upgrade.json"


def services_to_check(config: dict[str, Any]) -> list[str]:
    extra = [name for name in config.get("upgrade_stop_services") or ()
             if name not in CLIENT_SERVICES]
    return [*CLIENT_SERVICES, *extra]


def _gpu_label(gpu: dict[str, Any]) -> str:
    return f"GPU {gpu['index']} ({gpu.get('name') or gpu.get('model') or 'unknown model'})"


def _before(state: dict[str, Any], probe: dict[str, Any], services: list[str]) -> dict[str, Any]:
    gpus = state["gpus"]
    running = [name for name in services if probe["services"].get(name) == "running"]
    dcgm_service = any(name in running for name in ("nvidia-dcgm", "dcgm"))
    return {
        "gpu_count": len(gpus),
        "mig": {str(gpu["index"]): gpu["mig_current"] for gpu in gpus
                if gpu.get("source") == "nvidia-smi"
                and gpu.get("mig_current") in ("enabled", "disabled")},
        "daemon_json_sha256": probe["daemon_json_sha256"],
        "services": running,
        "hostengine": bool(probe["hostengine"]) and not dcgm_service,
        "containers": [container["id"] for container in probe["containers"]],
        "modules": list(probe["modules"]),
    }


def critical_findings(state: dict[str, Any], module_signing_cert: str | None = None,
                      ) -> list[dict[str, Any]]:
    """The host's critical health findings (``gpuhost.health``), kept small for the marker:
    the upgrade's health gate fails a host that has one afterwards that it did not have
    before."""
    from gpuhost import health

    return [{"id": f["id"], "gpu": f["gpu"], "message": f["message"]}
            for f in health.findings(state, module_signing_cert=module_signing_cert)
            if f["severity"] == "critical"]


def health_gate(before: list[dict[str, Any]] | None, state: dict[str, Any],
                module_signing_cert: str | None = None) -> tuple[bool, str]:
    """``(passed, one line)``: the upgraded host has no critical finding it did not have
    before the upgrade (``before``: ``critical_findings`` then; None: a resume point written
    by a gpuhost without the gate, nothing to compare with)."""
    from gpuhost import health

    now = critical_findings(state, module_signing_cert)
    if before is None:
        return True, (f"no health recorded before the upgrade (resume point of an older "
                      f"gpuhost): {len(now)} critical finding(s) now, not gated")
    new = health.new_findings([{**f, "severity": "critical"} for f in before],
                              [{**f, "severity": "critical"} for f in now], ("critical",))
    if new:
        listed = "; ".join(f"{f['id']}{' on ' + f['gpu'] if f['gpu'] else ''}: {f['message']}"
                           for f in new)
        return False, (f"health gate: {len(new)} new critical finding(s) after the upgrade: "
                       f"{listed}. The rollout stops here: look at this host (gpuhost audit) "
                       "before going on; a rerun resumes it once the finding is gone")
    return True, (f"health gate passed: no new critical finding ({len(now)} critical, "
                  f"{len(before)} before the upgrade)")


def pin_matches(tag: str, target: str, flavor: str, probe: dict[str, Any],
                signed: bool = False) -> bool:
    """The branch lock already points at the target (apt pin file / dnf module stream; on
    EL10, which has no module streams, the driver's dnf versionlock entries). ``signed``:
    ``nvidia_kernel_modules: distribution``, whose apt pin is ``signed_modules.apt_pin``."""
    if packages.family(tag) == "debian":
        pin = signed_modules.apt_pin(tag, target) if signed else packages.apt_pin(target)
        wanted = hashlib.sha256(pin.encode()).hexdigest()
        return probe["apt_pin_sha256"] == wanted
    if not packages.has_module_streams(tag):
        locks = [lock for lock in probe.get("dnf_locks") or () if el_packages.is_driver_lock(lock)]
        return bool(locks) and all(
            lock.split(":", 1)[1].rsplit("-", 1)[0] == target for lock in locks)
    return (probe["dnf_stream"] == packages.module_stream(target, flavor)
            and probe["dnf_state"] == "enabled")


def assess(name: str, config: dict[str, Any], state: dict[str, Any], probe: dict[str, Any],
           started: str = "", drains: bool = False) -> dict[str, Any]:
    """What to do with host ``name``.

    Returns ``{"host", "action": "none" | "upgrade" | "resume", "from", "target", "tag",
    "flavor", "fabricmanager", "problems": [...], "before": {...}, "marker": {...} | None,
    "new_marker": {...} | None}``. ``problems`` (one line each, naming the fix) refuse the
    upgrade before any host is touched. ``drains``: the host's Slurm node is drained (and its
    jobs waited for) before the GPU processes are checked, as ``upgrade_drain_command`` is.
    """
    target = config["nvidia_driver_version"]
    driver = state["driver"]
    services = services_to_check(config)
    problems: list[str] = []
    tag = state["os"]["distro_tag"]
    if not tag:
        problems.append(distro.os_problem(state["os"]))
    if probe.get("init") != "systemd":
        problems.append("this host did not boot with systemd (no /run/systemd/system or no "
                        "systemctl): gpuhost stops and starts services as systemd units, as "
                        "every supported distribution runs them; boot it with systemd")
    marker = probe.get("marker")
    if probe.get("marker_error"):
        problems.append(f"{probe['marker_error']}: it is gpuhost's resume point; look at it, "
                        "remove it, then rerun")
    kernels = (state["os"].get("kernel_release"),
               ((state.get("kernel") or {}).get("next_boot") or {}).get("kernel_release"))
    if config.get("nvidia_kernel_modules") == "distribution":  # issue 39
        unbuildable = signed_modules.problem(tag, kernels, target, config["nvidia_driver_flavor"])
    else:
        unbuildable = aptdistros.driver_problem(tag, kernels, target)
    if unbuildable:
        problems.append(unbuildable)
    stale = tag and settings_cross.local_repo_version_problem(
        config.get("nvidia_local_repo"), tag, target, config.get("nvidia_driver_source"))
    if stale:  # the local repo entry of this host's own distro tag only
        problems.append(stale)
    flavor = None
    try:
        flavor = policy.flavor_for_gpus(config["nvidia_driver_flavor"], state["gpus"], target)
    except ValueError as error:
        problems.append(f"driver {target} cannot drive this host: {error}")
    versions = [v for v in (driver["loaded_version"], *driver["installed_versions"]) if v]
    if not versions and not marker:
        problems.append("no NVIDIA driver is installed: provision the host with "
                        "gpuhost's gpu_host deploy (pyinfra INVENTORY "
                        "gpuhost.deploys.api.gpu_host), not with an upgrade")
    newest = max(versions, key=Version) if versions else None
    if newest and policy.is_downgrade(newest, target) and not config["upgrade_allow_downgrade"]:
        problems.append(f"refusing to downgrade the driver from {newest} to {target}: set "
                        "upgrade_allow_downgrade: true to allow it (or fix nvidia_driver_version)")
    # the one rule of a converged driver (gpuhost.converged), and what only an upgrade asks:
    # the target's module loaded, no other version installed, repo and pin moved with it
    at_target = bool(
        tag and flavor and not marker
        and converged.judge({"driver": driver}, {"nvidia_driver_version": target})
        .only(converged.DRIVER).converged
        and driver["state"] == "loaded"
        and driver["loaded_version"] == target
        and driver["installed_versions"] == [target]
        and driver["installed_flavor"] == flavor
        and all(repo["version"] == target for repo in driver["local_repos"])
        and pin_matches(tag, target, flavor, probe,
                        config.get("nvidia_kernel_modules") == "distribution")
    )
    action = "none" if at_target else "resume" if marker else "upgrade"
    before = dict(marker["before"]) if marker and isinstance(marker.get("before"), dict) \
        else _before(state, probe, services)
    if not marker:  # the health gate's reference: what was already wrong before (issue 15)
        before["critical"] = critical_findings(state, config.get("nvidia_module_signing_cert"))
    busy = [f"{_gpu_label(gpu)} pid {proc.get('pid')} {proc.get('name') or ''}".rstrip()
            for gpu in state["gpus"] for proc in gpu.get("processes") or []]
    busy += [f"container {container['name']}" for container in probe["containers"]]
    # a drain (upgrade_drain_command, or the Slurm node's drain: ``drains``) runs before the
    # GPU processes are checked, so busy GPUs are its business
    if action != "none" and busy and not config["upgrade_force"] \
            and not (config["upgrade_drain_command"] or drains):
        problems.append("GPU clients run: " + "; ".join(busy) + ": stop them, configure "
                        "upgrade_drain_command, or set upgrade_force: true")
    from_version = ((marker or {}).get("from") or driver["loaded_version"]
                    or driver["installed_version"])
    fabricmanager = bool(config["nvidia_fabricmanager"]) or any(
        "fabric" in name for name in driver["packages"])
    moving = companions(list(driver.get("companions") or ()), tag, target) if tag else []
    if tag and "nvidia-persistenced" in driver["packages"]:
        # a package of its own at the driver's version, depended on by nothing on apt: it
        # moves only when named (before, it stayed at the old driver's version)
        moving.append("nvidia-persistenced")
    new_marker = None
    if action == "upgrade":
        new_marker = {"schema": MARKER_SCHEMA, "target": target, "from": from_version,
                      "started": started, "before": before}
    return {"host": name, "action": action, "from": from_version, "target": target,
            "tag": tag, "flavor": flavor, "fabricmanager": fabricmanager,
            "companions": moving,
            "problems": problems, "before": before, "marker": marker, "new_marker": new_marker}


def refusal(plans: list[dict[str, Any]]) -> str | None:
    """The message that stops a run when any host's plan has problems (one line per problem,
    hosts by name), or None when every host may go ahead."""
    lines = [f"{plan['host']}: {problem}"
             for plan in sorted(plans, key=lambda plan: plan["host"])
             for problem in plan["problems"]]
    if not lines:
        return None
    return "driver upgrade refused, nothing was changed on any host:\n  " + "\n  ".join(lines)


_BRANCHED = re.compile(r"-(\d{3})(-server)?(-open)?$")  # Canonical's: -580-server-open

# Packages that belong to a driver branch without being the driver's meta package: they must
# be at the driver's exact version and move with it (NVIDIA's driver container pins and holds
# "FM, NSCQ, libnvsdm and IMEX" to the driver version). Their names lose the branch from 580
# on apt and dnf (gpuhost.packages.COMPANIONS_UNVERSIONED_FROM, with its sources): apt
# nvidia-fabricmanager-570 becomes nvidia-fabricmanager, EL nvidia-fabric-manager becomes
# nvidia-fabricmanager and libnvidia-nscq-570 libnvidia-nscq. The names are checked against
# what the host has, never guessed for a host without them.
COMPANIONS = ("nvidia-fabricmanager", "nvidia-fabric-manager", "libnvidia-nscq", "nvidia-imex",
              "libnvsdm")
_COMPANION = re.compile(r"^(" + "|".join(map(re.escape, COMPANIONS)) + r")(-\d{3})?$")


def _companion_kind(name: str) -> str | None:
    """``nvidia-fabricmanager`` for both spellings of Fabric Manager, else the unversioned
    base name; None for a package that is no companion."""
    match = _COMPANION.match(name)
    if not match:
        return None
    return "nvidia-fabricmanager" if match.group(1) == "nvidia-fabric-manager" else match.group(1)


def companion_name(kind: str, had_branch: bool, distro_tag: str, version: str) -> str:
    """The target's name of one companion (``kind`` as ``_companion_kind`` gives it)."""
    branch = packages.branch(version)
    if int(branch) >= packages.COMPANIONS_UNVERSIONED_FROM:
        return kind
    if kind == "nvidia-fabricmanager":
        return packages.fabricmanager_package(distro_tag, version)
    if had_branch or packages.family(distro_tag) == "debian":
        return f"{kind}-{branch}"
    return kind


def companions(installed: list[str], distro_tag: str, version: str) -> list[str]:
    """The target's names of the branch companions a host has (``installed``: its driver
    package names): from 580 every companion is unversioned (apt and dnf); below 580 apt
    names carry the branch, EL names keep what they had (Fabric Manager spelled
    ``nvidia-fabric-manager``)."""
    wanted = []
    for name in sorted(installed):
        kind = _companion_kind(name)
        if kind is None:
            continue
        target = companion_name(kind, bool(_COMPANION.match(name).group(2)), distro_tag, version)
        if target not in wanted:
            wanted.append(target)
    return wanted


def is_branched(name: str) -> bool:
    """A package name that ends with a driver branch (``nvidia-dkms-550``, ``nvidia-open-570``)."""
    return _BRANCHED.search(name) is not None


def old_packages(installed: list[str], version: str, flavor: str, wanted: list[str]) -> list[str]:
    """Installed driver packages the target does not keep: another branch's, and the other
    flavour's meta packages (their dependencies follow through the package manager)."""
    branch = packages.branch(version)
    # (and where names carry no branch, the other flavour's module package: Debian's
    # nvidia-kernel-dkms / nvidia-kernel-open-dkms, Ubuntu's unversioned nvidia-dkms /
    # nvidia-dkms-open, every branch on 26.04)
    other_meta = ({"cuda-drivers", f"cuda-drivers-{branch}", "nvidia-kernel-dkms", "nvidia-dkms"}
                  if flavor == "open"
                  else {"nvidia-open", f"nvidia-open-{branch}", "nvidia-kernel-open-dkms",
                        "nvidia-dkms-open"})
    # a companion the target spells otherwise (EL nvidia-fabric-manager -> nvidia-fabricmanager)
    renamed = {_companion_kind(name) for name in wanted} - {None}
    old = []
    for name in sorted(installed):
        if name in wanted:
            continue
        match = _BRANCHED.search(name)
        if (match and match.group(1) != branch) or name in other_meta or (
                _companion_kind(name) in renamed):
            old.append(name)
    return old
