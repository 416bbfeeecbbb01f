"""NVIDIA driver and GPU facts.

``pyinfra INVENTORY fact gpuhost.facts.nvidia.NvidiaDriver gpuhost.facts.nvidia.NvidiaGpus --json``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpuhost.facts.assemble_driver import driver_state
from gpuhost.facts.assemble_gpus import gpus_state
from gpuhost.facts.base import SectionFact
from gpuhost.facts.pyinfra_api import joined


class NvidiaDriver(SectionFact):
    """
    The NVIDIA driver on the host: loaded kernel module, user-space, packages, state.

    Reads ``/proc/driver/nvidia/version`` (the loaded module), ``nvidia-smi -q -x`` (the
    user-space) and the installed driver packages (dpkg or rpm). Returns:

    .. code:: python

        {
            "state": "not_installed" | "installed_not_loaded" | "loaded" | "library_mismatch",
            "loaded": {"version": "570.172.08", "flavor": "open", "arch": "x86_64",
                       "gcc": "12.2.0"} | None,
            "loaded_version": "570.172.08" | None,
            "installed_version": "570.172.08" | None,   # newest driver version among packages
            "installed_versions": ["570.172.08"],        # more than one: a half-done change
            "installed_flavor": "open" | "proprietary" | None,
            "userspace_version": "570.172.08" | None,    # what nvidia-smi reports
            "packages": {"nvidia-open-570": "570.172.08-1", ...},
            "held_packages": [...],                      # apt holds
            "companions": ["nvidia-imex-570", ...],      # FM, NSCQ, IMEX, NVSDM: move with it
            "local_repos": [{"package": ..., "distro": "debian12", "version": ...}],
            "cuda_version": "12.8" | None,               # as nvidia-smi prints it
            "newest_cuda": "12.8.1" | None,              # from gpuhost.policy for the loaded module
            "smi_error": None | "driver_not_loaded" | "library_mismatch" | "no_devices"
                         | "timed_out" | "failed",
            "reboot_required": bool,  # packages differ from the module, or module not loaded
        }

    ``library_mismatch``: the installed packages differ from the loaded module (a reboot or a
    module reload is due).
    """

    sections = ("dpkg", "rpm", "proc_version", "smi_xml")
    assemble = staticmethod(driver_state)


class NvidiaGpus(SectionFact):
    """
    The host's GPUs, one dict each, from ``nvidia-smi -q -x``; when the driver does not answer,
    from the kernel's PCI ids in ``/sys/bus/pci/devices`` (``source: "sysfs"``; names from
    ``lspci`` when pciutils is installed) or, without that directory, from ``lspci``
    (``source: "lspci"``), with fewer fields, so a bare host still shows its GPUs, unknown
    ones included (name "NVIDIA device 10de:12ff", model None, classified_by None: an id no
    table has and no rule of NVIDIA's device numbering claims).

    .. code:: python

        [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "model": "A100-SXM4-40GB",
          "architecture": "ampere", "uuid": "GPU-..." | None,
          "pci_bus_id": "00000000:07:00.0", "memory_total_mib": 40960,
          "persistence_mode": "enabled" | "disabled" | None,
          "mig_current": "enabled" | "disabled" | None,
          "mig_pending": "enabled" | "disabled" | None,
          "mig_capable": bool | None,
          "compute_capability": "8.0" | None,  # the driver's, else gpuhost.policy's model table
          "processes": [{"pid": 4242, "name": "python3", ...}],
          "pci_device_id": "20b0" | None,
          "generation": "turing-or-newer" | "pre-turing" | None,  # None: unknown GPU
          "legacy_branch": "470" | None,  # NVIDIA's supported-gpus.json legacybranch
          "classified_by": "gpu_models" | "supported-gpus" | "device-id-rule" | None,
          "health": {...} | None,  # see below; None for a GPU seen on the PCI bus only
          "source": "nvidia-smi" | "sysfs" | "lspci"}]

    ``health`` is ``facts.parsers.parse_smi_xml``'s per-GPU dict (``facts.smi_xml``,
    ``_xml_health``): ``ecc_mode_current``, ``ecc_volatile_uncorrectable``,
    ``ecc_aggregate_uncorrectable``, ``retired_pages_double_bit``, ``retired_pages_pending``,
    ``remapped_rows_uncorrectable``, ``remapped_rows_pending``, ``remapped_rows_failure``,
    ``pcie_gen_current``, ``pcie_gen_max``, ``pcie_width_current``, ``pcie_width_max``,
    ``throttle_reasons_active`` (sorted names, e.g. ``["hw_slowdown"]``) and
    ``fabric_state`` (``"In Progress"``, ``"Completed"``, ... as printed); each ``None`` where
    the driver prints N/A or nothing.
    """

    sections = ("smi_xml", "lspci", "pci_sysfs")
    assemble = staticmethod(gpus_state)


class LocalRepoKeyTrusted(FactBase):
    """Whether every keyring a local repo ships is installed in /usr/share/keyrings.

    ``True`` when each ``nvidia-driver-*-keyring.gpg`` under ``repo_dir`` (where NVIDIA's
    local repo .deb unpacks) has an identical copy in ``/usr/share/keyrings``; ``False``
    when one is missing or differs, or the directory has none.
    """

    @override
    def command(self, repo_dir: str) -> StringCommand:
        return StringCommand(
            "for key in",
            joined(QuoteString(repo_dir), "/nvidia-driver-*-keyring.gpg"),
            '; do test -e "$key" || continue; cmp -s "$key" "/usr/share/keyrings/${key##*/}"'
            ' && echo trusted || echo missing; done; true',
        )

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and all(line.strip() == "trusted" for line in output)

    @override
    def default(self) -> bool:  # type: ignore[override]
        return False
