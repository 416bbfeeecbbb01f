"""Reset one GPU of one host without rebooting it (see docs/recover.md).

    gpuhost recover INVENTORY --limit HOST [--gpu N] [--force] [--reboot-fallback]
    pyinfra -y INVENTORY deploys/recover.py --limit HOST --data gpuhost_recover_gpu=1

Only for findings whose catalogued action is a GPU reset; refused, with what to do instead,
otherwise. The code: ``roles/recover.py`` (operations), ``gpuhost/health/recover.py`` (decisions),
``facts/recover.py`` (what it reads).
"""

from gpuhost.roles import recover

recover.run()
