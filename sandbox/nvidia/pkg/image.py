"""verify-image.tar: a `docker save` archive of a minimal Debian image whose only job is to
run `nvidia-smi -L` once the NVIDIA runtime shim has mounted the host's simulator. gpuhost
sends it to a host that lacks the image and loads it with `docker load -i`.

The root filesystem: mmdebstrap --variant=essential plus python3-minimal (the simulator
imports only what python3-minimal carries: sys, os, re, stat, time, hashlib, binascii, fcntl,
and its own json reader); /bin/sh (dash) runs the nvidia-smi launcher, coreutils what the
tests run besides (`true`, `sleep`). It becomes the image's only layer. What a container
never runs is pruned (PRUNE: perl, which dpkg's and debconf's scripts need, the iconv
modules, dpkg's and debconf's databases): 58 MiB instead of 129 MiB, and every host without
the image receives and `docker load`s it, the VM under QEMU/TCG too.

The archive is Docker's image archive as `docker save` writes it (moby's image spec v1.2,
"combined image JSON + filesystem changeset format"): ``manifest.json`` (one entry: the
``Config`` file name, ``RepoTags``, the ``Layers`` paths), the image config
``<sha256 of it>.json`` (``architecture``, ``os``, ``config`` with Env and Cmd, ``rootfs``
with the ``diff_ids`` = sha256 of each *uncompressed* layer tar, in order, and ``history``)
and ``<id>/layer.tar`` with ``<id>/VERSION``. `docker load` checks each layer's sha256
against its diff_id.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from pathlib import Path

from .common import OUT_DIR, inputs_digest, log, mark_done, need_tools, run, up_to_date

SUITE = "bookworm"
INCLUDE = ("python3-minimal",)
# Removed from the root (paths relative to it): what only package management runs.
PRUNE = ("usr/bin/perl*", "usr/lib/x86_64-linux-gnu/perl*", "usr/lib/x86_64-linux-gnu/libperl*",
         "usr/share/perl*", "usr/lib/x86_64-linux-gnu/gconv", "var/lib/dpkg/info",
         "var/cache/debconf", "usr/share/doc", "usr/share/man", "usr/share/locale",
         "var/cache/apt", "var/lib/apt/lists")
IMAGE_NAME = "gpuhost/verify:sandbox"
# As NVIDIA's CUDA images carry it: the runtime mounts the GPUs without `--gpus`/`-e`.
ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "NVIDIA_VISIBLE_DEVICES=all")
CMD = ("nvidia-smi", "-L")
CREATED = "2025-01-01T00:00:00Z"  # fixed: the same inputs give the same image id
FORMAT = "docker-save-v1.2"
RECIPE = 2  # bump when build() changes the root


def archive_path():
    return OUT_DIR / "verify-image.tar"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def image_config(diff_ids: list[str]) -> dict:
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": CREATED,
        "config": {"Env": list(ENV), "Cmd": list(CMD)},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created": CREATED,
                     "created_by": f"mmdebstrap --variant=essential --include="
                                   f"{','.join(INCLUDE)} {SUITE} (gpuhost sandbox)"}],
    }


def write_archive(layer: Path, out: Path, name: str = IMAGE_NAME) -> str:
    """Write the `docker save` archive of a one-layer image (``layer``: an uncompressed root
    filesystem tar) to ``out``; returns the image id (sha256 of the config)."""
    diff_id = _sha256(layer)
    config = json.dumps(image_config([diff_id]), sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(config).hexdigest()
    manifest = [{"Config": f"{image_id}.json", "RepoTags": [name],
                 "Layers": [f"{diff_id}/layer.tar"]}]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, f"{diff_id}/VERSION", b"1.0")
        info = tar.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
        info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, 0, "", ""
        with layer.open("rb") as f:
            tar.addfile(info, f)
        _add_bytes(tar, f"{image_id}.json", config)
        _add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
    return image_id


def layer_of(archive: tarfile.TarFile) -> tarfile.TarFile:
    """The (only) layer of a `docker save` archive, opened as a tar (tests extract it)."""
    manifest = json.load(archive.extractfile("manifest.json"))
    return tarfile.open(fileobj=archive.extractfile(manifest[0]["Layers"][0]))


def build(force: bool = False) -> None:
    need_tools("mmdebstrap")
    out = archive_path()
    digest = inputs_digest(suite=SUITE, include=INCLUDE, variant="essential", format=FORMAT,
                           env=ENV, cmd=CMD, created=CREATED, prune=PRUNE, recipe=RECIPE)
    if not force and up_to_date("verify-image", digest, [out]):
        log(f"{out.name}: up to date")
        return
    t = time.monotonic()
    rootfs = out.with_suffix(".rootfs.tmp.tar")
    tmp = out.with_suffix(".tmp.tar")
    log(f"{out.name}: mmdebstrap --variant=essential {SUITE} (about half a minute)")
    run(["mmdebstrap", "--quiet", "--variant=essential", f"--include={','.join(INCLUDE)}",
         "--customize-hook=mkdir -p \"$1/etc/gpusim\" \"$1/var/lib/gpusim\" \"$1/usr/lib/gpusim\"",
         "--customize-hook=cd \"$1\" && rm -rf " + " ".join(PRUNE),
         SUITE, str(rootfs)])
    try:
        image_id = write_archive(rootfs, tmp)
    finally:
        rootfs.unlink(missing_ok=True)
    tmp.replace(out)
    mark_done("verify-image", digest)
    log(f"{out.name}: built in {time.monotonic() - t:.1f}s ({out.stat().st_size >> 20} MiB, "
        f"docker save archive of {IMAGE_NAME}, image id {image_id[:12]})")
