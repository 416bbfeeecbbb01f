"""Issue 27 item 1, "done when": gpuhost installed from its wheel into a fresh virtualenv
outside the checkout, used from a directory of the user's own against a converged sandbox
host:

* a two-line deploy file of the user's (``from gpuhost.deploys.api import gpu_host`` and a
  call with a keyword setting) runs: pyinfra exits 0, the host's state fact ran;
* ``pyinfra INV fact gpuhost.facts.nvidia.NvidiaDriver`` answers the loaded driver;
* ``gpuhost audit INV`` prints the host's row;
* a mixed inventory (a ``gpus`` group and a ``web`` group whose host has no gpuhost setting)
  with the user's deploy ``if "gpus" in host.groups: gpu_host(...)`` runs gpuhost for the
  GPU group only: exit 0, no gpuhost message about the web host, no operation on it (and
  the same deploy without the ``if`` stops, naming the web host: the check can fail); the
  checkout's own ``pyinfra INV deploys/gpu_host.py --limit gpus`` does the same.

The fleet is test_health_audit's and test_metrics' spec (4 converged hosts: gpu-01, gpu-02,
ol8-03, ol9-04), so a pytest process that runs two of these modules converges the fleet
once and boots the others from its snapshot (conftest.py, ``provide_fleet``); gpu-02 is
the mixed inventory's web host.

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

# the same spec as test_health_audit and test_metrics: one converged snapshot for all three
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="converged")]
# the only keys the mixed inventory's web host has: how to reach it, nothing of gpuhost's
CONNECTION = ("ssh_hostname", "ssh_port", "ssh_user", "ssh_key", "ssh_known_hosts_file",
              "ssh_strict_host_key_checking", "ssh_allow_agent", "ssh_look_for_keys")


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
    # a mixed inventory: the GPU host, and a web server (the fleet's second host under its
    # own name) with nothing but its SSH connection data
    _, web_data = hosts[1]
    web = {key: web_data[key] for key in CONNECTION}
    (home / "mixed.py").write_text(f"gpus = ([({name!r}, {data!r})], {group_data!r})\n"
                                   f"web = ([('web-01', {web!r})], {{}})\n")
    for deploy, call in (("gpus_only.py", 'if "gpus" in host.groups:\n    gpu_host'),
                         ("every_host.py", "gpu_host")):
        (home / deploy).write_text("from pyinfra import host\n"
                                   "from gpuhost.deploys.api import gpu_host\n"
                                   f"{call}(nvidia_driver_version={version!r})\n")
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

    # the user's deploy file: its keyword setting is the only nvidia_driver_version. The
    # snapshot's stamp was recorded by the checkout's code: the wheel's same code has the same
    # digest (gpuhost.stamp.code_digest), so the converged host is one read, one operation
    deploy = _run([python, "-m", "pyinfra", "-y", "-v", "inv.py", "my_deploy.py"], cwd=home,
                  timeout=900)
    said = _said(deploy)
    assert deploy.returncode == 0, said[-4000:]
    assert f"[{name}] Loaded fact gpuhost.facts.host.GpuHostState" in said, said[-4000:]
    assert f"[{name}] gpuhost: as wanted, unchanged since gpuhost's run" in said, said[-4000:]
    # pyinfra's -v results (Operation, Hosts, Success, Error, No Change)
    total = re.search(r"^\s*Grand total\s+(\d+)\s+-\s+-\s+(\d+)\s*$", said, re.M)
    assert total and total[1] == total[2] == "1", said[-3000:]
    # full_check: every operation of gpu_host runs on the converged host, no change, no error
    full = _run([python, "-m", "pyinfra", "-y", "-v", "inv.py", "my_deploy.py", "--data",
                 "full_check=true"], cwd=home, timeout=900)
    said = _said(full)
    assert full.returncode == 0, said[-4000:]
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


def _results(done: subprocess.CompletedProcess) -> dict:
    """pyinfra's --json results: {"operations": [{"name", "success", "no_change", "error",
    ...}], "totals", "failed_hosts"}."""
    assert done.stdout.lstrip().startswith("{"), _said(done)[-4000:]
    return json.loads(done.stdout)["results"]


def _ran(results: dict) -> set[str]:
    return {name for op in results["operations"]
            for name in (*op["success"], *op["no_change"], *op["error"])}


def test_a_mixed_inventory_runs_gpuhost_for_the_gpu_group_only(installed, user_dir):
    """Issue 27, "done when": a mixed inventory (GPU hosts plus hosts without any gpuhost
    setting) runs gpuhost's deploy for the GPU group only, with no error about the other
    hosts. The web host ``web-01`` is the fleet's second sandbox host under another name,
    with only SSH connection data (a real host pyinfra connects to and runs the user's
    deploy file for)."""
    home, name, _ = user_dir
    python = str(installed)

    done = _run([python, "-m", "pyinfra", "-y", "mixed.py", "gpus_only.py", "--json"],
                cwd=home, timeout=900)
    said = _said(done)
    assert done.returncode == 0, said[-4000:]
    # pyinfra connects to web-01 and runs the file for it, which adds no operation: every
    # line about it is one of these (a gpuhost message would name it too)
    about_web = {line.strip() for line in said.splitlines() if "web-01" in line}
    assert about_web <= {"[web-01] Connected", "[web-01] Ready: gpus_only.py",
                         "[web-01] Skipped"}, said[-4000:]
    results = _results(done)
    assert _ran(results) == {name}, results["operations"][:3]
    ours = [op for op in results["operations"] if op["name"].startswith("gpuhost: GPU host")]
    assert ours and all(op["error"] == [] for op in ours), ours[:3]
    assert results["failed_hosts"] == []

    # the premise: gpu_host on the web host too stops the run with gpuhost's message about
    # web-01 (its settings miss what gpuhost needs), before any operation runs
    every = _run([python, "-m", "pyinfra", "-y", "mixed.py", "every_host.py"], cwd=home)
    said = _said(every)
    assert every.returncode != 0, said[-4000:]
    # "settings (keyword arguments over the host's inventory data) are invalid, nothing was
    # changed on any host:" and one line per problem, "  KEY: what is wrong: what to set  [HOST]"
    assert "are invalid" in said, said[-4000:]
    assert re.search(r"^\s+nvidia_local_repo: not set \(nor nvidia_driver_repo\).*\[web-01\]$", said, re.M), \
        said[-4000:]
    assert not re.search(rf"\[{re.escape(name)}\]$", said, re.M), said[-4000:]


def test_the_checkouts_deploy_limited_to_the_gpu_group(user_dir):
    """The same mixed inventory from the checkout, as its README runs a deploy:
    ``pyinfra INV deploys/gpu_host.py --limit gpus`` (the deploy file provisions every host
    it runs on, so a mixed inventory names its GPU group)."""
    home, name, version = user_dir
    done = _run([str(ROOT / ".venv/bin/pyinfra"), "-y", str(home / "mixed.py"),
                 "deploys/gpu_host.py", "--limit", "gpus", "--data",
                 f"nvidia_driver_version={version}", "--json"], cwd=ROOT, timeout=900)
    said = _said(done)
    assert done.returncode == 0, said[-4000:]
    assert "web-01" not in said, said[-4000:]
    results = _results(done)
    assert _ran(results) == {name} and results["failed_hosts"] == [], results["operations"][:3]
    assert results["totals"]["error"] == 0, results["totals"]
