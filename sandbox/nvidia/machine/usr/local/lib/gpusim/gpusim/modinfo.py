"""`modinfo` for the simulated kernel's modules: the fields gpuhost and its users read
(filename, version, license, and for a signed module sig_id, signer, sig_hashalgo), in
kmod's layout ("field:" padded to 16 columns; ``-F FIELD`` prints the value alone).

The signer is the common name (CN) of the certificate the appended signature names, as
kmod prints it from the PKCS#7 signer (kmod's libkmod-signature.c); an unsigned module has
no signature fields. ``-k KERNEL`` reads another kernel's module tree, as kmod's does.
Only module names that resolve to a simulated module are answered here; a path or any other
module goes to the host's own kmod modinfo, so that dkms keeps seeing what it saw before.
"""

import os
import sys

from . import firmware, host, modfile

CN_OID = b"\x06\x03\x55\x04\x03"
REAL = ("/usr/sbin/modinfo", "/sbin/modinfo", "/usr/bin/modinfo", "/bin/modinfo")


def common_name(name_der):
    """The CN of an X.509 Name (DER), or None."""
    at = name_der.find(CN_OID)
    if at < 0:
        return None
    _tag, start, end = firmware._tlv(name_der, at + len(CN_OID))
    return name_der[start:end].decode("utf-8", errors="replace")


def signature(data):
    """(signer CN or "", True) of a signed module's bytes, or (None, False) unsigned."""
    if not data.endswith(firmware.MAGIC):
        return None, False
    end = len(data) - len(firmware.MAGIC) - 12
    sig_len = int.from_bytes(data[end + 8:end + 12], "big")
    blob = data[max(0, end - sig_len):end]
    marker = b"gpusim-pkcs7:"
    if not blob.startswith(marker):
        return "", True
    _tag, _start, name_end = firmware._tlv(blob, len(marker))
    return common_name(blob[len(marker):name_end]) or "", True


def find(name, kver):
    """The module file `name` under /lib/modules/<kver>, or None."""
    wanted = modfile.names(name.replace("-", "_")) + modfile.names(name.replace("_", "-"))
    for dirpath, _dirs, files in sorted(os.walk(host.path(f"lib/modules/{kver}"))):
        for f in wanted:
            if f in files:
                return os.path.join(dirpath, f)
    return None


def fields(path):
    data = modfile.read(path)
    first = data[:4096].decode("utf-8", errors="replace").split("\n", 1)[0]
    tokens = dict(t.split("=", 1) for t in first.split() if "=" in t)
    shown = "/" + os.path.relpath(path, host.path("")) if host.root() != "/" else path
    out = [("filename", shown)]
    if "version" in tokens:
        out.append(("version", tokens["version"]))
        out.append(("license", "Dual MIT/GPL" if tokens.get("flavor") == "open" else "NVIDIA"))
    signer, signed = signature(data)
    if signed:
        out += [("sig_id", "PKCS#7"), ("signer", signer), ("sig_hashalgo", "sha512")]
    return out


def modinfo(argv):
    field, kver, names = None, None, []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-F", "--field") and args:
            field = args.pop(0)
        elif a.startswith("--field="):
            field = a.partition("=")[2]
        elif a in ("-k", "--set-version") and args:
            kver = args.pop(0)
        else:
            names.append(a)
    if not names:
        sys.stderr.write("modinfo: ERROR: missing module or filename.\n")
        return 1
    kver = kver or host.kernel_release(host.load_machine())
    paths = [None if os.sep in name else find(name, kver) for name in names]
    if None in paths or not all(_simulated(p) for p in paths):
        return _real(argv)
    for path in paths:
        for key, value in fields(path):
            if field is None:
                sys.stdout.write(f"{key + ':':<16}{value}\n")
            elif key == field:
                sys.stdout.write(f"{value}\n")
    return 0


def _simulated(path):
    try:
        return modfile.read(path)[:13] == b"gpusim-module"
    except OSError:
        return False


def _real(argv):
    """The host's own modinfo (kmod), or kmod's message when there is none."""
    for tool in REAL if not host.under_test() else ():
        if os.access(tool, os.X_OK):
            os.execv(tool, [tool, *argv])
    sys.stderr.write(f"modinfo: ERROR: Module {argv[-1]} not found.\n")
    return 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        return modinfo(argv)
    except host.SimError as err:
        sys.stderr.write(err.message.rstrip("\n") + "\n")
        return err.rc
