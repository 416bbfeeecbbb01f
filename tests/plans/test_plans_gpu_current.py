"""Plans for today's GPU classes (issue 22): what `nvidia_driver_flavor: auto` does on a fresh
host whose GPU is read from /sys/bus/pci/devices (pyinfra's @fake connector, debian12)."""

from __future__ import annotations

from tests.plans.test_plans import V100_PCIE_SYSFS, run_plan

RTX_PRO_6000_SYSFS = "0000:17:00.0 0x2bb5 0x030200 0x10de 0x204e 0xa1\n"
NO_LSPCI = [127, ""]


def _pci(sysfs: str) -> dict:
    return {"plan_pci": {"lspci": NO_LSPCI, "pci_sysfs": [0, sysfs]}}


def test_a_v100_host_asked_for_r595_is_refused_with_one_line_before_anything_changes():
    # R580 is the last branch for Maxwell, Pascal and Volta (NVIDIA's supported-gpus.json
    # 'legacybranch 580.xx'); R595 has no module for a V100, open or proprietary
    for flavor in ("auto", "proprietary"):
        result = run_plan("debian12", {**_pci(V100_PCIE_SYSFS), "nvidia_driver_flavor": flavor,
                                       "nvidia_driver_version": "595.71.05"})
        lines = result.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith("echo 'gpuhost: ") and \
            lines[0].endswith("exit 1"), lines
        assert "PCI id 10de:1db4" in lines[0] and "cannot run driver 595.71.05" in lines[0]
        assert "R580 is the last driver branch" in lines[0] and \
            "pin nvidia_driver_version to a 580 driver" in lines[0], lines[0]
    # the same host on R580 is provisioned with the proprietary modules
    lines = run_plan("debian12", {**_pci(V100_PCIE_SYSFS),
                                  "nvidia_driver_version": "580.95.05"}).stdout.splitlines()
    assert any(line.endswith("install --no-install-recommends cuda-drivers nvidia-smi") for line in lines)


def test_an_rtx_pro_6000_blackwell_server_host_gets_the_open_modules_and_refuses_proprietary():
    lines = run_plan("debian12", {**_pci(RTX_PRO_6000_SYSFS),
                                  "nvidia_driver_version": "580.95.05"}).stdout.splitlines()
    assert any(line.endswith("install --no-install-recommends nvidia-open nvidia-smi") for line in lines)
    assert not any("cuda-drivers" in line for line in lines)
    lines = run_plan("debian12", {**_pci(RTX_PRO_6000_SYSFS), "nvidia_driver_flavor": "proprietary",
                                  "nvidia_driver_version": "580.95.05"}).stdout.splitlines()
    assert len(lines) == 1 and "NVIDIA RTX PRO 6000 Blackwell Server Edition, PCI id 10de:2bb5" \
        in lines[0] and "Blackwell GPUs need the open kernel modules" in lines[0], lines


def test_mig_on_a_driver_older_than_the_gpus_first_mig_driver_is_refused_not_skipped():
    # NVIDIA's MIG User Guide, "Deployment Considerations" (edition 620): RTX PRO 6000
    # Blackwell has MIG from 575.51.03; on 570 `nvidia-smi -mig 1` says "not supported"
    lines = run_plan("debian12", {**_pci(RTX_PRO_6000_SYSFS), "mig_mode": "enabled",
                                  "nvidia_driver_version": "570.172.08"}).stdout.splitlines()
    refused = [line for line in lines if "MIG needs driver" in line]
    assert len(refused) == 1 and refused[0].endswith("exit 1"), lines
    assert "GPU 0 (RTX-PRO-6000-BLACKWELL): MIG needs driver 575.51.03 or newer" in refused[0]
    assert not any("nvidia-smi -mig" in line or "-mig 1" in line for line in lines), lines
    # on 580 the same host gets its MIG mode
    lines = run_plan("debian12", {**_pci(RTX_PRO_6000_SYSFS), "mig_mode": "enabled",
                                  "nvidia_driver_version": "580.95.05"}).stdout.splitlines()
    assert not any("MIG needs driver" in line for line in lines), lines
