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


# grub2's /etc/kernel/postinst.d/zz-update-grub and postrm.d/zz-update-grub (Debian's grub-pc /
# grub-efi-amd64), less their "skip in a container" test: a sandbox host stands for a machine.
ZZ_UPDATE_GRUB = """#! /bin/sh
# grub2's kernel hook (gpuhost sandbox, sandbox/traits/kernels.py): update-grub after a
# kernel is installed or removed, as on an installed Debian/Ubuntu system
set -e
which update-grub >/dev/null 2>&1 || exit 0
if [ -n "$DEB_MAINT_PARAMS" ]; then
    eval set -- "$DEB_MAINT_PARAMS"
    if [ -z "$1" ] || [ "$1" != "configure" -a "$1" != "remove" ]; then exit 0; fi
fi
[ -e /boot/grub/grub.cfg ] || exit 0
exec update-grub
"""


def _grub(h: dict, upper: Path) -> None:
    import importlib.util

    from .. import paths

    spec = importlib.util.spec_from_file_location(
        "gpusim_grub", paths.NVIDIA_MACHINE_DIR / "usr/local/lib/gpusim/gpusim/grub.py")
    rel = h["kernel_release"]
    write_file(upper / f"boot/vmlinuz-{rel}", f"simulated kernel image {rel}\n")
    write_file(upper / f"boot/config-{rel}", "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n")
    # Debian's /etc/default/grub as the installer leaves it (GRUB_DEFAULT=0: the first entry,
    # the newest kernel)
    write_file(upper / "etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n"
               'GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n'
               'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n')
    distributor = "Ubuntu" if h["os"].startswith("ubuntu") else "Debian"
    write_file(upper / "boot/grub/grub.cfg", _render_grub(spec, [rel], distributor))
    for tool, where in (("update-grub", "usr/sbin"), ("grub-set-default", "usr/sbin"),
                        ("grub-editenv", "usr/bin")):
        write_file(upper / where / tool, _shim(tool), mode=0o755)
    for hooks in ("postinst.d", "postrm.d"):
        write_file(upper / "etc/kernel" / hooks / "zz-update-grub", ZZ_UPDATE_GRUB, mode=0o755)


def _render_grub(spec, kernels: list[str], distributor: str) -> str:
    """gpusim's grub.cfg writer (gpusim/grub.py ``render``: the layout update-grub writes on
    the host), loaded by file."""
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render(kernels, "0", distributor)


register(Trait(
    name="grub",
    doc="Debian/Ubuntu: GRUB 2 as installed (GRUB_DEFAULT=0, grub.cfg of the running kernel, "
        "update-grub, grub-set-default, grub-editenv, the kernel hooks' zz-update-grub)",
    source=("GNU GRUB manual 'Simple configuration handling' (GRUB_DEFAULT, saved, "
            "grub-set-default); grub-mkconfig 00_header/10_linux (entry ids, newest first); "
            "Debian grub2's /etc/kernel/postinst.d/zz-update-grub; Debian Kernel Handbook "
            "'Kernel hooks'"),
    oses=("debian12", "debian13", "ubuntu2204", "ubuntu2404", "ubuntu2604"),
    create=_grub,
))
