"""An HGX H100 host (8 GPUs, 4 NVSwitches) and an HGX B200 host (8 GPUs, 2 NVLink 5
switches) from bare, over real SSH (issue 25).

gpusim keeps every GPU's fabric state "In Progress" until Fabric Manager of the driver's
exact version runs (sandbox/nvidia/README.md, "Fabric Manager"). With the default
``nvidia_fabric: auto`` gpuhost reads the NVSwitches, installs Fabric Manager and NSCQ at
the driver's version, orders Fabric Manager before Docker, starts it once the driver is
loaded, and its verify waits for every GPU's fabric state Completed. Then: a second run
changes nothing; a reboot brings the fabric back before Docker starts (real systemd's
timestamps); Fabric Manager at another version is drift naming both versions, and the
deploy moves it back. Beside it an NVL host (``nvidia_fabric: nvl``): IMEX and NVSDM at
the driver's version, the peers in nodes_config.cfg, nvidia-imex running, IMEX channel 0
asked of the driver at every load. And the B200 board (gpu-03): `auto` sees its NVLink 5
switches (SW_MNG in their VPD), installs NVLSM and infiniband-diags (unversioned) with Fabric
Manager, whose start script runs NVLSM first; Completed on every GPU, again after a reboot,
before Docker. Last, the NVL host as a Kubernetes DRA node (kubernetes_profile: dra):
nvidia-imex masked, CDI on in containerd, a second run changes nothing, and back (to the
gpu-operator profile: the driver, the toolkit, containerd's nvidia runtime) IMEX runs again;
then with host-managed IMEX (kubernetes_profile: dra-host-managed-imex) IMEX_CMD_ENABLED=1 and
its control socket in config.cfg, nvidia-imex restarted, a rerun changing nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import paths

from tests.support import default_driver

HGX = {"gpu_model": "H100-80GB-HBM3", "gpu_count": 8, "nvswitch": True}
# NVLink 5: its two switches are InfiniBand functions with SW_MNG in their VPD, and the
# fabric needs NVLSM beside Fabric Manager (sandbox/nvidia/README.md, "NVLink 5")
HGX_B200 = {"gpu_model": "B200", "gpu_count": 8, "nvswitch": True, "docker": True}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=3, ol=0, docker_hosts=1,
                                overrides={"gpu-01": HGX, "gpu-03": HGX_B200}, state="bare",
                                why="converging HGX H100 and B200 hosts from bare is the point")]
# gpu-02 is an NVL domain member (nvidia_fabric: nvl) with two peers: itself and another
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

# gpu-02 on Docker CE 28.5 with containerd.io 2.1 (CDI needs containerd 1.7+; Debian 12's
# own is 1.6): its Kubernetes profile test turns containerd's CRI plugin on
_OVERRIDES = {{"gpu-02": {{"nvidia_fabric": "nvl", "nvidia_imex_peers": {peers!r},
                         **_shared.docker_ce_28_debian}}}}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""
ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
OTHER = "595.71.05"  # a Fabric Manager of another driver version


def fabric_states(ssh, name: str = "gpu-01") -> list[str]:
    out = ssh(name, "nvidia-smi -q -x").stdout
    from gpuhost.facts import parsers

    return [gpu["health"]["fabric_state"] for gpu in parsers.parse_smi_xml(out)["gpus"]]


def package_version(ssh, name: str, host: str = "gpu-01") -> str:
    return ssh(host, f"dpkg-query -W -f '${{Version}}' {name}").stdout.strip()


def audit_hosts(tmp_path: Path) -> tuple[int, dict[str, dict]]:
    out = tmp_path / "audit.json"
    proc = subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", "inventories/sandbox.py",
                           "--json", str(out)], cwd=ROOT, text=True, capture_output=True,
                          timeout=600, env={**os.environ, "PYINFRA_PROGRESS": "off"})
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, {h["name"]: h for h in json.loads(out.read_text())["hosts"]}


def audit(tmp_path: Path, name: str = "gpu-01") -> tuple[int, dict]:
    code, hosts = audit_hosts(tmp_path)
    return code, hosts[name]


def all_well(host: dict) -> None:
    """No fabric or NVLSM drift, no fabric or NVLink finding."""
    assert not [d for d in host["drift"] if d["item"].startswith(("fabric", "nvlsm"))], host
    assert not {"fabric-not-completed", "nvlink-down"} & {
        f["id"] for f in host["health"]["findings"]}, host["health"]


@pytest.fixture(scope="module")
def peers(fleet):
    return [next(h["address"] for h in fleet["hosts"] if h["name"] == "gpu-02"), "10.77.0.2"]


@pytest.fixture(scope="module")
def nvl_pyinfra(fleet, sandbox_tools, tmp_path_factory, peers):
    inventory = tmp_path_factory.mktemp("fabric") / "fabric_inventory.py"
    inventory.write_text(INVENTORY.format(root=str(sandbox_tools.root), peers=peers))
    return lambda *args, **kw: sandbox_tools.run_pyinfra(*args, inventory=str(inventory), **kw)


@pytest.fixture(scope="module")
def converged(fleet, ssh, nvl_pyinfra):
    first = nvl_pyinfra("-y", "deploys/gpu_host.py", check=False, timeout=1800)
    second = nvl_pyinfra("-y", "deploys/gpu_host.py", "--data", "full_check=true", check=False, timeout=900)
    return {"first": first, "second": second}


def test_the_hgx_host_converges_from_bare_with_the_fabric_completed(converged, ssh):
    first = converged["first"]
    assert first.returncode == 0, first.output[-5000:]
    version = default_driver()
    assert fabric_states(ssh) == ["Completed"] * 8
    for name in ("nvidia-fabricmanager", "libnvidia-nscq"):  # R580+ names, the driver's version
        assert package_version(ssh, name).startswith(version + "-"), name
    assert ssh("gpu-01", "systemctl is-enabled nvidia-fabricmanager; "
                         "systemctl is-active nvidia-fabricmanager").stdout.split() == [
        "enabled", "active"]
    assert "docker.service" in ssh("gpu-01", "systemctl show -p Before --value "
                                             "nvidia-fabricmanager").stdout
    # verify waited for (or found) the fabric: its operation ran on the host
    assert first.summary_row("Verify | Every GPU's NVLink fabric state is Completed")[2] == "-"


def test_the_nvl_host_runs_imex_with_its_peers_and_channel_0_at_every_driver_load(
        converged, ssh, peers):
    assert converged["first"].returncode == 0, converged["first"].output[-3000:]
    version = default_driver()
    for name in ("nvidia-imex", "libnvsdm"):
        assert package_version(ssh, name, "gpu-02").startswith(version + "-"), name
    assert ssh("gpu-02", "cat /etc/nvidia-imex/nodes_config.cfg").stdout.split() == peers
    assert ssh("gpu-02", "systemctl is-active nvidia-imex").stdout.strip() == "active"
    assert "nvidia-fabricmanager" not in ssh("gpu-02", "dpkg-query -W -f '${Package}\\n' "
                                                       "'nvidia-fabric*' 2>/dev/null || true").stdout
    assert "options nvidia NVreg_CreateImexChannel0=1" in ssh(
        "gpu-02", "cat /etc/modprobe.d/gpuhost-imex-channel.conf").stdout


NVLSM_PID = "cat /run/nvidia-fabricmanager/nvlsm.pid"


def nvlsm_in_fabric_managers_unit(ssh) -> None:
    """NVLSM runs, started by Fabric Manager's unit (its start script), not by a unit of its own."""
    pid = ssh("gpu-03", NVLSM_PID).stdout.strip()
    assert ssh("gpu-03", f"kill -0 {pid} && echo alive").stdout.strip() == "alive"
    cgroup = ssh("gpu-03", f"cat /proc/{pid}/cgroup").stdout
    assert "nvidia-fabricmanager.service" in cgroup, cgroup


def test_the_b200_host_converges_from_bare_with_nvlsm_and_the_fabric_completed(converged, ssh):
    assert converged["first"].returncode == 0, converged["first"].output[-5000:]
    version = default_driver()
    assert fabric_states(ssh, "gpu-03") == ["Completed"] * 8
    for name in ("nvidia-fabricmanager", "libnvidia-nscq"):
        assert package_version(ssh, name, "gpu-03").startswith(version + "-"), name
    # NVLSM at its own version (not the driver's); infiniband-diags is Debian's own
    assert package_version(ssh, "nvlsm", "gpu-03") == "2025.06.6-1"
    assert ssh("gpu-03", "command -v ibstat").stdout.strip()
    assert "nvlsm" not in ssh("gpu-03", "cat /etc/apt/preferences.d/gpuhost-nvidia-driver").stdout
    assert ssh("gpu-03", "systemctl is-enabled nvidia-fabricmanager; "
                         "systemctl is-active nvidia-fabricmanager").stdout.split() == [
        "enabled", "active"]
    nvlsm_in_fabric_managers_unit(ssh)
    # the audit finding it all well: the last test's closing audit (one audit run less)


def test_a_second_run_changes_nothing(converged):
    second = converged["second"]
    assert second.returncode == 0, second.output[-3000:]
    assert second.totals["changed"] == 0 and second.totals["error"] == 0, second.changed()


def test_a_completed_fabric_with_a_failed_status_is_critical_and_fails_the_wait(
        converged, ssh, pyinfra, tmp_path):
    """Issue 36 (T4-05): NVML checks the status once the state is Completed; a GPU that
    is Completed with "Insufficient Resources" (Azure/azhpc-images PR #506) is critical in
    the audit and fails verify's bounded wait."""
    ssh("gpu-01", "gpusim fault set fabric_status --gpu 2")
    try:
        assert fabric_states(ssh) == ["Completed"] * 8
        _code, host = audit(tmp_path)
        found = [(f["id"], f["severity"], f["gpu"]) for f in host["health"]["findings"]
                 if f["id"].startswith("fabric")]
        assert found == [("fabric-probe-failed", "critical", "0000:3a:00.0")], \
            host["health"]
        assert host["health"]["status"] == "critical"
        wait = pyinfra("-y", "tests/integration/fabric_wait_only.py", "--limit", "gpu-01",
                       check=False, timeout=300)
        assert wait.returncode != 0, wait.output[-3000:]
        assert "status Insufficient Resources" in wait.output, wait.output[-3000:]
    finally:
        ssh("gpu-01", "gpusim fault clear")


def test_a_reboot_brings_the_fabric_back_before_docker_starts(converged, ssh, sandbox_tools,
                                                              fleet):
    before = sandbox_tools.boots("gpu-01")
    ssh("gpu-01", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-01", before)
    fm = int(ssh("gpu-01", "systemctl show -p ActiveEnterTimestampMonotonic --value "
                           "nvidia-fabricmanager").stdout.strip())
    docker = int(ssh("gpu-01", "systemctl show -p ExecMainStartTimestampMonotonic --value "
                               "docker").stdout.strip())
    assert 0 < fm <= docker, (fm, docker)  # Fabric Manager was up (forked) before dockerd ran
    assert fabric_states(ssh) == ["Completed"] * 8


def test_a_reboot_brings_fabric_manager_and_nvlsm_back_before_docker_on_the_b200(
        converged, ssh, sandbox_tools, fleet):
    before = sandbox_tools.boots("gpu-03")
    ssh("gpu-03", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-03", before)
    fm = int(ssh("gpu-03", "systemctl show -p ActiveEnterTimestampMonotonic --value "
                           "nvidia-fabricmanager").stdout.strip())
    docker = int(ssh("gpu-03", "systemctl show -p ExecMainStartTimestampMonotonic --value "
                               "docker").stdout.strip())
    # Fabric Manager's start returns once NVLSM and the daemon run (Type=forking)
    assert 0 < fm <= docker, (fm, docker)
    nvlsm_in_fabric_managers_unit(ssh)
    assert fabric_states(ssh, "gpu-03") == ["Completed"] * 8


def test_nvlsm_gone_is_drift_and_the_deploy_restarts_fabric_manager_with_it(
        converged, ssh, pyinfra, tmp_path):
    ssh("gpu-03", f"kill $({NVLSM_PID})")
    assert fabric_states(ssh, "gpu-03") == ["In Progress"] * 8
    _code, host = audit(tmp_path, "gpu-03")
    assert [d["item"] for d in host["drift"] if d["item"].startswith("nvlsm")] == [
        "nvlsm_running"], host["drift"]
    fixed = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-03", check=False, timeout=900)
    assert fixed.returncode == 0, fixed.output[-4000:]
    restart = next(op for op in fixed.results["operations"]
                   if op["name"].endswith("NVLSM runs with Fabric Manager (NVLink 5)"))
    assert restart["success"] == ["gpu-03"], restart  # Fabric Manager restarted, NVLSM with it
    nvlsm_in_fabric_managers_unit(ssh)
    assert fabric_states(ssh, "gpu-03") == ["Completed"] * 8


def test_fabric_manager_of_another_version_is_drift_and_the_deploy_moves_it_back(
        converged, fleet, ssh, pyinfra, tmp_path):
    version = default_driver()
    out = paths.NVIDIA_CACHE
    repo = out / "local-repos" / OTHER / f"nvidia-driver-local-repo-debian12-{OTHER}_1.0-1_amd64.deb"
    h = next(h for h in fleet["hosts"] if h["name"] == "gpu-01")
    subprocess.run(["ssh", "-i", fleet["ssh_key"], "-p", str(h["port"]), "-o",
                    f"UserKnownHostsFile={fleet['known_hosts']}", "-o", "BatchMode=yes",
                    f"root@{h['address']}", "cat > /tmp/other-repo.deb"],
                   input=repo.read_bytes(), check=True, timeout=60)
    # an administrator's "apt install ./nvidia-fabricmanager_595...deb" (dependencies forced)
    ssh("gpu-01", "rm -rf /tmp/other && dpkg-deb -x /tmp/other-repo.deb /tmp/other && "
                  "dpkg -i --force-depends /tmp/other/var/nvidia-driver-local-repo-debian12-"
                  f"{OTHER}/nvidia-fabricmanager_{OTHER}-1_amd64.deb >/dev/null 2>&1; "
                  "systemctl start nvidia-fabricmanager || true")
    assert fabric_states(ssh) == ["In Progress"] * 8  # FM 595 refuses driver 580
    log = ssh("gpu-01", "journalctl -u nvidia-fabricmanager -b --no-pager -o cat").stdout
    assert f"version {OTHER} don't match with driver version {version}" in log, log[-2000:]

    # verify's bounded wait fails the host with the states and Fabric Manager's own lines
    wait = pyinfra("-y", "tests/integration/fabric_wait_only.py", "--limit", "gpu-01",
                   check=False, timeout=300)
    assert wait.returncode != 0, wait.output[-3000:]
    assert "8 fabric state/status line(s) not Completed/Success" in wait.output, \
        wait.output[-3000:]
    assert f"version {OTHER} don't match with driver version {version}" in wait.output

    code, host = audit(tmp_path)
    assert code == 4, host  # unhealthy (fabric-not-completed) wins over drift
    messages = [d["message"] for d in host["drift"] if d["item"] == "fabric_package"]
    assert any(OTHER in m and version in m and "nvidia-fabricmanager" in m for m in messages), \
        host["drift"]
    assert {f["id"] for f in host["health"]["findings"]} >= {"fabric-not-completed"}

    fixed = pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-01", check=False, timeout=900)
    assert fixed.returncode == 0, fixed.output[-4000:]
    assert package_version(ssh, "nvidia-fabricmanager").startswith(version + "-")
    assert fabric_states(ssh) == ["Completed"] * 8
    code, hosts = audit_hosts(tmp_path)
    all_well(hosts["gpu-01"])
    all_well(hosts["gpu-03"])  # the B200 board (its NVLSM restarted by the test before)


CONTAINERD_K8S = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


def test_the_nvl_host_as_a_dra_node_masks_imex_turns_cdi_on_and_back(converged, ssh,
                                                                     nvl_pyinfra):
    """kubernetes_profile: dra (docs/kubernetes.md): the DRA driver runs IMEX per
    ComputeDomain, so the host's nvidia-imex.service is disabled and masked, and CDI is on in
    containerd's CRI plugin; a second run changes nothing; back to gpu-operator (IMEX as with
    none), IMEX runs again and the node is what the GPU Operator on the host's driver and
    toolkit expects."""
    assert converged["first"].returncode == 0, converged["first"].output[-3000:]
    # the node's containerd as a Kubernetes node setup leaves it: CRI on (Docker's
    # containerd.io ships it disabled), conf.d imported
    assert " 2.1." in ssh("gpu-02", "containerd --version").stdout  # containerd.io 2.1
    ssh("gpu-02", "mkdir -p /etc/containerd && printf '%b' "
                  f"{CONTAINERD_K8S!r} > /etc/containerd/config.toml && systemctl restart containerd")
    dra = ("--limit", "gpu-02", "--data", "kubernetes_profile=dra",
           "--data", "containerd_nvidia_runtime=true")
    first = nvl_pyinfra("-y", "deploys/gpu_host.py", *dra, check=False, timeout=900)
    assert first.returncode == 0, first.output[-4000:]
    assert ssh("gpu-02", "systemctl is-enabled nvidia-imex; systemctl is-active nvidia-imex; "
                         "true").stdout.split() == ["masked", "inactive"]
    dump = ssh("gpu-02", "containerd config dump").stdout
    assert "enable_cdi = true" in dump and ".containerd.runtimes.nvidia]" in dump, dump[-2000:]
    second = nvl_pyinfra("-y", "deploys/gpu_host.py", *dra, check=False, timeout=600)
    assert second.returncode == 0, second.output[-3000:]
    assert second.totals["changed"] == 0, second.changed()

    # back from dra to gpu-operator, which wants IMEX as none does (docs/kubernetes.md): the
    # unit unmasked and running again, and what the GPU Operator with driver.enabled=false and
    # toolkit.enabled=false expects of the node: the driver loaded, the toolkit installed,
    # containerd's nvidia runtime (CDI as container_runtime_mode says: legacy here)
    back = nvl_pyinfra("-y", "deploys/gpu_host.py", "--limit", "gpu-02", "--data",
                       "containerd_nvidia_runtime=true", "--data",
                       "kubernetes_profile=gpu-operator", check=False, timeout=900)
    assert back.returncode == 0, back.output[-4000:]
    assert ssh("gpu-02", "systemctl is-enabled nvidia-imex; systemctl is-active nvidia-imex"
               ).stdout.split() == ["enabled", "active"]
    dump = ssh("gpu-02", "containerd config dump").stdout
    assert ".containerd.runtimes.nvidia]" in dump and "/usr/bin/nvidia-container-runtime" in dump
    assert "enable_cdi = true" not in ssh("gpu-02", "cat /etc/containerd/conf.d/99-nvidia.toml"
                                          ).stdout
    assert ssh("gpu-02", "nvidia-smi -L").stdout.startswith("GPU 0:")
    assert ssh("gpu-02", "nvidia-ctk --version").returncode == 0



def test_the_nvl_host_with_host_managed_imex_for_the_dra_driver(converged, ssh, nvl_pyinfra):
    """After the DRA test (profile gpu-operator, IMEX running): kubernetes_profile
    dra-host-managed-imex puts IMEX_CMD_ENABLED=1 and the control socket's path in config.cfg
    (the rest of the file kept), restarts nvidia-imex with them, keeps CDI on in containerd;
    a rerun changes nothing. (The sandbox's IMEX has no control socket: `nvidia-imex-ctl -q`
    is not checked.)"""
    assert converged["first"].returncode == 0, converged["first"].output[-3000:]
    before = ssh("gpu-02", "cat /etc/nvidia-imex/config.cfg").stdout.splitlines()
    pid = ssh("gpu-02", "systemctl show -p MainPID --value nvidia-imex").stdout.strip()
    managed = ("--limit", "gpu-02", "--data", "containerd_nvidia_runtime=true",
               "--data", "kubernetes_profile=dra-host-managed-imex")
    first = nvl_pyinfra("-y", "deploys/gpu_host.py", *managed, check=False, timeout=600)
    assert first.returncode == 0, first.output[-4000:]
    config = ssh("gpu-02", "cat /etc/nvidia-imex/config.cfg").stdout.splitlines()
    assert "IMEX_CMD_ENABLED=1" in config, config
    assert "IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock" in config, config
    assert [line for line in config if not line.startswith(("IMEX_CMD_ENABLED=",
                                                               "IMEX_CMD_UNIX_DOMAIN_PATH="))] \
        == [line for line in before if not line.startswith(("IMEX_CMD_ENABLED=",
                                                             "IMEX_CMD_UNIX_DOMAIN_PATH="))]
    assert ssh("gpu-02", "systemctl is-enabled nvidia-imex; systemctl is-active nvidia-imex"
               ).stdout.split() == ["enabled", "active"]
    assert ssh("gpu-02", "systemctl show -p MainPID --value nvidia-imex").stdout.strip() != pid
    assert "enable_cdi = true" in ssh("gpu-02", "containerd config dump").stdout
    again = nvl_pyinfra("-y", "deploys/gpu_host.py", *managed, check=False, timeout=600)
    assert again.returncode == 0, again.output[-3000:]
    assert again.totals["changed"] == 0, again.changed()
