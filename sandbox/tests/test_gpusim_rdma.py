"""gpusim's RDMA NIC (trait rdma-nic, issue 25 item 5): a ConnectX-7 function on the PCI bus
and in sysfs, NIC columns in `nvidia-smi topo -m` that gpuhost's parser reads, NVLink 5
switch functions kept apart, nvidia_peermem loadable (sandbox/nvidia/README.md, "RDMA NIC")."""

import json

import pytest

from gpuhost import rdma
from sandbox import pci
from sandbox.tests.test_gpusim import KR, Sim

DRIVER = "570.172.08"


def machine(sim, model, count, nvswitch=False, traits=("rdma-nic",)):
    sim.write("etc/gpusim/machine.json", json.dumps({
        "hostname": "gpu-01", "os": "debian12", "kernel_release": KR, "gpu_model": model,
        "gpu_count": count, "nvswitch": nvswitch, "traits": list(traits)}))
    sim.install(DRIVER)
    sim.boot()
    return sim


@pytest.fixture
def a100_nic(tmp_path):
    return machine(Sim(tmp_path), "A100-SXM4-40GB", 2)


def test_the_nic_is_a_mellanox_infiniband_function_in_lspci_and_sysfs(a100_nic, tmp_path):
    assert "a8:00.0 0207: 15b3:1021" in a100_nic.tool("lspci", "-n").stdout
    h = {"name": "gpu-01", "os": "debian12", "kernel_release": KR, "gpu_model": "A100-SXM4-40GB",
         "gpu_count": 2, "nvswitch": False, "traits": ["rdma-nic"]}
    pci.write_tree(h, tmp_path / "pci")
    nic = tmp_path / "pci/0000:a8:00.0"
    assert (nic / "vendor").read_text() == "0x15b3\n"
    assert (nic / "class").read_text() == "0x020700\n" and not (nic / "vpd").exists()


def test_topo_m_has_a_nic_column_and_legend_that_gpuhost_reads(a100_nic):
    text = a100_nic.smi("topo", "-m")
    assert text.startswith("\t\x1b[4mGPU0\t")  # underlined, as real nvidia-smi prints it
    topo = rdma.parse_topo(text)
    assert topo["columns"] == ["GPU0", "GPU1", "NIC0"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0"}
    # GPU0 beside the NIC, GPU1 on the other NUMA node
    assert rdma.nearest_nics(topo, set()) == {"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "SYS")}


def test_without_the_trait_there_is_no_nic_and_topo_has_only_gpus(tmp_path):
    sim = machine(Sim(tmp_path), "A100-SXM4-40GB", 2, traits=())
    assert "15b3" not in sim.tool("lspci", "-n").stdout
    assert rdma.parse_topo(sim.smi("topo", "-m"))["columns"] == ["GPU0", "GPU1"]
    sim.smi("topo", rc=2)  # topo needs -m here


def test_on_a_b200_board_the_nvlink5_switch_ports_get_mlx5_names_but_no_column(tmp_path):
    sim = machine(Sim(tmp_path), "B200", 8, nvswitch=True)
    topo = rdma.parse_topo(sim.smi("topo", "-m"))
    assert topo["columns"][-1] == "NIC0" and len(topo["columns"]) == 9
    assert topo["nic_names"] == {"NIC0": "mlx5_0"}  # a8:00.0 probes before the e4/e5 switches


def test_nvidia_peermem_loads_on_the_nic_host(a100_nic):
    a100_nic.tool("modprobe", "nvidia_peermem")
    assert "nvidia_peermem" in a100_nic.tool("lsmod").stdout


def test_a_modules_load_d_file_loads_nvidia_peermem_at_the_next_boot(a100_nic):
    a100_nic.write("etc/modules-load.d/nvidia-peermem.conf", "# gpuhost\nnvidia_peermem\n")
    a100_nic.write("etc/modules-load.d/other.conf", "; not simulated, ignored\nmlx5_ib\n")
    out = a100_nic.boot()
    assert "nvidia_peermem" in a100_nic.tool("lsmod").stdout, out
    a100_nic.write("etc/modules-load.d/nvidia-peermem.conf", "")
    a100_nic.boot()
    assert "nvidia_peermem" not in a100_nic.tool("lsmod").stdout


def test_on_an_inbox_rdma_stack_nvidia_peermem_fails_with_invalid_argument(tmp_path):
    """Trait rdma-inbox: no peer-memory API in ib_core, nv_mem_client_init() -EINVAL."""
    sim = machine(Sim(tmp_path), "A100-SXM4-40GB", 2, traits=("rdma-nic", "rdma-inbox"))
    out = sim.tool("modprobe", "nvidia_peermem", rc=1)
    assert "could not insert 'nvidia_peermem': Invalid argument" in out.stdout + out.stderr
    assert "nvidia_peermem" not in sim.tool("lsmod").stdout


def test_the_inbox_trait_binds_its_kallsyms_over_proc_at_every_boot(tmp_path):
    from sandbox.traits import REGISTRY, rdma as rdma_trait

    REGISTRY["rdma-inbox"].create({"name": "gpu-01"}, tmp_path)
    text = (tmp_path / rdma_trait.KALLSYMS).read_text()
    assert text == rdma_trait.INBOX_KALLSYMS and "[ib_core]" in text
    assert "ib_register_peer_memory_client" not in text
    unit = (tmp_path / rdma_trait.KALLSYMS_UNIT).read_text()
    assert "ExecStart=/bin/mount --bind -o ro /etc/gpusim/kallsyms /proc/kallsyms" in unit
    assert (tmp_path / "etc/systemd/system/sysinit.target.wants/gpusim-kallsyms.service"
            ).is_symlink()
