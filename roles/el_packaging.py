"""Oracle Linux 8/9 packaging the driver needs: Oracle's channels (CodeReady Builder,
developer EPEL for dkms), container-tools out of Docker's way, and the exact version lock
(`dnf versionlock`). docs/real-hosts.md has the vendor sources."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpuhost.facts.el import ElPackaging
from gpuhost import el_packages
from gpuhost.roles.common import fail_command

@operation()
def enable_repos(repos: list[str], major: str):
    """
    Enable dnf repositories (``el_enable_repos``) with ``dnf config-manager --set-enabled``;
    Oracle's developer EPEL channel first gets its .repo file from
    ``oracle-epel-release-elN`` when the host lacks it.

    + repos: repository ids
    + major: the EL major release ("8", "9")
    """
    info = host.get_fact(ElPackaging)
    defined = info["repos"]
    todo = [repo for repo in repos if not defined.get(repo)]
    if not todo:
        host.noop(f"{', '.join(repos)} enabled" if repos else "no repository to enable")
        return
    epel = el_packages.ol_channels(major)["epel"]
    release = el_packages.epel_release_package(major)
    unknown = [repo for repo in todo if repo not in defined and repo != epel]
    if unknown:
        yield fail_command(
            f"{host.name}: no dnf repository {', '.join(unknown)} on this host "
            "(/etc/yum.repos.d): add its .repo file or change el_enable_repos; nothing "
            "was changed")
        return
    if epel in todo and epel not in defined and release not in info["packages"]:
        yield StringCommand("dnf install -y", QuoteString(release))
    yield StringCommand("dnf config-manager --set-enabled", *[QuoteString(r) for r in todo])


@operation()
def dkms_available(major: str, enabled: list[str]):
    """
    Before the driver: fail with the missing channel's name when dkms is neither installed
    nor available from an enabled repository (NVIDIA's kmod-nvidia-*-dkms needs it).

    + major: the EL major release
    + enabled: the repository ids gpuhost enabled (el_enable_repos)
    """
    if "dkms" in host.get_fact(ElPackaging)["packages"]:
        host.noop("dkms is installed")
        return
    yield StringCommand(
        "dnf -q repoquery --available dkms 2>/dev/null | "
        "grep -q . || { echo", QuoteString(el_packages.dkms_missing_message(major, enabled)),
        ">&2; exit 1; }")


@operation()
def remove_container_tools(names: list[str]):
    """
    Remove OL8's container-tools (podman, buildah, runc, containers-common) before Docker,
    as Docker's RHEL guide does (``docker_replace_podman: true``).

    + names: the installed ones (read before the deploy)
    """
    yield StringCommand("dnf remove -y", *[QuoteString(n) for n in names])


@operation()
def version_lock(version: str):
    """
    Lock every installed NVIDIA package at ``version`` exactly with ``dnf versionlock``
    (NVIDIA's version-locking page; plugin python3-dnf-plugin-versionlock), dropping locks
    of another driver version. Converged: no command when the list already says so.

    + version: the driver version, like ``570.172.08``
    """
    info = host.get_fact(ElPackaging)
    commands = []
    if not info["versionlock_plugin"]:
        commands.append(StringCommand("dnf install -y", QuoteString(el_packages.VERSIONLOCK_PLUGIN)))
    stale, add = el_packages.versionlock_changes(info["nvidia"], info["locks"], version)
    if stale:
        commands.append(StringCommand("dnf versionlock delete",
                                      *[QuoteString(lock.removesuffix(".*")) for lock in stale]))
    if add:
        commands.append(StringCommand("dnf versionlock add", *[QuoteString(a) for a in add]))
    if not commands:
        host.noop(f"the NVIDIA packages are locked at {version}")
        return
    yield from commands


@operation()
def release_lock():
    """
    Before a driver upgrade: delete the ``dnf versionlock`` entries of NVIDIA driver
    packages (dnf would hide every other version of them); ``version_lock`` re-takes the
    lock at the new version.
    """
    info = host.get_fact(ElPackaging)
    locks = [lock for lock in info["locks"] if el_packages.is_driver_lock(lock)]
    if not locks:
        host.noop("no NVIDIA driver version lock")
        return
    yield StringCommand("dnf versionlock delete",
                        *[QuoteString(lock.removesuffix(".*")) for lock in locks])

