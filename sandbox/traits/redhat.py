"""RHEL host traits.

rhsm-registered: the host is registered with Red Hat's subscription service, as a RHEL host
must be to have any Red Hat repository: registered in the booted host with
`subscription-manager register --org ... --activationkey ...`, the way an admin or a
kickstart does (the sandbox's stand-in, sandbox/files/subscription-manager). A RHEL host
without this trait (`--spec '{"rhel10-03": {"traits": []}}'`) is unregistered: no
redhat.repo, and `subscription-manager identity` exits 1.
"""
from __future__ import annotations

from . import Trait, register


def _register(h: dict, sh) -> None:
    sh("subscription-manager register --org=gpuhost-sandbox --activationkey=sandbox >/dev/null")


register(Trait(
    name="rhsm-registered",
    doc="RHEL: registered with subscription-manager (redhat.repo: BaseOS and AppStream enabled)",
    source=("Red Hat's 'Registering RHEL' documentation: content comes through a registered "
            "subscription (redhat.repo written by subscription-manager); "
            "subscription-manager's ERR_NOT_REGISTERED_CODE = 1 when unregistered"),
    oses=("rhel10",),
    default=lambda h: h["os"] == "rhel10",
    booted=_register,
))
