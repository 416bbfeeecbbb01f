"""What git tracks is source: no virtualenv, no bytecode, no build output, no large binary.

A committed virtualenv once made every fresh clone unusable (its interpreter link pointed at
one machine's Python); these checks keep any build output from coming back.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_BINARY = 300 * 1024  # bytes: larger non-text files belong in a build step, not in git


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def test_no_build_output_is_tracked():
    bad = [p for p in tracked()
           if p.startswith((".venv/", "venv/", ".lock-venv/", "build/", "dist/"))
           or "/__pycache__/" in f"/{p}" or p.endswith((".pyc", ".pyo", ".so", ".whl"))
           or ".egg-info/" in p or p.endswith("pyvenv.cfg")]
    assert not bad, f"build output tracked by git (git rm --cached it): {bad[:10]}"


def test_no_large_binary_is_tracked():
    big = []
    for p in tracked():
        f = REPO / p
        if not f.is_file() or f.stat().st_size <= MAX_BINARY:
            continue
        if b"\0" in f.read_bytes()[:8192]:
            big.append(f"{p} ({f.stat().st_size // 1024} KiB)")
    assert not big, f"binary files over {MAX_BINARY // 1024} KiB tracked: {big}"


def test_gitignore_covers_build_output():
    probes = [".venv/bin/python", "facts/__pycache__/x.cpython-311.pyc", "gpuhost.egg-info/PKG-INFO",
              ".pytest_cache/v", "build/lib/x.py"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *probes], cwd=REPO,
                         capture_output=True, text=True)
    assert sorted(out.stdout.split()) == sorted(probes)


def test_lock_pins_every_package_with_a_hash():
    lock = (REPO / "requirements.lock").read_text()
    entries = [b for b in lock.split("\n") if b and not b[0].isspace() and not b.startswith("#")]
    assert len(entries) > 20
    for e in entries:
        assert "==" in e, f"not an exact pin: {e}"
    assert lock.count("--hash=sha256:") >= len(entries)
    assert any(e.startswith("pyinfra==3.10.") for e in entries)
