"""The plan worker ("zygote") of a pytest session: imports once, forks one child per plan.

    python tests/plans/zygote.py      # started by tests/plans/plan_runner.py, not by hand

Every plan test used to start ``python harness.py SCENARIO DEPLOY`` (or upgrade_harness.py,
or ``python -c SCRIPT``) in a fresh process, paying gevent's monkey-patching and pyinfra's
imports each time. This process does them once (``import harness``, the deploys' imports),
then, for each request, forks a child that becomes that command: the request's working
directory, environment, ``sys.argv``/``sys.path[0]``, stdin from /dev/null, stdout and
stderr into the request's files, the script run as ``__main__`` (the same code as from the
command line), its exit status as the process's. The fork isolates pyinfra's global state,
``sys.exit`` and whatever the plan changes; nothing runs in this process itself.

Protocol (stdin/stdout, one JSON object a line): first ``{"ready": pid}`` from here, then
per request ``{"argv": [...], "cwd": ..., "env": {...}, "timeout": s, "stdout": path,
"stderr": path}`` in, ``{"returncode": n}`` or ``{"timeout": true}`` (the child killed) out.
"""

import ast
import atexit
import importlib
import json
import os
import runpy
import sys
import time
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BASE_PATH = list(sys.path)  # as a fresh ``python SCRIPT`` has it (before harness adds ROOT)
PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8")  # fd 1 itself is each child's stdout
_DEVNULL = os.open(os.devnull, os.O_RDWR)
os.dup2(_DEVNULL, 1)  # nothing imported here writes into the protocol (and no tty: as a pipe)

import harness  # noqa: E402,F401,I001  (gevent's monkey-patching, pyinfra)
import upgrade_harness  # noqa: E402,F401
from gevent import monkey  # noqa: E402
from gevent.os import fork_gevent  # noqa: E402  (os.fork, then gevent.reinit() in the child)

# this process never runs gevent's hub: the unpatched calls
_raw_waitpid = monkey.get_original("os", "waitpid")
_raw_sleep = monkey.get_original("time", "sleep")
_OWN_FILES = {__file__, runpy.__file__, "<frozen runpy>"}  # frames not the script's


def preimport_deploys() -> None:
    """The modules the deploy files import (roles, facts, pyinfra operations) and pyinfra's
    connectors (which every Inventory loads), so that each child finds them loaded; they
    only define functions and classes and read packaged data."""
    from pyinfra.api.connectors import get_all_connectors

    get_all_connectors()
    for deploy in sorted((ROOT / "deploys").glob("*.py")):
        for node in ast.parse(deploy.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                importlib.import_module(node.module)
                for alias in node.names:
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        pass  # a name in the module, not a submodule
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)


def _exit_status(code) -> int:
    """As the interpreter turns ``SystemExit(code)`` into the process's exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_as_main(argv: list[str]) -> None:
    """``python SCRIPT ARGS`` or ``python -c CODE ARGS`` (argv without the interpreter)."""
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[:] = ["", *BASE_PATH[1:]]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)
    else:
        script = str(Path(argv[0]))
        sys.argv = [script, *argv[1:]]
        sys.path[:] = [str(Path(script).resolve().parent), *BASE_PATH[1:]]
        runpy.run_path(script, run_name="__main__")


def _child(request: dict) -> None:
    """Become the requested command; never returns."""
    status = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.dup2(_DEVNULL, 0)
        for fd, key in ((1, "stdout"), (2, "stderr")):
            target = os.open(request[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        PROTOCOL.close()
        try:
            _run_as_main(request["argv"])
            status = 0
        except SystemExit as stop:
            status = _exit_status(stop.code)
        except BaseException as error:  # noqa: BLE001  (printed as the interpreter would)
            tb = error.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES:
                tb = tb.tb_next  # this file's and runpy's frames: not the script's
            sys.excepthook(type(error), error.with_traceback(tb), tb)
            status = 1
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        os._exit(status)


def _wait(pid: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        done, status = _raw_waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            _raw_waitpid(pid, 0)
            return {"timeout": True}
        _raw_sleep(0.002)


def serve() -> None:
    PROTOCOL.write(json.dumps({"ready": os.getpid()}) + "\n")
    PROTOCOL.flush()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = fork_gevent()
        if pid == 0:
            _child(request)
        PROTOCOL.write(json.dumps(_wait(pid, float(request["timeout"]))) + "\n")
        PROTOCOL.flush()


if __name__ == "__main__":
    preimport_deploys()
    serve()
