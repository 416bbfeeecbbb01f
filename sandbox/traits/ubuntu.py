"""Stock traits of Ubuntu and Debian images: unattended-upgrades enabled, the distribution's
docker.io or containerd already installed (sandbox/README.md, "Ubuntu hosts").

Each trait is applied after the host's first boot with the host's own apt from the
sandbox's archives (real dpkg state, real systemd units), then configured as the images
ship it.
"""
from __future__ import annotations

from . import Trait, register

APT_HOSTS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404", "ubuntu2604")
UBUNTU = ("ubuntu2204", "ubuntu2404", "ubuntu2604")

APT_INSTALL = ("export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && "
               "apt-get install -y -q --no-install-recommends {pkgs} >/dev/null")

# /etc/apt/apt.conf.d/20auto-upgrades as Ubuntu's images carry it (and as
# `dpkg-reconfigure -plow unattended-upgrades` writes it on Debian).
AUTO_UPGRADES = 'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n'

# Ubuntu's /etc/apt/apt.conf.d/50unattended-upgrades (its first stanza): the hosts carry
# Debian's unattended-upgrades package, whose own file names Debian's origins; an Ubuntu
# host gets Ubuntu's origins so the tool acts on the sandbox's Ubuntu archive (Origin:
# Ubuntu) as it would on the real one.
UBUNTU_ORIGINS = """\
// gpuhost sandbox: Ubuntu's 50unattended-upgrades (Allowed-Origins as Ubuntu ships them)
Unattended-Upgrade::Allowed-Origins {
	"${distro_id}:${distro_codename}";
	"${distro_id}:${distro_codename}-security";
	"${distro_id}ESMApps:${distro_codename}-apps-security";
	"${distro_id}ESM:${distro_codename}-infra-security";
};
Unattended-Upgrade::Package-Blacklist {
};
Unattended-Upgrade::DevRelease "auto";
"""


def _unattended(h: dict, sh) -> None:
    sh(APT_INSTALL.format(pkgs="unattended-upgrades"))
    sh("printf '%s' " + _q(AUTO_UPGRADES) + " > /etc/apt/apt.conf.d/20auto-upgrades")
    if h["os"] in UBUNTU:
        sh("printf '%s' " + _q(UBUNTU_ORIGINS) + " > /etc/apt/apt.conf.d/50unattended-upgrades")
    sh("systemctl enable --now unattended-upgrades.service apt-daily.timer "
       "apt-daily-upgrade.timer >/dev/null 2>&1")


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)


register(Trait(
    name="unattended-upgrades",
    doc="unattended-upgrades installed and enabled (20auto-upgrades: lists and upgrades daily)",
    source="Ubuntu Server documentation, 'Automatic updates' (unattended-upgrades installed "
           "and on by default, /etc/apt/apt.conf.d/20auto-upgrades); Debian wiki "
           "UnattendedUpgrades (the same two APT::Periodic lines)",
    oses=APT_HOSTS,
    default=lambda h: h["os"] in UBUNTU,
    booted=_unattended,
))


# trixie split the docker client out of docker.io: docker.io Recommends docker-cli, which a
# default install (recommends on) brings; the trait installs without recommends, so names it
TRIXIE_ROOTED = ("debian13", "ubuntu2604")
EXTRA = {"docker.io": "docker-cli"}


def _installed_running(pkg: str, unit: str):
    def booted(h: dict, sh) -> None:
        extra = EXTRA.get(pkg, "") if h["os"] in TRIXIE_ROOTED else ""
        sh(APT_INSTALL.format(pkgs=f"{pkg} {extra}".strip()))
        # Debian's and Ubuntu's packages enable and start their unit in postinst
        # (deb-systemd-helper, invoke-rc.d): check, do not help.
        sh(f"systemctl is-active --quiet {unit}")
    return booted


register(Trait(
    name="distro-docker",
    doc="the distribution's docker.io already installed and running",
    source="Ubuntu's and Debian's docker.io package (docker.service enabled and started by "
           "its postinst); Docker's Ubuntu/Debian install guides list docker.io among the "
           "conflicting packages to remove first",
    oses=APT_HOSTS,
    booted=_installed_running("docker.io", "docker.service"),
))

register(Trait(
    name="distro-containerd",
    doc="the distribution's containerd (and runc) already installed and running",
    source="Ubuntu's and Debian's containerd package (containerd.service enabled by its "
           "postinst); Docker's install guides list containerd and runc as conflicting "
           "with containerd.io",
    oses=APT_HOSTS,
    booted=_installed_running("containerd", "containerd.service"),
))
