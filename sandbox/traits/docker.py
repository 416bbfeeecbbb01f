"""Docker traits: a hand-written daemon.json on a host that already runs Docker.

Both traits install Debian's `docker.io` (20.10, no `dockerd --validate`) from the sandbox
mirror after the first boot, as a host that already runs Docker has it, so the file is
read by a real dockerd started by the real `docker.service` (`dockerd -H fd://
--containerd=/run/containerd/containerd.sock $DOCKER_OPTS`).

- `daemon-json-clash`: `/etc/docker/daemon.json` sets `hosts`, which docker.service also
  passes as a flag (`-H fd://`). dockerd refuses to start ("unable to configure the Docker
  daemon with file /etc/docker/daemon.json: the following directives are specified both as
  a flag and in the configuration file: hosts: (from flag: [fd://], from file: [...])"), and
  the package's postinst still exits 0 (dh_installsystemd's `deb-systemd-invoke start ...
  || true`), so the host is left with Docker down.
- `live-restore`: `/etc/docker/daemon.json` has `"live-restore": true` and one container
  (`gpuhost-sandbox-sleeper`, a tiny image imported from the host's own `sleep`) runs; a
  Docker restart keeps it running.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..util import write_file
from . import Trait, register

SLEEPER = "gpuhost-sandbox-sleeper"
SLEEPER_IMAGE = "gpuhost-sandbox/sleeper:1"
CLASH_HOSTS = ["unix:///var/run/docker.sock"]

# Debian's docker.io from the sandbox mirror; its postinst starts docker.service (and
# ignores a failed start, as dh_installsystemd's generated code does).
_INSTALL_DOCKER = ("DEBIAN_FRONTEND=noninteractive apt-get -q update >/dev/null && "
                   "DEBIAN_FRONTEND=noninteractive apt-get -q install -y docker.io >/dev/null")


def _daemon_json(upper: Path, config: dict) -> None:
    write_file(upper / "etc/docker/daemon.json", json.dumps(config, indent=2) + "\n")


def _install_docker(h: dict, sh) -> None:
    sh(_INSTALL_DOCKER, timeout=900)


def _live_restore_booted(h: dict, sh) -> None:
    _install_docker(h, sh)
    # a one-binary image from the host's own sleep (no registry, no network)
    # (-h: /lib64/ld-linux-x86-64.so.2 is a symlink into /lib, which is one into /usr/lib)
    sh("tar -C / -ch usr/bin/sleep usr/lib/x86_64-linux-gnu/libc.so.6 lib64/ld-linux-x86-64.so.2 "
       f"2>/dev/null | docker import - {SLEEPER_IMAGE} >/dev/null")
    sh(f"docker run -d --name {SLEEPER} --restart=no --network=none {SLEEPER_IMAGE} "
       "/usr/bin/sleep infinity >/dev/null")


register(Trait(
    name="daemon-json-clash",
    doc="Docker installed; hand-written /etc/docker/daemon.json sets \"hosts\", which "
        "docker.service also passes as -H fd://: dockerd refuses to start",
    source="Docker docs, dockerd reference, \"Daemon configuration file\": options set both "
           "as a flag and in daemon.json make dockerd refuse to start (\"the following "
           "directives are specified both as a flag and in the configuration file\"); "
           "Debian's docker.service passes -H fd://",
    oses=("debian12",),
    create=lambda h, upper: _daemon_json(upper, {"hosts": CLASH_HOSTS}),
    booted=_install_docker,
))

register(Trait(
    name="live-restore",
    doc="Docker installed with \"live-restore\": true in daemon.json and one running "
        f"container ({SLEEPER}) that a Docker restart keeps",
    source="Docker docs, \"Live restore\": with live-restore enabled, containers keep "
           "running while the daemon is stopped or restarted",
    oses=("debian12",),
    create=lambda h, upper: _daemon_json(upper, {"live-restore": True}),
    booted=_live_restore_booted,
))
