"""gpusim's GPU reset as `gpuhost recover` uses it (issue 26 item 3), in temporary
GPUSIM_ROOTs like test_gpusim.py (whose Sim and fixtures these tests reuse).

What NVIDIA documents and gpusim follows (sandbox/nvidia/README.md, "GPU reset"):
nvidia-smi(1) -r/--gpu-reset: "There can't be any applications using these devices";
"Starting with the NVIDIA Ampere architecture, GPUs with NVLink connections can be
individually reset". Persistence mode counts as a user of the GPU: `-r` answers "In use by
another client" (exit 255) until `nvidia-smi -i N -pm 0` (NVIDIA/NVSentinel#1690, PR #1692;
NVIDIA/gpu-operator#118). A pending row remap takes effect at the GPU's next reset (NVIDIA,
GPU Memory Error Management).
"""
from __future__ import annotations

import subprocess

import pytest

from sandbox.tests.test_gpusim import Sim, _fork_server, healths  # noqa: F401 (fork server)


@pytest.fixture
def a100(tmp_path):
    sim = Sim(tmp_path).machine("A100-SXM4-40GB", 2).install()
    sim.boot()
    return sim


@pytest.fixture
def persistenced(a100):
    """A live process named like the daemon, with its pid file (as in test_gpusim.py)."""
    proc = subprocess.Popen(["nvidia-persistenced", "60"], executable="/bin/sleep")
    a100.write("var/run/nvidia-persistenced/nvidia-persistenced.pid", f"{proc.pid}\n")
    yield proc
    proc.kill()
    proc.wait()


BUS = ("00000000:07:00.0", "00000000:0F:00.0")


def pending(sim):
    found = healths(sim)
    return [found[bus]["remapped_rows_pending"] for bus in BUS]


def persistence(sim):
    return sim.smi("--query-gpu=persistence_mode", "--format=csv,noheader").split()


def test_a_reset_clears_the_pending_remap_of_that_gpu_only(a100, persistenced):
    a100.gpusim("fault", "set", "row_remap_pending", "--gpu", "all")
    assert pending(a100) == [True, True] and persistence(a100) == ["Enabled", "Enabled"]
    out = a100.smi("-r", "-i", "1", rc=255)  # persistence mode holds the GPU
    assert out.startswith(f"The following GPUs could not be reset:\n  GPU {BUS[1]}: In use by "
                          "another client\n")
    assert pending(a100) == [True, True]
    assert a100.smi("-i", "1", "-pm", "0") == f"Disabled persistence mode for GPU {BUS[1]}.\n" \
                                              "All done.\n"
    assert persistence(a100) == ["Enabled", "Disabled"]  # the daemon keeps GPU 0
    assert a100.smi("-r", "-i", "1") == f"GPU {BUS[1]} was successfully reset.\n"
    assert pending(a100) == [True, False]
    assert healths(a100)[BUS[1]]["remapped_rows_uncorrectable"] == 1  # the remap is counted
    assert a100.smi("-i", "1", "-pm", "1") == f"Enabled persistence mode for GPU {BUS[1]}.\n" \
                                              "All done.\n"
    assert persistence(a100) == ["Enabled", "Enabled"]


def test_a_process_blocks_the_reset_of_its_gpu_not_of_the_other(a100):
    a100.gpusim("fault", "set", "row_remap_pending", "--gpu", "all")
    a100.gpusim("process", "add", "--gpu", "0", "--pid", "4242", "--name", "python3")
    a100.gpusim("process", "add", "--gpu", "1", "--pid", "4243", "--name", "python3")
    assert "GPU 00000000:0F:00.0: In use by another client" in a100.smi("-r", "-i", "1", rc=255)
    a100.gpusim("process", "remove", "--pid", "4243")
    assert a100.smi("-r", "-i", "1") == f"GPU {BUS[1]} was successfully reset.\n"
    assert pending(a100) == [True, False]
    apps = a100.smi("--query-compute-apps=pid", "--format=csv,noheader").split()
    assert apps == ["4242"]  # GPU 0's process was not touched


def test_an_unsupported_reset_changes_nothing(a100):
    a100.gpusim("fault", "set", "row_remap_pending", "--gpu", "1")
    a100.gpusim("fault", "set", "gpu_reset_unsupported")
    assert a100.smi("-r", "-i", "1", rc=3) == f"Resetting GPU {BUS[1]} is not supported.\n"
    assert pending(a100) == [False, True]
