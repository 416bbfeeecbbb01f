"""``nvidia_kernel_modules: distribution``: the distribution's signed NVIDIA modules for the
running kernel and the driver's user space without DKMS, from the distribution's own
archive (Ubuntu's restricted component), pinned so that apt does not move them.

No NVIDIA repository, no DKMS, no kernel headers and no Machine Owner Key: the modules are
signed with the key the distribution's shim trusts (``gpuhost.signed_modules``).
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.operations import apt

from gpuhost import packages, signed_modules
from gpuhost.facts.kernel import KernelHeaders
from gpuhost.roles.common import fail_command
from gpuhost.roles.files import config_file


def pin(tag: str, version: str) -> None:
    config_file(
        name=f"Pin Canonical's NVIDIA user space at {version}",
        content=signed_modules.apt_pin(tag, version), dest=packages.APT_PIN, mode="644")


def install(tag: str, version: str, kernel_release: str) -> None:
    """Pin, then install the signed modules of ``version``'s branch for ``kernel_release``
    and the branch's user space (Ubuntu; ``signed_modules.problem`` refused the rest)."""
    pin(tag, version)
    config_file(
        name="Keep unattended-upgrades away from the driver",
        content=packages.unattended_upgrades_blacklist(), dest=packages.UNATTENDED, mode="644")
    wanted = signed_modules.packages(version, kernel_release)
    apt.packages(
        name=f"Install the distribution's signed NVIDIA modules {version} ({', '.join(wanted)})",
        packages=wanted, no_recommends=True, update=True, cache_time=3600)


@operation()
def module_for_next_boot(version: str):
    """
    The next-boot gate of signed modules: when the next boot starts another kernel, install
    the distribution's signed module package of that kernel, or, when the host's
    repositories do not have it (yet), fail this host so that it does not reboot into a
    kernel without its driver.

    + version: the driver version the host must load after the reboot
    """
    kernel = host.get_fact(KernelHeaders)
    nxt = kernel["next_boot"]
    if not nxt["differs"]:
        host.noop(f"the next boot starts the running kernel {kernel['kernel_release']}")
        return
    release = nxt["kernel_release"]
    package = signed_modules.module_package(version, release)
    yield StringCommand(
        "if dpkg-query -W -f '${Status}'", QuoteString(package),
        "2>/dev/null | grep -q 'ok installed'; then :; elif apt-cache policy", QuoteString(package),
        "2>/dev/null | grep -q 'Candidate: [0-9]'; then DEBIAN_FRONTEND=noninteractive apt-get "
        "install -y --no-install-recommends", QuoteString(package), "; else", fail_command(
            f"the next boot starts kernel {release}, for which this host's repositories have "
            f"no signed NVIDIA module package ({package}): not rebooting; wait for the "
            "distribution to publish it, or make the running kernel "
            f"{kernel['kernel_release']} the default boot entry"), "; fi")


def switch(tag: str, current: str | None, target: str) -> None:
    """The rolling upgrade's switch: the pin moved to ``target``, then in one apt transaction
    the target branch's signed modules for the running kernel and its user space in, the
    other branch's (``current``) out, the module package with them."""
    from gpuhost.roles.common import host_state
    from gpuhost.roles.upgrade import ops_packages

    kernel = host_state()["os"]["kernel_release"]
    pin(tag, target)
    wanted = signed_modules.packages(target, kernel)
    old = ([signed_modules.module_package(current, kernel)]
           if current and signed_modules.branch(current) != signed_modules.branch(target) else [])
    ops_packages.switch_packages(
        name=f"Switch to the distribution's signed NVIDIA modules {target} ({', '.join(wanted)})",
        distro_tag=tag, version=target, flavor="open", wanted=wanted, remove=old)
