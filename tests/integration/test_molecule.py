"""The Molecule scenario vagrant/molecule/sandbox, run by pytest on this worker's fleet.

`molecule test -s sandbox` (destroy, create, converge, idempotence, verify, destroy) drives
the sandbox through its playbooks: create = `python -m sandbox up --hosts 2`, converge and
idempotence = pyinfra with deploys/gpu_host.py (the second run must report no change),
verify = the GpuHostState fact on every host. Run here rather than after pytest, it shares
the two workers with the other modules instead of running alone at the end.

The worker's fleet of the module before is taken down first: create.yml uses a running
fleet as it is, and this scenario must create its own (GPUHOST_SANDBOX_DOWN=1 makes
destroy.yml take it down again).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support

pytestmark = [pytest.mark.integration]


def test_the_molecule_scenario_converges_is_idempotent_and_verifies(_fleet_session,
                                                                     sandbox_tools):
    sandbox_tools.cli("down")
    venv_bin = Path(sys.executable).parent  # molecule and ansible beside this pytest
    env = {**os.environ, "GPUHOST_SANDBOX_DOWN": "1", "PYINFRA_PROGRESS": "off",
           "NO_COLOR": "1", "ANSIBLE_NOCOLOR": "1", "PY_COLORS": "0",
           "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["molecule", "test", "-s", "sandbox"], cwd=support.ROOT / "vagrant",
                          env=env, text=True, capture_output=True, timeout=1800)
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # in case colour got through
    assert proc.returncode == 0, out[-6000:]
    for action in ("create", "converge", "idempotence", "verify", "destroy"):
        assert re.search(rf"sandbox > {action}: +Executed: Successful", out), (action, out[-6000:])
    assert re.search(r"sandbox +: actions=6 +successful=6 .*failed=0", out), out[-3000:]
    assert not (sandbox_tools.run_dir() / "fleet.json").exists(), "destroy left the fleet up"
