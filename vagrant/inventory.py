"""pyinfra inventory of the Vagrant VMs defined in vagrant/Vagrantfile (run from the repo root):

    (cd vagrant && vagrant up ubuntu2204 --provider=libvirt)
    VAGRANT_CWD=vagrant pyinfra -y vagrant/inventory.py deploys/gpu_host.py
    VAGRANT_CWD=vagrant pyinfra vagrant/inventory.py fact gpuhost.facts.host.GpuHostState --json

Hosts: every running VM of the Vagrantfile, through pyinfra's @vagrant connector (it reads
`vagrant ssh-config`, so VAGRANT_CWD must point at this folder). Data: the YAML file
$GPUHOST_DATA (default vagrant/gpuhost_data.yml); the vagrant user gets sudo.
"""

import os
from pathlib import Path

import yaml

from inventories.preflight import check

_DATA = Path(os.environ.get("GPUHOST_DATA") or Path(__file__).with_name("gpuhost_data.yml"))
if not os.environ.get("VAGRANT_CWD"):
    os.environ["VAGRANT_CWD"] = str(Path(__file__).resolve().parent)

vagrant_boxes = (["@vagrant"], {"_sudo": True, **(yaml.safe_load(_DATA.read_text()) or {})})

check(__file__)
