"""The os and kernel facts (``state["os"]``, ``state["kernel"]``; ``facts.kernel``) from
the sections of ``facts.script``: os-release, the running and the next boot's kernel, its
headers, nouveau, DKMS, Secure Boot and MOK. Pure, like ``facts.assemble``."""

from __future__ import annotations

from typing import Any

from gpuhost.facts import boot_parsers, offered_parsers, parsers
from gpuhost.dkms_names import is_nvidia_module
from gpuhost.facts.sections import NOT_INSTALLED, Sections, installed_specs, is_installed, ok, section
from gpuhost import distro


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


def held_back(text: str | None) -> dict[str, str] | None:
    """``gpuhost kernel-update``'s note of a kernel the NVIDIA module did not build for:
    ``kernel R`` / ``driver V`` / ``reason LINE`` lines (None: no note)."""
    if not text:
        return None
    note = {"kernel": "", "driver": "", "reason": ""}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in note and not note[key]:
            note[key] = value.strip()
    return note if note["kernel"] else None


def offered(text: str | None, release: str, dkms: list[dict[str, Any]],
            held: dict[str, str] | None) -> dict[str, Any] | None:
    """The newest kernel the host's package manager offers (``facts.offered_parsers``) and
    whether gpuhost proved the NVIDIA module on it: ``newer`` than the running one,
    ``proven`` (DKMS has the NVIDIA module installed for it; None: the module does not come
    from DKMS), ``held_back`` (gpuhost kernel-update could not build it). None: not read."""
    try:
        found = offered_parsers.parse_kernel_offered(text) if text else None
    except ValueError as error:
        return {"source": None, "newest": None, "error": str(error), "newer": False,
                "proven": None, "held_back": False, "installed": False, "headers": None}
    if found is None:
        return None
    newest = found["newest"]
    nvidia = [e for e in dkms if is_nvidia_module(e["module"])]
    found["newer"] = bool(newest) and offered_parsers.release_key(newest) > \
        offered_parsers.release_key(release)
    found["proven"] = (any(e["kernel"] == newest and e["status"] == "installed" for e in nvidia)
                       if nvidia and newest else None)
    found["held_back"] = bool(held and newest and held["kernel"] == newest)
    return found


def kernel_state(sections: Sections) -> dict[str, Any]:
    """See ``gpuhost.facts.kernel.KernelHeaders``."""
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
    held = held_back(ok(sections, "kernel_held"))
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
        "module_signer": (ok(sections, "module_signer") or "").strip() or None,
        "next_boot": next_boot,
        "dkms_logs": boot_parsers.parse_dkms_logs(ok(sections, "dkms_log") or ""),
        "held_back": held,
        "offered": offered(ok(sections, "kernel_offered"), release, dkms, held),
        "problem": problem,
    }
