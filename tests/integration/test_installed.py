"""Issue 27 item 1, "done when": gpuhost installed from its wheel into a fresh virtualenv
outside the checkout, used from a directory of the user's own against a converged sandbox
host:

* a two-line deploy file of the user's (``from gpuhost.deploys.api import gpu_host`` and a
  call with a keyword setting) runs: pyinfra exits 0, the host's state fact ran;
* ``pyinfra INV fact gpuhost.facts.nvidia.NvidiaDriver`` answers the loaded driver;
* ``gpuhost audit INV`` prints the host's row.

No network: the wheel is built without build isolation and installed with ``--no-deps``;
the new virtualenv sees the checkout virtualenv's site-packages through a ``.pth`` line
(only the path: that site's own ``.pth`` files, e.g. the checkout's editable install, are
not run), so ``gpuhost`` itself is the wheel's. The wheel is built from a copy of the
files it packages, so the shared checkout gets no ``build/`` or ``*.egg-info``.
"""
from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PACKAGED = ("pyproject.toml", "README.md", "gpuhost", "facts", "roles", "deploys")

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=1, ol=0, docker_hosts=0, state="converged")]


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYINFRA_PROGRESS="off", NO_COLOR="1")
    return subprocess.run(argv, cwd=cwd, env=env, text=True, capture_output=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv (outside the checkout) with gpuhost's wheel installed: its python."""
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    source.mkdir()
    for name in PACKAGED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    built = _run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                  "-w", str(base / "dist"), "./source"], cwd=base)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("gpuhost-*.whl")
    venv = base / "venv"
    made = _run(["python3", "-m", "venv", "--without-pip", str(venv)], cwd=base)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                cwd=base).stdout.strip()
    (Path(site) / "gpuhost-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = _run([PYTHON, "-m", "pip", "--python", str(python), "install", "--no-deps",
                 "--no-index", "-q", str(wheel)], cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    return python


@pytest.fixture(scope="module")
def user_dir(fleet, tmp_path_factory) -> tuple[Path, str, str]:
    """The user's own directory: an inventory of the one sandbox host (its data written out
    as literals, nothing imported from the checkout, no nvidia_driver_version: the deploy
    file gives it) and a two-line deploy file. Returns (directory, host, driver version)."""
    home = tmp_path_factory.mktemp("user")
    sandbox = runpy.run_path(str(ROOT / "inventories" / "sandbox.py"))
    hosts, group_data = sandbox["sandbox_fleet"]
    name, data = hosts[0]
    version = group_data.pop("nvidia_driver_version")
    (home / "inv.py").write_text(f"gpus = ([({name!r}, {data!r})], {group_data!r})\n")
    (home / "my_deploy.py").write_text(textwrap.dedent(f"""\
        from gpuhost.deploys.api import gpu_host
        gpu_host(nvidia_driver_version={version!r})
    """))
    (home / "no_version.py").write_text(textwrap.dedent("""\
        from gpuhost.deploys.api import gpu_host
        gpu_host()
    """))
    return home, name, version


def _said(done: subprocess.CompletedProcess) -> str:
    return ANSI.sub("", done.stdout + done.stderr)


def test_installed_gpuhost_runs_from_the_users_directory(installed, user_dir):
    home, name, version = user_dir
    python = str(installed)
    where = _run([python, "-c", "import gpuhost.facts.host as h, gpuhost.cli as c; "
                  "print(h.__file__); print(c.deploy_file('audit.py'))"], cwd=home)
    assert where.returncode == 0, where.stderr
    site = str(installed.parents[1])
    assert all(line.startswith(site) for line in where.stdout.splitlines()), where.stdout

    # the user's deploy file: its keyword setting is the only nvidia_driver_version
    deploy = _run([python, "-m", "pyinfra", "-y", "-v", "inv.py", "my_deploy.py"], cwd=home,
                  timeout=900)
    said = _said(deploy)
    assert deploy.returncode == 0, said[-4000:]
    assert f"[{name}] Loaded fact gpuhost.facts.host.GpuHostState" in said, said[-4000:]
    # pyinfra's -v results (Operation, Hosts, Success, Error, No Change): every operation
    # of gpu_host ran on the converged host without a change or an error
    total = re.search(r"^\s*Grand total\s+(\d+)\s+-\s+-\s+(\d+)\s*$", said, re.M)
    assert total and total[1] == total[2] and int(total[1]) > 10, said[-3000:]
    assert "gpuhost: GPU host | NVIDIA driver |" in said  # the @deploy's operations
    without = _run([python, "-m", "pyinfra", "-y", "inv.py", "no_version.py"], cwd=home)
    assert without.returncode != 0
    assert "nvidia_driver_version: missing (required)" in _said(without), _said(without)[-3000:]

    fact = _run([python, "-m", "pyinfra", "inv.py", "fact", "gpuhost.facts.nvidia.NvidiaDriver",
                 "--json"], cwd=home)
    assert fact.returncode == 0, _said(fact)[-3000:]
    driver = json.loads(fact.stdout)["gpuhost.facts.nvidia.NvidiaDriver"][name]  # pyinfra's name
    assert (driver["state"], driver["loaded_version"]) == ("loaded", version), driver

    audit = _run([str(installed.parent / "gpuhost"), "audit", "inv.py", "--data",
                  f"nvidia_driver_version={version}", "--json", "audit.json"], cwd=home)
    assert audit.returncode == 0, _said(audit)[-3000:]
    assert re.search(rf"^\s*{re.escape(name)}\s.*{re.escape(version)}", audit.stdout, re.M), \
        audit.stdout[-3000:]
    report = json.loads((home / "audit.json").read_text())
    assert [h["name"] for h in report["hosts"]] == [name]
