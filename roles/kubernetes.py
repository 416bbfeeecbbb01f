"""IMEX as the Kubernetes node profile wants it (``kubernetes_profile``, docs/kubernetes.md),
called by ``roles.fabric`` on NVL hosts; the rules are in ``gpuhost.kubernetes``.

- ``dra``: ``nvidia-imex.service`` disabled, stopped and masked (the DRA driver's
  prerequisites: ``systemctl disable --now nvidia-imex.service && systemctl mask
  nvidia-imex.service``);
- any other profile: a unit masked by an earlier ``dra`` run is unmasked first (systemd
  refuses to enable a masked unit), then ``roles.fabric`` enables and starts it;
- ``dra-host-managed-imex``: ``IMEX_CMD_ENABLED=1`` and the control socket's path in
  ``/etc/nvidia-imex/config.cfg`` (each key set in place, the rest of NVIDIA's file kept).

Each operation reads the unit's state when it runs: no command on a host that is already so.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.server import Command

from gpuhost import kubernetes

_STATE = ("systemctl is-enabled nvidia-imex.service 2>/dev/null; "
          "systemctl is-active nvidia-imex.service 2>/dev/null; true")


def _unit() -> tuple[str, str]:
    words = (host.get_fact(Command, command=_STATE) or "").split()
    return (words + ["unknown", "unknown"])[0], (words + ["unknown", "unknown"])[1]


@operation(is_idempotent=True)
def imex_masked():
    """
    nvidia-imex.service disabled, stopped and masked (kubernetes_profile: dra).
    """
    enabled, active = _unit()
    if enabled == "masked" and active != "active":
        host.noop("nvidia-imex.service is masked and stopped (the DRA driver runs IMEX)")
        return
    unit = kubernetes.IMEX_SERVICE + ".service"
    yield StringCommand("systemctl disable --now", QuoteString(unit), "&&",
                        "systemctl mask", QuoteString(unit))


@operation(is_idempotent=True)
def imex_unmasked():
    """
    nvidia-imex.service no longer masked (a profile other than dra after a dra run).
    """
    enabled, _active = _unit()
    if enabled != "masked":
        host.noop("nvidia-imex.service is not masked")
        return
    yield StringCommand("systemctl unmask", QuoteString(kubernetes.IMEX_SERVICE + ".service"))


@operation(is_idempotent=True)
def imex_host_managed():
    """
    IMEX's config.cfg has the keys the DRA driver's hostManaged mode needs
    (kubernetes_profile: dra-host-managed-imex).
    """
    from pyinfra.facts.files import FileContents

    lines = host.get_fact(FileContents, path=kubernetes.IMEX_CONFIG) or []
    path = QuoteString(kubernetes.IMEX_CONFIG)
    changed = False
    for key, value in kubernetes.HOST_MANAGED_IMEX:
        want = f"{key}={value}"
        if want in lines:
            continue
        changed = True
        if any(line.startswith(f"{key}=") for line in lines):
            yield StringCommand("sed -i", QuoteString(f"s|^{key}=.*|{want}|"), path)
        else:
            yield StringCommand("printf '%s\\n'", QuoteString(want), ">>", path)
    if not changed:
        host.noop(f"{kubernetes.IMEX_CONFIG} has IMEX_CMD_ENABLED=1 and its control socket")


def configure(profile: str, installed) -> None:
    """Before roles.fabric's IMEX enable/start (``installed``: a callable, is the unit
    there); returns the config.cfg operation for dra-host-managed-imex (its change restarts
    IMEX), else None."""
    if kubernetes.imex_masked(profile):
        imex_masked(name="nvidia-imex disabled and masked (kubernetes_profile: dra)",
                    _if=installed)
        return None
    imex_unmasked(name=f"nvidia-imex not masked (kubernetes_profile: {profile})", _if=installed)
    if profile == "dra-host-managed-imex":
        return imex_host_managed(
            name="IMEX_CMD_ENABLED=1 and the control socket in config.cfg "
                 "(kubernetes_profile: dra-host-managed-imex)", _if=installed)
    return None
