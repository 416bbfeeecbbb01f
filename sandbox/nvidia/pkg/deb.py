"""Build .deb packages with dpkg-deb and signed flat apt repositories with apt-ftparchive."""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .common import WORK_DIR, fresh_dir, run, write
from .signing import SigningKey

# Fixed timestamps make rebuilt packages byte-identical for the same inputs.
SOURCE_DATE_EPOCH = "1735689600"


@dataclass
class DebPackage:
    name: str
    version: str
    description: str
    arch: str = "amd64"
    depends: list[str] = field(default_factory=list)
    recommends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    section: str = "non-free/libs"
    # path inside the package -> (content, mode)
    files: dict[str, tuple[str | bytes, int]] = field(default_factory=dict)
    # "postinst", "prerm", ... -> shell script text
    scripts: dict[str, str] = field(default_factory=dict)
    conffiles: list[str] = field(default_factory=list)

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version}_{self.arch}.deb"

    def control(self, installed_kb: int) -> str:
        lines = [f"Package: {self.name}", f"Version: {self.version}",
                 f"Architecture: {self.arch}",
                 "Maintainer: gpuhost sandbox (fake NVIDIA package) <nvidia-sandbox@gpuhost.invalid>",
                 f"Installed-Size: {max(installed_kb, 1)}", f"Section: {self.section}",
                 "Priority: optional"]
        for key, values in (("Depends", self.depends), ("Recommends", self.recommends),
                            ("Conflicts", self.conflicts),
                            ("Replaces", self.replaces), ("Provides", self.provides)):
            if values:
                lines.append(f"{key}: {', '.join(values)}")
        summary, _, body = self.description.partition("\n")
        lines.append(f"Description: {summary}")
        for line in (body or "Simulated package for the gpuhost sandbox; no real driver inside.").splitlines():
            lines.append(" " + (line if line.strip() else "."))
        return "\n".join(lines) + "\n"


def build_deb(pkg: DebPackage, outdir: Path) -> Path:
    root = fresh_dir(WORK_DIR / "debroot" / f"{pkg.name}_{pkg.version}")
    total = 0
    for rel, (content, mode) in pkg.files.items():
        dest = root / rel.lstrip("/")
        write(dest, content, mode)
        total += len(content)
    debian = root / "DEBIAN"
    debian.mkdir(mode=0o755)
    for script, text in pkg.scripts.items():
        write(debian / script, text, 0o755)
    if pkg.conffiles:
        write(debian / "conffiles", "".join(f"{c}\n" for c in pkg.conffiles))
    write(debian / "control", pkg.control(total // 1024))
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / pkg.filename
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(out)],
        env={"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
    shutil.rmtree(root)
    return out


def build_flat_repo(repo: Path, key: SigningKey, *, origin: str, label: str,
                    description: str) -> None:
    """Index REPO (a flat `deb ... /` repository holding .debs) and sign its Release."""
    packages = run(["apt-ftparchive", "packages", "."], cwd=repo)
    write(repo / "Packages", packages)
    with gzip.GzipFile(repo / "Packages.gz", "wb", mtime=int(SOURCE_DATE_EPOCH)) as f:
        f.write(packages.encode())
    for old in ("Release", "InRelease", "Release.gpg"):
        (repo / old).unlink(missing_ok=True)
    release = run(["apt-ftparchive",
                   "-o", f"APT::FTPArchive::Release::Origin={origin}",
                   "-o", f"APT::FTPArchive::Release::Label={label}",
                   "-o", "APT::FTPArchive::Release::Architectures=amd64",
                   "-o", f"APT::FTPArchive::Release::Description={description}",
                   "release", "."], cwd=repo)
    write(repo / "Release", release)
    key.clearsign(repo / "Release", repo / "InRelease")
    key.detach_sign(repo / "Release", repo / "Release.gpg")
