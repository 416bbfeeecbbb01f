"""Oracle Linux host traits.

container-tools: OL8's container tools (podman, buildah, runc, containers-common), as many
OL8 servers and cloud images carry them. Installed in the booted host with `dnf install`
from the host's stock channels (ol8_appstream), the way an admin or an image build does.
Docker's containerd.io obsoletes and conflicts with runc, so `dnf install docker-ce
containerd.io` stops on such a host (sandbox/tests/test_traits_oracle.py shows it).
"""
from __future__ import annotations

from . import Trait, register

CONTAINER_TOOLS = ("podman", "buildah", "runc", "containers-common")


def _install_container_tools(h: dict, sh) -> None:
    sh("dnf -q -y install " + " ".join(CONTAINER_TOOLS))


register(Trait(
    name="container-tools",
    doc="OL8: podman, buildah, runc and containers-common installed from ol8_appstream",
    source=("Oracle Linux 8 AppStream container-tools (podman, buildah, runc, "
            "containers-common); Docker's RHEL guide (docs.docker.com/engine/install/rhel: "
            "'dnf remove ... podman runc' before installing containerd.io, which conflicts "
            "with runc)"),
    oses=("ol8",),
    # every OL8 host of a fleet by default (a fleet's OL8 hosts are its first --ol hosts;
    # `--spec '{"ol8-03": {"traits": []}}'` gives a bare OL8 host)
    default=lambda h: h["os"] == "ol8",
    booted=_install_container_tools,
))
