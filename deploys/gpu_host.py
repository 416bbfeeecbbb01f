"""Provision an NVIDIA GPU host end to end (Oracle Linux, RHEL, Rocky Linux, AlmaLinux 8/9/10,
Ubuntu 22.04/24.04/26.04, Debian 12/13).

    pyinfra inventories/prod.py deploys/gpu_host.py           # plan, confirm, apply
    pyinfra inventories/prod.py deploys/gpu_host.py --dry     # show the plan only
    pyinfra -y inventories/prod.py deploys/gpu_host.py        # apply without asking

Kernel headers of the running kernel -> NVIDIA driver from NVIDIA's local repo package ->
MIG mode/layout or named MIG configuration when set -> Docker -> NVIDIA Container Toolkit ->
nvidia runtime merged into /etc/docker/daemon.json -> the NVIDIA CDI spec
(container_runtime_mode cdi; a stale one is regenerated) -> (optional) containerd's nvidia
runtime -> verification with facts. Every key it reads is documented in docs/settings.md;
bad values stop the run before any host is changed. A second run on a converged host changes nothing.
"""

from gpuhost.deploys.api import provision

provision()
