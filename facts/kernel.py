"""Kernel facts: headers for the running kernel, nouveau, DKMS, Secure Boot.

``pyinfra INVENTORY fact gpuhost.facts.kernel.KernelHeaders --json``
"""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from gpuhost.facts.assemble_kernel import kernel_state
from gpuhost.facts.base import SectionFact


class KernelHeaders(SectionFact):
    """
    What building the NVIDIA module needs from the running kernel.

    .. code:: python

        {"kernel_release": "6.1.0-56-amd64",
         "flavour": "generic" | "uek" | "rhck",
         "distro_tag": "debian12" | ... | "ubuntu2604" | "rhel8" | "rhel9" | "rhel10" | None,
         "headers_packages": ["linux-headers-6.1.0-56-amd64"],   # what the kernel needs
         "headers_packages_missing": [...],                      # of those, not installed
         "headers_installed": bool,     # /lib/modules/$(uname -r)/build has a Makefile
         "build_dir": "/usr/src/linux-headers-6.1.0-56-amd64" | None,
         "gcc_toolset": "gcc-toolset-14" | None,   # the toolset that built a UEK kernel (11: UEK 7 on OL8)
         "gcc_toolset_installed": bool,
         "nouveau": {"loaded": bool, "blacklisted": bool},
         "dkms": [{"module": "nvidia", "version": ..., "kernel": ..., "status": "installed"}],
         "dkms_installed": bool,
         "secure_boot": "enabled" | "disabled" | None,  # None: no mokutil
         "mok_enrolled": ["2f:01:..."] | None,  # SHA1 of enrolled MOKs; None: no mokutil
         "module_signer": "Canonical Ltd. ..." | None,  # modinfo's signer of the nvidia module
         "next_boot": {"kernel_release": ..., "source": "grubby" | "grub" | None,
                       "differs": bool,           # the next boot starts another kernel
                       "headers_packages": [...], "headers_packages_missing": [...],
                       "headers_installed": bool, "nvidia_module": ["570.172.08"]},
         "dkms_logs": {"/var/lib/dkms/nvidia/570.172.08/build/make.log": "last lines"},
         "held_back": None | {"kernel": ..., "driver": ..., "reason": "make.log's line"},
         "offered": None | {"source": "apt" | "dnf", "newest": "6.8.0-71-generic" | None,
                            "installed": bool, "headers": "available" | ... | None,
                            "newer": bool, "proven": bool | None, "held_back": bool,
                            "error": None | "..."},  # the composite fact's section only
         "problem": None | "why gpuhost cannot name the headers package"}
    """

    sections = ("os_release", "kernel", "dpkg", "rpm", "headers_build", "nouveau", "dkms",
                "secure_boot", "mok", "module_signer", "boot_loader", "dkms_log", "kernel_held")
    assemble = staticmethod(kernel_state)


class PackageAvailable(FactBase):
    """
    Whether the host's package manager has ``package`` to install (a candidate in apt's
    lists, an available package in dnf's enabled repositories): ``True`` / ``False``.

    ``pyinfra INVENTORY fact gpuhost.facts.kernel.PackageAvailable package=linux-headers-amd64 family=debian``
    """

    def command(self, package: str, family: str = "debian") -> str:
        quoted = shlex.quote(package)
        if family == "debian":
            # `apt-cache show` exits 0 for a name apt knows only as referred to by another
            # package ("has no installation candidate" at install time): ask for the candidate
            check = f"apt-cache policy {quoted} 2>/dev/null | grep -q 'Candidate: [0-9]'"
        else:
            check = f"dnf -q repoquery --available {quoted} 2>/dev/null | grep -q ."
        return f": gpuhost-package-available; if {check}; then echo yes; else echo no; fi"

    def process(self, output: list[str]) -> bool:
        return "yes" in output
