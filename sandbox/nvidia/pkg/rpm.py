"""Build .rpm packages with rpmbuild and signed yum/dnf repositories with createrepo_c.

The sandbox's Oracle Linux hosts are Debian root filesystems with rpm and dnf: their
rpm database knows nothing of /bin/sh or python3. So every package here is built with
AutoReqProv off and with Lua scriptlets (rpm's built-in interpreter), which call the
shell through rpm.execute() without adding a Requires(post): /bin/sh.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .common import WORK_DIR, fresh_dir, run, write
from .signing import SigningKey


@dataclass
class RpmPackage:
    name: str
    version: str
    release: str
    summary: str
    epoch: int | None = None
    arch: str = "x86_64"
    requires: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    obsoletes: list[str] = field(default_factory=list)
    files: dict[str, tuple[str | bytes, int]] = field(default_factory=dict)
    config_files: list[str] = field(default_factory=list)
    symlinks: dict[str, str] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    payload: str = "w6.xzdio"
    # "post", "preun", ... -> argv run through rpm.execute(); fails the scriptlet on non-zero
    scriptlets: dict[str, list[str]] = field(default_factory=dict)
    description: str = "Simulated package for the gpuhost sandbox; no real software inside."

    @property
    def evr(self) -> str:
        e = f"{self.epoch}:" if self.epoch is not None else ""
        return f"{e}{self.version}-{self.release}"

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.release}.{self.arch}.rpm"

    def spec(self, stage: Path) -> str:
        head = [f"Name: {self.name}", f"Version: {self.version}", f"Release: {self.release}",
                f"Summary: {self.summary}", "License: LicenseRef-gpuhost-sandbox",
                f"BuildArch: {self.arch}", "AutoReqProv: no"]
        if self.epoch is not None:
            head.append(f"Epoch: {self.epoch}")
        for key, values in (("Requires", self.requires), ("Conflicts", self.conflicts),
                            ("Provides", self.provides), ("Obsoletes", self.obsoletes)):
            head += [f"{key}: {v}" for v in values]
        body = ["", "%description", self.description, "", "%install",
                f"cp -a {stage}/. %{{buildroot}}/", "", "%files"]
        for rel in sorted(self.files):
            path = "/" + rel.lstrip("/")
            body.append(f"%config(noreplace) {path}" if path in self.config_files else path)
        body += sorted(self.symlinks)
        body += [f"%dir {d}" for d in sorted(self.dirs)]
        for when, argv in self.scriptlets.items():
            args = ", ".join(lua_str(a) for a in argv)
            body += ["", f"%{when} -p <lua>",
                     f"local ok, err, code = rpm.execute({args})",
                     "if not ok then",
                     "  local status = code and math.floor(code / 256) or tostring(err)",
                     f"  error({lua_str('%' + when + '(' + self.name + '): ' + argv[-1])} ..",
                     '        " failed, exit status " .. status, 0)',
                     "end"]
        return "\n".join(head + body) + "\n"


def lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_rpm(pkg: RpmPackage, outdir: Path) -> Path:
    top = fresh_dir(WORK_DIR / "rpmbuild" / f"{pkg.name}-{pkg.version}-{pkg.release}")
    stage = top / "stage"
    stage.mkdir()
    for rel, (content, mode) in pkg.files.items():
        write(stage / rel.lstrip("/"), content, mode)
    for link, target in pkg.symlinks.items():
        (stage / link.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (stage / link.lstrip("/")).symlink_to(target)
    for d in pkg.dirs:
        (stage / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    spec = write(top / f"{pkg.name}.spec", pkg.spec(stage))
    run(["rpmbuild", "-bb", "--quiet",
         "--define", f"_topdir {top}",
         "--define", "_build_id_links none",
         "--define", "debug_package %{nil}",
         "--define", "__os_install_post %{nil}",
         "--define", f"_binary_payload {pkg.payload}",
         "--define", "source_date_epoch_from_changelog 0",
         "--define", "use_source_date_epoch_as_buildtime 1",
         "--define", "clamp_mtime_to_source_date_epoch 1",
         str(spec)], env={"SOURCE_DATE_EPOCH": "1735689600"})
    built = top / "RPMS" / pkg.arch / pkg.filename
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / pkg.filename
    shutil.move(str(built), out)
    shutil.rmtree(top)
    return out


def build_rpm_repo(repo: Path, key: SigningKey, modules_yaml: str | None = None) -> None:
    """Sign every RPM in REPO, write its repodata (plus modules.yaml) and sign repomd.xml."""
    key.rpmsign(*sorted(repo.glob("*.rpm")))
    if (repo / "repodata").exists():
        shutil.rmtree(repo / "repodata")
    run(["createrepo_c", "--quiet", "--no-database", "--simple-md-filenames", str(repo)])
    if modules_yaml is not None:
        src = write(WORK_DIR / "modules" / "modules.yaml", modules_yaml)
        run(["modifyrepo_c", "--mdtype=modules", "--simple-md-filenames",
             str(src), str(repo / "repodata")])
    key.detach_sign(repo / "repodata" / "repomd.xml", repo / "repodata" / "repomd.xml.asc")
