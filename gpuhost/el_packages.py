"""Enterprise Linux packaging: the repositories each distribution needs (its vendor's names,
``gpuhost.eldistros``), container-tools vs Docker, the exact version lock of the driver,
dnf's proxy (pure, no pyinfra). docs/real-hosts.md has the vendor sources of each fact."""

from __future__ import annotations

import re

from gpuhost import eldistros


# OL8's container-tools packages: Docker's containerd.io obsoletes and conflicts with runc
# (podman and buildah require it), so `dnf install docker-ce containerd.io` stops on them.
EL_CONTAINER_TOOLS = ("podman", "buildah", "runc", "containers-common")
VERSIONLOCK_PLUGIN = "python3-dnf-plugin-versionlock"
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"


def repo_plan(os_id: str, version_id: str, arch: str, setting: tuple[str, ...] | None,
              mirrors: dict | None = None) -> dict:
    """What gpuhost enables on an EL host before the driver, and how.

    ``setting`` (``el_enable_repos``) given: exactly those ids, with ``dnf config-manager``.
    Else, with ``el_repo_urls`` (``mirrors``) given: nothing more (those repositories are
    written enabled). Else the distribution's own channels (``gpuhost.eldistros``): CodeReady
    Builder and EPEL as its vendor names them. Returns ``{"config_manager": [ids],
    "subscription": [ids], "epel": id, "epel_release": package or URL or None,
    "registration": bool}``; ``epel`` is the vendor's EPEL id either way (for messages)."""
    channels = eldistros.channels(os_id, version_id, arch)
    plan = {"config_manager": [], "subscription": [], "epel": channels.epel,
            "epel_release": None, "registration": False}
    if setting is not None:
        plan["config_manager"] = list(setting)
        return plan
    if mirrors:
        return plan
    if channels.crb_by == "subscription-manager":
        plan["subscription"] = [channels.crb]
    else:
        plan["config_manager"] = [channels.crb]
    plan["config_manager"].append(channels.epel)
    plan["epel_release"] = channels.epel_release
    plan["registration"] = eldistros.DISTRIBUTIONS[os_id].registration
    return plan


def unregistered_message(host: str, installed: bool = True) -> str:
    """An unregistered RHEL host (or one without subscription-manager): no Red Hat
    repository through subscription-manager, so no CodeReady Builder."""
    why = ("is not registered (subscription-manager identity)" if installed
           else "has no subscription-manager")
    return (f"{host}: this RHEL host {why}, so gpuhost cannot enable its Red Hat "
            "repositories: register it (subscription-manager register), or name the "
            "repositories it has (el_enable_repos, e.g. a cloud image's RHUI "
            "codeready-builder-for-rhel-N-rhui-rpms) or give them by URL (el_repo_urls, e.g. "
            "your Satellite or mirror); nothing was changed")


def release_lags_message(host: str, release: str, epel: str) -> str:
    """The EPEL release package is installed but does not define the channel gpuhost would
    enable (Oracle Linux 10: the package may lag the host's update level)."""
    return (f"{host}: {release} is installed but defines no {epel} (/etc/yum.repos.d): set "
            "el_enable_repos to the EPEL repository this host should use, or give it by URL "
            "(el_repo_urls); nothing was changed")


def mirror_repo_file(mirrors: dict) -> str:
    """/etc/yum.repos.d/gpuhost-mirrors.repo: one enabled, signature-checked section per
    ``el_repo_urls`` entry (id -> {"baseurl", "gpgkey"})."""
    lines = ["# Managed by gpuhost (el_repo_urls)"]
    for repo_id in sorted(mirrors):
        entry = mirrors[repo_id]
        lines += ["", f"[{repo_id}]", f"name={repo_id} (gpuhost el_repo_urls)",
                  f"baseurl={entry['baseurl']}", "enabled=1", "gpgcheck=1",
                  f"gpgkey={entry['gpgkey']}"]
    return "\n".join(lines) + "\n"


MIRROR_REPO_FILE = "/etc/yum.repos.d/gpuhost-mirrors.repo"


def dkms_missing_message(epel: str, enabled: list[str]) -> str:
    """Why the driver cannot install when no enabled repository carries dkms (``epel``:
    the distribution's EPEL id, as ``repo_plan`` names it)."""
    if epel in enabled:
        where = (f"gpuhost enabled {epel}, yet it offers no dkms here: "
                 "check that channel or your mirror of it")
    else:
        where = (f"dkms comes from EPEL ({epel} on this distribution), which gpuhost did not "
                 f"enable (el_enable_repos): add {epel}, or the id of your mirror of it, to "
                 "el_enable_repos, or give it by URL (el_repo_urls)")
    return (f"gpuhost: NVIDIA's kmod-nvidia-*-dkms packages need dkms, and no enabled "
            f"repository provides it. {where}, then run again.")


def container_tools_message(host: str, installed: list[str]) -> str:
    return (f"{host}: {', '.join(installed)} installed: Docker's containerd.io obsoletes and "
            "conflicts with runc, so dnf cannot install Docker next to them. Set "
            "docker_replace_podman: true to remove them first (as Docker's RHEL guide "
            "does), or docker_source: none to keep them; nothing was changed on this host")


def lock_installed_command(version: str) -> str:
    """Shell: ``dnf versionlock add`` every installed package named *nvidia* at ``version``
    (NAME-EPOCH:VERSION-RELEASE, as ``versionlock_spec``); fails when there is none."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)+", version):
        raise ValueError(f"{version!r} is not a driver version")
    return ("locks=$(rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' '*nvidia*' "
            f"| grep -F -e ':{version}-') && test -n \"$locks\" && "
            "dnf versionlock add $locks")


def release_package_name(release: str) -> str:
    """The package a release package file or name installs: ``oracle-epel-release-el10``
    as it is; Fedora's ``.../epel-release-latest-10.noarch.rpm`` -> ``epel-release``."""
    if "://" not in release:
        return release
    name = release.rsplit("/", 1)[-1].removesuffix(".rpm").removesuffix(".noarch")
    return re.sub(r"-latest-\d+$", "", name)


def versionlock_spec(name: str, version: str) -> str:
    """The line `dnf versionlock add` writes for an installed package: NAME-EPOCH:VERSION-
    RELEASE.* (epoch 0 when the package has none); ``version`` as rpm facts give it."""
    evr = version if ":" in version.split("-", 1)[0] else f"0:{version}"
    return f"{name}-{evr}.*"


def versionlock_changes(installed: dict[str, str], locks: list[str], version: str
                        ) -> tuple[list[str], list[str]]:
    """(lock entries to delete, packages to add) so that every installed NVIDIA package at
    ``version`` is locked at its exact version and no NVIDIA lock names another version.

    ``installed``: name -> rpm version ('3:570.172.08-1.el9') of the installed *nvidia*
    packages; ``locks``: the non-comment lines of versionlock.list."""
    wanted = {versionlock_spec(n, v) for n, v in installed.items()
              if upstream(v) == version}
    stale = [lock for lock in locks if is_driver_lock(lock) and lock not in wanted]
    add = sorted(spec[:-2] for spec in wanted if spec not in locks)
    return stale, add


def is_driver_lock(lock: str) -> bool:
    """A versionlock.list line of an NVIDIA driver package ('nvidia-open-3:570.172.08-1.el9.*'),
    not of another NVIDIA package (the container toolkit's 1.17.8 is no driver version)."""
    _, _, evr = lock.partition(":")
    return "nvidia" in lock and re.match(r"\d{3}\.\d+", evr) is not None


def upstream(version: str) -> str:
    """'3:570.172.08-1.el9' -> '570.172.08'."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


# Each flavour's kernel module package and meta package in NVIDIA's RPM repositories
# (NVIDIA's driver installation guide, "Red Hat Enterprise Linux": nvidia-open pulls
# kmod-nvidia-open-dkms, cuda-drivers kmod-nvidia-latest-dkms; the two conflict).
FLAVOR_PACKAGES = {"open": ("nvidia-open", "kmod-nvidia-open-dkms"),
                   "proprietary": ("cuda-drivers", "kmod-nvidia-latest-dkms")}


def other_flavor(flavor: str) -> str:
    return "proprietary" if flavor == "open" else "open"


def driver_switch(installed: dict[str, str], version: str, flavor: str) -> bool:
    """Does installing the ``flavor`` driver ``version`` replace another driver on this EL
    host? ``installed``: name -> rpm version of its *nvidia* packages (the toolkit's are no
    driver's). True when a driver package of another version, or the other flavour's
    kernel module package, is installed."""
    drivers = {name: v for name, v in installed.items()
               if re.match(r"\d{3}\.\d+", upstream(v))}
    return (FLAVOR_PACKAGES[other_flavor(flavor)][1] in drivers
            or any(upstream(v) != version for v in drivers.values()))


def install_name(flavor: str, version: str, wanted: list[str], driver: dict) -> str:
    """The one line a deploy's EL10 driver install says (``driver``: the host's driver facts
    before the run): an install, or, on a host with another branch or flavour, the switch
    it makes (as ``gpuhost upgrade`` names it)."""
    what = f"the {flavor} driver {version} ({', '.join(wanted)})"
    have = [v for v in driver.get("installed_versions") or () if v]
    had = driver.get("installed_flavor")
    if not have or (have == [version] and had in (None, flavor)):
        return f"Install {what} and lock it (dnf versionlock)"
    was = f"the {had} driver" if had else "driver"
    return (f"Switch to {what} from {was} {', '.join(have)}, removing it, and move the dnf "
            "versionlock with it")

def dnf_conf_with_proxy(text: str | None, proxy: str) -> str:
    """``/etc/dnf/dnf.conf`` (``text``; None when missing) with ``proxy=`` set in its
    ``[main]`` section; every other line kept as it was.

    dnf reads its global options only from this file (dnf.conf(5): no drop-in directory),
    so gpuhost edits it on the controller and uploads it whole (never through a command
    line: the URL may carry credentials).
    """
    lines = (text or "").splitlines()
    wanted = f"proxy={proxy}"
    section = None
    main_at = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            if section == "main" and main_at is None:
                main_at = index
            continue
        if section == "main" and re.match(r"proxy\s*=", stripped):
            lines[index] = wanted
            return "\n".join(lines) + "\n"
    if main_at is None:
        lines = ["[main]", wanted, *lines]
    else:
        lines.insert(main_at + 1, wanted)
    return "\n".join(lines) + "\n"
