"""Cached root filesystems: a Debian bookworm minbase root, one layer with rpm + dnf that
every Enterprise Linux release shares, and one small layer per release with its own files
(Oracle Linux 8/9/10, Rocky Linux 10, RHEL 10: sandbox/elrelease.py). Each lives in a
directory named after the hash of its recipe, so it is rebuilt only when the recipe changes:

  /var/cache/gpuhost/base/debian12-<hash>/
  /var/cache/gpuhost/base/el-common-<hash>/  (overlay layer: rpm, dnf, dnf-plugins-core)
  /var/cache/gpuhost/base/ol8-<hash>/        (the release's files only; likewise ol9,
                                              ol10, rocky10, rhel10)
"""
from __future__ import annotations

import inspect
import os
import shutil
import tempfile
from pathlib import Path

from . import elrelease, paths, ubuntu
from .util import SandboxError, need_commands, recipe_hash, run, say, step, write_file

BASE_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "libpam-systemd",
    "openssh-server", "python3-minimal", "iproute2", "ca-certificates", "gnupg", "kmod",
    "procps", "sysvinit-utils", "init-system-helpers", "sudo", "netbase", "initramfs-tools",
]
# Bump when the post-processing below changes (it is part of the recipe).
BASE_RECIPE_VERSION = 2

# dnf-plugins-core: `dnf config-manager` (Oracle installs dnf-plugins-core in every OL8/OL9
# BaseOS install). Debian's package also carries the versionlock plugin, which Oracle ships
# apart (python3-dnf-plugin-versionlock, not installed by default): the layer drops it and
# the fake ol*_baseos_latest channel carries it as that package (sandbox/nvidia/pkg/oracle.py).
OL_PACKAGES = ["rpm", "dnf", "python3-dnf", "dnf-plugins-core"]
OL_RECIPE_VERSION = 4
# Debian's dnf-plugins-core files that Oracle ships apart, in packages a stock install
# lacks: python3-dnf-plugin-versionlock (faked in ol*_baseos_latest) and
# python3-dnf-plugin-local (its enabled plugin would add a `_dnf_local` repository),
# python3-dnf-plugin-show-leaves.
VERSIONLOCK_FILES = ["usr/lib/python3/dist-packages/dnf-plugins/versionlock.py",
                     "etc/dnf/plugins/versionlock.conf", "etc/dnf/plugins/versionlock.list",
                     "usr/lib/python3/dist-packages/dnf-plugins/local.py",
                     "etc/dnf/plugins/local.conf",
                     # python3-dnf-plugin-show-leaves: prints "New leaves:" after each install
                     "usr/lib/python3/dist-packages/dnf-plugins/show_leaves.py"]

# Every Enterprise Linux release the sandbox boots (Oracle Linux, Rocky Linux, RHEL): the
# same rpm/dnf layer with each release's files (sandbox/elrelease.py)
OL_RELEASES = elrelease.RELEASES


def _base_recipe() -> dict:
    return {
        "suite": paths.DEBIAN_SUITE,
        "sources": paths.DEBIAN_SOURCES,
        "packages": BASE_PACKAGES,
        "version": BASE_RECIPE_VERSION,
    }


def debian_base_dir() -> Path:
    return paths.BASE_CACHE / f"debian12-{recipe_hash(_base_recipe())}"


# RHEL hosts: the stand-in of subscription-manager (installed by RHEL's default install)
RHSM_STANDIN = paths.FILES_DIR / "subscription-manager"


def el_common_dir() -> Path:
    """rpm, dnf and dnf-plugins-core over the Debian root: one layer every Enterprise Linux
    release shares (the slow part: an apt-get install)."""
    recipe = {"base": debian_base_dir().name, "packages": OL_PACKAGES,
              "drop": VERSIONLOCK_FILES, "version": OL_RECIPE_VERSION}
    return paths.BASE_CACHE / f"el-common-{recipe_hash(recipe)}"


def ol_layer_dir(os_name: str) -> Path:
    """The release's own files, over el_common_dir() (sandbox/elrelease.py)."""
    recipe = {"base": el_common_dir().name, "release": OL_RELEASES[os_name],
              "files": inspect.getsource(elrelease), "version": OL_RECIPE_VERSION}
    if OL_RELEASES[os_name]["vendor"] == "redhat":
        recipe["rhsm"] = RHSM_STANDIN.read_text()
    return paths.BASE_CACHE / f"{os_name}-{recipe_hash(recipe)}"


def lower_dirs(os_name: str) -> list[Path]:
    """Overlay lower layers for a host OS, topmost first."""
    from . import debian13
    if os_name == "debian12":
        return [debian_base_dir()]
    if os_name == debian13.OS_NAME:
        return [debian13.base_dir()]
    if os_name in OL_RELEASES:
        return [ol_layer_dir(os_name), el_common_dir(), debian_base_dir()]
    if ubuntu.is_ubuntu(os_name):
        root = ubuntu.debian_root(os_name)
        return [ubuntu.layer_dir(root, os_name), root]
    raise SandboxError(f"unknown host OS {os_name!r}: use debian12, debian13, "
                       f"{', '.join(OL_RELEASES)}, ubuntu2204, ubuntu2404 or ubuntu2604")


def _sources_lines(sources: list[str] | None = None) -> list[str]:
    """Debian's one-line sources (``paths.DEBIAN_SOURCES`` unless given), signed by Debian's
    archive keyring."""
    return [line.replace("deb ", f"deb [signed-by={paths.DEBIAN_KEYRING}] ", 1)
            for line in (paths.DEBIAN_SOURCES if sources is None else sources)]


def _clear_dir(path: Path) -> None:
    for child in path.iterdir() if path.is_dir() else []:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def build_debian_base() -> Path:
    return build_minbase(debian_base_dir(), "debian12", paths.DEBIAN_SUITE, paths.DEBIAN_SOURCES)


def build_minbase(target: Path, os_name: str, suite: str, sources: list[str]) -> Path:
    """A Debian minbase root of ``suite`` (BASE_PACKAGES, mmdebstrap) at ``target``, built
    once; older builds of ``os_name`` are removed (Debian 12's and Debian 13's roots)."""
    if target.is_dir():
        say(f"base root {target} is cached")
        return target
    need_commands("mmdebstrap")
    paths.BASE_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{os_name}-", dir=paths.BASE_CACHE))
    try:
        with step(f"mmdebstrap --variant=minbase {suite} -> {target.name}"):
            run(["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
                 "--include=" + ",".join(BASE_PACKAGES), suite, str(tmp),
                 *_sources_lines(sources)])
        with step("post-process base root"):
            _postprocess_base(tmp)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune_old(f"{os_name}-", keep=target)
    return target


def _postprocess_base(root: Path) -> None:
    # Host keys are generated per host; apt sources are written per host (mirror only).
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    for f in [root / "etc/apt/sources.list", root / "etc/hostname", root / "etc/resolv.conf"]:
        if f.exists() or f.is_symlink():
            f.unlink()
    _clear_dir(root / "etc/apt/sources.list.d")
    lists = root / "var/lib/apt/lists"
    for f in lists.glob("*") if lists.is_dir() else []:
        if f.is_file():
            f.unlink()
    write_file(root / "etc/machine-id", "")
    # dpkg without an fsync per unpacked file, as Debian's own container images set it
    # (sandbox/README.md, "Not simulated"): a kernel headers install costs 7 s here, not 18
    write_file(root / "etc/dpkg/dpkg.cfg.d/gpuhost-sandbox-unsafe-io", "force-unsafe-io\n")
    (root / "etc/gpusim").mkdir(exist_ok=True)
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)


def build_el_common() -> Path:
    target = el_common_dir()
    if target.is_dir():
        say(f"Enterprise Linux layer {target} is cached")
        return target
    base = debian_base_dir()
    tmp = Path(tempfile.mkdtemp(prefix=".build-el-common-", dir=paths.BASE_CACHE))
    upper, work, merged = tmp / "upper", tmp / "work", tmp / "merged"
    for d in (upper, work, merged):
        d.mkdir()
    try:
        with step(f"Enterprise Linux layer: apt-get install {' '.join(OL_PACKAGES)} in an overlay"):
            _install_in_overlay(base, upper, work, merged, OL_PACKAGES)
        _drop_versionlock(upper)
        os.replace(upper, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_old("el-common-", keep=target)
    return target


def build_ol_layer(os_name: str) -> Path:
    build_el_common()
    target = ol_layer_dir(os_name)
    if target.is_dir():
        say(f"{os_name} layer {target} is cached")
        return target
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{os_name}-", dir=paths.BASE_CACHE))
    try:
        with step(f"{os_name} layer: {os_name} release files"):
            (tmp / "etc").mkdir()
            elrelease.write_release(tmp, os_name)
            if OL_RELEASES[os_name]["vendor"] == "redhat":
                dest = tmp / "usr/sbin/subscription-manager"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(RHSM_STANDIN, dest)
                dest.chmod(0o755)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_old(f"{os_name}-", keep=target)
    return target


# Runs in a private mount namespace: the overlay and the bind mounts vanish with it.
_OVERLAY_INSTALL = r"""
set -eu
base=$1 upper=$2 work=$3 root=$4; shift 4
mount -t overlay overlay -o "lowerdir=$base,upperdir=$upper,workdir=$work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
printf '%s\n' "$SOURCES" > "$root/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" apt-get -q update >/dev/null
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -q -y --no-install-recommends install "$@" >/dev/null
chroot "$root" apt-get clean
rm -f "$root/etc/resolv.conf" "$root/etc/apt/sources.list" "$root/usr/sbin/policy-rc.d"
find "$root/var/lib/apt/lists" -maxdepth 1 -type f -delete
"""


def _install_in_overlay(base: Path, upper: Path, work: Path, root: Path, pkgs: list[str]) -> None:
    run(["unshare", "--mount", "--propagation", "private", "sh", "-c", _OVERLAY_INSTALL, "sh",
         str(base), str(upper), str(work), str(root), *pkgs],
        env={"SOURCES": "\n".join(_sources_lines())}, quiet=True)


def _drop_versionlock(upper: Path) -> None:
    """Oracle's stock install has dnf config-manager but not the versionlock (nor the local)
    plugin: remove Debian's copies from the layer (whiteouts would be needed only for lower-layer files; these
    come from this layer's own apt-get install)."""
    for rel in VERSIONLOCK_FILES:
        (upper / rel).unlink(missing_ok=True)
    cache = upper / "usr/lib/python3/dist-packages/dnf-plugins/__pycache__"
    for cached in [*cache.glob("versionlock.*"), *cache.glob("local.*"), *cache.glob("show_leaves.*")]:
        cached.unlink()


def _prune_old(prefix: str, keep: Path) -> None:
    """Remove older builds of the same kind (they are not used by any recipe any more),
    unless a running host still uses one (an overlay lower layer must not vanish)."""
    for d in paths.BASE_CACHE.glob(prefix + "*"):
        if d != keep and d.is_dir() and not _in_use(d):
            shutil.rmtree(d, ignore_errors=True)


def _in_use(d: Path) -> bool:
    """True when an existing host of this fleet lists `d` among its lower layers, or a
    running host of any fleet (a private one has other state directories) boots from it:
    its supervisor and boot.sh name their lower layers on their command lines."""
    for lower in paths.HOSTS_DIR.glob("*/lower"):
        try:
            if str(d) in lower.read_text().split(":"):
                return True
        except OSError:
            continue
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(d).encode() in a.split(b":") for a in args if a.startswith(b"/")):
            return True
    return False


def build_all(ol: bool, ubuntu_layers: bool = False, oses: set[str] = frozenset()) -> dict[str, Path]:
    """The bases and layers of a fleet: the Debian 12 root, the OL8/OL9 layers (``ol``: a
    fleet's --ol hosts), and what ``oses`` (the OSes its hosts run) needs besides: the other
    Enterprise Linux layers, the trixie root (Debian 13 and Ubuntu 26.04, built only then)
    and the Ubuntu layers."""
    from . import debian13
    out = {"debian12": build_debian_base()}
    for name in OL_RELEASES:
        if (ol and name in ("ol8", "ol9")) or name in oses:
            out[name] = build_ol_layer(name)
    if oses & {debian13.OS_NAME, *ubuntu.ON_TRIXIE}:
        out[debian13.OS_NAME] = debian13.build_base()
    if ubuntu_layers or oses & set(ubuntu.RELEASES):
        # Ubuntu's release files on a Debian root (sandbox/ubuntu.py)
        for name in ubuntu.RELEASES:
            if name in ubuntu.ON_TRIXIE and name not in oses:
                continue
            out[name] = ubuntu.build_layer(ubuntu.debian_root(name), name)
    return out
