"""Move GPU hosts to a newer kernel, the NVIDIA module built for it first (docs/kernel-updates.md).

    gpuhost kernel-update INVENTORY --dry                        # what each host would get
    gpuhost kernel-update INVENTORY --canary 1 --batch 25%       # rolling, the usual way

Every host of the run is checked before any is touched (the kernel and its headers in the
host's repositories, a driver installed, the driver not known to fail on that kernel). The
code: ``roles/kernel_update.py`` (operations), ``gpuhost/kernel_update.py`` (decisions),
``facts/kernel_update.py`` (what it reads).
"""

from gpuhost.roles import kernel_update

kernel_update.run()
