"""Docker's daemon.json and MIG never leave a host worse (issue 14 items 4 and 6), over SSH
against the sandbox with the Docker traits (sandbox/traits/docker.py):

gpu-01  daemon-json-clash: a hand-written "hosts" key that docker.service passes as -H
gpu-02  live-restore: one container runs; H100 x2 (MIG, no reset needed)
gpu-03  no trait, A100 x2 (Ampere: a MIG mode change needs a reset): the daemon.json tries

The spec is the one of sandbox/tests/test_traits_docker.py. Bare hosts: the first converge
on those traits is what the module tests.
"""
from __future__ import annotations

import json

import pytest

SPEC = {"hosts": 3, "ol": 0, "docker_hosts": 3, "overrides": {
    "gpu-01": {"traits": ["daemon-json-clash"]},
    "gpu-02": {"traits": ["live-restore"]},
    "gpu-03": {"traits": [], "gpu_model": "A100-SXM4-40GB", "gpu_count": 2},
}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="the first converge on each Docker trait is the point")]
DEPLOY = "deploys/gpu_host.py"
SLEEPER = "docker inspect -f '{{.State.Running}} {{.State.Pid}}' gpuhost-sandbox-sleeper"


@pytest.fixture(scope="module")
def ssh(fleet, sandbox_tools):
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw)


@pytest.fixture(scope="module")
def pyinfra(fleet, sandbox_tools):
    return sandbox_tools.run_pyinfra


@pytest.fixture(scope="module")
def first_run(fleet, pyinfra, ssh):
    before = {"gpu-01": ssh("gpu-01", "sha256sum /etc/docker/daemon.json").stdout}
    proc = pyinfra("-y", DEPLOY, check=False, timeout=1500)
    return before, proc


def _daemon_json(ssh, name: str) -> dict:
    return json.loads(ssh(name, "cat /etc/docker/daemon.json").stdout)


def test_a_clashing_hand_written_key_is_refused_before_anything_changes(first_run, ssh):
    before, proc = first_run
    out = proc.stdout + proc.stderr
    assert 'sets "hosts" (flag -H), which docker.service also passes to dockerd' in out, out[-3000:]
    assert ssh("gpu-01", "sha256sum /etc/docker/daemon.json").stdout == before["gpu-01"]
    # nothing was installed: the refusal came first
    assert ssh("gpu-01", "dpkg-query -W -f '${Status}' nvidia-open 2>/dev/null; true").stdout \
        .find("install ok installed") < 0


def test_live_restore_host_converges_and_a_restart_keeps_its_container(first_run, ssh, pyinfra):
    config = _daemon_json(ssh, "gpu-02")
    assert config["live-restore"] is True and "nvidia" in config["runtimes"]
    assert "nvidia" in ssh("gpu-02", "docker info -f '{{json .Runtimes}}'").stdout
    # the driver's reboot stopped the trait's container: start it, then make gpuhost restart
    ssh("gpu-02", "docker start gpuhost-sandbox-sleeper >/dev/null")
    running = ssh("gpu-02", SLEEPER).stdout.split()
    assert running[0] == "true"
    proc = pyinfra("-y", DEPLOY, "--limit", "gpu-02",
                   "--data", 'docker_daemon_settings={"max-concurrent-uploads": 4}', timeout=900)
    assert _daemon_json(ssh, "gpu-02")["max-concurrent-uploads"] == 4
    assert ssh("gpu-02", SLEEPER).stdout.split() == running  # same process
    assert "restarting Docker stops" not in proc.stdout + proc.stderr


def test_a_restart_that_stops_containers_is_announced_or_refused(first_run, ssh, pyinfra):
    ssh("gpu-03", "docker image inspect sleeper:1 >/dev/null 2>&1 || tar -C / -ch usr/bin/sleep "
                  "usr/lib/x86_64-linux-gnu/libc.so.6 lib64/ld-linux-x86-64.so.2 2>/dev/null | "
                  "docker import - sleeper:1 >/dev/null; docker rm -f s1 >/dev/null 2>&1; "
                  "docker run -d --name s1 --network=none sleeper:1 /usr/bin/sleep infinity >/dev/null")
    before = ssh("gpu-03", "sha256sum /etc/docker/daemon.json").stdout
    refused = pyinfra("-y", DEPLOY, "--limit", "gpu-03",
                      "--data", "docker_restart_running_containers=refuse",
                      "--data", 'docker_daemon_settings={"max-concurrent-uploads": 4}',
                      check=False, timeout=900)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "restarting Docker stops the 1 running container(s) (live-restore is off); gpuhost " \
           "changed nothing" in out, out[-3000:]
    assert ssh("gpu-03", "sha256sum /etc/docker/daemon.json").stdout == before
    warned = pyinfra("-y", DEPLOY, "--limit", "gpu-03",
                     "--data", 'docker_daemon_settings={"max-concurrent-uploads": 4}', timeout=900)
    assert "gpu-03: restarting Docker stops the 1 running container(s)" in \
        warned.stdout + warned.stderr
    ssh("gpu-03", "docker rm -f s1 >/dev/null")
    pyinfra("-y", DEPLOY, "--limit", "gpu-03", timeout=900)  # back to no setting


def test_a_converged_host_gets_no_change_and_no_docker_restart(first_run, pyinfra, ssh):
    started = "systemctl show -p ActiveEnterTimestampMonotonic --value docker.service"
    before = ssh("gpu-03", started).stdout
    second = pyinfra("-y", DEPLOY, "--limit", "gpu-03", "--data", "full_check=true", timeout=900)
    row = second.summary_row("Docker daemon.json | Merge the nvidia runtime")
    assert row == ["1", "-", "-", "1"], row
    assert ssh("gpu-03", started).stdout == before  # Docker was not restarted


def test_a_value_of_the_wrong_type_is_refused_before_any_host_is_touched(first_run, pyinfra):
    proc = pyinfra("-y", DEPLOY, "--limit", "gpu-03", "--data",
                   'docker_daemon_settings={"log-driver": 5}', check=False)
    assert proc.returncode != 0
    assert "'log-driver' must be a string" in proc.stdout + proc.stderr
    assert "[gpu-03] Success" not in proc.output


def test_a_config_docker_rejects_is_put_back_and_docker_runs(first_run, pyinfra, ssh):
    before = ssh("gpu-03", "sha256sum /etc/docker/daemon.json").stdout
    proc = pyinfra("-y", DEPLOY, "--limit", "gpu-03",
                   "--data", "docker_daemon_allow_unknown_keys=true",
                   "--data", 'docker_daemon_settings={"no-such-option": true}', check=False,
                   timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Docker did not start with the new /etc/docker/daemon.json" in out, out[-3000:]
    assert "no-such-option" in out  # dockerd's own words
    assert ssh("gpu-03", "systemctl is-active docker.service").stdout.strip() == "active"
    assert ssh("gpu-03", "sha256sum /etc/docker/daemon.json").stdout == before
    # and a run without it converges
    pyinfra("-y", DEPLOY, "--limit", "gpu-03", timeout=900)


def test_a_setting_removed_from_the_inventory_leaves_the_file(first_run, pyinfra, ssh):
    ssh("gpu-03", "sed -i '0,/^{/s//{\\n    \"max-concurrent-downloads\": 4,/' "
                  "/etc/docker/daemon.json")  # a key written by hand
    hand = _daemon_json(ssh, "gpu-03")
    pyinfra("-y", DEPLOY, "--limit", "gpu-03",
            "--data", 'docker_daemon_settings={"log-opts": {"max-size": "10m"}, "debug": true}',
            timeout=900)
    config = _daemon_json(ssh, "gpu-03")
    assert config["log-opts"] == {"max-size": "10m"} and config["debug"] is True
    pyinfra("-y", DEPLOY, "--limit", "gpu-03", timeout=900)
    config = _daemon_json(ssh, "gpu-03")
    assert "log-opts" not in config and "debug" not in config, config
    assert config == hand and config["max-concurrent-downloads"] == 4, config


def test_docker_is_restarted_when_the_running_daemon_lacks_the_runtime(first_run, pyinfra, ssh):
    # a run that wrote the file and died before the restart: the daemon runs without nvidia
    ssh("gpu-03", "cp -p /etc/docker/daemon.json /root/daemon.json.keep && "
                  "echo '{}' > /etc/docker/daemon.json && systemctl restart docker && "
                  "cp -p /root/daemon.json.keep /etc/docker/daemon.json")
    assert "nvidia" not in ssh("gpu-03", "docker info -f '{{json .Runtimes}}'").stdout
    pyinfra("-y", DEPLOY, "--limit", "gpu-03", timeout=900)
    assert "nvidia" in ssh("gpu-03", "docker info -f '{{json .Runtimes}}'").stdout


def test_a_mig_layout_given_as_profile_ids_converges(first_run, pyinfra, ssh):
    data = ["--data", "mig_mode=enabled", "--data", "mig_layout=[19, 19, 9]"]
    pyinfra("-y", DEPLOY, "--limit", "gpu-02", *data, timeout=900)
    layout = ssh("gpu-02", "nvidia-smi mig -lgi").stdout
    assert layout.count("1g.10gb") == 4 and layout.count("3g.40gb") == 2, layout
    uuids = ssh("gpu-02", "nvidia-smi -L").stdout
    second = pyinfra("-y", DEPLOY, "--limit", "gpu-02", *data, "--data", "full_check=true", timeout=900)
    assert second.summary_row("MIG | MIG layout 19, 19, 9") == ["1", "-", "-", "1"]
    assert ssh("gpu-02", "nvidia-smi -L").stdout == uuids  # the same MIG devices


def test_the_mig_layout_survives_a_reboot(first_run, pyinfra, ssh, sandbox_tools, fleet):
    """GPU instances do not survive a reboot (NVIDIA MIG user guide); gpuhost's boot-time
    unit re-creates the inventory's layout before the GPU clients start."""
    data = ["--data", "mig_mode=enabled", "--data", "mig_layout=[19, 19, 9]"]
    pyinfra("-y", DEPLOY, "--limit", "gpu-02", *data, timeout=900)
    layout = ssh("gpu-02", "nvidia-smi mig -lgi").stdout
    assert layout.count("1g.10gb") == 4, layout
    boots = sandbox_tools.boots("gpu-02")
    ssh("gpu-02", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-02", boots)
    after = ssh("gpu-02", "nvidia-smi mig -lgi").stdout
    assert after.count("1g.10gb") == 4 and after.count("3g.40gb") == 2, after
    # ordered before the GPU clients: Docker started after the layout was made
    order = ssh("gpu-02", "systemctl show -p ActiveEnterTimestampMonotonic --value "
                          "gpuhost-mig-layout.service docker.service").stdout.split()
    assert int(order[0]) <= int(order[1]), order


def test_an_ampere_mig_mode_change_takes_effect_with_persistenced_running(first_run, pyinfra,
                                                                          ssh, sandbox_tools):
    """nvidia-persistenced holds the GPU, so on Ampere `nvidia-smi -mig 1` stays pending
    ("In use by another client") until a reset or reboot; gpuhost stops the holders around
    the change and starts them again."""
    query = "nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader"
    # nvidia-persistenced runs, as NVIDIA recommends (gpuhost installs and enables it with
    # nvidia_persistenced: true; the line below makes sure whatever the first run did)
    ssh("gpu-03", "DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-persistenced "
                  ">/dev/null && systemctl enable --now nvidia-persistenced 2>/dev/null")
    assert ssh("gpu-03", "systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    assert ssh("gpu-03", query).stdout.split("\n")[0] == "Disabled, Disabled"
    boots = sandbox_tools.boots("gpu-03")
    try:
        pyinfra("-y", DEPLOY, "--limit", "gpu-03", "--data", "mig_mode=enabled",
                "--data", "reboot_policy=never", timeout=900)
        assert ssh("gpu-03", query).stdout.split() == ["Enabled,", "Enabled"] * 2
        assert sandbox_tools.boots("gpu-03") == boots  # no reboot was needed
        assert ssh("gpu-03", "systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    finally:
        pyinfra("-y", DEPLOY, "--limit", "gpu-03", "--data", "mig_mode=disabled",
                "--data", "reboot_policy=never", timeout=900, check=False)


# --- named MIG configurations (issue 16 item 4): mig-parted's file format, per GPU model ---
MIG_CONFIG = """\
version: v1
mig-configs:
  balanced:
    - device-filter: ["0x233010DE"]   # H100 80GB HBM3 (gpu-02)
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    - device-filter: "0x20B010DE"     # A100-SXM4-40GB (gpu-03)
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
  too-big:
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"3g.20gb": 3}
"""
BALANCED = {"gpu-02": ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"],
            "gpu-03": ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]}


def _profiles(ssh, name: str) -> list[list[str]]:
    """Per GPU, the sorted profiles of its GPU instances (`nvidia-smi mig -lgi` rows)."""
    from gpuhost.facts import parsers

    rows = parsers.parse_mig_gpu_instances(ssh(name, "nvidia-smi mig -lgi").stdout)
    return [sorted(r["profile"] for r in rows if r["gpu"] == i) for i in (0, 1)]


def test_a_named_mig_config_converges_survives_a_reboot_and_a_misfit_is_refused_unseen(
        first_run, pyinfra, ssh, sandbox_tools, tmp_path, fleet):
    import subprocess
    import sys

    config = tmp_path / "mig.yaml"
    config.write_text(MIG_CONFIG)
    limit = ["--limit", "gpu-02", "--limit", "gpu-03"]
    data = ["--data", f"mig_config_file={config}", "--data", "mig_config=balanced",
            "--data", "reboot_policy=never"]
    pyinfra("-y", DEPLOY, *limit, *data, timeout=900)
    for name, wanted in BALANCED.items():
        assert _profiles(ssh, name) == [wanted, wanted], name
    # second run: nothing to do (the plan says so too, from one read-only command per host)
    second = pyinfra("-y", DEPLOY, *limit, *data, "--data", "full_check=true", timeout=900)
    assert second.summary_row("MIG | MIG layout of mig_config balanced") == ["2", "-", "-", "2"]
    plan = subprocess.run([sys.executable, "-m", "gpuhost.cli", "mig", "plan",
                           "inventories/sandbox.py", *limit, *data], cwd=sandbox_tools.root,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stdout + plan.stderr[-2000:]
    assert plan.stdout.count("as wanted") == 2 + 4, plan.stdout
    # reboot: instances are gone with the driver (and the H100's MIG mode too); the boot
    # unit makes them again before Docker starts
    boots = {name: sandbox_tools.boots(name) for name in BALANCED}
    for name in BALANCED:
        ssh(name, "systemctl reboot", check=False)
    for name, count in boots.items():
        sandbox_tools.wait_for_reboot(fleet, name, count)
    for name, wanted in BALANCED.items():
        assert _profiles(ssh, name) == [wanted, wanted], name
        order = ssh(name, "systemctl show -p ActiveEnterTimestampMonotonic --value "
                          "gpuhost-mig-layout.service docker.service").stdout.split()
        assert 0 < int(order[0]) <= int(order[1]), (name, order)
    # a layout that does not fit the A100 is refused by the inventory check: the host
    # address is unroutable (TEST-NET-1), so the refusal cannot come from a contacted host
    preflight = tmp_path / "inventory.py"
    preflight.write_text("from inventories.sandbox import *  # noqa: F401,F403\n"
                         "from inventories.preflight import check\ncheck(__file__)\n")
    unseen = ["--data", f"mig_config_file={config}", "--data", "mig_config=too-big",
              "--data", "ssh_hostname=192.0.2.1", "--data", "ssh_connect_retries=0"]
    refused = pyinfra("-y", DEPLOY, "--limit", "gpu-03", *unseen, check=False,
                      inventory=str(preflight), timeout=300)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "no host was contacted" in out and "3x 3g.20gb does not fit A100-SXM4-40GB" in out, out
    assert "allows at most 2" in out and "9 compute slices" in out, out
    plan = subprocess.run([sys.executable, "-m", "gpuhost.cli", "mig", "plan", str(preflight),
                           "--limit", "gpu-03", *unseen], cwd=sandbox_tools.root,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 1 and "no host was contacted" in plan.stderr, plan.stderr
    assert _profiles(ssh, "gpu-03") == [BALANCED["gpu-03"]] * 2
