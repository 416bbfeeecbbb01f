"""Docker and NVIDIA Container Toolkit facts: daemon.json, the daemon, images, a GPU container.

``pyinfra INVENTORY fact gpuhost.facts.container.DockerDaemonConfig gpuhost.facts.container.ContainerToolkit``
"""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpuhost.facts.assemble_container import cdi_state, docker_state, toolkit_state
from gpuhost.facts.base import SectionFact


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


class CdiSpecs(SectionFact):
    """
    The CDI spec files in /etc/cdi and /var/run/cdi (YAML or JSON), parsed with
    ``gpuhost.runtime.cdi.parse_spec``; ``gpuhost.runtime.cdi.judge(state)`` tells whether the NVIDIA one is
    fresh for the host's GPUs, MIG devices and loaded driver. ``boot_unit``: gpuhost's unit
    that writes the spec at boot (``gpuhost.runtime.cdi.BOOT_UNIT``), None when absent.

    .. code:: python

        {"specs": [{"path": "/var/run/cdi/nvidia.yaml", "kind": "nvidia.com/gpu",
                    "cdi_version": "0.5.0", "devices": ["0", "GPU-...", "all"],
                    "driver_versions": ["570.172.08"], "error": None}],
         "boot_unit": {"sha256": "5f3c...", "enabled": True},
         "refresh_unit": {"active": "failed", "sub": "failed", "result": "start-limit-hit",
                          "failed": True},
         "podman": "4.3.1+ds1" | None}

    ``refresh_unit``: NVIDIA's ``nvidia-cdi-refresh.service`` (toolkit 1.18+), None when the
    host has none. ``podman``: the installed podman package's version (from the ``dpkg``/``rpm``
    sections of the host state; None here, or without podman).
    """

    sections = ("cdi_specs", "cdi_boot_unit", "cdi_refresh_unit")
    assemble = staticmethod(cdi_state)


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
    """Run ``nvidia-smi -L`` in a throwaway container the way users ask for GPUs.

    ``how``: ``gpus`` (``docker run --gpus all``: Docker's device request, served by the
    toolkit's prestart hook, any runtime), ``cdi`` (``--device nvidia.com/gpu=all``: Docker
    applies the CDI spec itself, Docker 25+) or ``runtime`` (``--runtime=nvidia -e
    NVIDIA_VISIBLE_DEVICES=all``). Returns ``{"rc": int, "output": str}`` (``rc`` -1 when
    nothing came back). The container has no network, is removed afterwards and is given
    120 seconds.
    """

    FLAGS = {"gpus": "--gpus all", "cdi": "--device nvidia.com/gpu=all",
             "runtime": "--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all"}

    @override
    def command(self, image: str, how: str = "gpus") -> StringCommand:
        return StringCommand(
            "out=$(timeout 120 docker run --rm --network=none", self.FLAGS[how],
            QuoteString(image), 'nvidia-smi -L 2>&1); rc=$?; echo "rc=$rc"; echo "$out"',
        )

    @override
    def process(self, output: list[str]) -> dict:
        rc = int(output[0].removeprefix("rc=")) if output and output[0].startswith("rc=") else -1
        return {"rc": rc, "output": "\n".join(output[1:])}

    @override
    def default(self) -> dict:  # type: ignore[override]
        return {"rc": -1, "output": "(no output)"}


class DockerDaemonView(FactBase):
    """What the daemon.json operation needs at execute time, in one round trip: where the
    file really is (a symlink is followed), the keys gpuhost wrote last time, docker.service's
    dockerd command line (ExecStart and its environment), and the running daemon.

    .. code:: python

        {"realpath": "/etc/docker/daemon.json",
         "managed": {"settings": {...}, "default-runtime": bool} | None,
         "unit": bool,                         # docker.service exists
         "exec_start": "/usr/sbin/dockerd -H fd:// $DOCKER_OPTS" | None,
         "environment": {"DOCKER_OPTS": "..."},  # Environment= and EnvironmentFile= lines
         "daemon": {"running": bool, "runtimes": ["nvidia", "runc"], "default_runtime": "runc",
                    "live_restore": bool, "containers_running": int}}
    """

    @override
    def command(self, path: str, state_path: str) -> StringCommand:
        import shlex

        return StringCommand(
            f"p={shlex.quote(path)}; s={shlex.quote(state_path)};",
            'echo "realpath=$(readlink -f -- "$p" 2>/dev/null || echo "$p")";',
            'echo "managed=$(cat -- "$s" 2>/dev/null | tr -d \'\\n\')";',
            "if systemctl cat docker.service >/dev/null 2>&1; then echo unit=yes;",
            'echo "execstart=$(systemctl show -p ExecStart --value docker.service | head -n 1)";',
            'echo "environment=$(systemctl show -p Environment --value docker.service)";',
            "for f in $(systemctl show -p EnvironmentFiles --value docker.service "
            "| sed 's/ ([a-z_]*=[a-z]*)//g'); do",
            '[ -r "$f" ] && sed -n \'s/^[[:space:]]*\\(export[[:space:]]\\+\\)\\?'
            '\\([A-Za-z_][A-Za-z0-9_]*=.*\\)/envline=\\2/p\' "$f"; done; fi;',
            "if command -v docker >/dev/null 2>&1 && out=$(timeout 20 docker info -f "
            "'{{json .Runtimes}}|{{.DefaultRuntime}}|{{.LiveRestoreEnabled}}|{{.ContainersRunning}}'"
            ' 2>/dev/null); then echo "daemon=$out"; fi; true',
        )

    @override
    def default(self) -> dict:  # type: ignore[override]
        return {"realpath": None, "managed": None, "unit": False, "exec_start": None,
                "environment": {}, "daemon": {"running": False, "runtimes": [],
                                              "default_runtime": None, "live_restore": False,
                                              "containers_running": 0}}

    @override
    def process(self, output: list[str]) -> dict:
        import json
        import shlex

        out = self.default()
        for line in output:
            key, _, value = line.partition("=")
            if key == "realpath":
                out["realpath"] = value or None
            elif key == "managed" and value:
                try:
                    managed = json.loads(value)
                    out["managed"] = managed if isinstance(managed, dict) else None
                except ValueError:
                    out["managed"] = None
            elif key == "unit":
                out["unit"] = True
            elif key == "execstart":
                # { path=/usr/sbin/dockerd ; argv[]=/usr/sbin/dockerd -H fd:// $DOCKER_OPTS ; ... }
                argv = value.split("argv[]=", 1)[1] if "argv[]=" in value else ""
                out["exec_start"] = argv.split(" ;", 1)[0].strip() or None
            elif key == "environment":
                try:
                    words = shlex.split(value)
                except ValueError:
                    words = value.split()
                for word in words:
                    name, eq, val = word.partition("=")
                    if eq:
                        out["environment"][name] = val
            elif key == "envline":
                name, _, val = value.partition("=")
                try:
                    parts = shlex.split(val)
                    val = " ".join(parts) if len(parts) != 1 else parts[0]
                except ValueError:
                    pass
                out["environment"][name] = val
            elif key == "daemon":
                fields = value.split("|")
                if len(fields) == 4:
                    try:
                        runtimes = sorted(json.loads(fields[0]) or {})
                    except ValueError:
                        runtimes = []
                    out["daemon"] = {
                        "running": True, "runtimes": runtimes,
                        "default_runtime": fields[1] or None,
                        "live_restore": fields[2] == "true",
                        "containers_running": int(fields[3]) if fields[3].isdigit() else 0,
                    }
        return out
