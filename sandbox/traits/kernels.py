"""Host trait of kernel updates: the boot loader state an installed Enterprise Linux system
has for its running kernel (sandbox/kernels.py serves the newer kernels).

The fake OL repositories' kernels boot by name (gpusim-boot boots the boot loader's default
entry), so a host that installs one needs what EL's installer leaves: the running kernel's
image and its BLS entry, grubenv naming it, and grubby (grub2-tools' dependency on every
EL 8/9/10 install).
"""
from __future__ import annotations

from pathlib import Path

from ..util import write_file
from . import Trait, register
from .boot import _shim


def _boot_entries(h: dict, upper: Path) -> None:
    rel = h["kernel_release"]
    machine_id = (upper / "etc/machine-id").read_text().strip()
    write_file(upper / f"boot/vmlinuz-{rel}", f"simulated kernel image {rel}\n")
    write_file(upper / f"boot/config-{rel}", "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n")
    write_file(upper / f"boot/loader/entries/{machine_id}-{rel}.conf",
               f"title Oracle Linux Server ({rel})\nversion {rel}\nlinux /vmlinuz-{rel}\n"
               f"initrd /initramfs-{rel}.img $tuned_initrd\noptions $kernelopts $tuned_params\n"
               "grub_users $grub_users\ngrub_arg --unrestricted\ngrub_class kernel\n")
    write_file(upper / "boot/grub2/grubenv",
               f"# GRUB Environment Block\nsaved_entry={machine_id}-{rel}\n")
    write_file(upper / "etc/sysconfig/kernel", "# UPDATEDEFAULT specifies if new-kernel-pkg "
               "should make new kernels the default\nUPDATEDEFAULT=yes\n"
               "# DEFAULTKERNEL specifies the default kernel package type\nDEFAULTKERNEL=kernel-core\n")
    write_file(upper / "usr/sbin/grubby", _shim("grubby"), mode=0o755)


register(Trait(
    name="boot-entries",
    doc="EL: the running kernel's /boot image, BLS entry and grubenv default, grubby, "
        "/etc/sysconfig/kernel UPDATEDEFAULT=yes",
    source=("RHEL 8/9 'Managing, monitoring and updating the kernel': BLS entries in "
            "/boot/loader/entries, saved_entry in grubenv, grubby --set-default, "
            "UPDATEDEFAULT in /etc/sysconfig/kernel"),
    oses=("ol8", "ol9", "ol10", "rocky10", "rhel10"),
    create=_boot_entries,
))
