"""Move GPU hosts to the NVIDIA driver set in ``nvidia_driver_version`` (see docs/upgrades.md).

    gpuhost upgrade INVENTORY --canary 1 --batch 25%                   # rolling, the usual way
    pyinfra -y --fail-percent 0 INVENTORY deploys/upgrade_driver.py --limit gpu-01   # one batch

Every host of the run is checked before any is touched (GPU support, no downgrade without
``upgrade_allow_downgrade``, no GPU processes without a drain hook or ``upgrade_force``).
Then, per host: drain, stop GPU clients, switch repo, pin and packages, reboot or reload,
verify with facts, restart clients, uncordon. A host already at the target changes nothing,
so a rerun after an interruption resumes. The code: ``roles/upgrade/`` (operations),
``gpuhost/upgrade/__init__.py`` (decisions), ``facts/upgrade.py`` (what it reads).
"""

from gpuhost.roles import upgrade

upgrade.run()
