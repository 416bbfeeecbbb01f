"""``nvidia_kernel_modules: distribution``: the distribution's signed NVIDIA modules for the
running kernel and the driver's user space without DKMS, from the distribution's own
archive (Ubuntu's restricted component), pinned so that apt does not move them.

No NVIDIA repository, no DKMS, no kernel headers and no Machine Owner Key: the modules are
signed with the key the distribution's shim trusts (``gpuhost.signed_modules``).
"""

from __future__ import annotations

from pyinfra.operations import apt

from gpuhost import packages, signed_modules
from gpuhost.roles.files import config_file


def install(tag: str, version: str, kernel_release: str) -> None:
    """Pin, then install the signed modules of ``version``'s branch for ``kernel_release``
    and the branch's user space (Ubuntu; ``signed_modules.problem`` refused the rest)."""
    config_file(
        name=f"Pin Canonical's NVIDIA user space at {version}",
        content=signed_modules.apt_pin(tag, version), dest=packages.APT_PIN, mode="644")
    config_file(
        name="Keep unattended-upgrades away from the driver",
        content=packages.unattended_upgrades_blacklist(), dest=packages.UNATTENDED, mode="644")
    wanted = signed_modules.packages(version, kernel_release)
    apt.packages(
        name=f"Install the distribution's signed NVIDIA modules {version} ({', '.join(wanted)})",
        packages=wanted, no_recommends=True, update=True, cache_time=3600)
