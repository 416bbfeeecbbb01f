"""When a host needs a reboot for its NVIDIA driver: one meaning for install and upgrade
(pure: no pyinfra).

Both ``roles/nvidia_driver.py`` (install) and ``roles/upgrade/`` (driver switch) reboot
only with ``reboot_policy: when_needed`` and only when this says so, read at execute time
from ``gpuhost.facts.nvidia.NvidiaDriver``.
"""

from __future__ import annotations

from typing import Any


def needs_reboot(driver: dict[str, Any], target: str) -> bool:
    """A reboot would load the ``target`` driver that is not loaded now.

    True when driver packages are installed and the kernel module is not the target's:
    not loaded at all (nouveau may hold the GPU), another version loaded, or a
    user-space/kernel mismatch (``library_mismatch``). False when the target is loaded and
    answers, and when no driver is installed: a reboot cannot load a driver that is not
    there (the package step failed or has not run; a reboot would hide that).
    """
    if driver["state"] == "not_installed":
        return False
    return driver["state"] != "loaded" or driver["loaded_version"] != target
