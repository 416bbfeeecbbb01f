"""The Docker traits (sandbox/traits/docker.py) are really in effect in booted hosts:
dockerd refuses a daemon.json that clashes with the unit's flags, and live-restore keeps a
container running across a Docker restart.

Bare hosts of DOCKER_TRAITS_SPEC (the spec of tests/integration/test_docker_mig_safety.py)."""
from __future__ import annotations


import pytest

DOCKER_TRAITS_SPEC = {"hosts": 3, "ol": 0, "docker_hosts": 3, "overrides": {
    "gpu-01": {"traits": ["daemon-json-clash"]},
    "gpu-02": {"traits": ["live-restore"]},
    "gpu-03": {"traits": [], "gpu_model": "A100-SXM4-40GB", "gpu_count": 2},
}}


pytestmark = [pytest.mark.integration, pytest.mark.fleet(**DOCKER_TRAITS_SPEC, state="bare")]


@pytest.fixture(scope="module")
def docker_fleet(fleet):
    assert {h["name"]: h["traits"] for h in fleet["hosts"]}["gpu-01"] == ["daemon-json-clash"]
    return fleet


def test_dockerd_refuses_a_daemon_json_that_sets_a_flag_of_its_unit(docker_fleet, ssh):
    out = ssh("gpu-01", "cat /etc/docker/daemon.json; systemctl cat docker.service | "
                        "grep '^ExecStart='; systemctl is-active docker.service; "
                        "journalctl -u docker.service -b --no-pager | tail -n 30",
              check=False).stdout
    assert '"hosts"' in out and "-H fd://" in out, out
    assert "\nactive\n" not in out, out  # is-active says failed / activating, never active
    assert ("the following directives are specified both as a flag and in the "
            "configuration file: hosts") in out, out
    # and it stays so: a start by hand fails the same way
    proc = ssh("gpu-01", "systemctl reset-failed docker.service; systemctl start docker.service",
               check=False)
    assert proc.returncode != 0


def test_live_restore_keeps_the_container_running_across_a_docker_restart(docker_fleet, ssh):
    inspect = "docker inspect -f '{{.State.Running}} {{.State.Pid}}' gpuhost-sandbox-sleeper"
    # a reboot (e.g. a deploy's driver install) stops it, as on any host: start it again
    ssh("gpu-02", "docker start gpuhost-sandbox-sleeper >/dev/null")
    before = ssh("gpu-02", f"docker info -f '{{{{.LiveRestoreEnabled}}}}'; {inspect}").stdout.split()
    assert before[0:2] == ["true", "true"], before
    ssh("gpu-02", "systemctl restart docker.service && docker info >/dev/null")
    after = ssh("gpu-02", inspect).stdout.split()
    assert after == before[1:], (before, after)  # same process: never stopped
