"""Exact plans of the Oracle Linux packaging steps (issue 13 items 1, 2, 4): Oracle's
channels enabled before the driver, dkms checked with the missing channel named, OL8's
container-tools against Docker (docker_replace_podman), and the dnf versionlock taken at
install and moved by the upgrade."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DRIVER = "570.172.08"


def _plan(scenario: str, extra: dict | None = None, harness: str = "harness.py"):
    env = dict(os.environ, GPUHOST_PLAN_DATA=json.dumps(extra or {}), PYINFRA_PROGRESS="off")
    result = plan_runner.run([sys.executable, str(HERE / harness), scenario], cwd=ROOT,
                             env=env, timeout=120)
    return result, result.stdout.splitlines()


def _index(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_ol8_and_ol9_enable_oracle_channels_before_the_driver_and_lock_it_exactly():
    for scenario, major in (("ol8-uek", "8"), ("ol9-rhck", "9")):
        result, lines = _plan(scenario)
        assert result.returncode == 0, result.stderr[-2000:]
        release = lines.index(f"dnf install -y oracle-epel-release-el{major}")
        enable = lines.index(f"dnf config-manager --set-enabled ol{major}_codeready_builder "
                             f"ol{major}_developer_EPEL")
        install = lines.index("dnf install -y nvidia-open")
        plugin = lines.index("dnf install -y python3-dnf-plugin-versionlock")
        lock = lines.index(f"dnf versionlock add kmod-nvidia-open-dkms-3:{DRIVER}-1.el{major} "
                           f"nvidia-driver-3:{DRIVER}-1.el{major} "
                           f"nvidia-open-3:{DRIVER}-1.el{major}")
        assert release < enable < install < plugin < lock
        assert _index(lines, "dnf -q repoquery --available dkms") < install


def test_el_enable_repos_empty_enables_nothing_and_names_the_missing_channel():
    result, lines = _plan("ol8-rhck", {"el_enable_repos": []})
    assert result.returncode == 0, result.stderr[-2000:]
    assert not any("config-manager" in line or "oracle-epel-release" in line for line in lines)
    check = lines[_index(lines, "dnf -q repoquery --available dkms")]
    assert "dkms comes from EPEL (ol8_developer_EPEL on this distribution)" in check
    assert "el_enable_repos" in check


def test_el_enable_repos_names_a_repository_the_host_does_not_have():
    result, lines = _plan("ol9-uek8", {"el_enable_repos": ["ol9_appstream", "site_epel"]})
    assert result.returncode == 0, result.stderr[-2000:]
    # a failing command (this harness records it; a real host stops there), before the
    # driver, naming the repository and the setting; nothing enabled
    fail = _index(lines, "no dnf repository site_epel on this host")
    assert lines[fail].startswith("echo 'gpuhost: ") and "el_enable_repos" in lines[fail]
    assert fail < lines.index("dnf install -y nvidia-open")
    assert not any("config-manager" in line for line in lines)


def test_container_tools_stop_the_host_before_any_change_without_docker_replace_podman():
    result, lines = _plan("ol8-uek", {"plan_el_container_tools": True})
    assert lines[:1] and "buildah, containers-common, podman, runc installed" in lines[0]
    assert "docker_replace_podman: true" in lines[0]
    assert len([line for line in lines if not line.startswith("FAILED")]) == 1  # nothing else


def test_docker_replace_podman_removes_them_right_before_docker():
    result, lines = _plan("ol8-uek", {"plan_el_container_tools": True,
                                      "docker_replace_podman": True})
    assert result.returncode == 0, result.stderr[-2000:]
    remove = lines.index("dnf remove -y buildah containers-common podman runc")
    docker = lines.index("dnf install -y docker-ce docker-ce-cli containerd.io")
    assert remove + 1 == docker
    assert lines.index("dnf install -y nvidia-open") < remove


def test_upgrade_releases_the_old_lock_and_locks_the_new_version():
    result, lines = _plan("ol8-uek", harness="upgrade_harness.py")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    delete = lines.index("dnf versionlock delete nvidia-driver-3:550.163.01-1.el8 "
                         "kmod-nvidia-latest-dkms-3:550.163.01-1.el8")
    switch = _index(lines, "dnf -y module switch-to nvidia-driver:570-open")
    add = lines.index(f"dnf versionlock add kmod-nvidia-latest-dkms-3:{DRIVER}-1.el8 "
                      f"nvidia-driver-3:{DRIVER}-1.el8")
    assert delete < switch < add
