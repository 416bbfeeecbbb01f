"""The operations of a kernel update (``roles/kernel_update.py`` orders them). Each reads the
host when it runs and does only what is still to do, so a rerun after an interruption
picks up where the last run stopped.

The boot default is the guarantee: it names the running kernel until the NVIDIA module is
installed by DKMS for the new one, and only ``make_default`` moves it
(``roles/kernel_boot_default.py``: EL ``grubby``, the kernel package's own scriptlet kept from
moving it by ``UPDATEDEFAULT=no`` while it installs; Debian/Ubuntu GRUB's saved default,
``grub-set-default``, named before the package's ``update-grub`` runs).
"""

from __future__ import annotations

from typing import Any

from pyinfra import host, state
from pyinfra.api import QuoteString, StringCommand, operation

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.kernel import KernelHeaders
from gpuhost.facts.kernel_update import KernelCandidate
from gpuhost.roles import kernel_boot_default as boot
from gpuhost.roles.common import executing, fail_command
from gpuhost.roles.upgrade import record as upgrade_record

SYSCONFIG = "/etc/sysconfig/kernel"
# the host's own /etc/sysconfig/kernel while gpuhost holds UPDATEDEFAULT=no (the resume point)
SYSCONFIG_SAVED = "/var/lib/gpuhost/kernel-update.sysconfig-kernel"
# the audit's note of a kernel the module did not build for (facts/script.py "kernel_held")
HELD_BACK = "/var/lib/gpuhost/kernel-held-back"


def _q(value: str) -> QuoteString:
    return QuoteString(value)


def _restore_sysconfig() -> str:
    return (f"if [ -e {SYSCONFIG_SAVED} ]; then cp -p {SYSCONFIG_SAVED} {SYSCONFIG} && "
            f"rm -f {SYSCONFIG_SAVED}; fi")


def _keep(family: str, running: str) -> StringCommand:
    return boot.set_default(family, running, fail_command(
        f"the boot loader has no entry for the running kernel {running} ({boot.GRUB_CFG}): "
        "gpuhost cannot keep it the boot default; run update-grub and check the host boots "
        "with GRUB"))


@operation()
def install_kernel(family: str, packages: list[str], running: str, fact_args: dict[str, Any]):
    """
    Install the new kernel and its headers with the running kernel staying the boot default.

    + family: ``debian`` or ``rhel``
    + packages: the kernel and its headers (``gpuhost.kernel_update.kernel_packages``)
    + running: the running kernel (the default until the module is there)
    + fact_args: ``KernelCandidate``'s arguments for this host
    """
    states = host.get_fact(KernelCandidate, **fact_args)["packages"]
    missing = [p for p in packages if states.get(p) != "installed"]
    if not missing:
        host.noop(f"{', '.join(packages)} installed")
        return
    names = [_q(p) for p in packages]
    if family == "debian":
        # the running kernel GRUB's saved default before the package's update-grub runs
        yield StringCommand(_keep(family, running), "&& apt-get update -qq && "
                            "DEBIAN_FRONTEND=noninteractive apt-get install -y "
                            "--no-install-recommends", *names, "; rc=$?;",
                            _keep(family, running), "; exit $rc")
        return
    # EL: kernel-install makes a new kernel the default when UPDATEDEFAULT=yes; hold it at
    # "no" for this transaction, then put the host's file back (a resume puts it back first)
    yield StringCommand(
        "mkdir -p /var/lib/gpuhost &&", _restore_sysconfig(), "&&",
        f"{{ [ ! -e {SYSCONFIG} ] || cp -p {SYSCONFIG} {SYSCONFIG_SAVED}; }} &&",
        f"{{ grep -q '^UPDATEDEFAULT=' {SYSCONFIG} 2>/dev/null && "
        f"sed -i 's/^UPDATEDEFAULT=.*/UPDATEDEFAULT=no/' {SYSCONFIG} || "
        f"echo UPDATEDEFAULT=no >> {SYSCONFIG}; }};",
        "dnf install -y --setopt=install_weak_deps=False", *names, "; rc=$?;",
        _restore_sysconfig(), "; if [ -e", _q(f"/boot/vmlinuz-{running}"), "]; then",
        boot.set_default(family, running), "; fi; exit $rc")


@operation()
def keep_default(family: str, running: str):
    """
    The running kernel is the boot default (a package scriptlet or an interrupted run may
    have moved it).

    + family: ``debian`` or ``rhel``
    + running: the running kernel
    """
    if family != "rhel":
        yield _keep(family, running)
        return
    yield StringCommand(_restore_sysconfig(), ";", boot.set_default(family, running))


def _module_for(kernel: dict[str, Any], module: str, version: str, release: str) -> bool:
    return any(e.get("module") == module and e.get("version") == version
               and e.get("kernel") == release and e.get("status") == "installed"
               for e in kernel.get("dkms") or [])


@operation()
def build_module(module: str, version: str, release: str, remove: list[str] | None = None):
    """
    DKMS builds and installs the NVIDIA module ``version`` for kernel ``release``; a failed
    build fails the host with the tail of DKMS's make.log (the boot default is untouched).
    With ``remove`` (``--remove-failed``) those packages (the new kernel's) are removed
    first; else the kernel stays installed, not the default.

    + module: the DKMS module name (``nvidia``, ``nvidia-open``...)
    + version: the driver version the host runs
    + release: the new kernel
    + remove: the new kernel's packages, removed when the build fails (EL: dnf, apt: apt-get)
    """
    if executing() and _module_for(host.get_fact(KernelHeaders), module, version, release):
        host.noop(f"DKMS has {module} {version} installed for kernel {release}")
        return
    log = f"/var/lib/dkms/{module}/{version}/build/make.log"
    fate = (f"kernel {release} was removed again" if remove else
            f"kernel {release} stays installed but is not the boot default")
    removal: list[Any] = []
    if remove:
        removal = ["dnf remove -y" if remove[0].startswith("kernel") else
                   "DEBIAN_FRONTEND=noninteractive apt-get purge -y",
                   *[_q(p) for p in remove if p != "kernel-headers"], ">/dev/null 2>&1;"]
    # the audit's note of the kernel left installed (not with --remove-failed)
    note: list[Any] = [] if remove else [
        "mkdir -p /var/lib/gpuhost; { printf '%s\\n'", _q(f"kernel {release}"),
        _q(f"driver {version}"), '; grep -m 1 -i "error" ', _q(log),
        f"| sed 's/^/reason /'; }} > {HELD_BACK};"]
    # on failure the compiler's error lines from make.log first (they say why), then the end
    # of DKMS's own output ("Bad return status ..."), then gpuhost's line
    yield StringCommand(
        "out=$(mktemp) && if dkms install -m", _q(module), "-v", _q(version), "-k", _q(release),
        '>"$out" 2>&1; then cat "$out"; rm -f "$out"; if grep -qx', _q(f"kernel {release}"),
        HELD_BACK, "2>/dev/null; then rm -f", HELD_BACK, "; fi; else", *note,
        'grep -i -E "error|warning: the" ', _q(log),
        '| head -n 6 >&2; tail -n 4 "$out" >&2; rm -f "$out";', *removal,
        fail_command(
            f"DKMS could not build {module} {version} for kernel {release} (its make.log: "
            f"{log}); {fate}: the host keeps booting its running kernel. Use a driver that "
            "builds for it or name another kernel (--kernel)"), "; fi")


@operation()
def module_ready(module: str, version: str, release: str):
    """
    Fail the host unless ``dkms status`` shows the NVIDIA module installed for ``release``
    (read after the build: a build that fails silently is caught here).

    + module: the DKMS module name
    + version: the driver version
    + release: the new kernel
    """
    if not executing():
        host.noop("the module is checked when the update runs")
        return
    if _module_for(host.get_fact(KernelHeaders), module, version, release):
        host.noop(f"{module} {version} is installed for kernel {release}")
        return
    yield fail_command(f"DKMS does not show {module} {version} installed for kernel {release} "
                       "after the build; not making it the boot default")


@operation()
def make_default(release: str, family: str = "rhel"):
    """
    Make ``release`` the boot default (EL: ``grubby --set-default``; Debian/Ubuntu:
    ``grub-set-default`` with ``GRUB_DEFAULT=saved``), only after ``module_ready`` passed.

    + release: the new kernel
    + family: ``debian`` or ``rhel``
    """
    yield boot.set_default(family, release, fail_command(
        f"the boot loader has no entry for kernel {release} ({boot.GRUB_CFG} after update-grub)"
        "; it stays installed, not the boot default"))


@operation()
def boot_gate(running: str, release: str, module_signing_cert: str | None,
              family: str = "rhel"):
    """
    With ``release`` now the boot default, and before the reboot: gpuhost's next-boot health
    checks (``gpuhost.health.host.next_boot_findings``: DKMS's module for the kernel that
    boots next; under Secure Boot a Machine Owner Key enrolled, and the inventory's signing
    certificate among them). A critical finding puts ``running`` back as the default and
    fails the host, not rebooted.

    + running: the running kernel
    + release: the new kernel
    + module_signing_cert: the inventory's ``nvidia_module_signing_cert``
    + family: ``debian`` or ``rhel``
    """
    if not executing():
        host.noop("the next boot is checked when the update runs")
        return
    from gpuhost.health.host import next_boot_findings

    found = [f for f in next_boot_findings(host.get_fact(GpuHostState), module_signing_cert)
             if f["severity"] == "critical"]
    if not found:
        host.noop(f"the next boot ({release}) will load the NVIDIA module")
        return
    yield StringCommand(_keep(family, running), ";", fail_command("not rebooting into " + release + ", " + running
                                     + " is the boot default again: "
                                     + "; ".join(f["message"] for f in found)))


@operation()
def verify(release: str, version: str, gpu_count: int):
    """
    After the reboot: the host runs ``release``, the NVIDIA module ``version`` is loaded on
    it and every GPU seen before answers.

    + release: the new kernel
    + version: the driver version
    + gpu_count: GPUs the host had before
    """
    if not executing():
        host.noop("the new kernel is verified when the update runs")
        return
    now = host.get_fact(GpuHostState)
    problems = []
    if now["os"]["kernel_release"] != release:
        problems.append(f"runs kernel {now['os']['kernel_release']}, not {release}")
    if now["driver"]["state"] != "loaded" or now["driver"]["loaded_version"] != version:
        problems.append(f"the NVIDIA module {version} is not loaded "
                        f"(driver state {now['driver']['state']})")
    if len(now["gpus"]) < gpu_count:
        problems.append(f"{len(now['gpus'])} GPU(s) answer, {gpu_count} before")
    if problems:
        yield fail_command("after the reboot: " + "; ".join(problems))
        return
    host.noop(f"kernel {release} runs with the NVIDIA module {version} and {gpu_count} GPU(s)")


@operation()
def record_done(running: str, result: str):
    """
    Append this host's result to the controller's event file (changes nothing).

    + running: the kernel the host ran before
    + result: ``upgraded`` or ``already at target``
    """
    if not executing():
        host.noop("the result is recorded when the update runs")
        return
    now = host.get_fact(GpuHostState)["os"]["kernel_release"]
    upgrade_record.write_event("done", **{
        "from": running, "to": now, "result": result,
        "seconds": upgrade_record.seconds_since_start(state, host.name)})
    host.noop(f"{result}: {running} -> {now}")
    yield from ()
