"""nvidia_fabric in exact plans (issue 25): a misfit refused on the host before any change,
the NVL stack's packages and files."""
from __future__ import annotations

from tests.plans.test_plans import run_plan


def test_nvswitch_on_a_host_without_nvswitches_is_refused_before_any_change():
    result = run_plan("debian12", {"nvidia_fabric": "nvswitch"})
    lines = result.stdout.splitlines()
    assert len(lines) == 1, lines  # the one refusal, nothing installed or uploaded
    assert "shows no NVSwitch on its PCI bus (GPUs: A100-SXM4-40GB)" in lines[0]
    assert lines[0].endswith("exit 1")


def test_nvl_installs_imex_and_nvsdm_with_the_driver_and_writes_its_files():
    result = run_plan("debian12", {"nvidia_fabric": "nvl",
                                   "nvidia_imex_peers": ["10.0.0.1", "10.0.0.2"]})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    install = next(line for line in lines if "install --no-install-recommends nvidia-open" in line)
    assert install.endswith("nvidia-open nvidia-smi nvidia-imex-570 libnvsdm-570")  # 570: branched
    assert "mv -f /etc/nvidia-imex/nodes_config.cfg.gpuhost-new /etc/nvidia-imex/nodes_config.cfg" in lines
    assert any(line.endswith("/etc/modprobe.d/gpuhost-imex-channel.conf") for line in lines)
    assert not any("fabricmanager" in line for line in lines)


def test_the_default_auto_adds_nothing_on_a_host_without_nvswitches():
    result = run_plan("debian12")
    assert result.returncode == 0
    assert not any(word in result.stdout for word in ("fabricmanager", "nscq", "imex"))


def test_auto_on_an_nvlink5_board_installs_nvlsm_and_infiniband_diags_unpinned():
    # the rdma section's view of an HGX B200: two switch functions (SW_MNG in their VPD)
    switches = "switch 0000:e4:00.0\nswitch 0000:e5:00.0\nib mlx5_1 0000:e5:00.0 switch\n"
    result = run_plan("debian12", {"plan_rdma": switches})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    install = next(line for line in lines if "install --no-install-recommends nvidia-open" in line)
    assert install.endswith("libnvidia-nscq-570 nvlsm infiniband-diags"), install
    assert "nvidia-fabricmanager-570" in install
    assert not any("nvlsm" in line for line in lines if "preferences.d" in line)
