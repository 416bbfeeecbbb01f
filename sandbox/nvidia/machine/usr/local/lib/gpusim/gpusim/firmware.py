"""The simulated firmware and boot loader: Secure Boot, the MOK list, module signatures,
the default boot entry. Written by the sandbox's boot traits (sandbox/traits/boot.py).

Files (relative to GPUSIM_ROOT):
  etc/gpusim/firmware/secure-boot       "enabled": UEFI Secure Boot is on (absent: off/legacy)
  etc/gpusim/firmware/mok/*.der|*.pem   the enrolled Machine Owner Keys (MokListRT)
  boot/grub/grub.cfg, etc/default/grub, boot/grub/grubenv        GRUB 2 on Debian/Ubuntu
  boot/grub2/grubenv, boot/loader/entries/*.conf                  BLS + grubby on EL

What the kernel does with Secure Boot on (lockdown, CONFIG_MODULE_SIG_FORCE in effect): a
module must carry an appended signature ("~Module signature appended~") made with a key the
kernel trusts (built-in, db, or MokListRT through shim); otherwise init_module fails with
EKEYREJECTED and modprobe prints "could not insert 'nvidia': Key was rejected by service".
The simulation identifies the signer as PKCS#7 does: the signature's SignerInfo names the
certificate by issuer and serial number, which must be those of an enrolled certificate.
No cryptography is checked (python3-minimal has none).
"""

import binascii
import hashlib
import os
import re
import sys

from . import host

SB_STATE = "etc/gpusim/firmware/secure-boot"
MOK_DIR = "etc/gpusim/firmware/mok"
# Keys trusted without any MOK: what the firmware's db and the distribution's shim (its
# vendor certificate) make the kernel trust, e.g. the key Canonical signs its NVIDIA
# modules with on Ubuntu (linux-restricted-modules). mokutil does not list them.
DB_DIR = "etc/gpusim/firmware/db"
MAGIC = b"~Module signature appended~\n"


def secure_boot():
    try:
        with open(host.path(SB_STATE), encoding="utf-8") as fh:
            return fh.read().strip() == "enabled"
    except OSError:
        return False


def to_der(data):
    """A certificate file's DER bytes (PEM or DER)."""
    if b"-----BEGIN CERTIFICATE-----" in data:
        body = data.split(b"-----BEGIN CERTIFICATE-----", 1)[1].split(b"-----END", 1)[0]
        return binascii.a2b_base64(b"".join(body.split()))
    return data


def _tlv(data, pos):
    """(tag, start of value, end of value) of the DER element at pos."""
    tag = data[pos]
    length = data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    return tag, pos, pos + length


def issuer_serial(der):
    """(issuer Name DER, serial INTEGER DER) of an X.509 certificate."""
    _t, cert, _e = _tlv(der, 0)            # Certificate SEQUENCE
    _t, tbs, _e = _tlv(der, cert)          # tbsCertificate SEQUENCE
    pos = tbs
    tag, start, end = _tlv(der, pos)
    if tag == 0xA0:                        # [0] version
        pos = end
    _t, start, end = _tlv(der, pos)        # serialNumber
    serial = der[pos:end]
    _t, _s, pos = _tlv(der, end)           # signature AlgorithmIdentifier
    _t, _s, iend = _tlv(der, pos)          # issuer Name
    return der[pos:iend], serial


def enrolled(rel=MOK_DIR):
    """[(file name, DER)] of the enrolled MOKs (or of the certificates under rel)."""
    found = []
    d = host.path(rel)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, name), "rb") as fh:
            found.append((name, to_der(fh.read())))
    return found


def signed_by_enrolled(module_path):
    """None when the module may load with Secure Boot on (signed by a key of the db or an
    enrolled MOK), else the kernel's reason."""
    from . import modfile
    data = modfile.read(module_path)
    if not data.endswith(MAGIC):
        return "Key was rejected by service"
    # Only the last appended signature counts: the kernel strips the trailing
    # struct module_signature (12 bytes, sig_len big-endian at its end) and checks the PKCS#7
    # before it; an earlier signature is mere module content (Linux kernel/module/signing.c).
    end = len(data) - len(MAGIC) - 12
    sig_len = int.from_bytes(data[end + 8:end + 12], "big")
    data = data[max(0, end - sig_len):end]
    for _name, der in enrolled(DB_DIR) + enrolled():
        try:
            issuer, serial = issuer_serial(der)
        except (IndexError, ValueError):
            continue
        if issuer in data and serial in data:
            return None
    return "Key was rejected by service"


def fingerprint(der):
    digest = hashlib.sha1(der).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def mokutil(argv):
    """mokutil --sb-state | --list-enrolled | --list-new, with mokutil 0.6's texts."""
    if not argv:
        sys.stderr.write("Usage:\n  mokutil OPTIONS [ARGS...]\n")
        return 255
    opt = argv[0]
    if opt == "--sb-state":
        if not os.path.isfile(host.path(SB_STATE)):
            print("EFI variables are not supported on this system", file=sys.stderr)
            return 255
        print("SecureBoot enabled" if secure_boot() else "SecureBoot disabled")
        return 0
    if opt in ("--list-enrolled", "-l"):
        keys = enrolled()
        if not keys:
            print("MokListRT is empty")
            return 1
        for i, (_name, der) in enumerate(keys, 1):
            print(f"[key {i}]")
            print(f"SHA1 Fingerprint: {fingerprint(der)}")
            print("Certificate:\n    Data:\n        (certificate dump not simulated by gpusim)")
        return 0
    if opt in ("--list-new", "-N"):
        print("MokNew is empty")
        return 1
    print(f"mokutil: gpusim simulates --sb-state, --list-enrolled and --list-new only, not "
          f"{opt} (an enrolment needs the firmware's MokManager at the console)", file=sys.stderr)
    return 1


def sign_file(argv):
    """scripts/sign-file HASH KEY CERT MODULE as the sandbox's EL kernel-devel lacks it: a
    stand-in PKCS#7 trailer naming the certificate by issuer and serial, then the magic."""
    if len(argv) != 4:
        sys.stderr.write("Usage: scripts/sign-file [-dp] <hash algo> <key> <x509> <module>\n")
        return 2
    _hash, key, cert, module = argv
    for f in (key, cert):
        if not os.access(f, os.R_OK):
            sys.stderr.write(f"At main.? Error: cannot read {f}\n")
            return 1
    with open(cert, "rb") as fh:
        issuer, serial = issuer_serial(to_der(fh.read()))
    blob = b"gpusim-pkcs7:" + issuer + serial
    trailer = blob + b"\0\0\2\0\0\0\0\0" + len(blob).to_bytes(4, "big") + MAGIC
    with open(module, "ab") as fh:
        fh.write(trailer)
    return 0


# --- the boot loader -----------------------------------------------------------------

def _read(rel):
    try:
        with open(host.path(rel), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _env(rel):
    out = {}
    for line in (_read(rel) or "").splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def grub_entries(cfg, nested=False):
    """[(title, id, kernel release)] of the top-level menu entries of a grub.cfg (with
    ``nested``: the entries inside submenus too)."""
    entries, depth, current = [], 0, None
    for line in cfg.splitlines():
        s = line.strip()
        m = re.match(r"""(menuentry|submenu)\s+['"]([^'"]*)['"].*?(?:\$menuentry_id_option\s+['"]([^'"]*)['"])?\s*\{""", s)
        if m:
            if depth == 0 or (nested and m.group(1) == "menuentry"):
                current = [m.group(2), m.group(3) or "", None, m.group(1)]
                entries.append(current)
            depth += 1
            continue
        k = re.match(r"linux(?:efi)?\s+\S*vmlinuz-(\S+)", s)
        if k and current is not None and current[2] is None:
            current[2] = k.group(1)
        if s.endswith("}") and depth:
            depth -= 1
    return [(t, i, r) for t, i, r, kind in entries if kind == "menuentry" or r]


def default_kernel():
    """The kernel release the boot loader boots next, or None when it cannot be told."""
    env = _env("boot/grub2/grubenv")
    if env.get("saved_entry"):           # EL: BLS entry named by grubenv
        text = _read(f"boot/loader/entries/{env['saved_entry']}.conf") or ""
        m = re.search(r"^linux\s+\S*vmlinuz-(\S+)", text, re.M)
        return m.group(1) if m else None
    cfg = _read("boot/grub/grub.cfg")
    if cfg is None:
        return None
    entries = grub_entries(cfg)
    # GRUB reads grub.cfg's `set default` (00_header, from GRUB_DEFAULT when update-grub
    # ran); a grub.cfg without one: GRUB_DEFAULT of etc/default/grub
    m = re.search(r'^set default="([^"]*)"', cfg, re.M)
    default = m.group(1) if m else _env("etc/default/grub").get("GRUB_DEFAULT", "0").strip("'\"")
    if default in ("saved", "${saved_entry}"):
        default = _env("boot/grub/grubenv").get("saved_entry", "") or "0"
    if default.isdigit():
        i = int(default)
        return entries[i][2] if i < len(entries) else None
    # an entry by title or id, in a submenu as SUBMENU>ENTRY (GRUB manual, GRUB_DEFAULT)
    path = default.split(">")
    for title, ident, rel in grub_entries(cfg, nested=len(path) > 1):
        if path[-1] in (title, ident):
            return rel
    return None


def grubby(argv):
    """grubby --default-kernel | --set-default=PATH (EL's BLS boot entries)."""
    if argv[:1] == ["--default-kernel"]:
        rel = default_kernel()
        if rel is None:
            print("grubby: unable to find the default entry", file=sys.stderr)
            return 1
        print(f"/boot/vmlinuz-{rel}")
        return 0
    if argv and argv[0].startswith("--set-default"):
        target = argv[0].partition("=")[2] or (argv[1] if len(argv) > 1 else "")
        rel = target.rsplit("vmlinuz-", 1)[-1]
        d = host.path("boot/loader/entries")
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(f"-{rel}.conf"):
                host.write_text("boot/grub2/grubenv",
                                f"# GRUB Environment Block\nsaved_entry={name[:-5]}\n")
                print(f"The default is /boot/loader/entries/{name} with index 0 and kernel "
                      f"/boot/vmlinuz-{rel}")
                return 0
        print(f"grubby: no entry for {target}", file=sys.stderr)
        return 1
    print("grubby: gpusim simulates --default-kernel and --set-default only", file=sys.stderr)
    return 1


def main(tool, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        from . import grub
        tools = {"mokutil": mokutil, "grubby": grubby, "sign-file": sign_file, **grub.TOOLS}
        return tools[tool](argv)
    except host.SimError as err:
        sys.stderr.write(err.message.rstrip("\n") + "\n")
        return err.rc
