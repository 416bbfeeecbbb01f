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


# An OL9 host booted into UEK that also has Red Hat Compatible Kernel installed: OL's
# installer puts both kernels on a host, and an OL 9.4 install's RHCK is older than the
# channels' newest. EPEL 9's dkms `Requires: (kernel-devel-matched if kernel-core)`, so
# installing dkms there makes dnf pull the newest kernel-devel-matched and with it the
# newest kernel-core (issue 23 item 4).
RHCK_INSTALLED = "5.14.0-427.13.1.el9_4"


def _install_rhck(h: dict, sh) -> None:
    sh(f"dnf -q -y install kernel-core-{RHCK_INSTALLED}")


register(Trait(
    name="rhck-installed",
    doc=f"OL9: RHCK kernel-core {RHCK_INSTALLED} installed beside the running UEK",
    source=("Oracle Linux installs both UEK and RHCK (the UEK boots by default); EPEL 9 "
            "dkms.spec 'Requires: (kernel-devel-matched if kernel-core)' (Fedora's dkms.spec "
            "3.1.x-3.2.x); kernel-devel-matched requires kernel-core and kernel-devel of its "
            "own version"),
    oses=("ol9",),
    booted=_install_rhck,
))
