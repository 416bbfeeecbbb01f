"""GPUDirect RDMA readiness on a host with an RDMA NIC, over real SSH (issue 25 item 5,
docs/rdma.md).

The NIC is a trait of the host's creation (sandbox trait ``rdma-nic``: a ConnectX-7 function
beside GPU 0, a NIC0 column in ``nvidia-smi topo -m``), so no converged snapshot has it:
one bare host, converged with ``nvidia_gpudirect_rdma: auto``. Then nvidia_peermem is
loaded and named in /etc/modules-load.d, a second run changes nothing, the host's facts
show the GPU/NIC topology (GPU 1 on the other NUMA node: a warning), and after a reboot
the module is back (gpusim-boot loads what modules-load.d names, as systemd-modules-load
does). ACS is not simulated (the sandbox's sysfs has no bridges): tests/unit/test_rdma.py.

Beside it gpu-02 has the same NIC on the kernel's inbox RDMA stack (trait ``rdma-inbox``:
ib_core without the peer-memory API, so nvidia_peermem fails with -EINVAL; issue 36,
T4-03): ``auto`` converges there without loading peermem or writing the boot file, the
audit says why and names DMA-BUF, and the host reboots clean.
"""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=2, ol=0, docker_hosts=2,
                                overrides={"gpu-01": {"traits": ["rdma-nic"], "gpu_count": 2},
                                           "gpu-02": {"traits": ["rdma-nic", "rdma-inbox"],
                                                      "gpu_count": 2}}, state="bare",
                                why="the RDMA NIC is a trait of host creation: no snapshot has it")]
AUTO = ("--data", "nvidia_gpudirect_rdma=auto")
CONF = "/etc/modules-load.d/nvidia-peermem.conf"


def host_state(ssh, name: str = "gpu-01") -> dict:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    return assemble.host_state(parsers.split_sections(ssh(name, build_script(ALL_SECTIONS)).stdout))


@pytest.fixture(scope="module")
def runs(fleet, pyinfra):
    first = pyinfra("-y", "deploys/gpu_host.py", *AUTO, check=False, timeout=1800)
    second = pyinfra("-y", "deploys/gpu_host.py", *AUTO, "--data", "full_check=true", check=False, timeout=900)
    return {"first": first, "second": second}


def test_peermem_is_loaded_and_named_in_modules_load_d(runs, ssh):
    assert runs["first"].returncode == 0, runs["first"].output[-5000:]
    assert "nvidia_peermem" in ssh("gpu-01", "lsmod").stdout
    assert "nvidia_peermem" in ssh("gpu-01", f"cat {CONF}").stdout.split()


def test_a_second_run_changes_nothing(runs):
    assert runs["second"].returncode == 0, runs["second"].output[-3000:]
    assert runs["second"].changed() == {}


def test_the_facts_show_the_topology_and_a_gpu_across_the_cpu(runs, ssh):
    from gpuhost import health, rdma
    from gpuhost.health import xid

    state = host_state(ssh)
    facts = state["rdma"]
    assert list(facts["nics"]) == ["0000:a8:00.0"] and facts["peermem_loaded"] is True
    assert facts["topo"]["columns"] == ["GPU0", "GPU1", "NIC0"], facts["topo_error"]
    assert rdma.drift(state, "auto") == []
    far = [(f["severity"], f["gpu"]) for f in health.findings(state)
           if f["id"] == "rdma-nic-across-cpu"]
    assert far == [("warning", xid.slot(state["gpus"][1]["pci_bus_id"]))]


def test_after_a_reboot_the_module_is_back(runs, fleet, ssh, sandbox_tools):
    boots = sandbox_tools.boots("gpu-01")
    ssh("gpu-01", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-01", boots)
    assert "nvidia_peermem" in ssh("gpu-01", "lsmod").stdout


def test_an_inbox_rdma_stack_converges_without_peermem_and_the_audit_names_dma_buf(runs, ssh):
    assert runs["first"].returncode == 0, runs["first"].output[-5000:]
    assert "nvidia_peermem" not in ssh("gpu-02", "lsmod").stdout
    assert ssh("gpu-02", f"test -e {CONF}", check=False).returncode == 1
    from gpuhost import health

    state = host_state(ssh, "gpu-02")
    assert state["rdma"]["peer_api"] == "absent"
    found = [f for f in health.findings(state) if f["id"].startswith("rdma-peermem")]
    assert [f["id"] for f in found] == ["rdma-peermem-unusable"], found
    assert "DMA-BUF" in found[0]["message"] and "ib_register_peer_memory_client" in \
        found[0]["message"]


def test_the_inbox_host_reboots_clean(runs, fleet, ssh, sandbox_tools):
    boots = sandbox_tools.boots("gpu-02")
    ssh("gpu-02", "systemctl reboot", check=False)
    sandbox_tools.wait_for_reboot(fleet, "gpu-02", boots)
    assert ssh("gpu-02", "systemctl --failed --no-legend --plain").stdout.strip() == ""
    assert "nvidia_peermem" not in ssh("gpu-02", "lsmod").stdout
