"""Version rules and GPU knowledge, by concern (each module pure: no pyinfra, no I/O on hosts):

- ``gpuhost.gpu_models``: the GPU model table and ``lookup_model``;
- ``gpuhost.cuda_drivers``: CUDA toolkit -> minimum driver, ``cuda_compat``;
- ``gpuhost.driver_rules``: driver versions and branches, open/proprietary modules per
  architecture (``choose_flavor``);
- ``gpuhost.gpu_classes``: GPUs by PCI id (``classify_pci``) and ``flavor_for_gpus``;
- ``gpuhost.mig.tables``: MIG layouts against a GPU's profile table (``mig_layout_valid``).

New code imports from those modules. This module only keeps the names that callers and
docs still use as ``policy.NAME``.
"""

from gpuhost.cuda_drivers import CUDA_MIN_DRIVER, cuda_compat, min_driver_for_cuda, newest_cuda
from gpuhost.driver_rules import is_downgrade, open_module_supported
from gpuhost.gpu_classes import classify_pci, device_id_rule, flavor_for_gpus
from gpuhost.gpu_models import ARCHITECTURES, lookup_model
from gpuhost.mig.tables import mig_layout_valid

__all__ = ["ARCHITECTURES", "CUDA_MIN_DRIVER", "classify_pci", "cuda_compat", "device_id_rule",
           "flavor_for_gpus", "is_downgrade", "lookup_model", "mig_layout_valid",
           "min_driver_for_cuda", "newest_cuda", "open_module_supported"]
