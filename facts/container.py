"""Docker daemon configuration and NVIDIA Container Toolkit facts.

``pyinfra INVENTORY fact facts.container.DockerDaemonConfig facts.container.ContainerToolkit``
"""

from __future__ import annotations

from facts import state
from facts.base import SectionFact


class DockerDaemonConfig(SectionFact):
    """
    ``/etc/docker/daemon.json`` parsed, the nvidia runtime in it, and the running daemon.

    An invalid file is a state (``valid: False`` with the parser's message naming line and
    column), never an exception that stops other hosts. The nvidia runtime counts as defined
    in either style (``args`` or ``runtimeArgs``) with a relative or absolute path.

    .. code:: python

        {"path": "/etc/docker/daemon.json", "exists": bool, "valid": bool,
         "error": None | "line 3 column 5: ...",
         "config": {...},                     # {} when absent or invalid
         "nvidia_runtime": {"defined": bool, "path": "nvidia-container-runtime" | None,
                            "style": "args" | "runtimeArgs" | None, "args": []},
         "default_runtime": "nvidia" | "runc" | None,
         "nvidia_is_default": bool,
         "docker_installed": bool,  # dockerd is on the host
         "docker_version": "20.10.24+dfsg1" | None,  # the running daemon's
         "daemon": {"running": bool, "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
                    "default_runtime": "runc" | None, "version": ...}}
    """

    sections = ("daemon_json", "docker_version", "docker_info")
    assemble = staticmethod(state.docker_state)


class ContainerToolkit(SectionFact):
    """
    The NVIDIA Container Toolkit: the four packages, ``nvidia-ctk`` and
    ``nvidia-container-cli``, and whether they all agree on one version.

    .. code:: python

        {"installed": bool,
         "packages": {"nvidia-container-toolkit": "1.17.8" | None,
                      "nvidia-container-toolkit-base": ..., "libnvidia-container-tools": ...,
                      "libnvidia-container1": ...},
         "nvidia_ctk": "1.17.8" | None, "nvidia_container_cli": "1.17.8" | None,
         "version": "1.17.8" | None,          # None unless exactly one version is seen
         "versions_seen": ["1.17.8"],
         "consistent": bool,                  # all four installed at one version (or none)
         "held_packages": [...]}
    """

    sections = ("dpkg", "rpm", "nvidia_ctk", "nvidia_container_cli")
    assemble = staticmethod(state.toolkit_state)
