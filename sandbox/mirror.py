"""The Debian package mirror the sandbox hosts install from (they have no other network).

  /var/cache/gpuhost/mirror/apt/        the controller-side apt configuration used to resolve
                                        and download (own sources, lists, empty dpkg status)
  /var/cache/gpuhost/mirror/gnupg/      the sandbox archive signing key (generated once)
  /var/cache/gpuhost/mirror/debian/     served as http://127.77.0.1:8000/debian
      pool/main/*.deb                   the packages (kept between builds: incremental)
      dists/bookworm/{InRelease,Release,Release.gpg}, {main,contrib}/binary-amd64/Packages(.gz)
                                        (a package's component is its Section's prefix:
                                        Debian's contrib packages say "contrib/misc")
      gpuhost-sandbox-archive.gpg       the keyring hosts trust (signed-by)

Dependencies are resolved on the controller against an EMPTY dpkg status, so the pool
holds the full closure of every listed package: `apt-get install docker.io dkms
linux-headers-$(uname -r)` works on a host whatever it already has.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from . import debian_kernel, paths
from .util import SandboxError, need_commands, read_json, recipe_hash, run, say, step, write_file

# What the deploys (and the sandbox tests) install on Debian hosts; all dependencies too.
MIRROR_PACKAGES = [
    "docker.io", "containerd", "runc", "tini", "cgroupfs-mount",
    "dkms", "gcc", "make", "libc6-dev", "fakeroot", "kmod", "initramfs-tools",
    "unattended-upgrades", "apt-listchanges", "gnupg", "curl", "wget", "ca-certificates",
    "apt-transport-https", "lsb-release", "xz-utils", "pigz", "sudo", "jq",
    "python3", "python3-apt",
    # Slurm 22.05 (bookworm's slurm-wlm): the `slurm` trait's node daemon, controller, client
    # tools and MUNGE authentication (sandbox/README.md, "Slurm")
    "slurmd", "slurmctld", "slurm-client", "munge",
    # NVLink 5 HGX hosts: NVIDIA's driver container installs infiniband-diags with nvlsm
    # (gpu-driver-container@06a208c */install.sh nvlink5_pkgs_install; docs/fabric.md)
    "infiniband-diags",
    # From Debian's contrib (indexed as the mirror's contrib component): the fake NVIDIA
    # Debian 12 packages depend on it, as NVIDIA's Debian-style packages depend on contrib
    # packages (NVIDIA's guide: add-apt-repository contrib; sandbox/README.md)
    "nvidia-support",
]
# The mirror's own resolver reads Debian's contrib too; hosts see it only when enabled.
CONTRIB_SOURCES = [
    "deb http://deb.debian.org/debian bookworm contrib",
]
KEY_UID = "gpuhost sandbox mirror <sandbox-mirror@gpuhost.invalid>"
KEYRING_NAME = "gpuhost-sandbox-archive.gpg"
LISTS_MAX_AGE = 7 * 24 * 3600      # re-run apt-get update on the controller after a week
MIRROR_FORMAT = 3                  # bump when the layout below changes (2: contrib,
                                   # 3: the kernel chosen by sandbox/debian_kernel.py)

APT_DIR = paths.MIRROR_CACHE / "apt"
GNUPG_DIR = paths.MIRROR_CACHE / "gnupg"
POOL = paths.MIRROR_DEBIAN / "pool" / "main"
DIST = paths.MIRROR_DEBIAN / "dists" / paths.DEBIAN_SUITE
STATE_FILE = paths.MIRROR_CACHE / "state.json"
KEYRING = paths.MIRROR_DEBIAN / KEYRING_NAME


@dataclass(frozen=True)
class Archive:
    """One Debian suite's mirror: where it resolves, what it serves. The bookworm one is
    made from this module's globals at each call (``bookworm()``); sandbox/debian13.py
    describes trixie's, in directories of its own."""
    suite: str
    sources: list[str]           # the Debian archive it resolves against (one-line form)
    contrib_sources: list[str]
    packages: list[str]
    root: Path                   # served directory
    apt_dir: Path                # controller-side apt configuration, lists, empty status
    state_file: Path
    served: str = "debian"       # the URL path under the sandbox's HTTP server

    @property
    def pool(self) -> Path:
        return POOL if self.root == paths.MIRROR_DEBIAN else self.root / "pool" / "main"

    @property
    def dist(self) -> Path:
        return DIST if self.root == paths.MIRROR_DEBIAN else self.root / "dists" / self.suite

    @property
    def keyring(self) -> Path:
        return KEYRING if self.root == paths.MIRROR_DEBIAN else self.root / KEYRING_NAME


def bookworm() -> Archive:
    return Archive(suite=paths.DEBIAN_SUITE, sources=paths.DEBIAN_SOURCES,
                   contrib_sources=CONTRIB_SOURCES, packages=MIRROR_PACKAGES,
                   root=paths.MIRROR_DEBIAN, apt_dir=APT_DIR, state_file=STATE_FILE)


def _apt_env(a: Archive | None = None) -> dict[str, str]:
    """Isolate apt from the controller's /etc/apt/apt.conf.d (which may disable caches or
    add proxies and repositories that hosts will never see)."""
    return {"APT_CONFIG": str((a or bookworm()).apt_dir / "apt.conf")}


def _apt_opts(a: Archive | None = None) -> list[str]:
    APT_DIR = (a or bookworm()).apt_dir
    return [
        "-o", f"Dir::Etc::sourcelist={APT_DIR / 'sources.list'}",
        "-o", f"Dir::Etc::sourceparts={APT_DIR / 'sources.list.d'}",
        "-o", f"Dir::Etc::preferencesparts={APT_DIR / 'preferences.d'}",
        "-o", f"Dir::State={APT_DIR / 'state'}",
        "-o", f"Dir::State::status={APT_DIR / 'status'}",
        "-o", f"Dir::Cache={APT_DIR / 'cache'}",
        "-o", "APT::Architecture=amd64",
        "-o", "APT::Architectures::=amd64",
        "-o", "APT::Install-Recommends=false",
        "-o", "Debug::NoLocking=true",
        "-o", "Acquire::Languages=none",
        "-q",
    ]


def _prepare_apt_dir(a: Archive) -> None:
    APT_DIR = a.apt_dir
    for d in ("sources.list.d", "preferences.d", "apt.conf.d", "state/lists/partial",
              "cache/archives/partial"):
        (APT_DIR / d).mkdir(parents=True, exist_ok=True)
    write_file(APT_DIR / "apt.conf",
               f'Dir::Etc::parts "{APT_DIR / "apt.conf.d"}";\n'
               f'Dir::Etc::main "{APT_DIR / "apt.conf.main"}";\n')
    srcs = "\n".join(line.replace("deb ", f"deb [signed-by={paths.DEBIAN_KEYRING}] ", 1)
                     for line in a.sources + a.contrib_sources) + "\n"
    if not (APT_DIR / "sources.list").is_file() or (APT_DIR / "sources.list").read_text() != srcs:
        write_file(APT_DIR / "sources.list", srcs)
        _touch_old(APT_DIR / "state" / "updated")
    if not (APT_DIR / "status").exists():
        write_file(APT_DIR / "status", "")


def _touch_old(p: Path) -> None:
    if p.exists():
        p.unlink()


def _update_lists(a: Archive, refresh: bool, max_age: float = LISTS_MAX_AGE) -> bool:
    """apt-get update when asked, or when the lists are older than MAX_AGE; True if run."""
    stamp = a.apt_dir / "state" / "updated"
    fresh = stamp.exists() and time.time() - stamp.stat().st_mtime < max_age
    if fresh and not refresh:
        return False
    with step(f"mirror: apt-get update (controller-side, Debian {a.suite} only)"):
        run(["apt-get", *_apt_opts(a), "update"], quiet=True, env=_apt_env(a))
        write_file(stamp, time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    return True


def _apt_cache(args: list[str], a: Archive | None = None) -> str:
    """apt-cache with the mirror's own configuration; stdout ("" when apt knows none)."""
    return run(["apt-cache", *_apt_opts(a), *args], capture=True, check=False,
               env=_apt_env(a)).stdout


def kernel_choice(a: Archive | None = None) -> debian_kernel.KernelChoice:
    """The kernel the hosts simulate and the VM boots: one the archive installs whole today
    (sandbox/debian_kernel.py)."""
    a = a or bookworm()
    try:
        return debian_kernel.choose(lambda args: _apt_cache(args, a), a.suite)
    except debian_kernel.NoKernel as exc:
        raise SandboxError(str(exc)) from None


def _package_list(a: Archive, kernel: debian_kernel.KernelChoice) -> list[str]:
    # exact versions: the headers of the chosen ABI and the meta that depends on them (its
    # newest version may point at an ABI the archive cannot install yet); their -common and
    # linux-kbuild come with them
    pkgs = a.packages + [kernel.headers, kernel.meta]
    if paths.NVIDIA_MIRROR_PACKAGES.is_file():
        for line in paths.NVIDIA_MIRROR_PACKAGES.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                pkgs.append(line)
    return sorted(set(pkgs))


def _resolve(a: Archive, pkgs: list[str]) -> list[tuple[str, str, str]]:
    """(name, version, arch) of the full dependency closure against an empty system."""
    proc = run(["apt-get", *_apt_opts(a), "-s", "install", *pkgs], capture=True, check=False,
               env=_apt_env(a))
    if proc.returncode != 0:
        raise SandboxError(f"cannot resolve the mirror's packages against Debian {a.suite}:\n"
                           + (proc.stdout + proc.stderr).strip()[-2000:])
    out = []
    for m in re.finditer(r"^Inst (\S+) \((\S+) .*?\[(\S+)\]\)", proc.stdout, re.M):
        out.append((m.group(1), m.group(2), m.group(3)))
    if not out:
        raise SandboxError("apt resolved no package for the mirror (unexpected): "
                           + proc.stdout[-500:])
    return sorted(out)


def deb_filename(name: str, version: str, arch: str) -> str:
    """The file name `apt-get download` writes (':' of an epoch is URL-encoded)."""
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def _download(a: Archive, closure: list[tuple[str, str, str]]) -> int:
    POOL = a.pool
    POOL.mkdir(parents=True, exist_ok=True)
    missing = [(n, v, a) for n, v, a in closure if not (POOL / deb_filename(n, v, a)).is_file()]
    if missing:
        with step(f"mirror: apt-get download {len(missing)} of {len(closure)} packages"):
            for i in range(0, len(missing), 100):
                batch = [f"{n}={v}" for n, v, _ in missing[i:i + 100]]
                proc = run(["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(POOL),
                            "apt-get", *_apt_opts(a), "download", *batch], check=False,
                           quiet=True, env=_apt_env(a))
                if proc.returncode != 0:
                    raise SandboxError(f"apt-get download failed:\n{proc.stdout[-1500:]}")
        still = [n for n, v, a in missing if not (POOL / deb_filename(n, v, a)).is_file()]
        if still:
            raise SandboxError(f"downloaded packages not found in {POOL}: {', '.join(still[:10])}")
    wanted = {deb_filename(*c) for c in closure}
    for f in POOL.glob("*.deb"):
        if f.name not in wanted:
            f.unlink()
    return len(missing)


def _ensure_key(a: Archive | None = None) -> None:
    a = a or bookworm()
    KEYRING = a.keyring
    GNUPG_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {"GNUPGHOME": str(GNUPG_DIR)}
    have = run(["gpg", "--batch", "--list-secret-keys", "--with-colons"], capture=True,
               env=env, check=False).stdout
    if "sec:" not in have:
        with step("mirror: generate the sandbox archive signing key"):
            run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", KEY_UID,
                 "ed25519", "sign", "never"], env=env, quiet=True)
    KEYRING.parent.mkdir(parents=True, exist_ok=True)
    tmp = KEYRING.with_suffix(".tmp")
    run(["gpg", "--batch", "--yes", "--output", str(tmp), "--export", KEY_UID], env=env)
    os.replace(tmp, KEYRING)
    run(["gpg", "--batch", "--yes", "--armor", "--output",
         str(a.root / "gpuhost-sandbox-archive.asc"), "--export", KEY_UID], env=env)


def _split_components(packages: str) -> dict[str, str]:
    """apt-ftparchive's Packages text -> {component: text}: Debian's contrib packages
    (``Section: contrib/...``) go to ``contrib``, everything else to ``main``."""
    out: dict[str, list[str]] = {"main": [], "contrib": []}
    for stanza in packages.strip().split("\n\n"):
        if not stanza.strip():
            continue
        section = re.search(r"^Section: (\S+)", stanza, re.M)
        component = "contrib" if section and section.group(1).startswith("contrib/") else "main"
        out[component].append(stanza.strip() + "\n")
    return {c: "\n".join(stanzas) for c, stanzas in out.items()}


def _index(a: Archive) -> None:
    DIST = a.dist
    pk = run(["sh", "-c", 'cd "$1" && apt-ftparchive packages pool/main', "sh",
              str(a.root)], capture=True).stdout
    for component, text in _split_components(pk).items():
        comp = DIST / component / "binary-amd64"
        comp.mkdir(parents=True, exist_ok=True)
        write_file(comp / "Packages", text)
        run(["gzip", "-9nkf", str(comp / "Packages")])
    # Release lists index paths relative to the directory it is run in.
    rel = run(["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(DIST),
               "apt-ftparchive",
               "-o", "APT::FTPArchive::Release::Origin=gpuhost-sandbox",
               "-o", "APT::FTPArchive::Release::Label=gpuhost-sandbox",
               "-o", f"APT::FTPArchive::Release::Suite={a.suite}",
               "-o", f"APT::FTPArchive::Release::Codename={a.suite}",
               "-o", "APT::FTPArchive::Release::Architectures=amd64",
               "-o", "APT::FTPArchive::Release::Components=main contrib",
               "release", "."], capture=True).stdout
    for f in ("Release", "InRelease", "Release.gpg"):
        (DIST / f).unlink(missing_ok=True)
    write_file(DIST / "Release", rel)
    env = {"GNUPGHOME": str(GNUPG_DIR)}
    run(["gpg", "--batch", "--yes", "--local-user", KEY_UID, "--clearsign",
         "--output", str(DIST / "InRelease"), str(DIST / "Release")], env=env)
    run(["gpg", "--batch", "--yes", "--local-user", KEY_UID, "--armor", "--detach-sign",
         "--output", str(DIST / "Release.gpg"), str(DIST / "Release")], env=env)


def _inputs_hash(a: Archive) -> str:
    """Everything the mirror's content depends on, cheap to compute: when it is unchanged
    the (slow, ~5 s) dependency resolution is skipped. The lists count by their suites'
    InRelease (it holds every index's SHA256: any change of the archive changes it), not by
    size and time, which an archive's next state can share with the last."""
    lists_dir = a.apt_dir / "state" / "lists"
    lists = sorted([(f.name, hashlib.sha256(f.read_bytes()).hexdigest())
                    for f in lists_dir.glob("*InRelease")]
                   + [(f.name, f.stat().st_size, int(f.stat().st_mtime))
                      for f in lists_dir.glob("*Packages*")])
    extra = paths.NVIDIA_MIRROR_PACKAGES.read_text() if paths.NVIDIA_MIRROR_PACKAGES.is_file() else ""
    return recipe_hash({"format": MIRROR_FORMAT, "packages": a.packages, "extra": extra,
                        "sources": a.sources + a.contrib_sources, "lists": lists})


def _complete(a: Archive, state: dict) -> bool:
    return ((a.dist / "InRelease").is_file() and a.keyring.is_file()
            and bool(state.get("files")) and all((a.pool / f).is_file() for f in state["files"]))


def build(refresh: bool = False, max_age: float | None = None,
          archive: Archive | None = None) -> dict:
    """Build or update the mirror; return its state (kernel, package count). REFRESH runs
    apt-get update first; MAX_AGE (seconds) does when the lists are older than that (the
    default: a week). A package the lists name but the archive no longer serves (an ABI bump
    or a point release since the last update) refreshes the lists and resolves again, once."""
    a = archive or bookworm()
    need_commands("apt-get", "apt-ftparchive", "gpg", "gzip")
    _prepare_apt_dir(a)
    refreshed = _update_lists(a, refresh, LISTS_MAX_AGE if max_age is None else max_age)
    state = read_json(a.state_file) or {}
    inputs = _inputs_hash(a)
    if state.get("inputs") == inputs and _complete(a, state):
        say(f"mirror {a.root} is up to date ({state['count']} packages, "
            f"kernel {state['kernel_release']})")
        return state
    while True:
        with step("mirror: resolve dependencies against an empty system"):
            kernel = kernel_choice(a)
            pkgs = _package_list(a, kernel)
            closure = _resolve(a, pkgs)
        files = sorted(deb_filename(*c) for c in closure)
        if state.get("files") == files and _complete(a, state):
            break
        _ensure_key(a)
        try:
            fetched = _download(a, closure)
        except SandboxError:
            if refreshed:
                raise
            say("mirror: the archive moved since the last apt-get update: updating the lists")
            refreshed = _update_lists(a, True, 0)
            inputs = _inputs_hash(a)
            continue
        with step(f"mirror: index and sign {len(closure)} packages ({fetched} new)"):
            _index(a)
        break
    if kernel.note:
        say(f"mirror: kernel {kernel.release}: {kernel.note}")
    state = {"inputs": inputs, **kernel.as_state(), "packages": pkgs,
             "count": len(closure), "files": files,
             "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_file(a.state_file, json.dumps(state, indent=1) + "\n")
    say(f"mirror {a.root}: {len(closure)} packages, kernel {kernel.release}")
    return state


def kernel_release(archive: Archive | None = None) -> str:
    """The simulated kernel of Debian hosts (the mirror must have been built)."""
    state = read_json((archive or bookworm()).state_file)
    if not state or "kernel_release" not in state:
        raise SandboxError("the package mirror is not built: run `python -m sandbox mirror` "
                           "or `make sandbox-up`")
    return state["kernel_release"]


def sources_list() -> str:
    return (f"deb [signed-by=/etc/apt/keyrings/{KEYRING_NAME}] {paths.MIRROR_URL}/debian "
            f"{paths.DEBIAN_SUITE} main\n")
