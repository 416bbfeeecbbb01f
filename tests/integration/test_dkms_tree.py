"""The composite fact's ``dkms`` section reads DKMS's tree instead of running ``dkms status``
(facts/script.py, ``dkms_status``). Held here against the three real dkms the sandbox hosts
run (sandbox/README.md, "Real dkms"): bullseye's 2.8.4 (the Ubuntu 22.04 hosts), bookworm's
3.0.10 (Debian 12, Ubuntu 24.04) and trixie's 3.2.2 (Oracle Linux). Each state below is a
tree laid out as dkms lays it out; real ``dkms status --dkmstree`` says what it holds, and
the section must say the same module, version, kernel, arch and state. Where the section
hands over to dkms (a tree dkms' versions read differently), its output is dkms' own.

No fleet: the dkms scripts come from the sandbox's caches (the mirror, and the two fetches
the Ubuntu and Oracle Linux hosts need), each verified as apt verifies.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.facts.script import dkms_status
from tests.integration.dkms_read import states as _states

pytestmark = pytest.mark.integration

V1, V2 = "580.95.05", "595.45.04"
K1, K2 = "6.1.0-56-amd64", "6.1.0-60-amd64"
ARCH = "x86_64"


def _extract(deb: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)
    return into / "usr/sbin/dkms"


@pytest.fixture(scope="module")
def real_dkms(tmp_path_factory) -> dict[str, Path]:
    """{"2.8.4": script, "3.0.10": ..., "3.2.2": ...}: the dkms scripts of the sandbox hosts."""
    from sandbox import mirror
    from sandbox.ubuntu_archive import jammy_dkms_debs
    from sandbox.fleet import cache_lock
    from sandbox.nvidia.pkg.elrpms import debian_dkms
    from sandbox.paths import MIRROR_DEBIAN

    top = tmp_path_factory.mktemp("dkms")
    with cache_lock():  # as `sandbox up` builds them: another worker may be building too
        mirror.build()
        bookworm = sorted(MIRROR_DEBIAN.glob("pool/main/dkms_*.deb"))
        bullseye = [d for d in jammy_dkms_debs() if d.name.startswith("dkms_")]
        trixie_root, trixie = debian_dkms()
    versions = {  # the upstream version of each package: dkms_2.8.4-3_all.deb -> 2.8.4
        bullseye[-1].name.split("_")[1].split("-")[0]: _extract(bullseye[-1], top / "bullseye"),
        bookworm[-1].name.split("_")[1].split("-")[0]: _extract(bookworm[-1], top / "bookworm"),
        trixie.split("-")[0]: trixie_root / "usr/sbin/dkms"}
    assert set(versions) == {"2.8.4", "3.0.10", "3.2.2"}, versions
    return versions


class Tree:
    """A DKMS tree in a temporary directory, laid out as dkms lays it out."""

    def __init__(self, root: Path) -> None:
        self.tree, self.src = root / "dkms", root / "src"
        self.tree.mkdir()
        self.src.mkdir()

    def add(self, version: str, module: str = "nvidia") -> Path:
        """``dkms add``: /usr/src/M-V with dkms.conf, and M/V/source linking to it."""
        source = self.src / f"{module}-{version}"
        source.mkdir(exist_ok=True)
        (source / "dkms.conf").write_text(
            f'PACKAGE_NAME="{module}"\nPACKAGE_VERSION="{version}"\n'
            f'BUILT_MODULE_NAME[0]="{module}"\nDEST_MODULE_LOCATION[0]="/updates/dkms"\n')
        top = self.tree / module / version
        top.mkdir(parents=True, exist_ok=True)
        (top / "source").symlink_to(source)
        return top

    def build(self, version: str, kernel: str, module: str = "nvidia") -> Path:
        """``dkms build``: M/V/KERNEL/ARCH/module/M.ko and its log."""
        built = self.tree / module / version / kernel / ARCH
        (built / "module").mkdir(parents=True)
        (built / "log").mkdir()
        (built / "module" / f"{module}.ko").write_bytes(b"\x7fELF module")
        (built / "log" / "make.log").write_text("make: done\n")
        return built

    def install(self, version: str, kernel: str, module: str = "nvidia") -> None:
        """``dkms install``: M/kernel-KERNEL-ARCH links to V/KERNEL/ARCH."""
        link = self.tree / module / f"kernel-{kernel}-{ARCH}"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(f"{version}/{kernel}/{ARCH}")


def _run(dkms: Path, tree: Tree, tmp: Path) -> tuple[str, str]:
    """(dkms' own ``dkms status``, the section's output) for this tree; the section runs in
    sh with a ``dkms`` on PATH that is this real dkms reading this tree."""
    real = subprocess.run(["bash", str(dkms), "status", "--dkmstree", str(tree.tree)],
                          capture_output=True, text=True, timeout=60)
    assert real.returncode == 0, real.stderr
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "dkms"
    shim.write_text(f'#!/bin/sh\nexec bash {dkms} "$@" --dkmstree {tree.tree}\n')
    shim.chmod(0o755)
    etc, modules = tmp / "etc-dkms", tmp / "lib-modules"
    etc.mkdir(exist_ok=True)
    modules.mkdir(exist_ok=True)
    section = dkms_status(str(tree.tree), etc=str(etc), modules=str(modules))
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    ours = subprocess.run(["sh", "-c", section], capture_output=True, text=True, env=env,
                          timeout=60)
    assert ours.returncode == 0, ours.stderr
    return real.stdout + real.stderr, ours.stdout


def _plain(tree: Tree) -> None:
    pass


def _added(tree: Tree) -> None:
    tree.add(V1)


def _built(tree: Tree) -> None:
    tree.add(V1)
    tree.build(V1, K1)


def _installed(tree: Tree) -> None:
    tree.add(V1)
    tree.build(V1, K1)
    tree.install(V1, K1)


def _two_kernels(tree: Tree) -> None:
    """Installed for the running kernel, built for the next (a reboot would load it)."""
    tree.add(V1)
    tree.build(V1, K1)
    tree.install(V1, K1)
    tree.build(V1, K2)


def _upgrade(tree: Tree) -> None:
    """A driver upgrade half done: V2 installed on K1 over V1, which stays built there;
    V2 also added-only under another module name."""
    tree.add(V1)
    tree.build(V1, K1)
    tree.add(V2)
    tree.build(V2, K1)
    tree.install(V2, K1)
    tree.build(V2, K2)
    tree.install(V2, K2)
    tree.add(V2, module="nvidia-peermem")


def _other_dirs(tree: Tree) -> None:
    """What else a module version holds: build/ (a failed build's tree), a tarball, a log,
    and a built-looking directory whose name is no kernel release to dkms (digits, no dot)."""
    top = tree.add(V1)
    tree.build(V1, K1)
    tree.install(V1, K1)
    for name in ("build/kernel", "tarball", "log"):
        (top / name).mkdir(parents=True)
    tree.build(V1, "2024")
    (top / "build" / "make.log").write_text("error\n")


def _stale_link(tree: Tree) -> None:
    """kernel-K1 left pointing at a version that was removed."""
    tree.add(V2)
    tree.build(V2, K1)
    (tree.tree / "nvidia" / f"kernel-{K1}-{ARCH}").symlink_to(f"{V1}/{K1}/{ARCH}")


READ = [_plain, _added, _built, _installed, _two_kernels, _upgrade, _other_dirs, _stale_link]


@pytest.mark.parametrize("dkms_version", ["2.8.4", "3.0.10", "3.2.2"])
@pytest.mark.parametrize("state", READ, ids=lambda f: f.__name__.strip("_"))
def test_the_tree_read_says_what_dkms_says(real_dkms, tmp_path, dkms_version, state):
    tree = Tree(tmp_path)
    state(tree)
    real, ours = _run(real_dkms[dkms_version], tree, tmp_path)
    assert ours.startswith(f"# read from {tree.tree}\n"), ours  # read, not handed over
    assert _states(ours) == _states(real), (real, ours)
    if state is not _plain:
        assert _states(ours), "a state with something in it must list it"


def _broken_source(tree: Tree) -> None:
    """The source link dangles (its /usr/src was removed by hand): 3.2 says broken."""
    tree.add(V1)
    tree.build(V1, K1)
    tree.install(V1, K1)
    shutil.rmtree(tree.src / f"nvidia-{V1}")


def _source_directory(tree: Tree) -> None:
    """source is a directory, not a link: 3.0 reads it, 3.2 calls it broken."""
    top = tree.add(V1)
    target = (top / "source").resolve()
    (top / "source").unlink()
    shutil.copytree(target, top / "source")


def _empty_module_dir(tree: Tree) -> None:
    """A built directory without its module: 3.0 says not built, 3.2 built with a note."""
    tree.add(V1)
    built = tree.build(V1, K1)
    (built / "module" / "nvidia.ko").unlink()


def _original_module(tree: Tree) -> None:
    tree.add(V1)
    tree.build(V1, K1)
    tree.install(V1, K1)
    (tree.tree / "nvidia" / "original_module" / K1 / ARCH).mkdir(parents=True)


HANDED_OVER = [_broken_source, _source_directory, _empty_module_dir, _original_module]


@pytest.mark.parametrize("dkms_version", ["3.0.10", "3.2.2"])
@pytest.mark.parametrize("state", HANDED_OVER, ids=lambda f: f.__name__.strip("_"))
def test_where_dkms_versions_differ_the_section_asks_dkms(real_dkms, tmp_path, dkms_version,
                                                          state):
    tree = Tree(tmp_path)
    state(tree)
    real, ours = _run(real_dkms[dkms_version], tree, tmp_path)
    assert "# read from" not in ours
    assert ours == real


def test_a_dkms_tree_set_in_framework_conf_or_a_weak_link_hands_over(real_dkms, tmp_path):
    tree = Tree(tmp_path)
    _installed(tree)
    conf_d = tmp_path / "etc-dkms" / "framework.conf.d"  # the section's etc (_run)
    conf_d.mkdir(parents=True)
    (conf_d / "tree.conf").write_text('dkms_tree="/srv/dkms"\n')
    real, ours = _run(real_dkms["3.0.10"], tree, tmp_path)
    assert "# read from" not in ours and ours == real
    (conf_d / "tree.conf").unlink()
    weak = tmp_path / "lib-modules" / K2 / "weak-updates"
    weak.mkdir(parents=True)
    (weak / "nvidia.ko").symlink_to(f"/lib/modules/{K1}/extra/nvidia.ko")
    real, ours = _run(real_dkms["3.0.10"], tree, tmp_path)
    assert "# read from" not in ours and ours == real
    (weak / "nvidia.ko").unlink()
    _, ours = _run(real_dkms["3.0.10"], tree, tmp_path)
    assert ours.startswith("# read from"), "the negative control: nothing left to hand over"
