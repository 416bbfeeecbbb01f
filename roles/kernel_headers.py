"""Install exactly the headers of the running kernel (UEK aware); never upgrade the kernel."""

from __future__ import annotations

import re


from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages
from pyinfra.operations import files

from gpuhost.facts.kernel import KernelHeaders, PackageAvailable
from gpuhost.roles.files import config_file
from gpuhost.roles.common import GpuhostError, distro_tag, executing, host_state
from gpuhost import distro, kernel_meta, packages


def _missing_message(package: str, release: str) -> str:
    return (
        f"gpuhost: no package {package} for the running kernel {release} in this host's "
        "repositories. gpuhost never changes the kernel by itself: add the repository that "
        f"carries {package}, or boot a kernel whose headers are available, then run again."
    )


@operation()
def headers(family: str):
    """
    Install the headers/devel packages the running kernel needs, checking first that the
    repositories carry them (a clear failure names the kernel and the package).

    + family: ``debian`` or ``rhel``
    """
    kernel = host.get_fact(KernelHeaders)
    missing = list(kernel["headers_packages_missing"])
    if kernel["gcc_toolset"] and not kernel["gcc_toolset_installed"]:
        missing.append(kernel["gcc_toolset"])
    if not missing:
        host.noop(f"headers for kernel {kernel['kernel_release']} are installed")
        return
    release = kernel["kernel_release"]
    if family == "debian":
        yield "apt-get update -qq"
        for package in missing:
            yield StringCommand(
                "apt-cache show --no-all-versions", QuoteString(package),
                ">/dev/null 2>&1 || { echo", QuoteString(_missing_message(package, release)),
                ">&2; exit 1; }",
            )
        yield StringCommand(
            "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends",
            *[QuoteString(package) for package in missing],
        )
    else:
        for package in missing:
            yield StringCommand(
                "dnf -q repoquery --available", QuoteString(package),
                "2>/dev/null | grep -q . || { echo", QuoteString(_missing_message(package, release)),
                ">&2; exit 1; }",
            )
        # --setopt=install_weak_deps=False: nothing more than asked; exact names, so dnf
        # cannot pick a newer kernel's devel package (kernel-devel-matched could).
        yield StringCommand(
            "dnf install -y --setopt=install_weak_deps=False",
            *[QuoteString(package) for package in missing],
        )


@operation()
def next_boot_headers(family: str):
    """
    Headers of the kernel the boot loader starts next, when it is not the running one and
    the repositories carry them (else the reboot is refused later, roles/boot_safety.py).

    + family: ``debian`` or ``rhel``
    """
    nxt = host.get_fact(KernelHeaders)["next_boot"]
    missing = list(nxt["headers_packages_missing"])
    if not nxt["differs"] or not missing:
        host.noop(f"headers for the next boot's kernel {nxt['kernel_release']} are installed")
        return
    quoted = [QuoteString(package) for package in missing]
    if family == "debian":
        check = StringCommand("apt-cache show --no-all-versions", *quoted, ">/dev/null 2>&1")
        install = StringCommand(
            "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends", *quoted)
    else:
        check = StringCommand("dnf -q repoquery --available", *quoted, "2>/dev/null | grep -q .")
        install = StringCommand("dnf install -y --setopt=install_weak_deps=False", *quoted)
    yield StringCommand(
        "if", check, "; then", install, "; else echo", QuoteString(
            f"gpuhost: no {' '.join(missing)} in this host's repositories for kernel "
            f"{nxt['kernel_release']}, which the next boot starts; gpuhost will not reboot it"),
        "; fi")


def headers_meta_package(tag: str, flavour: str | None, release: str = "") -> str:
    """The package that follows kernel updates with their headers, so DKMS builds the
    module for the next kernel too: Debian/Ubuntu the meta package of kernel ``release``'s
    flavour (``gpuhost.kernel_meta``: linux-headers-amd64, -cloud-amd64, -generic,
    -generic-hwe-22.04, -aws ...), EL kernel-uek-devel / kernel-devel."""
    if packages.family(tag) == "debian":
        return kernel_meta.headers_meta(tag, release)
    return "kernel-uek-devel" if flavour == "uek" else "kernel-devel"


@operation()
def future_headers(family: str, package: str):
    """
    The headers meta package, so a kernel update brings its headers and DKMS builds the
    NVIDIA module for it (issue 14). Best effort: when the host's repositories do not carry
    it (an offline mirror), a warning instead of a failure; the next-boot check
    (roles/boot_safety.py) still refuses a reboot into a kernel without the module.

    pyinfra runs an operation's body again when it executes it, with facts read then: placed
    after the driver's local repository went in (``install_future``), the availability is
    read after every ``apt-get update`` of this run. (Read before it, a fresh image without
    package lists answered "not available" on the first run and "available" on the second:
    one change on a converged host, the CI run of stop 18.)

    + family: "debian" (apt) or "rhel" (dnf)
    + package: linux-headers-<flavour> (gpuhost.kernel_meta) / kernel-uek-devel / kernel-devel
    """
    installed = host.get_fact(DebPackages if family == "debian" else RpmPackages) or {}
    if package in installed:
        host.noop(f"{package} is installed")
        return
    if not host.get_fact(PackageAvailable, package=package, family=family):
        if not executing():  # the run may refresh the package lists before it gets here
            host.noop(f"{package}: whether the repositories carry it is read when the run "
                      "gets here")
            return
        logger.warning(f"{host.name}: WARNING: {package} is not in this host's package lists, "
                       "so kernel updates will not bring their headers and DKMS will not build "
                       "the NVIDIA module for them (a reboot into such a kernel is refused): "
                       f"add {package} to the repositories or mirror this host uses")
        host.noop(f"{package} is not available here (see the warning)")
        return
    if family == "debian":
        yield StringCommand(
            "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=\"--force-confdef\" "
            "-o Dpkg::Options::=\"--force-confold\" install --no-install-recommends",
            QuoteString(package))
    else:
        yield StringCommand("dnf install -y --setopt=install_weak_deps=False",
                            QuoteString(package))


def install_future() -> None:
    """The headers meta package of the kernel that boots next (``future_headers``): called by
    the driver role once its local repository is in."""
    state = host_state()
    tag = distro_tag(state)
    kernel = state["kernel"]
    next_boot = kernel["next_boot"]
    flavour, release = kernel["flavour"], kernel["kernel_release"]
    if next_boot["differs"]:
        flavour = "uek" if "uek" in next_boot["kernel_release"] else "rhck"
        release = next_boot["kernel_release"]
    meta = headers_meta_package(tag, flavour, release)
    future_headers(name=f"Headers of future kernels ({meta})", family=packages.family(tag),
                   package=meta)


DKMS_TOOLSET_CONF = "/etc/dkms/framework.conf.d/gpuhost-gcc-toolset.conf"
DKMS_TOOLSET_ENV = "/etc/dkms/gpuhost-gcc-toolset.sh"
DKMS_MODULE_OVERRIDE = "/etc/dkms/nvidia.conf"


def toolset_cases(el_major: int, indent: str, action: str) -> str:
    """``case "$kernelver"`` branches for every UEK line of this EL release built with a gcc
    toolset (gpuhost.distro.UEK_TOOLSETS); ``action`` gets the toolset's enable script."""
    lines = [f"{indent}{distro.uek_release_glob(el, uek)}) "
             + action.format(enable=f"/opt/rh/{ts}/enable") + " ;;"
             for (el, uek), ts in sorted(distro.UEK_TOOLSETS.items()) if el == el_major]
    return "\n".join(lines)


def toolset_files(el_major: int) -> dict[str, str]:
    """What makes DKMS build a UEK kernel's modules with that kernel's gcc toolset, and only
    those (RHCK on the same host keeps the system gcc): real dkms reads framework.conf.d in a
    subshell and keeps only its own variables, so sourcing an enable script there does
    nothing (dkms-project/dkms, dkms.in safe_source). dkms 3.3.0 and newer (EPEL's 3.4.x) take
    ``build_environment=FILE``: FILE is sourced before each build with ``$kernelver`` set and
    its exported variables kept. Older dkms (Debian's 3.2.x, EPEL's builds before 3.3.0) ignore that
    line; they read ``/etc/dkms/<module>.conf`` after the module's own dkms.conf, with
    ``$kernelver`` set and ``MAKE`` already holding the package's command, and keep MAKE:
    the toolset goes in front of the build command there. Both files are written: a dkms
    update (3.2 -> 3.4) changes which one acts, never whether one does."""
    head = ("# Managed by gpuhost: DKMS builds modules for UEK kernels with the gcc toolset\n"
            "# that built them (the system gcc is older); other kernels keep the system gcc.\n")
    return {
        DKMS_TOOLSET_ENV: head + 'case "$kernelver" in\n'
        + toolset_cases(el_major, "    ", ". {enable}") + "\nesac\n",
        DKMS_TOOLSET_CONF: head + "# dkms >= 3.3.0: sourced before each build, $kernelver set.\n"
        f'build_environment="{DKMS_TOOLSET_ENV}"\n',
        DKMS_MODULE_OVERRIDE: head + "# dkms < 3.3.0 (no build_environment): read after the NVIDIA "
        "module's dkms.conf.\n" + 'case "$kernelver" in\n'
        + toolset_cases(el_major, "    ", 'MAKE[0]=". {enable} && ${{MAKE[0]}}"') + "\nesac\n",
    }


def _rpm_key(evr: str) -> list:
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.findall(r"\d+|[a-z]+", evr)]


@operation()
def rhck_devel_matched():
    """
    EPEL 9's dkms ``Requires: (kernel-devel-matched if kernel-core)``: on a UEK host that
    also has RHCK installed, dnf satisfies it with the NEWEST kernel-devel-matched, which
    pulls the newest RHCK kernel-core (a kernel gpuhost never asked for, which may become the
    boot default). Installing kernel-devel-matched of the newest INSTALLED kernel-core first
    satisfies the requirement with a kernel that is already there (issue 23 item 4).
    """
    installed = host.get_fact(RpmPackages) or {}
    cores = installed.get("kernel-core") or []
    if not cores or installed.get("kernel-devel-matched"):
        host.noop("EPEL's dkms finds its kernel-devel-matched requirement met "
                  f"(kernel-core: {', '.join(cores) or 'none'})")
        return
    package = f"kernel-devel-matched-{max(cores, key=_rpm_key)}"
    yield StringCommand(
        "dnf -q repoquery --available", QuoteString(package), "2>/dev/null | grep -q . || { echo",
        QuoteString(
            f"gpuhost: this UEK host has RHCK kernel-core {', '.join(cores)} installed, and "
            f"EPEL's dkms requires kernel-devel-matched when kernel-core is installed; the "
            f"repositories lack {package}, so dnf would install a newer RHCK kernel. Add the "
            "repository that carries it, or remove the unused RHCK kernel-core, then run "
            "again"), ">&2; exit 1; }")
    yield StringCommand("dnf install -y --setopt=install_weak_deps=False", QuoteString(package))


@deploy("Kernel headers")
def install() -> None:
    """The running kernel's headers (and the gcc toolset a UEK kernel is built with)."""
    state = host_state()
    tag = distro_tag(state)
    family = packages.family(tag)
    kernel = state["kernel"]
    if not kernel["headers_packages"]:
        raise GpuhostError(f"{host.name}: cannot tell which headers kernel "
                           f"{kernel['kernel_release']} needs")
    headers(name=f"Install headers for kernel {kernel['kernel_release']}", family=family)
    next_boot = kernel["next_boot"]
    if next_boot["differs"]:
        next_boot_headers(name=f"Install headers for kernel {next_boot['kernel_release']} "
                          "(the next boot's)", family=family)
    # the headers meta package comes later: roles/nvidia_driver.py, install_future()
    if tag == "rhel9" and kernel["flavour"] == "uek":
        rhck_devel_matched(name="Keep EPEL's dkms from pulling a newer RHCK kernel "
                           "(kernel-devel-matched of the installed kernel-core)")
    toolsets = {kernel["gcc_toolset"]}
    if family == "rhel" and next_boot["differs"]:
        try:
            toolsets.add(distro.needs_gcc_toolset(tag, next_boot["kernel_release"]))
        except ValueError:
            pass  # a kernel gpuhost cannot name: its headers were refused above
    if toolsets - {None}:
        # UEK 7 on OL8 (gcc 11) and UEK 8 on OL9 (gcc 14) are built with a newer gcc than
        # the system's: DKMS must build the NVIDIA module with the kernel's compiler, or the
        # build fails (docs/real-hosts.md, "UEK and gcc toolsets")
        for dest, content in toolset_files(int(tag.removeprefix("rhel"))).items():
            if dest == DKMS_MODULE_OVERRIDE:
                # the administrator's file for the nvidia module (DKMS's documented place for
                # local settings): gpuhost keeps its lines in a marked block and leaves every
                # other line as it is
                files.block(name=f"DKMS builds UEK modules with the kernel's gcc toolset ({dest}, "
                                 "gpuhost's block)",
                            path=dest, content=content.rstrip("\n"),
                            marker="# {mark} gpuhost: gcc toolset of UEK kernels")
                continue
            config_file(name=f"DKMS builds UEK modules with the kernel's gcc toolset ({dest})",
                        content=content, dest=dest, mode="644")
