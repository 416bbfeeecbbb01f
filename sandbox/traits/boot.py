"""Host traits of the boot chain: UEFI Secure Boot, a newer kernel waiting for the next
boot, a DKMS build that fails while the driver package's scriptlet exits 0.

The simulated firmware and boot loader live in gpusim (sandbox/nvidia/.../gpusim/firmware.py):
`mokutil` and `grubby` are shims to it, the module loader refuses an unsigned module with
Secure Boot on, and gpusim-boot boots the boot loader's default entry (uname follows).
"""
from __future__ import annotations

import re

import subprocess
import threading
from pathlib import Path

from .. import paths
from ..util import SandboxError, write_file
from . import Trait, register

SB_STATE = "etc/gpusim/firmware/secure-boot"
MOK_DIR = "etc/gpusim/firmware/mok"
DB_DIR = "etc/gpusim/firmware/db"   # keys trusted without a MOK (gpusim/firmware.py)
# The key pair a test inventory provides (secure-boot-enrolled enrols its certificate).
MOK_KEY = paths.STATE_DIR / "secure-boot" / "gpuhost-sandbox-mok.key"
MOK_CERT = paths.STATE_DIR / "secure-boot" / "gpuhost-sandbox-mok.der"
_MOK_LOCK = threading.Lock()   # hosts are created in parallel threads: one key for all

# The kernel each OS's boot loader defaults to with next-kernel (running kernel unchanged).
# OL8: RHCK runs, the UEK R7 kernel is the default entry (its kernel-uek-devel is in the
# fake OL repo, so gpuhost can prepare it); OL9: UEK 8 runs, RHCK is the default. Debian:
# a newer ABI than the mirror carries headers for (gpuhost must refuse the reboot).
NEXT_KERNEL = {"ol8": "5.15.0-307.178.5.el8uek.x86_64",
               "ol9": "5.14.0-503.11.1.el9_5.x86_64"}


def next_kernel(h: dict) -> str:
    if h["os"] in NEXT_KERNEL:
        return NEXT_KERNEL[h["os"]]
    running = h["kernel_release"]           # 6.1.0-56-amd64 -> 6.1.0-57-amd64
    trixie = re.match(r"^(\d+\.\d+)\.(\d+)(\+deb\d+-\w+)$", running)
    if trixie:                              # 6.12.118+deb13-amd64 -> 6.12.119+deb13-amd64
        return f"{trixie[1]}.{int(trixie[2]) + 1}{trixie[3]}"
    head, abi, flavour = running.rsplit("-", 2)
    return f"{head}-{int(abi) + 1}-{flavour}"


def _shim(tool: str) -> str:
    return ("#!/usr/bin/python3\n"
            f"# gpusim shim ({tool}): the simulated firmware/boot loader, sandbox/traits/boot.py\n"
            "import sys\nsys.path.append('/usr/local/lib/gpusim')\n"
            "from gpusim import firmware\n"
            f"sys.exit(firmware.main({tool!r}))\n")


# Ubuntu's module signing tools (sandbox/README.md, "Host traits: boot"): kmodsign from
# sbsigntool, with its documented CLI (kmodsign(1): `kmodsign [-dpkD] <hash algo> <key>
# <x509> <module> [<dest>]`; the options are not simulated), signing as sign-file does.
# python3-minimal only (no shutil), like the rest of gpusim.
KMODSIGN = ("#!/usr/bin/python3\n"
            "# kmodsign stand-in (gpuhost sandbox, sandbox/traits/boot.py): sbsigntool's kmodsign\n"
            "import sys\nsys.path.append('/usr/local/lib/gpusim')\n"
            "from gpusim import firmware\n"
            "args = sys.argv[1:]\n"
            "if any(a.startswith('-') for a in args) or len(args) not in (4, 5):\n"
            "    sys.stderr.write('Usage: kmodsign [-dpkD] <hash algo> <key> <x509> <module> [<dest>]\\n'\n"
            "                     '(gpuhost sandbox: the options are not simulated)\\n')\n"
            "    sys.exit(2)\n"
            "if len(args) == 5:\n"
            "    with open(args[3], 'rb') as src, open(args[4], 'wb') as dest:\n"
            "        dest.write(src.read())\n"
            "    args = args[:3] + [args[4]]\n"
            "sys.exit(firmware.main('sign-file', args))\n")
# shim-signed's update-secureboot-policy, as far as dkms calls it: --new-key makes the pair
# in /var/lib/shim-signed/mok when MOK.der is absent (dkms 3.0.10's comment: "won't create
# new key if $mok_certificate exists"), --enroll-key would ask for a one-time password and
# run mokutil --import (a person at MokManager on the next boot): it enrols nothing here.
UPDATE_SB_POLICY = """#!/bin/sh
# update-secureboot-policy stand-in (gpuhost sandbox, sandbox/traits/boot.py): shim-signed's
# --new-key and --enroll-key as dkms calls them; nothing else is simulated.
d=/var/lib/shim-signed/mok
case "${1:-}" in
--new-key)
    [ -e "$d/MOK.der" ] && exit 0
    mkdir -p "$d" && umask 077 && openssl req -new -x509 -nodes -days 36500 -newkey rsa:2048 \\
        -subj "/CN=$(hostname -s) Secure Boot Module Signature key" \\
        -keyout "$d/MOK.priv" -outform DER -out "$d/MOK.der" >/dev/null 2>&1 &&
        chmod 644 "$d/MOK.der"
    ;;
--enroll-key)
    [ -e "$d/MOK.der" ] || exit 0
    fp=$(openssl x509 -inform DER -in "$d/MOK.der" -noout -fingerprint -sha1 | sed 's/.*=//')
    if mokutil --list-enrolled 2>/dev/null | grep -qi "SHA1 Fingerprint: $fp"; then exit 0; fi
    echo "update-secureboot-policy: $d/MOK.der is not enrolled; enrolling it needs a password" \\
         "and MokManager at the console on the next boot (not simulated)" >&2
    ;;
*)
    echo "update-secureboot-policy: the gpuhost sandbox simulates --new-key and --enroll-key only" >&2
    exit 1
    ;;
esac
exit 0
"""


def _secure_boot(h: dict, upper: Path) -> None:
    write_file(upper / SB_STATE, "enabled\n")
    (upper / MOK_DIR).mkdir(parents=True, exist_ok=True)
    # mokutil is on every stock Ubuntu (shim-signed depends on it), EL and Debian UEFI install
    write_file(upper / "usr/bin/mokutil", _shim("mokutil"), mode=0o755)
    if h["os"].startswith("ubuntu"):
        # shim-signed's MOK directory (empty until update-secureboot-policy --new-key),
        # sbsigntool's kmodsign and shim-signed's update-secureboot-policy
        (upper / "var/lib/shim-signed/mok").mkdir(parents=True, exist_ok=True)
        write_file(upper / "usr/bin/kmodsign", KMODSIGN, mode=0o755)
        write_file(upper / "usr/sbin/update-secureboot-policy", UPDATE_SB_POLICY, mode=0o755)
        # Ubuntu's shim trusts Canonical's key: the stand-in that signs the archive's
        # linux-modules-nvidia-* goes in the firmware's db, not in the MOK list
        from ..ubuntu_signed import DB_NAME, signing_cert
        write_file(upper / DB_DIR / DB_NAME, signing_cert().read_bytes())


def sandbox_mok() -> tuple[Path, Path]:
    """The sandbox's test MOK (key, DER certificate), made once with openssl as DKMS makes
    its own (`openssl req -new -x509 -nodes -days 36500 -newkey rsa:2048 -outform DER`)."""
    with _MOK_LOCK:
        return _make_mok()


def _make_mok() -> tuple[Path, Path]:
    if not (MOK_KEY.exists() and MOK_CERT.exists()):
        MOK_KEY.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        proc = subprocess.run(
            ["openssl", "req", "-new", "-x509", "-nodes", "-days", "36500",
             "-subj", "/CN=gpuhost sandbox module signing key", "-newkey", "rsa:2048",
             "-keyout", str(MOK_KEY), "-outform", "DER", "-out", str(MOK_CERT)],
            capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SandboxError(f"secure-boot-enrolled: openssl could not make the test MOK: "
                               f"{proc.stderr.strip()}")
        MOK_KEY.chmod(0o600)
    return MOK_KEY, MOK_CERT


def _secure_boot_enrolled(h: dict, upper: Path) -> None:
    _secure_boot(h, upper)
    _key, cert = sandbox_mok()
    write_file(upper / MOK_DIR / "gpuhost-sandbox-mok.der", cert.read_bytes())


def _next_kernel(h: dict, upper: Path) -> None:
    running, new = h["kernel_release"], next_kernel(h)
    for rel in (running, new):
        write_file(upper / f"boot/vmlinuz-{rel}", f"simulated kernel image {rel}\n")
        write_file(upper / f"boot/config-{rel}", "CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\n")
    # /lib is a symlink to usr/lib (merged /usr): write below usr/, never a real upper/lib
    write_file(upper / f"usr/lib/modules/{new}/modules.dep", "")
    if h["os"] in ("debian12", "debian13"):
        # grub-mkconfig's order: the newest kernel first; GRUB_DEFAULT=0 boots it
        write_file(upper / "etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n"
                   'GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n'
                   'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n')
        uuid = "0e4d2a6c-5b7e-4a8f-9c1d-3f2e1a0b9c8d"

        def entry(rel: str, title: str, ident: str, indent: str = "") -> str:
            return (f"{indent}menuentry '{title}' --class debian --class gnu-linux --class gnu "
                    f"--class os $menuentry_id_option '{ident}' {{\n"
                    f"{indent}\tload_video\n{indent}\tinsmod gzio\n"
                    f"{indent}\techo\t'Loading Linux {rel} ...'\n"
                    f"{indent}\tlinux\t/boot/vmlinuz-{rel} root=UUID={uuid} ro  quiet\n"
                    f"{indent}\tinitrd\t/boot/initrd.img-{rel}\n{indent}}}\n")
        cfg = ("#\n# DO NOT EDIT THIS FILE\n#\n# It is automatically generated by grub-mkconfig "
               "using templates\n# from /etc/grub.d and settings from /etc/default/grub\n#\n\n"
               "### BEGIN /etc/grub.d/10_linux ###\n"
               + entry(new, "Debian GNU/Linux", f"gnulinux-simple-{uuid}")
               + f"submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option "
                 f"'gnulinux-advanced-{uuid}' {{\n"
               + entry(new, f"Debian GNU/Linux, with Linux {new}",
                       f"gnulinux-{new}-advanced-{uuid}", "\t")
               + entry(running, f"Debian GNU/Linux, with Linux {running}",
                       f"gnulinux-{running}-advanced-{uuid}", "\t")
               + "}\n### END /etc/grub.d/10_linux ###\n")
        write_file(upper / "boot/grub/grub.cfg", cfg, mode=0o444)
    else:
        # EL: BLS entries named <machine-id>-<release>, the default in grubenv (grubby)
        machine_id = (upper / "etc/machine-id").read_text().strip()
        for rel in (running, new):
            write_file(upper / f"boot/loader/entries/{machine_id}-{rel}.conf",
                       f"title Oracle Linux Server ({rel})\nversion {rel}\n"
                       f"linux /vmlinuz-{rel}\ninitrd /initramfs-{rel}.img $tuned_initrd\n"
                       "options $kernelopts $tuned_params\ngrub_users $grub_users\n"
                       "grub_arg --unrestricted\ngrub_class kernel\n")
        write_file(upper / "boot/grub2/grubenv",
                   f"# GRUB Environment Block\nsaved_entry={machine_id}-{new}\n")
        write_file(upper / "usr/sbin/grubby", _shim("grubby"), mode=0o755)


def _dkms_build_fails(h: dict, upper: Path) -> None:
    # the compile fails (gpusim-build.sh) and the driver package's scriptlet still exits 0
    write_file(upper / "etc/gpusim/faults.json",
               '{"dkms_build_fail": true, "scriptlet_ignores_dkms": true}\n')


SB_SOURCE = ("kernel module signing (Documentation/admin-guide/module-signing.rst: with "
             "Secure Boot lockdown an unsigned or untrusted module is refused, EKEYREJECTED "
             "'Key was rejected by service'); shim's MokListRT and mokutil(1) --sb-state / "
             "--list-enrolled; dkms 3.0.10 prepare_signing (mok_signing_key/mok_certificate, "
             "default /var/lib/dkms/mok.key, mok.pub; on Ubuntu kmodsign and "
             "/var/lib/shim-signed/mok/MOK.priv); dkms 2.8.4 sign_build (kmodsign sha512 "
             "/var/lib/shim-signed/mok/MOK.priv MOK.der after update-secureboot-policy "
             "--new-key); kmodsign(1) of sbsigntool (manpages.ubuntu.com, jammy)")

register(Trait(
    name="secure-boot",
    doc="UEFI Secure Boot on, no MOK enrolled: DKMS's module is refused at load",
    source=SB_SOURCE,
    create=_secure_boot,
))
register(Trait(
    name="secure-boot-enrolled",
    doc="UEFI Secure Boot on with the sandbox's test MOK enrolled (sandbox.traits.boot.MOK_CERT)",
    source=SB_SOURCE,
    create=_secure_boot_enrolled,
))
register(Trait(
    name="next-kernel",
    doc="a newer kernel installed, not booted: the boot loader's default entry is not uname -r",
    source=("grub-mkconfig 10_linux (newest kernel first, GRUB_DEFAULT=0) on Debian/Ubuntu; "
            "BLS entries + grubenv saved_entry, `grubby --default-kernel` on EL8/9 (RHEL "
            "'Managing kernel boot entries')"),
    create=_next_kernel,
))
register(Trait(
    name="dkms-build-fails",
    doc="the NVIDIA module's DKMS build fails; the package scriptlet exits 0 anyway",
    source=("NVIDIA/open-gpu-kernel-modules#805: the driver packages' scriptlets exit 0 when "
            "the DKMS build fails; DKMS's make.log and `dkms status` show it"),
    create=_dkms_build_fails,
))
