"""GPU and PCI traits (issue 12 item 4, issue 13 item 3): what real GPU hosts bring that
gpuhost must see through.

no-pciutils      the host has no `lspci`. Debian's `pciutils` (which ships /usr/bin/lspci)
                 has Priority: standard, so a minimal install (debootstrap --variant=minbase,
                 a server installed without "standard system utilities") lacks it; the same
                 on EL (pciutils is not in @core's mandatory packages). The simulated lspci
                 is what a host has by default; this trait removes it.
unknown-pci-ids  the host's pci.ids predates its GPUs: lspci prints pciutils' fallback
                 "NVIDIA Corporation Device [10de:2901]" (`-mm -nn`: "Device [2901]"), as real
                 lspci does for any id its pci.ids lacks (the simulator's lspci reads the
                 trait from machine.json).
Pre-Turing GPUs (V100-PCIE-16GB 1db4, P100-PCIE-16GB 15f8, V100-SXM2-16GB 1db1) and a GPU
newer than gpuhost's NVIDIA table (B200 2901) are GPU models of the simulator
(`gpu_model` in --spec), not traits.
"""
from __future__ import annotations

from pathlib import Path

from . import Trait, register

LSPCI = "usr/local/bin/lspci"


def _remove_lspci(h: dict, upper: Path) -> None:
    (upper / LSPCI).unlink(missing_ok=True)


register(Trait(
    name="no-pciutils",
    doc="no lspci on the host (pciutils not installed)",
    source="Debian bookworm pciutils 1:3.9.0-4: Priority standard, ships /usr/bin/lspci; "
           "a minbase/minimal install has no pciutils",
    create=_remove_lspci,
))

register(Trait(
    name="unknown-pci-ids",
    doc="the host's pci.ids does not know its NVIDIA devices: lspci prints 'Device [10de:xxxx]'",
    source="pciutils lspci(8): a device id missing from pci.ids is shown as 'Device XXXX' "
           "('Device [XXXX]' with -nn); ids newer than the distribution's pci.ids get that",
))
