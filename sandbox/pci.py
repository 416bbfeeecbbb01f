"""The PCI functions a host's kernel would list in /sys/bus/pci/devices, as files.

Real hosts expose per PCI function `vendor`, `device`, `class`, `subsystem_vendor`,
`subsystem_device` and `revision` (sysfs-bus-pci(5) ABI: "0x10de", "0x1db4", "0x030200"
for a 3D controller, "0x030000" VGA, "0x068000" bridge such as an NVSwitch). nspawn mounts
/sys read-only from this machine, so each host gets its own tree, generated from its spec
at creation (the same devices the GPU simulator's lspci lists) and bound read-only over
/sys/bus/pci/devices by files/boot.sh (`HOSTDIR/pci`). The real entries are symlinks into
/sys/devices/pci*/...; plain directories hold the same files.

A function with PCI VPD gets its `vpd` file too (sysfs-bus-pci: "vpd", the binary Vital
Product Data): an NVLink 5 switch's management function, whose VPD says "SW_MNG". On a real
host /sys/class/infiniband/<dev>/device is that PCI function, so its VPD is the same file
as /sys/bus/pci/devices/<slot>/vpd (sandbox/nvidia/README.md, "NVLink 5").
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from . import paths
from .spec import machine_json

_GPUSIM = paths.NVIDIA_MACHINE_DIR / "usr/local/lib/gpusim"


def devices(h: dict) -> list[tuple]:
    """gpusim's lspci devices of host ``h`` (slot, class, (vendor, name), device, name, rev,
    subsystem, driver)."""
    if str(_GPUSIM) not in sys.path:
        sys.path.append(str(_GPUSIM))
    from gpusim import lspci  # the simulator's own table: one truth for lspci and sysfs

    return lspci.devices(machine_json(h), {})


def write_tree(h: dict, dest: Path) -> None:
    """(Re)write ``dest`` as the host's /sys/bus/pci/devices."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for slot, cls, (vendor, _), device, _name, rev, subsys, _driver in devices(h):
        d = dest / f"0000:{slot}"
        d.mkdir()
        files = {"vendor": f"0x{vendor}", "device": f"0x{device}", "class": f"0x{cls}00",
                 "revision": f"0x{rev or '00'}",
                 "subsystem_vendor": f"0x{(subsys or ('0000', '0000'))[0]}",
                 "subsystem_device": f"0x{(subsys or ('0000', '0000'))[1]}"}
        for name, value in files.items():
            (d / name).write_text(value + "\n")
    for slot, data in vpd(h).items():
        (dest / f"0000:{slot}" / "vpd").write_bytes(data)


def vpd(h: dict) -> dict[str, bytes]:
    """gpusim's VPD of host ``h``'s functions that have one (slot -> bytes)."""
    devices(h)  # puts gpusim on the path
    from gpusim import lspci

    return lspci.vpd(machine_json(h))
