"""The decisions of a kernel update, from facts (pure: no pyinfra).

A kernel update moves a host to a newer kernel only with the NVIDIA module built for it
first: install the kernel and its headers, let DKMS build the module, check that it is
installed for that kernel, and only then make the kernel the boot default and reboot
(docs/kernel-updates.md). ``assess`` takes the host's ``state["os"]``, ``state["kernel"]``
(``gpuhost.facts.kernel.KernelHeaders``), ``state["driver"]`` and the
``gpuhost.facts.kernel_update.KernelCandidate`` read before anything changes, and says what
to do. ``fact_args`` names what that fact must ask for on this host.
"""

from __future__ import annotations

import re
from typing import Any

from gpuhost import aptdistros, distro, kernel_meta
from gpuhost.dkms_names import is_nvidia_module

_RELEASE = re.compile(r"^[0-9][A-Za-z0-9._+~-]*$")


def release_key(release: str) -> tuple[int, ...]:
    """Orders kernel releases of one flavour: ``6.1.0-57-amd64`` after ``6.1.0-56-amd64``,
    ``5.15.0-307.178.5.el8uek.x86_64`` after ``5.15.0-306.177.4...`` (the numbers in order;
    the EL major and the flavour are the same on both sides)."""
    return tuple(int(n) for n in re.findall(r"\d+", release))


def parse_targets(text: str | None) -> dict[str, str]:
    """``--kernel TAG=RELEASE`` as the CLI passes them (``TAG=RELEASE,TAG=RELEASE``): the
    exact kernel per distribution tag. ValueError names what is wrong."""
    targets: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        tag, sep, release = item.strip().partition("=")
        if not sep or tag not in distro.DISTRO_TAGS or not _RELEASE.fullmatch(release):
            raise ValueError(f"--kernel {item.strip()!r}: want DISTRO=RELEASE with DISTRO one of "
                             f"{', '.join(distro.DISTRO_TAGS)} and RELEASE as `uname -r` prints "
                             "it (e.g. debian12=6.1.0-58-amd64)")
        targets[tag] = release
    return targets


def fact_args(os_info: dict[str, Any], kernel: dict[str, Any],
              targets: dict[str, str]) -> dict[str, Any] | None:
    """The keyword arguments of ``KernelCandidate`` for this host (None: nothing to ask,
    the distribution or the kernel flavour is unknown)."""
    tag, release = os_info.get("distro_tag"), os_info.get("kernel_release")
    if not tag or not release or not kernel.get("flavour"):
        return None
    requested = targets.get(tag)
    if os_info.get("family") == "debian":
        return {"family": "debian", "meta": kernel_meta.headers_meta(tag, release),
                "requested": requested}
    flavour = kernel["flavour"]
    name = "kernel-uek" if flavour == "uek" else "kernel"
    devel = tuple(p.replace(release, "{}") for p in
                  distro.headers_packages(tag, release, flavour))
    return {"family": "rhel", "package": name, "devel": devel, "requested": requested}


def kernel_packages(tag: str, family: str, release: str, flavour: str,
                    states: dict[str, str]) -> list[str]:
    """The packages that install kernel ``release`` with its headers. Debian publishes an
    image unsigned first (``linux-image-<abi>-unsigned``, the same kernel): that one when the
    signed one is not there."""
    if family == "debian":
        image = f"linux-image-{release}"
        unsigned = f"{image}-unsigned"
        if states.get(image) not in ("installed", "available") and \
                states.get(unsigned) in ("installed", "available"):
            image = unsigned
        return [image, f"linux-headers-{release}"]
    name = "kernel-uek" if flavour == "uek" else "kernel"
    return [f"{name}-{release}", *distro.headers_packages(tag, release, flavour)]


def assess(name: str, os_info: dict[str, Any], kernel: dict[str, Any], driver: dict[str, Any],
           candidate: dict[str, Any] | None, targets: dict[str, str]) -> dict[str, Any]:
    """What to do with host ``name``.

    ``{"host", "action": "none" | "update", "running", "target", "requested": bool,
    "packages": [...], "missing": [...], "headers": "installed" | "available" | "missing",
    "build": "installed" | "needed", "driver", "next_boot", "problems": [...], "note"}``.
    ``problems`` (one line each, naming the fix) refuse the run before any host is touched.
    """
    tag, family = os_info.get("distro_tag"), os_info.get("family")
    running = os_info.get("kernel_release") or ""
    problems: list[str] = []
    plan: dict[str, Any] = {
        "host": name, "action": "none", "running": running, "target": None,
        "requested": bool(tag and tag in targets), "packages": [], "missing": [],
        "headers": None, "build": None, "driver": None, "module": None,
        "next_boot": (kernel.get("next_boot") or {}).get("kernel_release") or running,
        "problems": problems, "note": ""}
    if not tag:
        problems.append(f"unsupported operating system "
                        f"{os_info.get('pretty_name') or '?'}: {os_info.get('error') or '?'}")
        return plan
    if kernel.get("problem") or not kernel.get("flavour"):
        problems.append(kernel.get("problem") or f"cannot tell the flavour of kernel {running}")
        return plan
    version = driver.get("loaded_version") or driver.get("installed_version")
    plan["driver"] = version
    target = (candidate or {}).get("target")
    if not target:
        problems.append(
            f"the exact kernel {targets[tag]} is not known to this host's package manager"
             if plan["requested"] else
             "this host's repositories offer no kernel of the running flavour "
             f"({kernel['flavour']}): check its repositories (apt-get update / dnf makecache)")
        return plan
    plan["target"] = target
    if target == running or (not plan["requested"]
                             and release_key(target) <= release_key(running)):
        plan["note"] = (f"runs {running}" + ("" if target == running else
                                              f", newer than the repositories' {target}"))
        plan["target"] = running if target != running else target
        return plan
    plan["action"] = "update"
    states = dict((candidate or {}).get("packages") or {})
    flavour = distro.kernel_flavour(target, family)
    plan["packages"] = kernel_packages(tag, family, target, flavour, states)
    plan["missing"] = [p for p in plan["packages"] if states.get(p, "missing") == "missing"
                       and p != "kernel-headers"]
    headers = [p for p in plan["packages"][1:] if p != "kernel-headers"]
    plan["headers"] = ("missing" if any(states.get(p, "missing") == "missing" for p in headers)
                       else "installed" if all(states.get(p) == "installed" for p in headers)
                       else "available")
    built = any(e.get("kernel") == target and e.get("status") == "installed"
                and e.get("version") == version for e in kernel.get("dkms") or [])
    plan["build"] = "installed" if built else "needed"
    plan["module"] = next((e["module"] for e in kernel.get("dkms") or []
                           if is_nvidia_module(e.get("module")) and e.get("version") == version),
                          None)
    if version and not plan["module"]:
        problems.append(f"DKMS does not build the NVIDIA module {version} on this host (no "
                        "dkms entry): gpuhost cannot build it for a new kernel")
    if not version:
        problems.append("no NVIDIA driver is installed: provision the host with "
                        "deploys/gpu_host.py first (a kernel update keeps the driver working)")
    if plan["missing"]:
        problems.append(f"kernel {target} cannot be installed with its headers: "
                        f"{', '.join(plan['missing'])} not in this host's repositories; add "
                        "the repository that carries them or name another kernel (--kernel)")
    if family == "debian" and (kernel.get("next_boot") or {}).get("source") != "grub":
        problems.append("no GRUB menu entry for the running kernel in /boot/grub/grub.cfg: "
                        "gpuhost moves the boot default with grub-set-default on Debian and "
                        "Ubuntu; run update-grub (or boot with GRUB) first")
    known = aptdistros.driver_problem(tag, (target,), version) if version else None
    if known:
        problems.append(f"kernel {target} would not get a driver module: {known}")
    return plan


def refusal(plans: list[dict[str, Any]]) -> str | None:
    """The message that stops a run when any host's plan has problems, or None."""
    lines = [f"{plan['host']}: {problem}" for plan in sorted(plans, key=lambda p: p["host"])
             for problem in plan["problems"]]
    if not lines:
        return None
    return "kernel update refused, nothing was changed on any host:\n  " + "\n  ".join(lines)


def describe(plan: dict[str, Any]) -> str:
    """One line for ``--dry``: what would happen to this host."""
    if plan["problems"]:
        return "refused: " + "; ".join(plan["problems"])
    if plan["action"] == "none":
        return f"nothing to do ({plan['note'] or 'runs ' + plan['running']})"
    return (f"install {', '.join(plan['packages'])}; headers {plan['headers']}; NVIDIA module "
            f"{plan['driver']} for {plan['target']}: "
            + ("already built by DKMS" if plan["build"] == "installed" else "DKMS build needed")
            + f"; then boot {plan['target']} (now {plan['running']})")
