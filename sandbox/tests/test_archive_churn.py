"""The sandbox mirror and the VM image against Debian's archive in its in-between states.

Each test builds a small signed apt archive of its own (packages named and versioned as
Debian's kernel packages are, their Depends as Debian writes them: the headers meta on the
exact headers version, headers on their -common exactly and on linux-kbuild by >=), points
the real mirror code at it (apt-get update, apt-cache, apt-get download, apt-ftparchive, gpg)
and checks what the sandbox hosts and the QEMU VM would get:
  - the state of 2026-11-29: bookworm-security carries the 6.1.0-57 headers and the unsigned
    image, the signed image is not published yet, while the metas already point at it;
  - the state seen the same day through another mirror: the 57 headers and unsigned image
    published ahead of the metas, which still point at 56;
  - an ABI bump under a warm cache (the mirror holds 56, the archive only 57);
  - lists older than the archive (the cache's files gone, the archive moved on);
  - no kernel that installs whole: one line that says why.
The kernel packages are empty stand-ins: what matters here is apt's view of names, versions
and dependencies, which is real.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sandbox import debian_kernel, fleet, mirror, paths
from sandbox.util import SandboxError

REPO = Path(__file__).resolve().parents[2]


def _load_image():
    spec = importlib.util.spec_from_file_location("gpuhost_qemu_image_churn",
                                                  REPO / "vagrant/qemu/image.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ a local Debian archive

def K(abi: int) -> str:
    return f"6.1.0-{abi}-amd64"


def kernel_set(abi: int, version: str, signed: bool = True, unsigned: bool = True) -> list:
    """Debian's packages of one kernel ABI (as linux and linux-signed-amd64 build them)."""
    pkgs = [
        (f"linux-headers-{K(abi)}", version,
         f"linux-headers-6.1.0-{abi}-common (= {version}), linux-kbuild-6.1 (>= {version})"),
        (f"linux-headers-6.1.0-{abi}-common", version, ""),
        ("linux-kbuild-6.1", version, ""),
    ]
    if signed:
        pkgs.append((f"linux-image-{K(abi)}", version, ""))
    if unsigned:
        pkgs.append((f"linux-image-{K(abi)}-unsigned", version, ""))
    return pkgs


def metas(meta_version: str, abi: int, abi_version: str) -> list:
    return [("linux-headers-amd64", meta_version, f"linux-headers-{K(abi)} (= {abi_version})"),
            ("linux-image-amd64", meta_version, f"linux-image-{K(abi)} (= {abi_version})")]


POINT_RELEASE = kernel_set(50, "6.1.176-1") + metas("6.1.176-1", 50, "6.1.176-1")
OTHERS = [("dkms", "3.0.10-8+deb12u1", "")]


class Archive:
    """A signed Debian-style archive in a directory: suites bookworm and bookworm-security."""

    def __init__(self, root: Path):
        self.root = root
        self.gnupg = root.parent / "archive-gnupg"
        self.gnupg.mkdir(mode=0o700)
        self.keyring = root.parent / "archive-keyring.gpg"
        env = self._env()
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                        "test archive <archive@gpuhost.invalid>", "ed25519", "sign", "never"],
                       env=env, check=True, capture_output=True)
        subprocess.run(["gpg", "--batch", "--yes", "--output", str(self.keyring), "--export"],
                       env=env, check=True, capture_output=True)
        self.debs = root.parent / "debs"

    def _env(self) -> dict:
        return {**os.environ, "GNUPGHOME": str(self.gnupg)}

    def _deb(self, name: str, version: str, depends: str) -> Path:
        out = self.debs / f"{name}_{version}_amd64.deb"
        if out.is_file():
            return out
        tree = self.debs / "tree" / f"{name}_{version}"
        (tree / "DEBIAN").mkdir(parents=True)
        (tree / "usr/share/doc" / name).mkdir(parents=True)
        (tree / "usr/share/doc" / name / "stand-in").write_text(f"{name} {version}\n")
        control = (f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                   "Maintainer: gpuhost tests <tests@gpuhost.invalid>\nSection: kernel\n"
                   f"Priority: optional\nDescription: stand-in for Debian's {name}\n")
        if depends:
            control += f"Depends: {depends}\n"
        (tree / "DEBIAN/control").write_text(control)
        subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "-b", str(tree), str(out)],
                       check=True, capture_output=True)
        return out

    def publish(self, suites: dict[str, list]) -> None:
        """Make the archive hold exactly SUITES ({suite: [(name, version, depends)]})."""
        for sub in ("dists", "pool"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        for suite, pkgs in suites.items():
            pool = self.root / "pool" / suite
            pool.mkdir(parents=True)
            for name, version, depends in pkgs:
                shutil.copy(self._deb(name, version, depends), pool)
            dist = self.root / "dists" / suite
            (dist / "main/binary-amd64").mkdir(parents=True)
            text = subprocess.run(["apt-ftparchive", "packages", f"pool/{suite}"], cwd=self.root,
                                  check=True, capture_output=True, text=True).stdout
            (dist / "main/binary-amd64/Packages").write_text(text)
            rel = subprocess.run(
                ["apt-ftparchive", "-o", f"APT::FTPArchive::Release::Suite={suite}",
                 "-o", f"APT::FTPArchive::Release::Codename={suite}",
                 "-o", "APT::FTPArchive::Release::Architectures=amd64",
                 "-o", "APT::FTPArchive::Release::Components=main", "release", "."],
                cwd=dist, check=True, capture_output=True, text=True).stdout
            (dist / "Release").write_text(rel)
            subprocess.run(["gpg", "--batch", "--yes", "--clearsign", "--output",
                            str(dist / "InRelease"), str(dist / "Release")],
                           env=self._env(), check=True, capture_output=True)

    def sources(self) -> list[str]:
        return [f"deb copy://{self.root} bookworm main",
                f"deb copy://{self.root} bookworm-security main"]


@pytest.fixture()
def archive(tmp_path, monkeypatch):
    """A local archive, and the mirror's code pointed at it with its cache in tmp_path."""
    arch = Archive(tmp_path / "archive")
    cache = tmp_path / "cache"
    debian = cache / "debian"
    monkeypatch.setattr(paths, "MIRROR_CACHE", cache)
    monkeypatch.setattr(paths, "MIRROR_DEBIAN", debian)
    monkeypatch.setattr(paths, "DEBIAN_SOURCES", arch.sources())
    monkeypatch.setattr(paths, "DEBIAN_KEYRING", str(arch.keyring))
    monkeypatch.setattr(paths, "NVIDIA_MIRROR_PACKAGES", tmp_path / "no-nvidia-packages.txt")
    monkeypatch.setattr(mirror, "APT_DIR", cache / "apt")
    monkeypatch.setattr(mirror, "GNUPG_DIR", cache / "gnupg")
    monkeypatch.setattr(mirror, "POOL", debian / "pool" / "main")
    monkeypatch.setattr(mirror, "DIST", debian / "dists" / paths.DEBIAN_SUITE)
    monkeypatch.setattr(mirror, "STATE_FILE", cache / "state.json")
    monkeypatch.setattr(mirror, "KEYRING", debian / mirror.KEYRING_NAME)
    monkeypatch.setattr(mirror, "MIRROR_PACKAGES", ["dkms"])
    monkeypatch.setattr(mirror, "CONTRIB_SOURCES", [])
    # the image module takes the sandbox's cache lock around the mirror: not this one's
    monkeypatch.setattr(fleet, "cache_lock", contextlib.nullcontext)
    monkeypatch.delenv("GPUHOST_VM_KERNEL", raising=False)
    yield arch
    for home in (arch.gnupg, cache / "gnupg"):   # gpg leaves an agent per home behind
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                       capture_output=True)


def installable(*pkgs: str) -> subprocess.CompletedProcess:
    """apt-get -s install PKGS with the mirror's apt configuration (the archive's lists)."""
    return subprocess.run(["apt-get", *mirror._apt_opts(), "-s", "install", *pkgs],
                          capture_output=True, text=True, env={**os.environ, **mirror._apt_env()})


def vm_kernel_packages(image_module, max_age: float | None = None) -> list[str]:
    """The kernel packages of one ABI the VM image's recipe installs (image and headers; the
    headers meta, which follows the archive, left out)."""
    rec = image_module.recipe(*image_module.kernel(max_age=max_age), layers=["headers"])
    return [p for p in rec["packages"] if p.startswith("linux-") and p != "linux-headers-amd64"]


def served(prefix: str) -> list[str]:
    return sorted(f.name for f in mirror.POOL.glob(f"{prefix}*.deb"))


# ------------------------------------------------------------------------------- the tests

def test_metas_pointing_at_a_signed_image_not_yet_published(archive):
    """2026-11-29: the metas point at 6.1.0-57's signed image, which has no candidate; its
    headers and unsigned image are published. The hosts simulate 57, the mirror's meta
    depends on 57's headers, and the VM installs the unsigned image of the same ABI."""
    archive.publish({
        "bookworm": POINT_RELEASE + OTHERS,
        "bookworm-security": kernel_set(57, "6.1.192-3", signed=False)
        + metas("6.1.192-3", 57, "6.1.192-3"),
    })
    state = mirror.build()
    assert state["kernel_release"] == K(57)
    assert state["kernel_image"] == f"linux-image-{K(57)}-unsigned"
    assert "not published yet" in state["kernel_note"]
    assert served("linux-headers-amd64_") == ["linux-headers-amd64_6.1.192-3_amd64.deb"]
    pkgs = vm_kernel_packages(_load_image())
    assert pkgs == sorted([f"linux-headers-{K(57)}", f"linux-image-{K(57)}-unsigned"])
    res = installable(*pkgs)
    assert res.returncode == 0, res.stdout + res.stderr


def test_headers_published_ahead_of_the_metas_are_not_served(archive):
    """The same day through another mirror: 57's headers and unsigned image are published,
    the metas still point at 56. The hosts run 56, so installing the headers meta adds no
    second ABI (a host that ran 57 got 56's headers from the meta, and DKMS built for a
    kernel it never boots); the VM boots 56's signed image."""
    archive.publish({
        "bookworm": POINT_RELEASE + OTHERS,
        "bookworm-security": kernel_set(56, "6.1.192-2", unsigned=False)
        + kernel_set(57, "6.1.192-3", signed=False)[:2]
        + [(f"linux-image-{K(57)}-unsigned", "6.1.192-3", "")]
        + metas("6.1.192-2", 56, "6.1.192-2"),
    })
    state = mirror.build()
    assert state["kernel_release"] == K(56)
    assert state["kernel_image"] == f"linux-image-{K(56)}"
    assert served("linux-headers-6.1.0-") == [
        "linux-headers-6.1.0-56-amd64_6.1.192-2_amd64.deb",
        "linux-headers-6.1.0-56-common_6.1.192-2_amd64.deb"]
    pkgs = vm_kernel_packages(_load_image())
    assert pkgs == sorted([f"linux-headers-{K(56)}", f"linux-image-{K(56)}"])
    res = installable(*pkgs)
    assert res.returncode == 0, res.stdout + res.stderr


def _age_lists(seconds: float) -> None:
    stamp = mirror.APT_DIR / "state" / "updated"
    old = time.time() - seconds
    os.utime(stamp, (old, old))


def test_an_abi_bump_under_a_warm_cache_rebuilds_the_kernel_and_nothing_else(archive):
    """The mirror was built when the archive had 56; the archive now has only 57 (the ABI
    bump removed 56). The mirror alone stays as it is (its pool is whole, its lists less
    than a week old); a VM image built now asks the archive, so it refreshes the lists, and
    the mirror moves to 57 with it: 57's headers fetched, 56's dropped, the rest untouched."""
    image = _load_image()
    archive.publish({"bookworm": POINT_RELEASE + OTHERS,
                     "bookworm-security": kernel_set(56, "6.1.192-2")
                     + metas("6.1.192-2", 56, "6.1.192-2")})
    assert mirror.build()["kernel_release"] == K(56)
    dkms = mirror.POOL / "dkms_3.0.10-8+deb12u1_amd64.deb"
    before = dkms.stat().st_ino, dkms.stat().st_mtime_ns
    archive.publish({"bookworm": POINT_RELEASE + OTHERS,
                     "bookworm-security": kernel_set(57, "6.1.192-3")
                     + metas("6.1.192-3", 57, "6.1.192-3")})
    _age_lists(2 * 3600)
    again = mirror.build()                       # nothing asks the archive: nothing moves
    assert again["kernel_release"] == K(56) and again["built"]
    pkgs = vm_kernel_packages(image, max_age=image.LISTS_FRESH_FOR_BUILD)
    assert pkgs == sorted([f"linux-headers-{K(57)}", f"linux-image-{K(57)}"])
    res = installable(*pkgs)
    assert res.returncode == 0, res.stdout + res.stderr
    assert mirror.kernel_release() == K(57)
    assert served("linux-headers-6.1.0-5") == [
        "linux-headers-6.1.0-57-amd64_6.1.192-3_amd64.deb",
        "linux-headers-6.1.0-57-common_6.1.192-3_amd64.deb"]
    assert (dkms.stat().st_ino, dkms.stat().st_mtime_ns) == before


def test_lists_older_than_the_archive_are_refreshed_when_a_download_fails(archive):
    """The lists name 56, the archive dropped it, and the pool must be fetched again (a new
    cache format, a pool removed by hand): the download fails, the lists are updated once,
    the mirror is built for 57."""
    archive.publish({"bookworm": POINT_RELEASE + OTHERS,
                     "bookworm-security": kernel_set(56, "6.1.192-2")
                     + metas("6.1.192-2", 56, "6.1.192-2")})
    mirror.build()
    for deb in mirror.POOL.glob("*.deb"):
        deb.unlink()
    mirror.STATE_FILE.unlink()
    archive.publish({"bookworm": POINT_RELEASE + OTHERS,
                     "bookworm-security": kernel_set(57, "6.1.192-3")
                     + metas("6.1.192-3", 57, "6.1.192-3")})
    state = mirror.build()
    assert state["kernel_release"] == K(57)
    assert "linux-headers-6.1.0-57-amd64_6.1.192-3_amd64.deb" in state["files"]


def test_no_kernel_that_installs_whole_is_one_line_naming_the_archive_state(archive):
    """The security metas point at headers that are not published, and the point release's
    kernel lost its images: nothing can be served, and the error says what each meta lacks."""
    archive.publish({
        "bookworm": kernel_set(50, "6.1.176-1", signed=False, unsigned=False)
        + metas("6.1.176-1", 50, "6.1.176-1") + OTHERS,
        "bookworm-security": metas("6.1.192-3", 57, "6.1.192-3"),
    })
    with pytest.raises(SandboxError) as err:
        mirror.build()
    msg = str(err.value)
    assert "\n" not in msg
    assert "linux-headers-amd64 6.1.192-3 -> linux-headers-6.1.0-57-amd64 6.1.192-3: not in " \
           "the archive" in msg
    assert f"linux-headers-amd64 6.1.176-1 -> {K(50)}: no linux-image-{K(50)} nor " \
           f"linux-image-{K(50)}-unsigned" in msg


def test_choose_prefers_the_newest_meta_whose_kernel_installs():
    """The rule alone, on apt-cache's text: the newest meta first (madison's order)."""
    show = {
        ("show", "linux-headers-amd64"):
            "Package: linux-headers-amd64\nVersion: 6.1.176-1\n"
            "Depends: linux-headers-6.1.0-50-amd64 (= 6.1.176-1)\n\n"
            "Package: linux-headers-amd64\nVersion: 6.1.192-3\n"
            "Depends: linux-headers-6.1.0-57-amd64 (= 6.1.192-3)\n",
        ("madison", "linux-headers-amd64"):
            " linux-headers-amd64 | 6.1.192-3 | file:/a bookworm-security/main amd64 Packages\n"
            " linux-headers-amd64 | 6.1.176-1 | file:/a bookworm/main amd64 Packages\n",
    }

    def apt_cache(args: list[str]) -> str:
        if tuple(args) in show:
            return show[tuple(args)]
        assert args[0] == "show"
        found = []
        for name in args[1:]:
            if name in ("linux-headers-6.1.0-50-amd64", "linux-image-6.1.0-50-amd64"):
                found.append(f"Package: {name}\nVersion: 6.1.176-1\n")
        return "\n".join(found)

    choice = debian_kernel.choose(apt_cache)
    assert (choice.release, choice.image, choice.meta) == (
        K(50), f"linux-image-{K(50)}", "linux-headers-amd64=6.1.176-1")
    assert "6.1.192-3 -> linux-headers-6.1.0-57-amd64 6.1.192-3: not in the archive" \
        in choice.note
