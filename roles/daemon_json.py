"""Merge the nvidia runtime into /etc/docker/daemon.json, keeping everything the user had.

``daemon_json`` is an idempotent operation: it reads the file at execute time, merges with
``gpuhost.runtime.daemon_json.merge`` and compares parsed structures, so a converged host gets no
change and Docker is restarted only when the parsed content changed. A file that is not
valid JSON is refused with its line and column and left untouched (that host fails, the
others go on). Writes are atomic: the new content is uploaded beside the file, validated with
``dockerd --validate`` when the installed Docker has it, a timestamped backup of the old file
is kept, and the new file is renamed into place.

Never leave Docker down (issue 14 item 4): the new file keeps the old one's mode and owner,
a symlinked daemon.json is followed (the link's target is written), and Docker's restart is
checked: when Docker does not come back, the previous file is put back, Docker is started
again and the host fails with dockerd's own words (``journalctl -u docker`` tail). The keys
gpuhost set from ``docker_daemon_settings`` are remembered in ``STATE`` so that a key removed
from the inventory is removed from the file (never a key written by hand). Docker is also
restarted when the running daemon disagrees with the file (no nvidia runtime, another default
runtime), not only when the file changed; a restart that would stop running containers
(live-restore off) is announced with a warning, or refused with
``docker_restart_running_containers: refuse``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pyinfra import host, logger, state
from pyinfra.api import QuoteString, StringCommand, deploy, operation

from gpuhost.facts import parsers
from gpuhost.facts.container import DockerDaemonView, DockerdValidates
from gpuhost.facts.files import RawFile
from gpuhost.facts.pyinfra_api import color_diff
from gpuhost.runtime import daemon_json as merge_rules
from gpuhost.roles import restart
from gpuhost.roles.common import fail_command, host_settings
from gpuhost.roles.files import atomic_write

PATH = "/etc/docker/daemon.json"
STATE = "/var/lib/gpuhost/docker-daemon-json-keys.json"
# docker.io's and docker-ce's docker.service both start `dockerd -H fd:// --containerd=...`:
# what a host without Docker yet will get
STOCK_EXEC_START = "/usr/sbin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock"


def preflight_problem(path: str = PATH) -> str | None:
    """A hand-written daemon.json key that docker.service also passes as a flag: dockerd
    would refuse to start, so the host is refused before anything changes."""
    from gpuhost.facts.files import RawFile as _RawFile

    text = host.get_fact(_RawFile, path=path)
    if not text:
        return None
    try:
        existing = parsers.parse_daemon_json(text)
    except ValueError:
        return None  # host_ready refuses an invalid file with its own message
    view = host.get_fact(DockerDaemonView, path=path, state_path=STATE)
    argv = merge_rules.dockerd_flags(view["exec_start"] or STOCK_EXEC_START, view["environment"])
    clashes = merge_rules.flag_clashes(existing, argv)
    return merge_rules.clash_message(path, clashes) if clashes else None


def _disagreement(config: dict[str, Any], daemon: dict[str, Any]) -> str | None:
    """Why the running daemon does not run what the file says (None: it does)."""
    if not daemon["running"]:
        return "Docker is not running"
    runtimes = config.get("runtimes") if isinstance(config.get("runtimes"), dict) else {}
    missing = sorted(set(runtimes) - set(daemon["runtimes"]))
    if missing:
        return f"the running Docker lacks the runtime(s) {', '.join(missing)} of daemon.json"
    want = config.get("default-runtime") or "runc"
    if daemon["default_runtime"] and daemon["default_runtime"] != want:
        return (f"the running Docker's default runtime is {daemon['default_runtime']}, "
                f"daemon.json says {want}")
    return None


DOCKER_ERRORS = "grep -i -e 'error' -e 'unable' -e 'failed'"


def checked_restart(target: str, backup: str | None) -> StringCommand:
    """Restart Docker and wait for it (``roles.restart.checked_restart``); if it does not
    come back, put ``backup`` back (or remove ``target`` when there was no file before:
    ``backup`` None), start Docker again and fail with what dockerd logged since the
    restart."""
    restore = (StringCommand("cp -p", QuoteString(backup), QuoteString(target)) if backup
               else StringCommand("rm -f", QuoteString(target)))
    what = "put the previous file back" if backup else "removed the new file"
    return restart.checked_restart(
        "docker.service", "docker info >/dev/null 2>&1",
        f"gpuhost: Docker did not start with the new {target}; gpuhost {what} and started "
        "Docker again. dockerd said:", errors=DOCKER_ERRORS, undo=[restore, ";"])


def checked_restart_only() -> StringCommand:
    """Restart Docker (the file did not change): fail with what dockerd logged since the
    restart if it does not come back (nothing to put back)."""
    return restart.checked_restart(
        "docker.service", "docker info >/dev/null 2>&1",
        "gpuhost: Docker does not start with daemon.json as it is. dockerd said:",
        errors=DOCKER_ERRORS)


@operation()
def daemon_json(
    default_runtime: bool = False,
    extra: dict[str, Any] | None = None,
    path: str = PATH,
    running_containers: str = "warn",
):
    """
    Merge the nvidia runtime (and optional extra settings) into Docker's daemon.json and
    make the running Docker use it (restart checked, put back when Docker does not start).

    + default_runtime: make ``nvidia`` Docker's default runtime
    + extra: more daemon.json keys to set (dicts merge one level deep)
    + path: the daemon.json to manage (a symlink is followed)
    + running_containers: ``warn`` or ``refuse`` a restart that stops running containers

    Keeps every key already in the file; an nvidia runtime written in ``args`` or
    ``runtimeArgs`` style, with a relative or absolute path, is left as it is. Keys gpuhost
    set on an earlier run and no longer asked for are removed.
    """
    view = host.get_fact(DockerDaemonView, path=path, state_path=STATE)
    target = view["realpath"] or path
    text = host.get_fact(RawFile, path=target)
    try:
        existing = parsers.parse_daemon_json(text or "")
    except ValueError as error:
        yield fail_command(merge_rules.invalid_message(path, str(error)))
        return
    merged, managed = merge_rules.apply_settings(
        existing, default_runtime=default_runtime, extra=extra, previous=view["managed"])
    file_changes = merged != existing or text is None
    disagree = None if file_changes or not view["unit"] else _disagreement(merged, view["daemon"])
    restart = view["unit"] and (file_changes or disagree is not None)
    daemon = view["daemon"]
    if restart and daemon["running"] and not daemon["live_restore"] and daemon["containers_running"]:
        message = (f"restarting Docker stops the {daemon['containers_running']} running "
                   "container(s) (live-restore is off)")
        if running_containers == "refuse":
            yield fail_command(f"{message}; gpuhost changed nothing "
                               "(docker_restart_running_containers: refuse)")
            return
        logger.warning(f"{host.name}: {message}")
    if file_changes:
        content = merge_rules.render(merged)
        if state.config.DIFF:
            host.log(f"Will {'modify' if text is not None else 'create'} {target} "
                     f"(keys: {', '.join(merge_rules.changed_keys(existing, merged))})", logger.info)
            before = [line + "\n" for line in merge_rules.render(existing).splitlines()] if text else []
            for line in color_diff(before, content.splitlines(keepends=True)):
                logger.info("  %s", line)
        validates = host.get_fact(DockerdValidates)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        backup = f"{target}.gpuhost-{stamp}.bak" if text is not None else None

        def check_and_back_up(new: str):
            if text is not None:  # keep the file's mode and owner
                yield StringCommand("chmod --reference", QuoteString(target), QuoteString(new))
                yield StringCommand("chown --reference", QuoteString(target), QuoteString(new))
            if validates:
                yield StringCommand(
                    "dockerd --validate --config-file", QuoteString(new),
                    "|| { rm -f", QuoteString(new), "; exit 1; }",
                )
            if backup:
                yield StringCommand("cp -p", QuoteString(target), QuoteString(backup))

        yield from atomic_write(target, content.encode(), "644", before_rename=check_and_back_up)
    else:
        backup = None
    if restart:
        if disagree:
            host.log(f"Restarting Docker: {disagree}", logger.info)
        yield checked_restart(target, backup) if file_changes else checked_restart_only()
    if view["managed"] != managed:
        yield from atomic_write(STATE, (json.dumps(managed, sort_keys=True) + "\n").encode(), "600")
    if not file_changes and not restart and view["managed"] == managed:
        host.noop(f"{path} already has the nvidia runtime and the wanted settings, "
                  "and the running Docker uses them")


@deploy("Docker daemon.json")
def configure() -> None:
    """Write the nvidia runtime into daemon.json; restart Docker (checked) when the file
    changed or the running daemon does not use it."""
    from gpuhost.roles import cdi

    config = host_settings()
    daemon_json(
        name="Merge the nvidia runtime into /etc/docker/daemon.json (restart Docker if needed)",
        default_runtime=bool(config.nvidia_default_runtime),
        extra=merge_rules.mode_settings(config.docker_daemon_settings, cdi.runtime_mode(config))
        or None,
        running_containers=config.docker_restart_running_containers,
    )
