"""Merge the nvidia runtime into /etc/docker/daemon.json, keeping everything the user had.

``daemon_json`` is an idempotent operation: it reads the file at execute time, merges with
``gpuhost.daemon_json.merge`` and compares parsed structures, so a converged host gets no
change and Docker is restarted only when the parsed content changed. A file that is not
valid JSON is refused with its line and column and left untouched (that host fails, the
others go on). Writes are atomic: the new content is uploaded beside the file, validated with
``dockerd --validate`` when the installed Docker has it, a timestamped backup of the old file
is kept, and the new file is renamed into place.
"""

from __future__ import annotations

import time
from typing import Any

from pyinfra import host, logger, state
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.operations import server
from pyinfra.operations.util.files import generate_color_diff

from facts import parsers
from facts.container import DockerdValidates
from facts.files import RawFile
from gpuhost import daemon_json as merge_rules
from roles.common import fail_command, host_settings
from roles.files import atomic_write

PATH = "/etc/docker/daemon.json"


def _reason(error: ValueError) -> str:
    """The parser's reason alone (``Expecting ',' delimiter at line 3 column 2``)."""
    text = str(error)
    if "is not valid JSON: " in text:
        text = text.split("is not valid JSON: ", 1)[1]
    return text.removesuffix("; fix or remove the file")


@operation()
def daemon_json(
    default_runtime: bool = False,
    extra: dict[str, Any] | None = None,
    path: str = PATH,
):
    """
    Merge the nvidia runtime (and optional extra settings) into Docker's daemon.json.

    + default_runtime: make ``nvidia`` Docker's default runtime
    + extra: more daemon.json keys to set (dicts merge one level deep)
    + path: the daemon.json to manage

    Keeps every key already in the file; an nvidia runtime written in ``args`` or
    ``runtimeArgs`` style, with a relative or absolute path, is left as it is.
    """
    text = host.get_fact(RawFile, path=path)
    try:
        existing = parsers.parse_daemon_json(text or "")
    except ValueError as error:
        yield fail_command(
            f"{path} is not valid JSON ({_reason(error)}); gpuhost left it untouched. "
            "Fix the file (or move it away) and run again."
        )
        return
    merged = merge_rules.merge(existing, default_runtime=default_runtime, extra=extra)
    if merged == existing and text is not None:
        host.noop(f"{path} already has the nvidia runtime and the wanted settings")
        return
    content = merge_rules.render(merged)
    if state.config.DIFF:
        host.log(f"Will {'modify' if text is not None else 'create'} {path} "
                 f"(keys: {', '.join(merge_rules.changed_keys(existing, merged))})", logger.info)
        before = [line + "\n" for line in merge_rules.render(existing).splitlines()] if text else []
        for line in generate_color_diff(before, content.splitlines(keepends=True)):
            logger.info("  %s", line)
    validates = host.get_fact(DockerdValidates)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())

    def check_and_back_up(new: str):
        if validates:
            yield StringCommand(
                "dockerd --validate --config-file", QuoteString(new),
                "|| { rm -f", QuoteString(new), "; exit 1; }",
            )
        if text is not None:
            yield StringCommand("cp -p", QuoteString(path),
                                QuoteString(f"{path}.gpuhost-{stamp}.bak"))

    yield from atomic_write(path, content.encode(), "644", before_rename=check_and_back_up)


@deploy("Docker daemon.json")
def configure() -> None:
    """Write the nvidia runtime into daemon.json and restart Docker only on a real change."""
    config = host_settings()
    merged = daemon_json(
        name="Merge the nvidia runtime into /etc/docker/daemon.json",
        default_runtime=bool(config.nvidia_default_runtime),
        extra=config.docker_daemon_settings or None,
    )
    server.service(
        name="Restart Docker (daemon.json changed)",
        service="docker",
        restarted=True,
        _if=merged.did_change,
    )
