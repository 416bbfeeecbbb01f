"""Install exactly the headers of the running kernel (UEK aware); never upgrade the kernel."""

from __future__ import annotations


from pyinfra import host, logger
from pyinfra.api import StringCommand, deploy, operation
from pyinfra.api import QuoteString


from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages

from facts.kernel import KernelHeaders, PackageAvailable
from roles.files import config_file
from roles.common import GpuhostError, distro_tag, executing, host_state
from gpuhost import packages


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


def headers_meta_package(tag: str, flavour: str | None) -> str:
    """The package that follows kernel updates with their headers, so DKMS builds the
    module for the next kernel too (Debian linux-headers-amd64, Ubuntu linux-headers-generic,
    EL kernel-uek-devel / kernel-devel)."""
    if tag == "debian12":
        return "linux-headers-amd64"
    if tag.startswith("ubuntu"):
        return "linux-headers-generic"
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
    + package: linux-headers-amd64 / linux-headers-generic / kernel-uek-devel / kernel-devel
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
    flavour = kernel["flavour"]
    if next_boot["differs"]:
        flavour = "uek" if "uek" in next_boot["kernel_release"] else "rhck"
    meta = headers_meta_package(tag, flavour)
    future_headers(name=f"Headers of future kernels ({meta})", family=packages.family(tag),
                   package=meta)


DKMS_TOOLSET_CONF = "/etc/dkms/framework.conf.d/gpuhost-gcc-toolset.conf"


@deploy("Kernel headers")
def install() -> None:
    """The running kernel's headers (and the gcc toolset UEK 8 is built with)."""
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
    toolset = kernel["gcc_toolset"]
    if toolset:
        # UEK 8 is built with gcc-toolset-14 while the system gcc is 11: DKMS must build the
        # NVIDIA module with the kernel's compiler, or the build fails.
        config_file(
            name=f"Build DKMS modules with {toolset} (UEK {kernel['kernel_release']})",
            content=(
                "# Managed by gpuhost: UEK 8 kernels are built with gcc-toolset-14; DKMS must\n"
                "# build their modules with the same compiler.\n"
                f"if [ -r /opt/rh/{toolset}/enable ]; then . /opt/rh/{toolset}/enable; fi\n"
            ),
            dest=DKMS_TOOLSET_CONF,
            mode="644",
        )
