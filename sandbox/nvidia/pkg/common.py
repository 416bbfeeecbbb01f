"""Paths, command runner, progress lines and the incremental-build stamps."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Everything under the sandbox's cache directory (GPUHOST_CACHE_DIR, as sandbox/paths.py),
# so that a private cache keeps the build's stamps and work files private too.
CACHE_DIR = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost"))
OUT_DIR = Path(os.environ.get("GPUHOST_NVIDIA_OUT", CACHE_DIR / "nvidia"))
# Private state lives beside the served directory, never inside it.
WORK_DIR = Path(os.environ.get("GPUHOST_NVIDIA_WORK", CACHE_DIR / "nvidia-build"))
GNUPG_DIR = Path(os.environ.get("GPUHOST_NVIDIA_GNUPG", CACHE_DIR / "nvidia-gnupg"))
BASE_URL = os.environ.get("GPUHOST_NVIDIA_URL", "http://127.77.0.1:8000/nvidia")

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE.parent / "templates"
GPUSIM_SRC = HERE.parent / "gpusim"

# The fake drivers, oldest first. 550/570: the old upgrade story (R570 ended 2026-02).
# 580.95.05: R580 LTSB, the driver of CUDA 13.0.2 (its cuda-compat 13.0.2 pairs with
# cuda-compat-impl 580.95.05). 595.71.05: R595 production branch, CUDA 13.2.2's driver.
# 620.70.06: R620 LTSB, open modules only (NVIDIA's redistrib_620.70.06.json,
# release_date 2026-11-04, cuda_compat for CUDA 13.5). DEFAULT_DRIVER: what the sandbox
# inventory installs unless GPUHOST_SANDBOX_DRIVER names another (manifest "default_driver").
DRIVER_VERSIONS = ("550.163.01", "570.172.08", "580.95.05", "595.71.05", "620.70.06")
DEFAULT_DRIVER = "580.95.05"
APT_DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404")
RPM_DISTROS = ("rhel8", "rhel9", "rhel10")
# NVIDIA's tags whose local repos have no dnf module metadata (EL10 has no module streams)
NO_MODULE_STREAMS = ("rhel10",)
# Distributions whose local repos exist only from a branch on (NVIDIA's debian13 repository
# is newer than R550/R570; the sandbox builds debian13 from R580).
FIRST_BRANCH = {"debian13": 580}
# NVIDIA's network repositories the sandbox serves (sandbox/nvidia/pkg/netrepo.py), with
# the driver versions in each: ubuntu2604 has no local repo package at all. 580.142 on
# ubuntu2604 only: the first R580 whose module builds on 26.04's kernel 7.0 (gpuhost refuses
# older ones there: gpuhost/aptdistros/ubuntu.py, KERNEL_7_0_FIRST).
NETWORK_REPOS = {"ubuntu2604": ("580.95.05", "580.142", "595.71.05"),
                 "debian13": ("580.95.05", "595.71.05")}


def builds(version: str, distro: str) -> bool:
    """Whether the sandbox builds DISTRO's local repo package of VERSION."""
    return int(version.split(".")[0]) >= FIRST_BRANCH.get(distro, 0)
# The toolkit versions the fake repos serve (apt pin / dnf version picks one) and their
# release commits (NVIDIA/nvidia-container-toolkit tags v1.17.8, v1.18.2, v1.19.1 of
# 2026-05-21, v1.20.0 of 2026-08-12); TOOLKIT_VERSION is gpuhost's default
# (container_toolkit_version), the toolkit GPU Operator 26.7 ships.
TOOLKIT_COMMITS = {"1.17.8": "f202b80a9b9d0db00d9b1d73c0128c8962c55f4d",
                   "1.18.2": "9e88ed39710fd94c7e49fbb26d96492c45e574fb",
                   "1.19.1": "09ceee5dde66ba9ce25c7cc69b1ebd5e6e3266fa",
                   "1.20.0": "5505e2f94d9aaa08561490db974ba3cd676af209"}
TOOLKIT_VERSIONS = tuple(TOOLKIT_COMMITS)
TOOLKIT_VERSION = "1.20.0"
TOOLKIT_COMMIT = TOOLKIT_COMMITS[TOOLKIT_VERSION]
DEB_EPOCH_NOTE = "NVIDIA's apt packages carry no epoch; its EL packages carry epoch 3"

_T0 = time.monotonic()


class BuildError(RuntimeError):
    """A build step failed; the message says what and what to do."""


def log(msg: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f}s] {msg}", flush=True)


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None,
        input: str | None = None, capture: bool = True) -> str:
    """Run a command; raise BuildError with its output when it fails."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(cmd, cwd=cwd, env=full_env, input=input, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.STDOUT if capture else None)
    if proc.returncode != 0:
        out = (proc.stdout or "").strip()[-3000:]
        raise BuildError(f"command failed (rc={proc.returncode}): {shlex.join(cmd)}\n{out}")
    return proc.stdout or ""


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise BuildError(
            f"missing build tools: {', '.join(missing)}. Install them with "
            "`make deps` (mk/nvidia.mk lists the Debian packages) and run again.")


def template(name: str, **subst: str) -> str:
    """Read templates/NAME and replace every @KEY@ with subst[KEY]."""
    text = (TEMPLATES / name).read_text()
    for key, value in subst.items():
        text = text.replace(f"@{key}@", value)
    if "@" in text:
        import re
        left = set(re.findall(r"@([A-Z_]+)@", text))
        if left:
            raise BuildError(f"template {name}: unreplaced placeholders {sorted(left)}")
    return text


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_digest(*paths: Path) -> str:
    """Digest of file names and contents under the given files/directories."""
    h = hashlib.sha256()
    for root in paths:
        if not root.exists():
            h.update(f"missing:{root}".encode())
            continue
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for p in files:
            h.update(str(p.relative_to(root.parent)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def code_digest(*modules: str) -> str:
    """Digest of the named modules of this package (e.g. "deb", "driver") plus templates."""
    return tree_digest(*(HERE / f"{m}.py" for m in ("common", "signing", *modules)), TEMPLATES)


def inputs_digest(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def up_to_date(name: str, digest: str, outputs: list[Path]) -> bool:
    stamp = WORK_DIR / "stamps" / f"{name}.json"
    if not stamp.exists() or not all(p.exists() for p in outputs):
        return False
    return json.loads(stamp.read_text()).get("digest") == digest


def mark_done(name: str, digest: str) -> None:
    stamp = WORK_DIR / "stamps" / f"{name}.json"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"digest": digest, "at": time.time()}))


def fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def write(path: Path, content: str | bytes, mode: int = 0o644) -> Path:
    """Write atomically (temp file + rename): served files are never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(content, bytes):
        tmp.write_bytes(content)
    else:
        tmp.write_text(content)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return path


def die(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def build_lock():
    """One build at a time on this machine (make test, the sandbox and the VM tests all
    run it): a second one waits, then finds everything up to date."""
    from sandbox.util import flocked

    return flocked(WORK_DIR / "build.lock",
                   "another build of the NVIDIA artifacts is running: waiting for it", log)


@contextlib.contextmanager
def replace_dir(final: Path):
    """Build a served directory beside FINAL, then swap it in with two renames, so HTTP
    clients never see a half-written repository."""
    new = final.with_name(final.name + ".new")
    old = final.with_name(final.name + ".old")
    for d in (new, old):
        if d.exists():
            shutil.rmtree(d)
    new.mkdir(parents=True)
    yield new
    if final.exists():
        final.rename(old)
    new.rename(final)
    if old.exists():
        shutil.rmtree(old)


def publish(src: Path, outdir: Path) -> Path:
    """Move a finished file into the served directory atomically (rename in place)."""
    outdir.mkdir(parents=True, exist_ok=True)
    tmp = outdir / f".{src.name}.tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, outdir / src.name)
    src.unlink()
    return outdir / src.name

