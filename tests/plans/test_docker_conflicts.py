"""Docker's repository on an apt host that already has the distribution's container stack
(docker.io, containerd, runc, podman-docker ...): Docker's Ubuntu/Debian guides remove
those first (official-procedures.md 3.1). gpuhost does so only with
docker_replace_conflicting; without it the host stops before anything changes, the
packages named. Exact plans through the @fake connector (tests/plans/harness.py), the host
answering pyinfra's DebPackages fact (`dpkg -l`) with what is installed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOLDEN = HERE / "golden"

# Runs in its own process (the harness needs gevent's monkey-patching).
SCRIPT = r"""
import json, os, re, sys
sys.path.insert(0, os.environ["PLAN_DIR"])
import harness, scenarios
dpkg_l = os.environ["DPKG_L"]
extra = json.loads(os.environ["EXTRA"])

def host_data(name, extra):
    data = scenarios.host_data(name, extra)
    data["fake_responses"][re.compile(r"dpkg -l")] = dpkg_l
    return data

for line in harness.plan(sys.argv[1], extra_data=extra, host_data=host_data):
    print(line)
"""


def dpkg_l(*names: str) -> str:
    head = ("Desired=Unknown/Install/Remove/Purge/Hold\n"
            "||/ Name           Version      Architecture Description\n"
            "+++-==============-============-============-=================\n")
    return head + "".join(f"ii  {n}  1.0-1  amd64  {n} (test)\n" for n in names)


def plan(scenario: str, installed: tuple[str, ...], extra: dict | None = None):
    env = dict(os.environ, PLAN_DIR=str(HERE), DPKG_L=dpkg_l(*installed),
               EXTRA=json.dumps(extra or {}), PYINFRA_PROGRESS="off")
    return plan_runner.run([sys.executable, "-c", SCRIPT, scenario], cwd=ROOT, env=env,
                           timeout=120)


@pytest.mark.parametrize("scenario", ["ubuntu2204", "ubuntu2404", "debian12"])
def test_conflicting_packages_stop_the_host_before_anything_changes(scenario):
    result = plan(scenario, ("openssh-server", "docker.io", "containerd", "runc"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    # one command: the host fails with the reason; no header, driver or Docker step
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("echo 'gpuhost: ") and lines[0].endswith(">&2; exit 1")
    assert "docker.io, containerd, runc" in lines[0]
    assert "docker_replace_conflicting" in lines[0]


def test_with_consent_they_are_removed_before_dockers_packages_go_in():
    result = plan("ubuntu2404", ("docker.io", "containerd", "runc", "podman-docker"),
                  {"docker_replace_conflicting": True})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    removal = [i for i, line in enumerate(lines) if "apt-get" in line and " remove " in line]
    install = [i for i, line in enumerate(lines) if "install" in line and "docker-ce" in line]
    assert len(removal) == 1 and install, result.stdout
    assert removal[0] < install[0]
    for name in ("docker.io", "podman-docker", "containerd", "runc"):
        assert name in lines[removal[0]]
    # everything else is the golden plan of a bare host
    golden = (GOLDEN / "ubuntu2404.plan").read_text().splitlines()
    assert [line for i, line in enumerate(lines) if i != removal[0]] == golden


def test_a_host_without_them_gets_the_golden_plan():
    # containerd.io / docker-ce (Docker's own) are not among them
    result = plan("ubuntu2204", ("openssh-server", "curl"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == (GOLDEN / "ubuntu2204.plan").read_text().splitlines()
