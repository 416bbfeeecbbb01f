"""Kernel module files as the kernel's module tree holds them: plain ``.ko`` or compressed
as the kernel's configuration and dkms choose (``.ko.xz`` on Debian 13's 6.12,
``.ko.zst`` on Ubuntu 26.04's 7.0, ``.ko.gz``); kmod loads each kind. The simulator reads a
compressed one through the host's own decompressor (xz-utils, zstd, gzip)."""
import subprocess

SUFFIXES = {".ko": None, ".ko.xz": "xz", ".ko.zst": "zstd", ".ko.gz": "gzip"}


def names(module):
    """The file names MODULE may have in a module tree."""
    return [module + s for s in SUFFIXES]


def read(path):
    """The module's bytes, decompressed; OSError when it cannot be read."""
    tool = next((t for s, t in SUFFIXES.items() if t and path.endswith(s)), None)
    if tool is None:
        with open(path, "rb") as fh:
            return fh.read()
    try:
        proc = subprocess.run([tool, "-dc", path], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise OSError(f"cannot decompress {path}: {exc}") from exc
    if proc.returncode != 0:
        raise OSError(f"cannot decompress {path}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout
