"""Which ``dkms status`` module names are the NVIDIA kernel module (issue 23 item 5).

Pure: used by the fact assembly (``gpuhost.facts.assemble_kernel``) and by ``gpuhost.boot``;
it lives in ``gpuhost/`` so the facts layer imports from ``gpuhost`` and not the other way round.
"""

from __future__ import annotations

# The DKMS module names the NVIDIA kernel module is registered under (``dkms status``:
# NAME/VERSION, KERNEL, ARCH: installed), by packaging (docs/real-hosts.md, "Debian 12's
# driver names"):
# - "nvidia": NVIDIA's own packages: Ubuntu's nvidia-dkms-<branch>[-open], EL's
#   kmod-nvidia-*-dkms, and the Debian-style nvidia-kernel[-open]-dkms of NVIDIA's Debian
#   repository (field `dkms status`: "nvidia/595.45.04, 6.19.6+deb14-amd64, x86_64: installed");
# - "nvidia-current", "nvidia-current-open": Debian's own nvidia-kernel-dkms and
#   nvidia-open-kernel-dkms (Debian's archive; "Loading new nvidia-current-525.147.05 DKMS
#   files", NVIDIA/nvidia-container-toolkit#361; "nvidia-current-open/550.163.01, ...:
#   installed" in a field report);
# - "nvidia-open": NVIDIA's open kmod RPM before 570.148.08 (awslabs/amazon-eks-ami#2284:
#   "the dkms module installed for nvidia-open is called `nvidia` vs the previous name
#   `nvidia-open`").
NVIDIA_DKMS_MODULES = frozenset({"nvidia", "nvidia-current", "nvidia-current-open", "nvidia-open"})


def is_nvidia_module(name: str | None) -> bool:
    """A ``dkms status`` module name under which the NVIDIA kernel module is registered."""
    return name in NVIDIA_DKMS_MODULES
