"""nvidia_gpudirect_rdma in exact plans (issue 25 item 5, docs/rdma.md): nvidia_peermem at
boot and loaded after the driver where an RDMA NIC is seen, nothing elsewhere."""
from __future__ import annotations

from tests.plans.test_plans import run_plan

NIC = "gpu 0000:07:00.0\nnic 0000:0c:00.0\nib mlx5_0 0000:0c:00.0 nic\npeermem not_loaded\n"


def test_auto_with_an_rdma_nic_loads_peermem_after_the_driver_and_at_boot():
    result = run_plan("debian12", {"nvidia_gpudirect_rdma": "auto", "plan_rdma": NIC})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if "install --no-install-recommends nvidia-open" in line)
    conf = next(i for i, line in enumerate(lines)
                if line.endswith("/etc/modules-load.d/nvidia-peermem.conf"))
    load = lines.index("modprobe nvidia_peermem")
    # the boot file only after the module loaded: a failed modprobe leaves no file that
    # fails every boot (T4-03)
    assert install < load < conf


def test_an_inbox_rdma_stack_gets_no_peermem_and_no_boot_file():
    """T4-03: ib_core without the peer-memory API (nvidia_peermem: -EINVAL); converges."""
    for mode in ("auto", "peermem"):
        result = run_plan("debian12", {"nvidia_gpudirect_rdma": mode,
                                       "plan_rdma": NIC + "peer_api absent\n"})
        assert result.returncode == 0, result.stderr[-2000:]
        assert "modprobe nvidia_peermem" not in result.stdout
        assert not any(line.endswith("> /etc/modules-load.d/nvidia-peermem.conf")
                       for line in result.stdout.splitlines())


def test_auto_without_an_rdma_nic_and_the_default_add_nothing():
    for data in ({"nvidia_gpudirect_rdma": "auto"}, {}):
        result = run_plan("debian12", data)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "peermem" not in result.stdout


def test_peermem_on_a_host_without_rdma_nic_is_refused_before_any_change():
    result = run_plan("debian12", {"nvidia_gpudirect_rdma": "peermem"})
    lines = result.stdout.splitlines()
    assert len(lines) == 1, lines
    assert "shows no RDMA NIC" in lines[0] and lines[0].endswith("exit 1")
