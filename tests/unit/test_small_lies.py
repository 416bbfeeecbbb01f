"""Issue 23 items 7-10: small lies to the user (each test failed before its fix).

- 7: the headers meta package follows the running kernel's flavour (cloud, HWE kernels);
- 8: ``gpuhost audit`` says that pyinfra failed, exit 1, instead of "unreachable ... port 22";
- 9: ``--limit gpu`` on a mixed inventory validates only the hosts being run;
- 10: the MIG reboot waits ``reboot_timeout``, not a hard-coded 600 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ENV = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}

GPU_DATA = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.18.2",
            "nvidia_local_repo": {"debian12": {
                "url": "https://example.com/nvidia-driver-local-repo-debian12-570.172.08_1.0-1"
                       "_amd64.deb", "sha256": "a" * 64}},
            "fake_delay": 0, "fake_delay_jitter": 0}


# --- 10: the MIG reboot -------------------------------------------------------------------------

def test_the_mig_reboot_waits_reboot_timeout(monkeypatch):
    from gpuhost.roles import mig

    seen = {}
    monkeypatch.setattr(mig.server, "reboot", lambda **kwargs: seen.update(kwargs))
    mig._reboot_when_pending(SimpleNamespace(reboot_policy="when_needed", reboot_timeout=3456))
    assert seen["reboot_timeout"] == 3456


# --- 9: --limit on a mixed inventory ------------------------------------------------------------

@pytest.fixture
def mixed_inventory(tmp_path):
    inventory = tmp_path / "mixed.py"
    inventory.write_text(textwrap.dedent(f"""\
        gpu = [("@fake/gpu-1", {GPU_DATA!r})]
        web = [("@fake/web-1", {{"fake_delay": 0, "fake_delay_jitter": 0}})]
    """))
    deploy = tmp_path / "checked.py"  # what every gpuhost deploy does first
    deploy.write_text("from pyinfra.operations import server\nfrom gpuhost.roles import common\n"
                      "common.check_inventory()\nserver.shell(name='checked', commands=['true'])\n")
    return inventory, deploy


def _pyinfra(*args):
    return subprocess.run([PYTHON, "-m", "pyinfra", "-y", *map(str, args)], cwd=ROOT, env=ENV,
                          text=True, capture_output=True, timeout=120)


def test_limit_gpu_validates_only_the_gpu_hosts(mixed_inventory):
    inventory, deploy = mixed_inventory
    done = _pyinfra(inventory, deploy, "--limit", "gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "web-1" not in done.stdout + done.stderr


def test_the_whole_mixed_inventory_is_still_refused_naming_the_web_server(mixed_inventory):
    inventory, deploy = mixed_inventory
    done = _pyinfra(inventory, deploy)
    assert done.returncode == 1
    assert "inventory data is invalid" in done.stderr and "[@fake/web-1]" in done.stderr


def test_the_preflight_checks_only_the_limited_hosts(tmp_path):
    """An inventory that calls inventories.preflight.check (prod.py does) stops the run
    before connecting: with --limit gpu, the web server's missing settings do not."""
    inventory = tmp_path / "mixed_preflight.py"
    inventory.write_text(textwrap.dedent(f"""\
        gpu = [("@fake/gpu-1", {GPU_DATA!r})]
        web = [("@fake/web-1", {{"fake_delay": 0, "fake_delay_jitter": 0}})]
        from inventories.preflight import check
        check(__file__)
    """))
    done = _pyinfra(inventory, "deploys/gpu_host.py", "--dry", "--limit", "gpu")
    assert "inventory data is invalid" not in done.stderr, done.stderr[-3000:]
    assert "Connecting to hosts" in done.stderr  # the preflight let the run go on
    done = _pyinfra(inventory, "deploys/gpu_host.py", "--dry")
    assert done.returncode == 2 and "[@fake/web-1]" in done.stderr


# --- 8: gpuhost audit when pyinfra itself fails ------------------------------------------------

def _audit(inventory, *args):
    return subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", str(inventory), *args],
                          cwd=ROOT, env=ENV, text=True, capture_output=True, timeout=300)


def test_a_deploy_that_does_not_import_is_a_pyinfra_failure_exit_1(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("@fake/a", {"nvidia_driver_version": "570.172.08", '
                         '"fake_delay": 0, "fake_delay_jitter": 0})]\n')
    # the real pyinfra CLI, in a Python where `import facts.host` fails (a bad deploy import)
    wrapper = tmp_path / "pyinfra-broken-import.py"
    wrapper.write_text("import sys\nsys.modules['gpuhost.facts.host'] = None\n"
                       "from pyinfra_cli.main import main\nmain()\n")
    done = _audit(inventory, "--pyinfra", f"{PYTHON} {wrapper}")
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stderr.split("gpuhost audit:")[-1]
    assert "pyinfra failed (exit 1) before any host was audited" in said
    assert "import of gpuhost.facts.host halted" in said  # Python's ImportError, from pyinfra's output
    assert "unreachable" not in done.stdout + said


def test_an_unreachable_host_is_reported_with_pyinfras_reason_exit_3(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("@fake/a", {"nvidia_driver_version": "570.172.08", '
                         '"fake_delay": 0, "fake_delay_jitter": 0}), '
                         '("gone", {"ssh_hostname": "127.0.0.1", "ssh_port": 1, '
                         '"nvidia_driver_version": "570.172.08"})]\n')
    done = _audit(inventory)
    assert done.returncode == 3, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "unreachable 1 host: gone cannot connect to 127.0.0.1 port 1: Could not connect" in text
    assert "@fake/a unknown (unsupported)" in text  # reached: its state was read


def test_no_host_reachable_is_exit_3_not_a_pyinfra_failure(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("gone", {"ssh_hostname": "127.0.0.1", "ssh_port": 1, '
                         '"nvidia_driver_version": "570.172.08"})]\n')
    done = _audit(inventory)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "pyinfra failed" not in done.stderr
