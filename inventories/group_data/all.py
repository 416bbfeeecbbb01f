# gpuhost defaults: the lowest-priority pyinfra data for every host.
#
# The defaults are defined once, in the settings model (gpuhost/settings.py, class Settings);
# docs/settings.md lists every key with its type, default and meaning. This file only hands
# them to pyinfra, so that `pyinfra INVENTORY debug-inventory` and host.data show them.
# pyinfra keeps every top-level name here except imported ones: define nothing else.
#
# Required, set them in your own group or host data (no defaults on purpose):
#   nvidia_driver_version = "580.95.05"
#   nvidia_local_repo = {"debian12": {"url": "https://.../nvidia-driver-local-repo-debian12-580.95.05_1.0-1_amd64.deb",
#                                     "sha256": "<64 hex digits>"}}
# container_toolkit_version has a default (1.20.0); set it to keep a host on 1.19.1 or 1.18.2.
# Ubuntu 26.04 (no local repo package exists) or any host that should take NVIDIA's network
# repository or your mirror of it (docs/settings.md, "Where the driver comes from"):
#   nvidia_driver_repo = {"ubuntu2604": {"url": "https://.../cuda/repos/ubuntu2604/x86_64/",
#                                        "key": "/path/to/the/repository-key.asc",
#                                        "fingerprint": "<the key's 40 hex digits>"}}

from gpuhost.settings import defaults

globals().update(defaults())
