"""Cached root filesystems: a Debian bookworm minbase root and one Oracle Linux layer per
major (an overlay lower layer on top of the Debian root with rpm + dnf + Oracle's release
files). Each lives in a directory named after the hash of its recipe, so it is rebuilt
only when the recipe changes:

  /var/cache/gpuhost/base/debian12-<hash>/
  /var/cache/gpuhost/base/ol8-<hash>/      (a layer: only the files that differ)
  /var/cache/gpuhost/base/ol9-<hash>/
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import paths, ubuntu
from .util import SandboxError, need_commands, recipe_hash, run, say, step, write_file

BASE_PACKAGES = [
    "systemd", "systemd-sysv", "dbus", "libpam-systemd",
    "openssh-server", "python3-minimal", "iproute2", "ca-certificates", "gnupg", "kmod",
    "procps", "sysvinit-utils", "init-system-helpers", "sudo", "netbase", "initramfs-tools",
]
# Bump when the post-processing below changes (it is part of the recipe).
BASE_RECIPE_VERSION = 1

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

OL_RELEASES = {
    "ol8": {"version": "8.10", "major": "8", "rhel_codename": "Ootpa"},
    "ol9": {"version": "9.5", "major": "9", "rhel_codename": "Plow"},
}


def _base_recipe() -> dict:
    return {
        "suite": paths.DEBIAN_SUITE,
        "sources": paths.DEBIAN_SOURCES,
        "packages": BASE_PACKAGES,
        "version": BASE_RECIPE_VERSION,
    }


def debian_base_dir() -> Path:
    return paths.BASE_CACHE / f"debian12-{recipe_hash(_base_recipe())}"


def ol_layer_dir(os_name: str) -> Path:
    recipe = {"base": debian_base_dir().name, "packages": OL_PACKAGES,
              "release": OL_RELEASES[os_name], "version": OL_RECIPE_VERSION}
    return paths.BASE_CACHE / f"{os_name}-{recipe_hash(recipe)}"


def lower_dirs(os_name: str) -> list[Path]:
    """Overlay lower layers for a host OS, topmost first."""
    from . import debian13
    if os_name == "debian12":
        return [debian_base_dir()]
    if os_name == debian13.OS_NAME:
        return [debian13.base_dir()]
    if os_name in OL_RELEASES:
        return [ol_layer_dir(os_name), debian_base_dir()]
    if ubuntu.is_ubuntu(os_name):
        root = ubuntu.debian_root(os_name)
        return [ubuntu.layer_dir(root, os_name), root]
    raise SandboxError(f"unknown host OS {os_name!r}: use debian12, debian13, ol8, ol9, "
                       "ubuntu2204, ubuntu2404 or ubuntu2604")


def _sources_lines() -> list[str]:
    return [line.replace("deb ", f"deb [signed-by={paths.DEBIAN_KEYRING}] ", 1)
            for line in paths.DEBIAN_SOURCES]


def _clear_dir(path: Path) -> None:
    for child in path.iterdir() if path.is_dir() else []:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def build_debian_base() -> Path:
    target = debian_base_dir()
    if target.is_dir():
        say(f"base root {target} is cached")
        return target
    need_commands("mmdebstrap")
    paths.BASE_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-debian12-", dir=paths.BASE_CACHE))
    try:
        with step(f"mmdebstrap --variant=minbase bookworm -> {target.name}"):
            run(["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
                 "--include=" + ",".join(BASE_PACKAGES),
                 paths.DEBIAN_SUITE, str(tmp), *_sources_lines()])
        with step("post-process base root"):
            _postprocess_base(tmp)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _prune_old("debian12-", keep=target)
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
    (root / "etc/gpusim").mkdir(exist_ok=True)
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)


def build_ol_layer(os_name: str) -> Path:
    target = ol_layer_dir(os_name)
    if target.is_dir():
        say(f"{os_name} layer {target} is cached")
        return target
    base = debian_base_dir()
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{os_name}-", dir=paths.BASE_CACHE))
    upper, work, merged = tmp / "upper", tmp / "work", tmp / "merged"
    for d in (upper, work, merged):
        d.mkdir()
    try:
        with step(f"{os_name} layer: apt-get install {' '.join(OL_PACKAGES)} in an overlay"):
            _install_in_overlay(base, upper, work, merged, OL_PACKAGES)
        with step(f"{os_name} layer: Oracle Linux release files"):
            _write_ol_release(upper, os_name)
        _drop_versionlock(upper)
        os.replace(upper, target)
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


def _write_ol_release(upper: Path, os_name: str) -> None:
    rel = OL_RELEASES[os_name]
    ver, major = rel["version"], rel["major"]
    minor = ver.split(".")[1]
    os_release = (
        'NAME="Oracle Linux Server"\n'
        f'VERSION="{ver}"\n'
        'ID="ol"\n'
        'ID_LIKE="fedora"\n'
        'VARIANT="Server"\n'
        'VARIANT_ID="server"\n'
        f'VERSION_ID="{ver}"\n'
        f'PLATFORM_ID="platform:el{major}"\n'
        f'PRETTY_NAME="Oracle Linux Server {ver}"\n'
        'ANSI_COLOR="0;31"\n'
        f'CPE_NAME="cpe:/o:oracle:linux:{major}:{minor}:server"\n'
        'HOME_URL="https://linux.oracle.com/"\n'
        'BUG_REPORT_URL="https://github.com/oracle/oracle-linux"\n'
        "\n"
        f'ORACLE_BUGZILLA_PRODUCT="Oracle Linux {major}"\n'
        f"ORACLE_BUGZILLA_PRODUCT_VERSION={ver}\n"
        'ORACLE_SUPPORT_PRODUCT="Oracle Linux"\n'
        f"ORACLE_SUPPORT_PRODUCT_VERSION={ver}\n"
        "# gpuhost sandbox: a Debian root with rpm and dnf dressed as Oracle Linux\n"
    )
    etc = upper / "etc"
    # /etc/os-release is a symlink to ../usr/lib/os-release on Debian: replace both.
    for p in (etc / "os-release", upper / "usr/lib/os-release"):
        if p.is_symlink() or p.exists():
            p.unlink()
    write_file(upper / "usr/lib/os-release", os_release)
    os.symlink("../usr/lib/os-release", etc / "os-release")
    write_file(etc / "oracle-release", f"Oracle Linux Server release {ver}\n")
    write_file(etc / "redhat-release",
               f"Red Hat Enterprise Linux release {ver} ({rel['rhel_codename']})\n")
    if not (etc / "system-release").exists():
        os.symlink("oracle-release", etc / "system-release")
    write_file(etc / "dnf/vars/releasever", f"{major}\n")
    (etc / "yum.repos.d").mkdir(parents=True, exist_ok=True)
    # Hide Debian's release marker, as an overlay whiteout (character device 0:0).
    dv = etc / "debian_version"
    if not dv.exists():
        os.mknod(dv, 0o600 | 0o020000, os.makedev(0, 0))


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
    """The bases and layers of a fleet: ``oses`` names the OSes its hosts run (Debian 13 and
    Ubuntu 26.04 need the trixie root, built only then)."""
    from . import debian13
    out = {"debian12": build_debian_base()}
    if ol:
        for name in OL_RELEASES:
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
