#!/usr/bin/env python3
"""Build the cached Debian 12 VM image that vm.py boots under QEMU/TCG.

    python vagrant/qemu/image.py            # build when missing or when the recipe changed
    python vagrant/qemu/image.py --force    # rebuild
    python vagrant/qemu/image.py --show     # print image.json

Steps (no loop mounts, no root filesystem tricks): `mmdebstrap` a bookworm root with the
Debian kernel (linux-image-6.1.0-<K>-amd64, or its -unsigned build while the signed one is not
published: the ABI the sandbox mirror serves headers for, sandbox/debian_kernel.py),
systemd as init, openssh-server and python3; customise it (networkd DHCP, fstab, a small
initramfs with the virtio modules, an SSH host key and an authorized key we keep in the
cache); `mkfs.ext4 -d ROOT` turns the directory into a filesystem image; `qemu-img convert`
makes the read-only qcow2 base that every run puts a throw-away overlay on.

Output in $GPUHOST_VM_CACHE (default /var/cache/gpuhost/vm):
  base.qcow2 vmlinuz initrd.img id_ed25519[.pub] host_ed25519.pub image.json
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("GPUHOST_VM_CACHE", os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/vm"))
REPO = Path(__file__).resolve().parents[2]
# A new image's kernel is chosen on the mirror's apt lists refreshed within this many seconds.
LISTS_FRESH_FOR_BUILD = 600
SUITE = "bookworm"
DEBIAN_SOURCES = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]
# Packages on top of mmdebstrap's minbase. Kept close to what a cloud Debian 12 image has,
# minus what the deploy itself installs (docker, headers, dkms come from the sandbox mirror).
BASE_PACKAGES = [
    "systemd-sysv", "udev", "dbus", "kmod", "openssh-server", "python3", "ca-certificates",
    "iproute2", "procps", "gnupg", "curl", "less", "zstd",
    # Debian's kernel enables AppArmor and a standard Debian 12 install has its tools;
    # without apparmor_parser, `docker run` fails ("AppArmor enabled on system but the
    # docker-default profile could not be loaded").
    "apparmor",
]
# Optional layers already installed in the image (GPUHOST_VM_PRESEED, comma-separated,
# default "docker,headers,verify"; "none" for a bare host). Under TCG, apt installing these takes
# 5-15 minutes (thousands of header files); the sandbox hosts exercise those install paths
# from the same mirror, so by default the VM starts as "a host that already runs Debian's
# Docker and has its kernel headers", and the VM test spends its time on what only a real
# kernel and systemd can show: the Docker restart, the DKMS build, the reboot.
PRESEED = {
    "docker": ["docker.io", "containerd", "runc"],
    "headers": ["dkms", "gcc", "make", "libc6-dev", "linux-headers-{abi}", "linux-headers-amd64"],
    # the deploy's verification image already in the image's Docker (loaded natively at
    # build time, preload_verify_image): `docker load` of it under TCG took 35-150 s
    "verify": [],
}
DEFAULT_PRESEED = "docker,headers,verify"
IMAGE_SIZE = "8G"
HOSTNAME = "gpuvm"
# Everything that changes the image goes into this number or into recipe(): bump it when
# customize() changes so cached images are rebuilt.
RECIPE_VERSION = 4
TOOLS = {"mmdebstrap": "mmdebstrap", "mkfs.ext4": "e2fsprogs", "qemu-img": "qemu-utils",
         "systemd-nspawn": "systemd-container",
         "ssh-keygen": "openssh-client"}


class ImageError(RuntimeError):
    """The image cannot be built; the message says what to do."""


def log(msg: str) -> None:
    print(f"[vm-image] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=True, text=True, **kwargs)
    except FileNotFoundError as exc:
        raise ImageError(f"{cmd[0]} is not installed: run `make deps` (or apt-get install "
                         f"{TOOLS.get(cmd[0], cmd[0])})") from exc
    except subprocess.CalledProcessError as exc:
        out = (exc.stderr or exc.stdout or "").strip()[-2000:]
        raise ImageError(f"`{' '.join(cmd[:3])} ...` failed with exit {exc.returncode}\n{out}")\
            from exc


def check_tools() -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise ImageError(f"missing tools for the VM image: apt-get install -y {' '.join(missing)}"
                         " (or `make deps`)")
    if os.geteuid() != 0:
        raise ImageError("building the VM image needs root (mmdebstrap and mkfs.ext4 -d must "
                         "preserve file ownership): run it as root")


def _mirror():
    """The sandbox's mirror module (the VM installs its packages from the mirror too)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from sandbox import fleet, mirror
    return mirror, fleet.cache_lock


def kernel(max_age: float | None = None) -> tuple[str, str]:
    """(ABI, image package) of the VM's kernel: $GPUHOST_VM_KERNEL's ABI, else the kernel the
    sandbox mirror serves headers for, chosen by sandbox/debian_kernel.py so that the archive
    installs it today (the signed image, or the unsigned one while the signed one is not
    published). The mirror is built or updated first; MAX_AGE (seconds) refreshes its apt
    lists when older, so a VM built now does not ask for a kernel the archive has dropped."""
    forced = os.environ.get("GPUHOST_VM_KERNEL", "").strip()
    if forced and not re.fullmatch(r"6\.1\.0-\d+-amd64", forced):
        raise ImageError(f"GPUHOST_VM_KERNEL={forced!r} is not a Debian 12 kernel ABI "
                         "like 6.1.0-56-amd64")
    mirror, cache_lock = _mirror()
    try:
        with cache_lock():
            state = mirror.build(max_age=max_age)
    except mirror.SandboxError as exc:
        raise ImageError(f"the sandbox mirror (which chooses the VM's kernel): {exc}") from None
    if forced and forced != state["kernel_release"]:
        return forced, f"linux-image-{forced}"
    return state["kernel_release"], state["kernel_image"]   # MIRROR_FORMAT 3 records both


def preseed_layers() -> list[str]:
    wanted = os.environ.get("GPUHOST_VM_PRESEED", DEFAULT_PRESEED).strip()
    layers = [] if wanted in ("", "none") else [w.strip() for w in wanted.split(",")]
    unknown = sorted(set(layers) - set(PRESEED))
    if unknown:
        raise ImageError(f"GPUHOST_VM_PRESEED: unknown layer(s) {', '.join(unknown)} "
                         f"(have {', '.join(PRESEED)}, or none)")
    return sorted(set(layers))


def recipe(abi: str, image: str | None = None, layers: list[str] | None = None) -> dict:
    layers = preseed_layers() if layers is None else layers
    extra = [p.format(abi=abi) for layer in layers for p in PRESEED[layer]]
    image = image or f"linux-image-{abi}"
    rec = {"version": RECIPE_VERSION, "suite": SUITE, "kernel_release": abi,
           "kernel_image": image, "preseed": layers,
           "packages": sorted(set(BASE_PACKAGES + [image] + extra)),
           "sources": DEBIAN_SOURCES, "size": IMAGE_SIZE}
    verify = verify_image() if "verify" in layers and "docker" in layers else None
    if verify:   # the archive's path is not part of the recipe, its content is
        rec["verify_image"] = {"name": verify["name"], "sha256": verify["sha256"]}
    return rec


def verify_image() -> dict | None:
    """The sandbox's verification image (name, archive, its sha256) from the fake NVIDIA
    artifacts' manifest, or None when they are not built (the deploy then loads it)."""
    out = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                              os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
    try:
        image = json.loads((out / "manifest.json").read_text())["verify_image"]
        archive = Path(image["archive"])
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    except (OSError, KeyError, ValueError):
        return None
    return {"name": image["name"], "sha256": digest, "archive": str(archive)}


def preload_verify_image(root: Path, verify: dict) -> None:
    """`docker load` the verification image into the image root's own Docker, natively: the
    root's dockerd runs once under systemd-nspawn (overlay2, the driver the VM's dockerd uses
    on its ext4 root) and stops again."""
    script = (
        "dockerd --storage-driver=overlay2 --iptables=false --ip6tables=false --bridge=none "
        "--ip-forward=false --ip-masq=false >/run/preload-dockerd.log 2>&1 & pid=$!; i=0; "
        "until docker info >/dev/null 2>&1; do i=$((i+1)); if [ $i -gt 240 ]; then "
        "cat /run/preload-dockerd.log >&2; exit 1; fi; sleep 0.25; done; "
        "docker load -q -i /run/verify-image.tar && "
        f"docker image inspect {shlex.quote(verify['name'])} >/dev/null; rc=$?; "
        "kill $pid; wait $pid; exit $rc")
    # the flags of the sandbox's hosts (sandbox/files/boot.sh): no machine registration or
    # scope of its own (no system bus needed), the unified cgroup hierarchy
    run(["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--as-pid2",
         f"--directory={root}", "--machine=gpuvm-image", "--capability=CAP_NET_ADMIN",
         "--system-call-filter=@keyring bpf",
         f"--bind-ro={verify['archive']}:/run/verify-image.tar", "/bin/sh", "-c", script],
        capture_output=True, env={**os.environ, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"})


def recipe_id(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:16]


def cached_image(cache: Path = CACHE) -> dict | None:
    """image.json of a complete cached image, or None."""
    meta = cache / "image.json"
    if not meta.is_file():
        return None
    info = json.loads(meta.read_text())
    needed = ["base.qcow2", "vmlinuz", "initrd.img", "id_ed25519", "host_ed25519.pub"]
    if any(not (cache / name).is_file() for name in needed):
        return None
    return info


def write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def customize(root: Path, stage: Path) -> None:
    """Turn the bootstrap directory into a bootable, SSH-reachable machine."""
    write(root / "etc/hostname", f"{HOSTNAME}\n")
    write(root / "etc/hosts", f"127.0.0.1 localhost\n127.0.1.1 {HOSTNAME}\n")
    write(root / "etc/fstab", "/dev/vda / ext4 defaults,errors=remount-ro 0 1\n")
    # No DNS on purpose (restricted user networking); apt sources are written by vm.py at
    # boot time to the reverse-tunnelled mirror on 127.0.0.1.
    write(root / "etc/resolv.conf", "# gpuhost VM: no DNS, the mirror is 127.0.0.1:18000\n")
    write(root / "etc/apt/sources.list", "# written by vagrant/qemu/vm.py at boot\n")
    # QEMU user networking always gives the guest 10.0.2.15; a static address saves the
    # DHCP round (seconds under TCG). No gateway: nothing outside is reachable anyway.
    write(root / "etc/systemd/network/20-wired.network",
          "[Match]\nName=eth0\n\n[Network]\nAddress=10.0.2.15/24\nLinkLocalAddressing=no\n"
          "IPv6AcceptRA=no\n")
    write(root / "etc/sysctl.d/90-gpuhost-vm.conf", "kernel.printk = 3 4 1 3\n")
    # A small initramfs: only what mounts a virtio ext4 root (36 MB -> 6 MB, faster boot).
    conf = root / "etc/initramfs-tools/initramfs.conf"
    conf.write_text(re.sub(r"(?m)^MODULES=.*$", "MODULES=list", conf.read_text()))
    write(root / "etc/initramfs-tools/modules", "virtio_pci\nvirtio_blk\next4\n")
    run(["chroot", str(root), "systemctl", "enable", "systemd-networkd"], capture_output=True)
    # Units that only cost boot time in a throw-away VM, and apt timers that would race
    # the deploy for the dpkg lock.
    run(["chroot", str(root), "systemctl", "mask", "e2scrub_reap.service",
         "apt-daily.timer", "apt-daily-upgrade.timer", "systemd-networkd-wait-online.service"],
        capture_output=True)
    run(["chroot", str(root), "update-initramfs", "-u", "-k", "all"], capture_output=True)
    # SSH: our own host key (so known_hosts is exact) and our own client key.
    for old in (root / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{HOSTNAME}",
         "-f", str(root / "etc/ssh/ssh_host_ed25519_key")])
    shutil.copy(root / "etc/ssh/ssh_host_ed25519_key.pub", stage / "host_ed25519.pub")
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuhost-vm",
         "-f", str(stage / "id_ed25519")])
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    write(ssh_dir / "authorized_keys", (stage / "id_ed25519.pub").read_text(), 0o600)
    write(root / "etc/ssh/sshd_config.d/gpuhost.conf",
          "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n"
          "HostKey /etc/ssh/ssh_host_ed25519_key\nClientAliveInterval 5\n")
    abi = (root / "boot").glob("vmlinuz-*")
    kernels = sorted(abi)
    if len(kernels) != 1:
        raise ImageError(f"expected one kernel in the image, found {kernels}")
    shutil.copy(kernels[0], stage / "vmlinuz")
    shutil.copy(root / "boot" / kernels[0].name.replace("vmlinuz", "initrd.img"),
                stage / "initrd.img")


def build(force: bool = False, cache: Path = CACHE) -> dict:
    """Build the image unless a cached one matches the recipe. Returns image.json.
    Concurrent callers (two test sessions) wait on a lock and reuse the first one's image."""
    check_tools()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(force, cache)


def _build_locked(force: bool, cache: Path) -> dict:
    rec = recipe(*kernel())
    current = cached_image(cache)
    if current and current.get("recipe_id") == recipe_id(rec) and not force:
        log(f"cached image {cache}/base.qcow2 is current (kernel {rec['kernel_release']})")
        return current
    # Building: mmdebstrap asks the live archive for the kernel, so the mirror's choice is
    # made on lists at most 10 minutes old (an ABI bump since then would be asked for in vain).
    rec = recipe(*kernel(max_age=LISTS_FRESH_FOR_BUILD))
    rid = recipe_id(rec)
    stage = cache / f"build.{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    root = stage / "root"
    stage.mkdir()
    try:
        return _build_in(stage, root, rec, rid, cache)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _build_in(stage: Path, root: Path, rec: dict, rid: str, cache: Path) -> dict:
    abi = rec["kernel_release"]
    t0 = time.monotonic()
    log(f"mmdebstrap {SUITE} with {rec['kernel_image']} (+{', '.join(rec['preseed']) or 'nothing'})"
        f" into {root} (1-3 minutes)")
    run(["mmdebstrap", "--variant=minbase", "--include=" + ",".join(rec["packages"]),
         SUITE, str(root), *DEBIAN_SOURCES], capture_output=True)
    t_strap = time.monotonic() - t0
    customize(root, stage)
    verify = verify_image() if rec.get("verify_image") else None
    if verify:
        log(f"preloading {verify['name']} into the image's Docker (systemd-nspawn)")
        preload_verify_image(root, verify)
    raw = stage / "base.raw"
    log(f"mkfs.ext4 -d {root} ({IMAGE_SIZE} sparse) and qemu-img convert")
    run(["mkfs.ext4", "-q", "-F", "-L", "gpuhost-root", "-d", str(root), str(raw), IMAGE_SIZE],
        capture_output=True)
    run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(stage / "base.qcow2")],
        capture_output=True)
    raw.unlink()
    info = {**rec, "recipe_id": rid, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
            "mmdebstrap_seconds": round(t_strap, 1),
            "build_seconds": round(time.monotonic() - t0, 1)}
    write(stage / "image.json", json.dumps(info, indent=2) + "\n")
    # image.json last: an interrupted copy leaves no image.json that matches the recipe.
    for name in ["base.qcow2", "vmlinuz", "initrd.img", "id_ed25519", "id_ed25519.pub",
                 "host_ed25519.pub", "image.json"]:
        os.replace(stage / name, cache / name)
    (cache / "id_ed25519").chmod(0o600)
    log(f"image ready in {info['build_seconds']} s: {cache}/base.qcow2 (kernel {abi})")
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if cached")
    ap.add_argument("--show", action="store_true", help="print the cached image.json")
    args = ap.parse_args(argv)
    try:
        if args.show:
            info = cached_image()
            if info is None:
                raise ImageError(f"no image in {CACHE}: run `make vm-image`")
        else:
            info = build(force=args.force)
    except ImageError as exc:
        print(f"vm-image: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
