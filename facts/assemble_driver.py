"""The driver fact (``state["driver"]``; ``gpuhost.facts.nvidia.NvidiaDriver``): its packages,
companions and local repos, the loaded module, and the one parse of ``nvidia-smi -q -x``
(``smi_xml``) that the GPU, MIG and health facts read too. Pure, like ``facts.assemble``."""

from __future__ import annotations

import re
from typing import Any

from gpuhost.facts import parsers
from gpuhost.facts.sections import NOT_INSTALLED, TIMED_OUT, Sections, ok, packages, section, upstream_version
from gpuhost import policy

# Packages that carry the driver itself (not the local repo, not the container toolkit).
_DRIVER_PACKAGE = re.compile(
    # (the branch in apt names before 590, none from 590: nvidia-dkms-open, nvidia-utils)
    r"^(cuda-drivers(-\d+)?|nvidia-open(-\d+)?|nvidia-driver(-\d+)?(-open)?"
    r"|nvidia-dkms(-\d+)?(-open)?|nvidia-utils(-\d+)?|nvidia-kernel-common(-\d+)?"
    r"|nvidia-persistenced|nvidia-driver-cuda|kmod-nvidia-[a-z-]+"
    r"|nvidia-kmod-common|nvidia-fabricmanager-\d+|nvidia-fabric-manager"
    # Debian's names, which NVIDIA's Debian repository uses (gpuhost/packages.py)
    r"|nvidia-(open-)?kernel(-open)?-(dkms|support)|nvidia-driver-libs|libcuda1|nvidia-smi"
    r"|firmware-nvidia-gsp"
    # Canonical's server driver (nvidia_kernel_modules: distribution; gpuhost.signed_modules);
    # its linux-modules-nvidia-* carry the kernel's version, not the driver's
    r"|nvidia-(utils|kernel-common|compute-utils)-\d+-server|nvidia-headless-no-dkms-\d+-server(-open)?"
    r")$"
)
_COMPANION = re.compile(r"^(nvidia-fabricmanager|nvidia-fabric-manager|libnvidia-nscq|nvidia-imex"
                        r"|libnvsdm)(-\d{3})?$")
_LOCAL_REPO = re.compile(r"^nvidia-driver-local-repo-(?P<distro>[a-z]+\d+)-(?P<version>[\d.]+)$")


def smi_xml(sections: Sections) -> tuple[dict[str, Any] | None, str | None]:
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
    """See ``gpuhost.facts.nvidia.NvidiaDriver``."""
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
    smi, smi_error = smi_xml(sections)
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
