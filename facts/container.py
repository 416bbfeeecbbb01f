"""Docker and NVIDIA Container Toolkit facts: daemon.json, the daemon, images, a GPU container.

``pyinfra INVENTORY fact facts.container.DockerDaemonConfig facts.container.ContainerToolkit``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from facts.assemble import docker_state, toolkit_state
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
    assemble = staticmethod(docker_state)


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
    assemble = staticmethod(toolkit_state)


class DockerdValidates(FactBase):
    """Whether the installed dockerd has ``--validate`` (Docker 23 and newer): ``True`` / ``False``.

    ``False`` also when dockerd is not installed.
    """

    @override
    def command(self) -> str:
        return (
            "if command -v dockerd >/dev/null 2>&1 && dockerd --help 2>/dev/null "
            "| grep -q -- '--validate'; then echo yes; else echo no; fi"
        )

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[0].strip() == "yes"


class DockerImagePresent(FactBase):
    """Whether the local Docker has an image: ``True`` / ``False`` (no registry is asked)."""

    @override
    def command(self, image: str) -> StringCommand:
        return StringCommand(
            "if docker image inspect", QuoteString(image),
            ">/dev/null 2>&1; then echo yes; else echo no; fi",
        )

    @override
    def process(self, output: list[str]) -> bool:
        return bool(output) and output[-1].strip() == "yes"


class NvidiaContainerRun(FactBase):
    """Run ``nvidia-smi -L`` in a throwaway container through the nvidia runtime.

    Returns ``{"rc": int, "output": str}`` (``rc`` -1 when nothing came back). The container
    has no network, is removed afterwards and is given 120 seconds.
    """

    @override
    def command(self, image: str) -> StringCommand:
        return StringCommand(
            "out=$(timeout 120 docker run --rm --network=none --runtime=nvidia",
            "-e NVIDIA_VISIBLE_DEVICES=all", QuoteString(image),
            'nvidia-smi -L 2>&1); rc=$?; echo "rc=$rc"; echo "$out"',
        )

    @override
    def process(self, output: list[str]) -> dict:
        rc = int(output[0].removeprefix("rc=")) if output and output[0].startswith("rc=") else -1
        return {"rc": rc, "output": "\n".join(output[1:])}

    @override
    def default(self) -> dict:  # type: ignore[override]
        return {"rc": -1, "output": "(no output)"}
