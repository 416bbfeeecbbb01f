"""containerd's nvidia runtime through a drop-in file, for Kubernetes nodes (optional role).

On with ``containerd_nvidia_runtime: true``: gpuhost writes
``/etc/containerd/conf.d/99-nvidia.toml`` as ``nvidia-ctk runtime configure
--runtime=containerd`` (toolkit 1.18) would, but never rewrites the user's
``/etc/containerd/config.toml``. The rules (which runtime table is copied, the CRI plugin
per config version, when the drop-in is in effect) live in ``gpuhost.runtime.containerd``;
docs/containerd.md says what gpuhost chose and why.

A config.toml that would leave the drop-in unread (no ``imports`` covering conf.d, a
version 1 file, the CRI plugin disabled as in Docker's containerd.io) fails the host with
the line to change; nothing is written. containerd is restarted only when gpuhost's file
changed, and checked: it must answer (``ctr version``) and its effective configuration
(``containerd config dump``) must hold the nvidia runtime. When containerd does not come
back, gpuhost's previous file is put back (or the new one removed) and containerd started
again; the host fails with containerd's own words.
"""

from __future__ import annotations

import hashlib

from pyinfra import host, logger, state
from pyinfra.api import QuoteString, StringCommand, deploy, operation

from gpuhost.facts.containerd import ContainerdView
from gpuhost.facts.pyinfra_api import color_diff
from gpuhost.runtime import containerd as rules
from gpuhost.roles import restart
from gpuhost.roles.common import fail_command, host_settings, host_state
from gpuhost.runtime import cdi
from gpuhost.roles.files import atomic_write

# `ctr plugins ls` status of the CRI plugin (1.x: io.containerd.grpc.v1 cri; 2.x: the
# runtime half is io.containerd.cri.v1 runtime)
CRI_STATUS = ('($1 == "io.containerd.grpc.v1" && $2 == "cri") || '
              '($1 == "io.containerd.cri.v1" && $2 == "runtime") { print $NF }')
OLD = rules.DROP_IN.rsplit("/", 1)[0] + "/.99-nvidia.toml.gpuhost-old"


def checked_restart(restore: list[str], want_nvidia: bool = True) -> StringCommand:
    """Restart containerd (``roles.restart.checked_restart``): it must answer (``ctr
    version``), its CRI plugin must load and, with ``want_nvidia``, its effective config
    (``containerd config dump``) must have the nvidia runtime; otherwise ``restore`` (shell
    commands that put gpuhost's previous files back) runs, containerd is restarted and the
    host fails with the errors containerd logged since the restart."""
    if not want_nvidia:
        check = ["rm -f", QuoteString(OLD), "; exit 0; fi;"]
    else:
        check = [
            "if containerd config dump 2>/dev/null | grep -Eq",
            QuoteString(r"\.containerd\.runtimes\.nvidia\]"), "; then rm -f", QuoteString(OLD),
            "; exit 0; fi;",
            "echo", QuoteString(
                "gpuhost: containerd restarted, but `containerd config dump` shows no nvidia "
                f"runtime: something else decides what containerd reads ({rules.DROP_IN} is "
                "not imported)"), ">&2; exit 1; fi;"]
    return restart.checked_restart(
        "containerd.service", "ctr version >/dev/null 2>&1",
        "gpuhost: containerd did not start (or its CRI plugin did not load) with the nvidia "
        "drop-in; gpuhost put its previous files back and started containerd again. "
        "containerd said:",
        # containerd stays up when its CRI plugin fails to load: that is a failure too
        verify=["cri=$(ctr plugins ls 2>/dev/null | awk", QuoteString(CRI_STATUS), ");",
                'if test "$cri" != error; then', *check],
        errors="grep -e '^containerd: ' -e 'level=error' -e 'level=fatal'"
               " -e 'failed to load plugin io.containerd.grpc.v1.cri'"
               " -e 'failed to load plugin io.containerd.cri'"
               " | grep -v 'failed to load cni during init'",
        undo=[" ".join(f"{c};" for c in restore)] if restore else [])


def _show(path: str, content: str, exists: bool) -> None:
    if state.config.DIFF:
        host.log(f"Will {'modify' if exists else 'create'} {path}", logger.info)
        for line in color_diff([], content.splitlines(keepends=True)):
            logger.info("  %s", line)


def _same_as_written(view: dict, content: str) -> bool:
    """The drop-in on the host holds ``content``'s data in another layout (written by
    gpuhost's TOML writer before tomli-w): left alone, containerd is not restarted for it.
    Judged from the host state's copy of the file when its digest is the one read now."""
    text = (host_state().get("containerd") or {}).get("drop_in")
    return (text is not None and view["drop_in_sha256"] is not None
            and hashlib.sha256(text.encode()).hexdigest() == view["drop_in_sha256"]
            and rules.same_drop_in(text, content))


@operation()
def nvidia_runtime(default_runtime: bool = False, enable_cdi: bool = False,
                   toolkit_version: str | None = None):
    """
    containerd's CRI plugin gets the ``nvidia`` runtime from a gpuhost drop-in file, and the
    running containerd uses it (restart checked, gpuhost's file put back on failure).

    + default_runtime: make ``nvidia`` the CRI plugin's default runtime
    + enable_cdi: the CRI plugin's ``enable_cdi = true`` (container_runtime_mode cdi)
    + toolkit_version: the toolkit the deploy installs (its CDI spec schema, with enable_cdi)
    """
    view = host.get_fact(ContainerdView, config=rules.CONFIG, drop_in=rules.DROP_IN)
    if not view["installed"]:
        yield fail_command("containerd_nvidia_runtime is on but containerd is not installed "
                           "(gpuhost configures the containerd your Kubernetes setup installs)")
        return
    if view["config_flag"] and view["config_flag"] != rules.CONFIG:
        yield fail_command(
            f"containerd.service starts containerd with --config {view['config_flag']}; gpuhost "
            f"only handles {rules.CONFIG} (containerd's default); nothing changed")
        return
    from gpuhost import kubernetes

    refused = kubernetes.containerd_problem(host_settings().kubernetes_profile, view["version"])
    if refused:
        yield fail_command(refused)
        return
    if enable_cdi and cdi.runtime_too_old_for_schema("containerd", toolkit_version,
                                                     view["version"]):
        from gpuhost.roles.cdi import runtime_mode
        from gpuhost.runtime import cdi_schema

        why = cdi_schema.why_cdi(host_settings(), runtime_mode() == "cdi")
        yield fail_command(cdi.schema_refusal("containerd", toolkit_version, view["version"], why))
        return
    major = rules.major_version(view["version"])
    text = view["config"]
    try:
        config = rules.parse(text or "")
        version = rules.config_version(config, major)
        if text is not None:
            found = rules.problems(config, rules.CONFIG, version, major)
            if found:
                yield fail_command("; ".join(found))
                return
        content = rules.render_drop_in(config, version, default_runtime, enable_cdi=enable_cdi)
    except rules.ContainerdConfigError as error:
        yield fail_command(str(error))
        return

    restore = []
    changed = False
    if text is None:  # no config.toml: the one nvidia-ctk writes (containerd's defaults + imports)
        top = rules.top_config(version)
        _show(rules.CONFIG, top, False)
        yield from atomic_write(rules.CONFIG, top.encode(), "644")
        restore.append(f"rm -f {rules.CONFIG}")
        changed = True
    digest = hashlib.sha256(content.encode()).hexdigest()
    if digest != view["drop_in_sha256"] and not _same_as_written(view, content):
        _show(rules.DROP_IN, content, view["drop_in_sha256"] is not None)
        if view["drop_in_sha256"] is not None:
            def keep_old(new: str):
                yield StringCommand("cp -p", QuoteString(rules.DROP_IN), QuoteString(OLD))
            yield from atomic_write(rules.DROP_IN, content.encode(), "644", before_rename=keep_old)
            restore.insert(0, f"mv -f {OLD} {rules.DROP_IN}")
        else:
            yield from atomic_write(rules.DROP_IN, content.encode(), "644")
            restore.insert(0, f"rm -f {rules.DROP_IN}")
        changed = True
    if not changed:
        host.noop(f"{rules.DROP_IN} gives containerd the nvidia runtime and {rules.CONFIG} "
                  "imports it")
        return
    if view["active"]:
        yield checked_restart(restore)
    else:
        logger.warning(f"{host.name}: containerd is not running; the nvidia runtime is in "
                       "effect when it starts (gpuhost did not start it)")
        yield StringCommand("rm -f", QuoteString(OLD))


@operation()
def no_drop_in():
    """
    ``containerd_nvidia_runtime`` is off: gpuhost's own drop-in (its header; one nvidia-ctk
    or the user wrote stays) is removed and containerd restarted without it, checked (put
    back and containerd started again when it does not come up). Judged from the one host
    state command: a host without gpuhost's drop-in gets no command.
    """
    view = host_state().get("containerd") or {}
    if not rules.is_gpuhosts(view.get("drop_in")):
        host.noop(f"no gpuhost drop-in {rules.DROP_IN} (containerd_nvidia_runtime is off)")
        return
    yield StringCommand("mv -f", QuoteString(rules.DROP_IN), QuoteString(OLD))
    yield checked_restart([f"mv -f {OLD} {rules.DROP_IN}"], want_nvidia=False)


@deploy("containerd nvidia runtime")
def configure() -> None:
    """With ``containerd_nvidia_runtime: true`` (Kubernetes nodes) gpuhost's drop-in; off,
    gpuhost's drop-in removed where an earlier run wrote it."""
    config = host_settings()
    if not config.containerd_nvidia_runtime:
        if (host_state().get("containerd") or {}).get("installed"):
            no_drop_in(name=f"No gpuhost drop-in {rules.DROP_IN} "
                            "(containerd_nvidia_runtime is off)")
        return
    from gpuhost import kubernetes
    from gpuhost.roles.cdi import runtime_mode

    nvidia_runtime(
        name=f"containerd's nvidia runtime in {rules.DROP_IN} (restart containerd if needed)",
        default_runtime=bool(config.containerd_nvidia_default_runtime),
        enable_cdi=runtime_mode(config) == "cdi"
        or kubernetes.cdi_in_containerd(config.kubernetes_profile),
        toolkit_version=config.container_toolkit_version,
    )
