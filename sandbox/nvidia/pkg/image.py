"""verify-image.tar: a minimal Debian root filesystem (for `docker import`) whose only job
is to run `nvidia-smi -L` once the NVIDIA runtime shim has mounted the host's simulator.

mmdebstrap --variant=essential plus python3-minimal and the python stdlib (the simulator
needs json); /bin/sh (dash) runs the nvidia-smi launcher.
"""

from __future__ import annotations

import time

from .common import OUT_DIR, inputs_digest, log, mark_done, need_tools, run, up_to_date

SUITE = "bookworm"
INCLUDE = ("python3-minimal", "libpython3.11-stdlib")
IMAGE_NAME = "gpuhost/verify:sandbox"


def archive_path():
    return OUT_DIR / "verify-image.tar"


def build(force: bool = False) -> None:
    need_tools("mmdebstrap")
    out = archive_path()
    digest = inputs_digest(suite=SUITE, include=INCLUDE, variant="essential")
    if not force and up_to_date("verify-image", digest, [out]):
        log(f"{out.name}: up to date")
        return
    t = time.monotonic()
    tmp = out.with_suffix(".tmp.tar")
    log(f"{out.name}: mmdebstrap --variant=essential {SUITE} (about half a minute)")
    run(["mmdebstrap", "--quiet", "--variant=essential", f"--include={','.join(INCLUDE)}",
         "--customize-hook=mkdir -p \"$1/etc/gpusim\" \"$1/var/lib/gpusim\" \"$1/usr/lib/gpusim\"",
         "--customize-hook=rm -rf \"$1/usr/share/doc\" \"$1/usr/share/man\" \"$1/usr/share/locale\" "
         "\"$1/var/cache/apt\" \"$1/var/lib/apt/lists\"",
         SUITE, str(tmp)])
    tmp.replace(out)
    mark_done("verify-image", digest)
    log(f"{out.name}: built in {time.monotonic() - t:.1f}s ({out.stat().st_size >> 20} MiB)")
