"""Run a plan command (``python harness.py ...``) through the session's plan worker.

    run([sys.executable, HARNESS, scenario, deploy], cwd=ROOT, env=env, timeout=120)
        -> subprocess.CompletedProcess (returncode, stdout, stderr as text)

What ``subprocess.run(args, cwd=..., env=..., capture_output=True, text=True,
timeout=...)`` returns, and ``subprocess.TimeoutExpired`` when the plan runs too long (that
plan killed, the session goes on). While the session's worker runs (tests/plans/conftest.py
starts it), the command is a child forked by tests/plans/zygote.py, which imported gevent,
pyinfra and the roles once; otherwise, with ``GPUHOST_TEST_SUBPROCESS=1``, or when the
command or its interpreter environment is not the worker's, a fresh process as before.
"""

from __future__ import annotations

import json
import locale
import os
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ZYGOTE = HERE / "zygote.py"
# the interpreter's own settings: a forked child keeps the worker's, so a request that
# changes one of them gets a fresh process
_INTERPRETER_ENV = ("PYTHON",)
_STARTUP_S = 120  # the worker's imports, on a loaded machine
_SLACK_S = 30  # beyond a request's timeout before the worker itself is given up


def _text(data: bytes) -> str:
    """As ``subprocess.run(..., text=True)`` decodes (locale encoding, universal newlines)."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _interpreter_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(_INTERPRETER_ENV)}


class PlanWorker:
    """One zygote process; requests one at a time."""

    def __init__(self, env: dict | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.tmp = Path(tempfile.mkdtemp(prefix="gpuhost-plan-worker-"))
        self.process: subprocess.Popen | None = None
        self.ready: dict | None = None
        self.count = 0

    def _log(self) -> str:
        path = self.tmp / "zygote.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _readline(self, timeout: float) -> dict | None:
        """The worker's next answer, or None when it did not come in time or it ended."""
        assert self.process and self.process.stdout
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        return json.loads(line) if line else None

    def start(self) -> None:
        with open(self.tmp / "zygote.log", "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(ZYGOTE)], cwd=HERE.parents[1], env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.ready = None

    def _ensure_ready(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self.start()
        if self.ready is None:
            self.ready = self._readline(_STARTUP_S)
            if not self.ready:
                self.stop()
                raise RuntimeError(f"the plan worker did not start:\n{self._log()}")

    def accepts(self, args: list[str], env: dict) -> bool:
        return (len(args) >= 2 and args[0] == sys.executable
                and (args[1] == "-c" and len(args) >= 3 or args[1].endswith(".py"))
                and _interpreter_env(env) == _interpreter_env(self.env))

    def run(self, args: list[str], *, cwd, env: dict, timeout: float,
            ) -> subprocess.CompletedProcess[str]:
        self._ensure_ready()
        self.count += 1
        out, err = self.tmp / f"{self.count}.out", self.tmp / f"{self.count}.err"
        request = {"argv": [str(a) for a in args[1:]], "cwd": str(cwd), "env": env,
                   "timeout": timeout, "stdout": str(out), "stderr": str(err)}
        assert self.process and self.process.stdin
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
            answer = self._readline(timeout + _SLACK_S)
        except BrokenPipeError:
            answer = None
        except BaseException:  # interrupted: its answer would be taken for the next one's
            self.stop()
            raise
        stdout = _text(out.read_bytes()) if out.exists() else ""
        stderr = _text(err.read_bytes()) if err.exists() else ""
        for path in (out, err):
            path.unlink(missing_ok=True)
        if answer is None:  # the worker itself hung or died: a new one for the next plan
            log = self._log()
            self.stop()
            raise RuntimeError(f"the plan worker gave no answer:\n{log}")
        if answer.get("timeout"):
            raise subprocess.TimeoutExpired(args, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(args, answer["returncode"], stdout, stderr)

    def stop(self) -> None:
        if self.process is not None:
            if self.process.stdin:
                self.process.stdin.close()  # the worker's loop ends at EOF
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stdout:
                self.process.stdout.close()
            self.process = None
        self.ready = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


WORKER: PlanWorker | None = None  # set by tests/plans/conftest.py for the session


def run(args: list[str], *, cwd, env: dict, timeout: float) -> subprocess.CompletedProcess[str]:
    args = [str(a) for a in args]
    if WORKER is not None and WORKER.accepts(args, env):
        return WORKER.run(args, cwd=cwd, env=env, timeout=timeout)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
