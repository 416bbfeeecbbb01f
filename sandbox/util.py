"""Small helpers: progress lines with timings, subprocess calls, hashing, atomic writes."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


class SandboxError(Exception):
    """A failure with a message that says what is wrong and what to do."""


@contextlib.contextmanager
def flocked(path: Path, waiting: str, tell=None) -> Iterator[None]:
    """Hold an exclusive flock on PATH (created with its folder); when another process holds
    it, say ``waiting`` once (through ``tell``, default say()) and wait for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            (tell or say)(waiting)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def say(msg: str) -> None:
    print(f"sandbox: {msg}", flush=True)


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Print one line per step with its duration."""
    t0 = time.monotonic()
    try:
        yield
    except BaseException:
        say(f"{what}: FAILED after {time.monotonic() - t0:.1f}s")
        raise
    say(f"{what}: {time.monotonic() - t0:.1f}s")


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    check: bool = True,
    capture: bool = False,
    env: dict[str, str] | None = None,
    input: str | None = None,
    quiet: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run a command (never through a shell). On failure raise SandboxError with its output."""
    args = [str(a) for a in argv]
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.run(
        args,
        env=full_env,
        text=True,
        input=input,
        stdout=subprocess.PIPE if (capture or quiet) else None,
        stderr=subprocess.STDOUT if quiet and not capture else (subprocess.PIPE if capture else None),
    )
    if check and proc.returncode != 0:
        out = (proc.stdout or "") + (proc.stderr or "")
        tail = "\n".join(out.strip().splitlines()[-25:])
        raise SandboxError(
            f"command failed (exit {proc.returncode}): {shlex.join(args)}\n{tail}".rstrip()
        )
    return proc


def need_root() -> None:
    if os.geteuid() != 0:
        raise SandboxError("the sandbox needs root (namespaces, mounts): run it as root")


def need_commands(*names: str) -> None:
    import shutil

    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise SandboxError(
            f"missing commands: {', '.join(missing)}: run `make deps` "
            "(installs the Debian packages listed in mk/sandbox.mk)"
        )


def recipe_hash(*parts: object) -> str:
    """Stable short hash of a recipe (anything JSON-serialisable, or file contents)."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        else:
            h.update(json.dumps(p, sort_keys=True).encode())
        h.update(b"\1")
    return h.hexdigest()[:12]


def write_file(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    """Write atomically (temp file + rename), creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    data = text.encode() if isinstance(text, str) else text
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def eprint(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
