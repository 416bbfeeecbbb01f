"""Bad inventory data stops pyinfra before it connects to any host."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuhost import settings

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = ROOT / ".venv" / "bin" / "pyinfra"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PYINFRA), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_example_inventory_is_refused_before_connecting():
    result = run("inventories/prod.py", "deploys/gpu_host.py", "--dry")
    assert result.returncode == 2
    assert "no host was contacted" in result.stderr
    assert "Connecting to hosts" not in result.stderr + result.stdout
    # one line per distinct problem, naming the hosts, not one per host
    assert result.stderr.count('[debian12] sha256') == 1
    assert "and 2 more" in result.stderr


def test_command_line_data_is_validated_too():
    result = run("inventories/prod.py", "deploys/gpu_host.py", "--dry",
                 "--data", "nvidia_driver_version=570")
    assert result.returncode == 2
    assert "nvidia_driver_version: 570 is a number" in result.stderr


def test_fact_gathering_is_never_blocked_by_settings():
    result = run("inventories/prod.py", "fact", "server.Hostname", "--limit", "nohost")
    assert "inventory data is invalid" not in result.stderr


def test_group_problems_names_hosts_once_per_problem():
    lines = settings.group_problems({"a": ["x bad"], "b": ["x bad", "y bad"]})
    assert lines == ["x bad  [a, b]", "y bad  [b]"]


def test_preflight_reads_the_inventory_through_pyinfra_with_data_and_group_data(tmp_path):
    """The data it validates is pyinfra's own (debug-inventory --json): group_data beside the
    inventory, --group-data folders and --data overrides, in pyinfra's order."""
    from inventories import preflight

    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "all.py").write_text('container_toolkit_version = "1.17.8"\n')
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "gpus.py").write_text('nvidia_driver_version = "550.163.01"\n')
    inventory = tmp_path / "inv.py"
    inventory.write_text('gpus = ["@local"]\n')
    hosts = preflight.inventory_data(str(inventory), ["reboot_policy=when_needed"],
                                     [str(tmp_path / "extra")])
    data = hosts["@local"]
    assert (data["container_toolkit_version"], data["nvidia_driver_version"],
            data["reboot_policy"]) == ("1.17.8", "550.163.01", "when_needed")


def test_preflight_imports_no_pyinfra_cli():
    text = (ROOT / "inventories" / "preflight.py").read_text()
    assert "pyinfra_cli" not in text
