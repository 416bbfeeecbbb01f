"""Container toolkit 1.20 and 1.17 and the NVIDIA CDI spec (issues 16 and 37) over SSH against the
sandbox, from bare hosts (real apt, real dockerd 20.10 from Debian 12, the fake toolkit's units):

gpu-01  H100 x2, toolkit pinned at 1.18.2, container_runtime_mode legacy (the default); at the
        end moved to 1.20.0 by a deploy whose inventory sets no toolkit (the default)
gpu-02  A100 x1, toolkit pinned at 1.17.8 (a host kept on 1.17 still converges)
gpu-03  H100 x1, bare (no Docker), Docker CE 26 from the sandbox's stand-in of Docker's
        Debian repository, container_runtime_mode cdi

`docker run --gpus all` works on all three; 1.18's nvidia-cdi-refresh wrote a fresh spec on
gpu-01, 1.20's (in /lib/systemd/system) one with schema 0.7.0 on gpu-03, and left failed there
(started while the driver was not loaded) it is reset and rerun by the deploy; a second run changes nothing; a MIG change makes the audit flag the stale spec and
the next deploy regenerates it; cdi mode is refused on a Docker without CDI (20.10) before
daemon.json is touched, and with toolkit 1.20 (CDI spec schema 0.7.0) and gpuhost's containerd
drop-in on, Debian 12's docker.io 20.10 and containerd 1.6.20 are refused before any change in
one line; on gpu-03 cdi mode converges and Docker's own CDI
(`docker run --device nvidia.com/gpu=all`, dockerd 26 applies the spec itself) lists the GPU,
also right after a reboot (gpuhost-cdi-spec.service writes the spec before Docker starts), and
a deploy after that reboot is one remote command and 0 changes;
a driver change by gpuhost's upgrade regenerates a spec on gpu-02 (1.17.8, no refresh unit),
and one left from the old driver is flagged by the audit and fixed by the next deploy.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

SPEC = {"hosts": 3, "ol": 0, "docker_hosts": 2, "overrides": {
    "gpu-01": {"traits": [], "gpu_model": "H100-80GB-HBM3", "gpu_count": 2},
    "gpu-02": {"traits": [], "gpu_model": "A100-SXM4-40GB", "gpu_count": 1},
    "gpu-03": {"traits": [], "gpu_model": "H100-80GB-HBM3", "gpu_count": 1},
}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="toolkit 1.18/1.17 and Docker CE 26 in cdi mode, converged "
                                    "from bare with this module's own inventory")]
DEPLOY = "deploys/gpu_host.py"
REFRESH = "NVIDIA CDI spec | Refresh the NVIDIA CDI spec if it no longer matches the host"
RECORD = "Record the host as converged (/var/lib/gpuhost/converged)"
IMAGE = "gpuhost/verify:sandbox"
# host data outranks the sandbox's group data
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

assert _shared.docker_ce_debian, "no Docker CE repository in the fake NVIDIA artifacts"
_OVERRIDES = {{"gpu-01": {{"container_toolkit_version": "1.18.2"}},
              "gpu-02": {{"container_toolkit_version": "1.17.8"}},
              "gpu-03": {{**_shared.docker_ce_debian, "container_runtime_mode": "cdi"}}}}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""


@pytest.fixture(scope="module")
def ssh(fleet, sandbox_tools):
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw).stdout


@pytest.fixture(scope="module")
def inventory(fleet, sandbox_tools, tmp_path_factory):
    path = tmp_path_factory.mktemp("cdi") / "cdi_inventory.py"
    path.write_text(INVENTORY.format(root=str(sandbox_tools.root)))
    return path


@pytest.fixture(scope="module")
def pyinfra(inventory, sandbox_tools):
    return lambda *args, **kw: sandbox_tools.run_pyinfra(*args, inventory=str(inventory), **kw)


def state(ssh, name: str) -> dict:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    return assemble.host_state(parsers.split_sections(ssh(name, build_script(ALL_SECTIONS))))


def audit(sandbox_tools, tmp_path, name: str) -> dict:
    out = tmp_path / f"audit-{name}.json"
    proc = subprocess.run([sys.executable, "-m", "gpuhost.cli", "audit", "inventories/sandbox.py",
                           "--limit", name, "--json", str(out)], cwd=sandbox_tools.root,
                          text=True, capture_output=True, timeout=300)
    assert proc.returncode in (0, 2, 4), proc.stdout[-2000:] + proc.stderr[-2000:]
    [host] = json.loads(out.read_text())["hosts"]
    return host


@pytest.fixture(scope="module")
def converged(pyinfra):
    first = pyinfra("-y", DEPLOY, check=False, timeout=1500)
    second = pyinfra("-y", DEPLOY, "--data", "full_check=true", check=False, timeout=600)
    return first, second


def test_both_toolkits_converge_and_a_second_run_changes_nothing(converged, ssh):
    first, second = converged
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert second.totals["changed"] == 0, second.stderr[-4000:]
    version = "dpkg-query -W -f '${Version}' nvidia-container-toolkit"
    assert ssh("gpu-01", version) == "1.18.2-1"
    assert ssh("gpu-02", version) == "1.17.8-1"
    assert ssh("gpu-03", version) == "1.20.0-1"  # the default: no inventory sets it


def test_docker_run_gpus_all_lists_the_hosts_gpus(converged, ssh):
    for name, gpus in (("gpu-01", 2), ("gpu-02", 1), ("gpu-03", 1)):
        out = ssh(name, f"docker run --rm --network=none --gpus all {IMAGE} nvidia-smi -L")
        assert [line.split(":")[0] for line in out.splitlines()] == [
            f"GPU {i}" for i in range(gpus)], out


def test_toolkits_118_and_120_keep_a_fresh_spec_and_117_writes_none(converged, ssh):
    from gpuhost.runtime import cdi

    for name, unit_dir, schema in (("gpu-01", "/etc/systemd/system", "0.5.0"),
                                   ("gpu-03", "/lib/systemd/system", "0.7.0")):
        assert ssh(name, "systemctl is-enabled nvidia-cdi-refresh.path "
                         "nvidia-cdi-refresh.service").split() == ["enabled", "enabled"]
        assert ssh(name, "systemctl show -p FragmentPath --value nvidia-cdi-refresh.service"
                   ).strip() == f"{unit_dir}/nvidia-cdi-refresh.service"
        judged = cdi.judge(state(ssh, name))
        assert judged["status"] == "fresh" and "/var/run/cdi/nvidia.yaml" in judged["specs"], \
            judged
        assert f'cdiVersion: "{schema}"' in ssh(name, "cat /var/run/cdi/nvidia.yaml")
    assert "nvidia.com/gpu=all" in ssh("gpu-01", "nvidia-ctk cdi list").split()
    assert cdi.judge(state(ssh, "gpu-02"))["status"] == "missing"
    assert ssh("gpu-02", "systemctl cat nvidia-cdi-refresh.service", check=False) == ""


def test_a_mig_change_is_flagged_by_the_audit_and_fixed_by_the_next_deploy(
        converged, ssh, pyinfra, sandbox_tools, tmp_path):
    ssh("gpu-01", "nvidia-smi -i 0 -mig 1 && nvidia-smi mig -i 0 -cgi 9,9 -C")
    host = audit(sandbox_tools, tmp_path, "gpu-01")
    [finding] = [f for f in host["health"]["findings"] if f["id"] == "cdi-spec-stale"]
    assert "lacks device(s) the host has: 0:0, 0:1" in finding["message"], finding
    fix = pyinfra("-y", DEPLOY, "--limit", "gpu-01", timeout=600)
    assert "Regenerating the stale NVIDIA CDI spec" in fix.stdout + fix.stderr
    # the fast path saw the stale spec (roles/stamp.py): the spec changes, and the stamp
    # when the spec is one it watches (/etc/cdi)
    changed = set(fix.changed())
    assert REFRESH in changed and changed <= {REFRESH, RECORD}, fix.stderr[-3000:]
    again = audit(sandbox_tools, tmp_path, "gpu-01")
    assert not [f for f in again["health"]["findings"] if f["id"].startswith("cdi")]
    assert "nvidia.com/gpu=0:1" in ssh("gpu-01", "nvidia-ctk cdi list").split()


RERUN = "NVIDIA CDI spec | nvidia-cdi-refresh.service is not left failed"


def test_a_refresh_unit_left_failed_is_flagged_and_rerun_by_the_deploy(
        converged, ssh, pyinfra, sandbox_tools, tmp_path):
    """Issue 37 (Azure/aks-gpu PR #175): started while the driver is not loaded, 1.20's refresh
    unit (gpu-03) hits StartLimitBurst=5 in 10 s and stays failed. With the driver loaded again the
    audit reports it and the deploy resets and reruns it (the fast path does not hide it)."""
    unload = ("systemctl stop nvidia-persistenced 2>/dev/null; for m in nvidia_uvm nvidia_drm "
              "nvidia_modeset nvidia; do modprobe -r $m; done; rm -f /var/run/cdi/nvidia.yaml")
    ssh("gpu-03", unload)
    # it fails, restarts each second, and gives up (start-limit-hit, or exit-code where the
    # host is too slow for 5 starts in 10 s)
    ssh("gpu-03", "systemctl restart nvidia-cdi-refresh.service; for i in $(seq 40); do "
                  "systemctl is-failed -q nvidia-cdi-refresh.service && break; sleep 1; done",
        check=False)
    shown = ssh("gpu-03", "systemctl show -p ActiveState -p Result nvidia-cdi-refresh.service")
    assert "ActiveState=failed" in shown, shown
    result = shown.split("Result=", 1)[1].split()[0]
    assert result in ("start-limit-hit", "exit-code"), shown
    ssh("gpu-03", "modprobe nvidia && modprobe nvidia_uvm && systemctl start nvidia-persistenced")
    host = audit(sandbox_tools, tmp_path, "gpu-03")
    [finding] = [f for f in host["health"]["findings"] if f["id"] == "cdi-refresh-failed"]
    assert f"result {result}" in finding["message"], finding
    fix = pyinfra("-y", DEPLOY, "--limit", "gpu-03", timeout=600)
    changed = set(fix.changed())
    assert RERUN in changed and changed <= {RERUN, REFRESH, RECORD}, (fix.stdout + fix.stderr)[-3000:]
    shown = ssh("gpu-03", "systemctl show -p ActiveState -p Result nvidia-cdi-refresh.service")
    assert "ActiveState=failed" not in shown and "Result=success" in shown, shown
    assert 'cdiVersion: "0.7.0"' in ssh("gpu-03", "cat /var/run/cdi/nvidia.yaml")
    out = ssh("gpu-03", f"docker run --rm --network=none --device nvidia.com/gpu=all {IMAGE} "
                        "nvidia-smi -L")
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0"], out
    again = audit(sandbox_tools, tmp_path, "gpu-03")
    assert not [f for f in again["health"]["findings"] if f["id"].startswith("cdi")]


def test_cdi_mode_is_refused_on_a_docker_without_cdi(converged, ssh, pyinfra):
    before = ssh("gpu-02", "sha256sum /etc/docker/daemon.json")
    proc = pyinfra("-y", DEPLOY, "--limit", "gpu-02", "--data", "container_runtime_mode=cdi",
                   check=False, timeout=600)
    assert proc.returncode != 0
    assert "container_runtime_mode is cdi but Docker 20.10.24" in proc.stdout + proc.stderr
    assert ssh("gpu-02", "sha256sum /etc/docker/daemon.json") == before


def test_debian12s_docker_and_containerd_are_refused_for_schema_0_7_before_any_change(
        converged, ssh, pyinfra):
    """gpu-02 runs Debian 12's own docker.io 20.10.24 and containerd 1.6.20 (real binaries).
    In cdi mode with toolkit 1.20 (the default, writing CDI spec schema 0.7.0) and gpuhost's
    containerd drop-in on, the host is refused before any change, in one line naming the
    versions that read the spec and the ways out: daemon.json and config.toml unchanged, no
    drop-in, no package installed or upgraded (the toolkit stays at 1.17.8)."""
    files = "/etc/docker/daemon.json /etc/containerd/config.toml"
    packages = "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' | sha256sum"
    before = ssh("gpu-02", f"sha256sum {files}; {packages}")
    assert "1.6.20~ds1" in ssh("gpu-02", "containerd --version")
    proc = pyinfra("-y", DEPLOY, "--limit", "gpu-02", "--data", "container_runtime_mode=cdi",
                   "--data", "container_toolkit_version=1.20.0",
                   "--data", "containerd_nvidia_runtime=true", check=False, timeout=600)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said[-3000:]
    lines = {line.split("gpuhost: ", 1)[-1].strip() for line in said.splitlines()
             if "cannot read the CDI spec schema" in line}
    assert lines == {
        "gpu-02: container_runtime_mode is cdi but Docker 20.10.24+dfsg1 and containerd "
        "1.6.20~ds1 cannot read the CDI spec schema 0.7.0 that toolkit 1.20.0 writes (Docker "
        "26.1.0 and containerd 1.7.16 are the first that do): upgrade to Docker 26.1.0 and "
        "containerd 1.7.16 or newer, or keep this host on container_toolkit_version 1.18.2, or "
        "use container_runtime_mode legacy; gpuhost left the runtime's configuration as it "
        "was"}, said[-3000:]
    assert "gpuhost cannot provision this host" in said
    assert ssh("gpu-02", f"sha256sum {files}; {packages}") == before
    assert ssh("gpu-02", "ls /etc/containerd/conf.d/99-nvidia.toml", check=False) == ""
    assert ssh("gpu-02", "dpkg-query -W -f '${Version}' nvidia-container-toolkit") == "1.17.8-1"


def test_cdi_mode_on_docker_ce_26_runs_cdi_devices(converged, ssh):
    """gpu-03: Docker's packages from Docker's (stand-in) repository, dockerd 26 with CDI
    enabled in daemon.json, the spec fresh, and the CDI device run lists the GPU."""
    from gpuhost.runtime import cdi

    versions = dict(line.split() for line in ssh("gpu-03", (
        "dpkg-query -W -f '${Package} ${Version}\\n' docker-ce docker-ce-cli containerd.io"
    )).splitlines())
    assert versions == {"docker-ce": "5:26.1.5-1~debian.12~bookworm", "containerd.io": "1.6.20-1",
                        "docker-ce-cli": "5:26.1.5-1~debian.12~bookworm"}, versions
    # Debian's build reports its upstream version with Debian's suffix (sandbox/README.md)
    assert ssh("gpu-03", "docker version -f '{{.Server.Version}}'").strip() == "26.1.5+dfsg1"
    assert ssh("gpu-03", "dpkg-query -W -f '${Status}' docker.io", check=False) in (
        "", "unknown ok not-installed")
    assert json.loads(ssh("gpu-03", "cat /etc/docker/daemon.json"))["features"]["cdi"] is True
    assert cdi.judge(state(ssh, "gpu-03"))["status"] == "fresh"
    out = ssh("gpu-03", f"docker run --rm --network=none --device nvidia.com/gpu=all {IMAGE} "
                        "nvidia-smi -L")
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0"], out


def test_cdi_mode_writes_the_spec_at_boot_before_docker_starts(converged, ssh, sandbox_tools,
                                                              fleet, inventory, tmp_path):
    """gpu-03 after a reboot: /var/run is empty at boot, gpuhost-cdi-spec.service wrote a
    fresh spec before docker.service started, and the CDI device run works right away."""
    from gpuhost.runtime import cdi

    assert ssh("gpu-03", "systemctl is-enabled gpuhost-cdi-spec.service").strip() == "enabled"
    boots = sandbox_tools.boots("gpu-03")
    ssh("gpu-03", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-03", boots)
    # the unit had finished (spec written) when Docker began to start
    written, docker_start = ssh("gpu-03", (
        "systemctl show -p ActiveEnterTimestampMonotonic --value gpuhost-cdi-spec.service; "
        "systemctl show -p InactiveExitTimestampMonotonic --value docker.service")).split()
    assert 0 < int(written) <= int(docker_start), (written, docker_start)
    judged = cdi.judge(state(ssh, "gpu-03"))
    assert judged["status"] == "fresh" and "/var/run/cdi/nvidia.yaml" in judged["specs"], judged
    out = ssh("gpu-03", f"docker run --rm --network=none --device nvidia.com/gpu=all {IMAGE} "
                        "nvidia-smi -L")
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0"], out
    # issue 37: the boot ran gpuhost-cdi-spec.service (active now, inactive after the deploy),
    # which is no change: the next deploy is the one read of the fast path and changes nothing
    out_file = tmp_path / "counts.json"
    run = subprocess.run([sys.executable, "tests/integration/count_commands.py", str(out_file),
                          "--", "-y", str(inventory), DEPLOY, "--limit", "gpu-03"],
                         cwd=sandbox_tools.root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "gpuhost: as wanted, unchanged since gpuhost's run" in run.stdout + run.stderr, \
        (run.stdout + run.stderr)[-3000:]
    assert json.loads(out_file.read_text())["hosts"] == {"gpu-03": {"commands": 1, "uploads": 0}}


def test_a_driver_upgrade_regenerates_the_spec_and_a_stale_one_is_flagged_and_fixed(
        converged, ssh, pyinfra, sandbox_tools, tmp_path, monkeypatch):
    """gpu-02 (toolkit 1.17.8: no refresh unit) with a spec its user generated in /etc/cdi:
    gpuhost's driver change (the default -> 550, by reloading the modules) regenerates it before
    the GPU clients start. A spec left from the old driver (as after a driver changed by
    other means) is flagged by the audit and fixed by the next deploy."""
    from gpuhost.runtime import cdi
    from tests.support import default_driver

    converged_driver = default_driver()
    ssh("gpu-02", "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml "
                  "&& cp /etc/cdi/nvidia.yaml /root/spec-before.yaml")
    assert f"libnvidia-ml.so.{converged_driver}" in ssh("gpu-02", "cat /etc/cdi/nvidia.yaml")
    # the sandbox inventory's driver and local repos: 550's (inventories/sandbox.py)
    monkeypatch.setenv("GPUHOST_SANDBOX_DRIVER", "550.163.01")
    moved = pyinfra("-y", "deploys/upgrade_driver.py", "--limit", "gpu-02",
                    "--data", "upgrade_allow_downgrade=true", "--data", "reboot_policy=never",
                    timeout=900)
    log = moved.stdout + moved.stderr
    assert "Regenerating the stale NVIDIA CDI spec (the driver is now 550.163.01)" in log, log[-4000:]
    judged = cdi.judge(state(ssh, "gpu-02"))
    assert judged["status"] == "fresh" and judged["specs"] == ["/etc/cdi/nvidia.yaml"], judged
    assert "libnvidia-ml.so.550.163.01" in ssh("gpu-02", "cat /etc/cdi/nvidia.yaml")

    ssh("gpu-02", "cp /root/spec-before.yaml /etc/cdi/nvidia.yaml")
    host = audit(sandbox_tools, tmp_path, "gpu-02")
    [finding] = [f for f in host["health"]["findings"] if f["id"] == "cdi-spec-stale"]
    assert f"libraries are driver {converged_driver}, the loaded driver is 550.163.01" in finding[
        "message"], finding
    fix = pyinfra("-y", DEPLOY, "--limit", "gpu-02", timeout=600)
    changed = set(fix.changed())
    assert REFRESH in changed and changed <= {REFRESH, RECORD}, (fix.stdout + fix.stderr)[-4000:]
    assert cdi.judge(state(ssh, "gpu-02"))["status"] == "fresh"
    out = ssh("gpu-02", f"docker run --rm --network=none --gpus all {IMAGE} nvidia-smi -L")
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0"], out


def test_a_host_on_toolkit_118_moves_to_the_default_and_the_audit_sees_the_drift_go(
        converged, ssh, sandbox_tools, tmp_path):
    """Issue 37, done when: gpu-01 (1.18.2) with the sandbox's own inventory, which sets no
    toolkit version: the audit shows the toolkit drift against the default 1.20.0, one deploy
    moves the host there (1.20's units replace 1.18's, still enabled, spec fresh) and the audit
    shows no drift after."""
    from gpuhost.runtime import cdi

    before = audit(sandbox_tools, tmp_path, "gpu-01")
    assert [(i["item"], i["have"], i["want"]) for i in before["drift"]] == [
        ("toolkit", "1.18.2", "1.20.0")], before["drift"]
    moved = sandbox_tools.run_pyinfra("-y", DEPLOY, "--limit", "gpu-01",
                                      inventory="inventories/sandbox.py", timeout=900)
    assert any(name.endswith("Install the NVIDIA Container Toolkit 1.20.0")
               for name in moved.changed()), moved.changed()
    assert ssh("gpu-01", "dpkg-query -W -f '${Version}' nvidia-container-toolkit") == "1.20.0-1"
    assert ssh("gpu-01", "systemctl is-enabled nvidia-cdi-refresh.path "
                         "nvidia-cdi-refresh.service").split() == ["enabled", "enabled"]
    assert ssh("gpu-01", "ls /etc/systemd/system/nvidia-cdi-refresh.service",
               check=False) == ""
    assert cdi.judge(state(ssh, "gpu-01"))["status"] == "fresh"
    after = audit(sandbox_tools, tmp_path, "gpu-01")
    assert after["status"] == "ok" and after["drift"] == [], after["drift"]
