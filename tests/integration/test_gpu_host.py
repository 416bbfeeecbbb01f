"""deploys/gpu_host.py over real SSH against the sandbox fleet, from bare hosts (the
converge from bare is this module's point: its fleet is bare, not a snapshot).

One module-scoped converge run provisions the whole fleet (Debian hosts with real apt, real
DKMS against real linux-headers, a real dockerd on the docker host; Oracle hosts through
rpm/dnf), with two hosts prepared the way users leave them: gpu-01 has a hand-written
daemon.json with keys of its own, gpu-02 has a daemon.json that is not valid JSON.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox.py"

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare",
                                why="the converge from bare (Debian and Oracle) is the point")]

USER_DAEMON_JSON = {
    "log-driver": "json-file",
    "data-root": "/var/lib/docker-data",
    "registry-mirrors": ["https://registry-mirror.example.invalid"],
}
BROKEN_DAEMON_JSON = '{\n  "log-driver": "json-file",\n  "runtimes": {\n}\n'


def host_state(ssh, host: str) -> dict:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    out = ssh(host, build_script(ALL_SECTIONS))
    return assemble.host_state(parsers.split_sections(out))


@pytest.fixture(scope="module")
def ssh(ssh):
    """ssh(host, command) -> its stdout (the test fails on a non-zero exit)."""
    return lambda name, command: ssh(name, command).stdout.rstrip("\n")


@pytest.fixture(scope="module")
def converged(fleet, ssh, pyinfra, sandbox_tools):
    names = [h["name"] for h in fleet["hosts"]]
    debian = [h["name"] for h in fleet["hosts"] if h["os"] == "debian12"]
    assert "gpu-01" in debian and "gpu-02" in debian, "the tests expect gpu-01 and gpu-02"
    ssh("gpu-01", "mkdir -p /etc/docker && cat > /etc/docker/daemon.json <<'EOF'\n"
        + json.dumps(USER_DAEMON_JSON, indent=2) + "\nEOF")
    ssh("gpu-02", "mkdir -p /etc/docker && cat > /etc/docker/daemon.json <<'EOF'\n"
        + BROKEN_DAEMON_JSON + "EOF")
    boots = {name: sandbox_tools.boots(name) for name in debian}
    first = pyinfra("-y", "deploys/gpu_host.py", check=False, timeout=1800)
    limits = [arg for n in names if n != "gpu-02" for arg in ("--limit", n)]
    second = pyinfra("-y", "deploys/gpu_host.py", *limits, check=False, timeout=900)
    return {"names": names, "debian": debian, "first": first, "second": second,
            "boots": boots}


def test_debian_hosts_converge_with_the_driver_loaded_and_the_runtime_configured(converged, ssh,
                                                                               fleet):
    output = converged["first"].stdout + converged["first"].stderr
    for name in converged["debian"]:
        if name == "gpu-02":
            continue
        state = host_state(ssh, name)
        driver = state["driver"]
        assert driver["state"] == "loaded", (name, driver, output[-4000:])
        assert driver["loaded_version"] == driver["installed_version"]
        assert state["docker"]["nvidia_runtime"]["defined"], name
        assert state["toolkit"]["consistent"] and state["toolkit"]["version"], name
        spec = next(h for h in fleet["hosts"] if h["name"] == name)
        assert len([g for g in state["gpus"] if g["source"] == "nvidia-smi"]) == spec["gpu_count"]


def test_the_reboot_really_happened_and_loaded_the_new_module(converged, ssh, sandbox_tools):
    for name in converged["debian"]:
        if name == "gpu-02":
            continue
        # the sandbox's supervisor counts every boot of a host (the kernel's boot_id is the
        # machine's in a namespace host, so it cannot tell a simulated reboot)
        assert sandbox_tools.boots(name) > converged["boots"][name], name
        state = host_state(ssh, name)
        assert state["driver"]["state"] == "loaded", (name, state["driver"])


def test_second_run_changes_nothing(converged):
    result = converged["second"]
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    row = result.totals
    assert row["changed"] == 0 and row["error"] == 0, (row, result.changed())
    # every converged host really ran (pyinfra 3.10 does not split --limit a,b: a typo here
    # would make an empty run that "changes nothing")
    ran = result.hosts_that_ran()
    assert ran == set(converged["names"]) - {"gpu-02"}, (ran, output[-2000:])
    # issue 27 item 7: each host is found unchanged since the first run (its stamp), so the
    # rerun is one operation per host that changes nothing
    assert row["operations"] == len(ran), (row, output[-3000:])
    assert output.count("gpuhost: as wanted, unchanged since gpuhost's run") == len(ran), output[-3000:]


def _count(tmp_path, *args: str, timeout: float = 900) -> dict:
    """Run pyinfra with ``args`` through count_commands.py: its counts per host."""
    out = tmp_path / "counts.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests/integration/count_commands.py"), str(out), "--", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())["hosts"]


def test_a_converged_rerun_sends_one_command_per_host(converged, fleet, tmp_path):
    """Issue 27 item 7, "done when": at most 5 remote commands per converged host (it is 1:
    the composite fact, whose stamp section shows the host unchanged)."""
    oracle = next(h["name"] for h in fleet["hosts"] if h["os"].startswith("ol"))
    counts = _count(tmp_path, "-y", INVENTORY, "deploys/gpu_host.py", "--limit", "gpu-01",
                    "--limit", oracle)
    assert set(counts) == {"gpu-01", oracle}, counts
    assert all(c["commands"] <= 5 and c["uploads"] == 0 for c in counts.values()), counts
    assert all(c["commands"] == 1 for c in counts.values()), counts


def test_a_hand_edit_or_a_stopped_daemon_walks_every_role_and_the_edit_stays(converged, ssh,
                                                                            pyinfra):
    """What the stamp does not vouch for is checked role by role: a key added by hand to
    daemon.json and nvidia-persistenced stopped. The run says why, starts the daemon, keeps
    the hand-written key, records a new stamp, and the next run is one read again; with
    full_check every role is walked and nothing changes."""
    ssh("gpu-01", "sed -i '1s/^{$/{\\n  \"debug\": false,/' /etc/docker/daemon.json && "
                  "systemctl stop nvidia-persistenced")
    assert json.loads(ssh("gpu-01", "cat /etc/docker/daemon.json"))["debug"] is False
    walked = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-01", timeout=900)
    output = walked.stdout + walked.stderr
    assert "gpuhost checks every role: /etc/docker/daemon.json changed" in output, output[-3000:]
    assert "unit nvidia-persistenced.service: enabled active -> enabled inactive" in output
    assert walked.totals["operations"] >= 20, walked.totals
    assert ssh("gpu-01", "systemctl is-active nvidia-persistenced") == "active"
    config = json.loads(ssh("gpu-01", "cat /etc/docker/daemon.json"))
    assert config["debug"] is False and "nvidia" in config["runtimes"], config
    again = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-01", timeout=900)
    assert again.totals["operations"] == 1 and again.totals["changed"] == 0, again.totals
    full = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-01", "--data", "full_check=true",
                   timeout=900)
    assert full.totals["operations"] >= 20 and full.totals["changed"] == 0, \
        (full.totals, full.changed())


def test_hand_written_daemon_json_keys_survive_and_docker_really_loads_the_runtime(converged, ssh):
    text = ssh("gpu-01", "cat /etc/docker/daemon.json")
    config = json.loads(text)
    for key, value in USER_DAEMON_JSON.items():
        assert config[key] == value, key
    assert config["runtimes"]["nvidia"]["path"].endswith("nvidia-container-runtime")
    backups = ssh("gpu-01", "ls /etc/docker/").split()
    assert any(re.fullmatch(r"daemon\.json\.gpuhost-\d{8}T\d{6}\.bak", b) for b in backups), backups
    # the real dockerd runs with the user's data-root and the nvidia runtime
    info = ssh("gpu-01", "docker info --format '{{.DockerRootDir}} {{json .Runtimes}}'")
    assert info.startswith("/var/lib/docker-data ") and '"nvidia"' in info
    # (CUDA images set NVIDIA_VISIBLE_DEVICES themselves; this plain image needs it given)
    out = ssh("gpu-01", "docker run --rm --network=none --runtime=nvidia "
                        "-e NVIDIA_VISIBLE_DEVICES=all gpuhost/verify:sandbox nvidia-smi -L")
    assert out.startswith("GPU 0: NVIDIA A100"), out


def test_invalid_daemon_json_fails_that_host_alone_and_is_left_untouched(converged, ssh):
    assert ssh("gpu-02", "cat /etc/docker/daemon.json") + "\n" == BROKEN_DAEMON_JSON.rstrip("\n") + "\n"
    output = converged["first"].stdout + converged["first"].stderr
    assert "/etc/docker/daemon.json is not valid JSON" in output
    assert re.search(r"line \d+ column \d+", output)
    assert converged["first"].returncode != 0  # a host failed ...
    state = host_state(ssh, "gpu-01")  # ... and the others converged regardless
    assert state["driver"]["state"] == "loaded"


def test_oracle_hosts_go_through_the_rpm_path(converged, ssh, fleet):
    output = converged["first"].stdout + converged["first"].stderr
    for host in fleet["hosts"]:
        if host["os"] not in ("ol8", "ol9"):
            continue
        name = host["name"]
        rpms = ssh(name, "rpm -qa --qf '%{NAME}\\n' | sort")
        assert f"nvidia-driver-local-repo-rhel{host['os'][-1]}" in rpms, (name, output[-3000:])
        module = ssh(name, "cat /etc/dnf/modules.d/nvidia-driver.module")
        assert "state=enabled" in module and "-open" in module
        if host["kernel_release"].endswith("el9uek.x86_64") and host["kernel_release"].startswith("6.12"):
            assert "gcc-toolset-14" in rpms
            assert ssh(name, "cat /etc/dkms/framework.conf.d/gpuhost-gcc-toolset.conf")
        # as far as the RPM path goes here: driver loaded, docker-ce, toolkit, runtime
        state = host_state(ssh, name)
        assert state["driver"]["state"] == "loaded", (name, state["driver"])
        assert "docker-ce" in rpms and "nvidia-container-toolkit" in rpms, rpms
        assert state["docker"]["nvidia_runtime"]["defined"], name
        # issue 13 items 1, 2, 4: Oracle's EPEL and CodeReady enabled, the driver locked
        # exactly, the container-tools trait's packages replaced by Docker's
        major = host["os"][-1]
        enabled = ssh(name, "dnf -q repolist --enabled")
        assert f"ol{major}_developer_EPEL" in enabled and f"ol{major}_codeready_builder" in enabled
        locks = ssh(name, "dnf -q versionlock list")
        version = state["driver"]["installed_version"]
        assert f"nvidia-open-3:{version}-" in locks, locks
        assert f"kmod-nvidia-open-dkms-3:{version}-" in locks, locks
        if "container-tools" in host.get("traits", []):
            assert "podman" not in rpms.split() and "runc" not in rpms.split(), rpms


def test_the_composite_fact_is_one_remote_command_per_host(fleet, tmp_path):
    counts = _count(tmp_path, INVENTORY, "fact", "gpuhost.facts.host.GpuHostState", "--json",
                    timeout=300)
    assert set(counts) == {h["name"] for h in fleet["hosts"]}
    assert all(c["commands"] == 1 and c["uploads"] == 0 for c in counts.values()), counts
