"""Example production inventory: copy it, put your hosts in, fill in group_data/prod.py.

    pyinfra inventories/prod.py deploys/gpu_host.py --dry    # the plan, nothing changed
    pyinfra inventories/prod.py deploys/audit.py             # read-only fleet report

Every gpuhost key is documented in docs/settings.md. Hosts are grouped by what differs
between them; settings common to the fleet live in group_data/prod.py (this file's group).
"""

from inventories.preflight import check

# Debian 12 and Ubuntu hosts with 8 x H100 behind NVSwitch: Fabric Manager required.
hgx_nodes = (
    ["hgx-a01.example.com", "hgx-a02.example.com"],
    {"nvidia_fabricmanager": True, "nvidia_default_runtime": True},
)

# Oracle Linux 9 (UEK 8) inference hosts with L4 GPUs.
inference_nodes = (
    ["inf-b01.example.com", "inf-b02.example.com", "inf-b03.example.com"],
    {"reboot_policy": "when_needed"},
)

# A single A100 host that slices its GPUs with MIG.
mig_nodes = (
    [("mig-c01.example.com", {"mig_mode": "enabled", "mig_layout": ["3g.20gb", "3g.20gb"]})],
    {},
)

check(__file__)
