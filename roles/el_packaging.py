"""Enterprise Linux packaging the driver needs: each distribution's CodeReady Builder and EPEL
(for dkms), container-tools out of Docker's way, and the exact version lock (`dnf
versionlock`); on EL10, where NVIDIA has no module streams, the driver installed at its
exact version and locked in one step. docs/real-hosts.md has the vendor sources."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.rpm import RpmPackages

from gpuhost.facts.el import ElPackaging, RhsmRegistered
from gpuhost import el_packages
from gpuhost.roles.common import fail_command
from gpuhost.roles.files import config_file
from pyinfra.operations import server


def repo_plan(config, state) -> dict:
    """``el_packages.repo_plan`` for this host (its os-release and arch) and settings."""
    os_info = state["os"]
    return el_packages.repo_plan(os_info["id"], os_info["version_id"],
                                 os_info["arch"] or "x86_64", config.el_enable_repos,
                                 config.el_repo_urls)


def repo_problem(config, state) -> str | None:
    """Before any change: a repository the driver needs that this host cannot have. An
    unregistered RHEL host whose repositories gpuhost would enable through
    subscription-manager (it has none); an EPEL release package installed that does not
    define the channel gpuhost would enable (Oracle Linux 10's follows the update level).
    None when there is no such problem."""
    plan = repo_plan(config, state)
    if plan["registration"]:
        registered = host.get_fact(RhsmRegistered)
        if registered is not True:  # False: unregistered; None: no subscription-manager
            return el_packages.unregistered_message(host.name, installed=registered is False)
    if plan["epel_release"]:
        info = host.get_fact(ElPackaging)
        release = el_packages.release_package_name(plan["epel_release"])
        if release in info["packages"] and plan["epel"] not in info["repos"]:
            return el_packages.release_lags_message(host.name, release, plan["epel"])
    return None


def repositories(config, state) -> None:
    """The repositories the driver needs: ``el_repo_urls`` written when set, then the
    distribution's CodeReady Builder and EPEL enabled (``repo_plan``), then dkms checked."""
    plan = repo_plan(config, state)
    if config.el_repo_urls:
        written = config_file(
            name="dnf repositories given by URL (el_repo_urls)",
            content=el_packages.mirror_repo_file(config.el_repo_urls),
            dest=el_packages.MIRROR_REPO_FILE, mode="644")
        server.shell(name="Expire the dnf cache (el_repo_urls changed)",
                     commands=["dnf clean expire-cache"], _if=written.did_change)
    enabled = [*plan["subscription"], *plan["config_manager"]]
    enable_repos(
        name=f"Enable the dnf repositories the driver needs ({', '.join(enabled) or 'none'})",
        config_manager=plan["config_manager"], subscription=plan["subscription"],
        epel=plan["epel"], epel_release=plan["epel_release"])
    dkms_available(name="dkms is installed or available (NVIDIA's kmod-nvidia-*-dkms needs it)",
                   epel=plan["epel"], enabled=[*enabled, *(config.el_repo_urls or ())])

@operation()
def enable_repos(config_manager: list[str], subscription: list[str], epel: str,
                 epel_release: str | None):
    """
    Enable the dnf repositories the driver needs (``el_packages.repo_plan``): RHEL's with
    ``subscription-manager repos --enable=``, the others with ``dnf config-manager
    --set-enabled``; EPEL first gets its .repo file from its release package (Oracle's
    ``oracle-epel-release-elN``, Fedora's ``epel-release``) when the host lacks it.

    + config_manager: repository ids enabled with dnf config-manager
    + subscription: repository ids enabled with subscription-manager (RHEL)
    + epel: the distribution's EPEL repository id
    + epel_release: what ``dnf install`` takes to define ``epel`` (None: never installed)
    """
    info = host.get_fact(ElPackaging)
    defined = info["repos"]
    todo = [repo for repo in config_manager if not defined.get(repo)]
    todo_sm = [repo for repo in subscription if not defined.get(repo)]
    if not todo and not todo_sm:
        enabled = [*subscription, *config_manager]
        host.noop(f"{', '.join(enabled)} enabled" if enabled else "no repository to enable")
        return
    release = el_packages.release_package_name(epel_release) if epel_release else None
    needs_release = bool(release) and epel in todo and epel not in defined
    if needs_release and release in info["packages"]:
        # Oracle Linux 10: the release package defines the channel of one update level, which
        # may lag the host's (docs/real-hosts.md): refused, not guessed
        yield fail_command(el_packages.release_lags_message(host.name, release, epel))
        return
    unknown = [repo for repo in todo if repo not in defined and not (needs_release and repo == epel)]
    if unknown:
        yield fail_command(
            f"{host.name}: no dnf repository {', '.join(unknown)} on this host "
            "(/etc/yum.repos.d): add its .repo file or change el_enable_repos; nothing "
            "was changed")
        return
    if todo_sm:
        yield StringCommand("subscription-manager repos",
                            *[QuoteString(f"--enable={repo}") for repo in todo_sm])
    if needs_release:
        yield StringCommand("dnf install -y", QuoteString(epel_release))
        yield StringCommand(
            "grep -qs", QuoteString(f"^\\[{epel}\\]"), "/etc/yum.repos.d/*.repo || { echo",
            QuoteString(f"gpuhost: {epel_release} defines no {epel} on this host: set "
                        "el_enable_repos to the EPEL repository it should use, or give it by "
                        "URL (el_repo_urls)"), ">&2; exit 1; }")
    if todo:
        yield StringCommand("dnf config-manager --set-enabled", *[QuoteString(r) for r in todo])


@operation()
def dkms_available(epel: str, enabled: list[str]):
    """
    Before the driver: fail with the missing repository's name when dkms is neither installed
    nor available from an enabled repository (NVIDIA's kmod-nvidia-*-dkms needs it).

    + epel: the distribution's EPEL repository id
    + enabled: the repository ids gpuhost enabled
    """
    if "dkms" in host.get_fact(ElPackaging)["packages"]:
        host.noop("dkms is installed")
        return
    yield StringCommand(
        "dnf -q repoquery --available dkms 2>/dev/null | "
        "grep -q . || { echo", QuoteString(el_packages.dkms_missing_message(epel, enabled)),
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
        commands.append(_delete_locks(stale))
    if add:
        commands.append(StringCommand("dnf versionlock add", *[QuoteString(a) for a in add]))
    if not commands:
        host.noop(f"the NVIDIA packages are locked at {version}")
        return
    yield from commands


def _delete_locks(locks: list[str]) -> StringCommand:
    """``dnf versionlock delete`` of LOCKS as versionlock.list writes them (``name-evr.*``)."""
    return StringCommand("dnf versionlock delete",
                         *[QuoteString(lock.removesuffix(".*")) for lock in locks])


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
    yield _delete_locks(locks)


@operation()
def install_locked(names: list[str], version: str, flavor: str = "open"):
    """
    EL10 (no module streams): install the driver's packages at exactly ``version`` and lock
    every installed NVIDIA package of that version with ``dnf versionlock``, in one step:
    the versionlock plugin comes in the same dnf transaction as the driver, and the lock
    is taken by the same command once that transaction succeeded (NVIDIA's R620 table:
    ``dnf install nvidia-open`` and ``dnf versionlock``; its version-locking page: DNF 4,
    ``python3-dnf-plugin-versionlock``). Locks of another driver version are deleted first.
    On a host with another branch or the other flavour installed, every driver lock is
    deleted and the switch is one ``dnf install --allowerasing`` (the other flavour's kernel
    module package conflicts with this one's), as ``gpuhost upgrade`` switches.
    Converged: no command.

    + names: the driver's packages (``gpuhost.packages.driver_packages``)
    + version: the driver version, like ``580.105.08``
    + flavor: ``open`` or ``proprietary``
    """
    info = host.get_fact(ElPackaging)
    if el_packages.driver_switch(info["nvidia"], version, flavor):
        locks = [lock for lock in info["locks"] if el_packages.is_driver_lock(lock)]
        if locks:
            yield _delete_locks(locks)
        meta = el_packages.FLAVOR_PACKAGES[el_packages.other_flavor(flavor)][0]
        yield StringCommand(
            "dnf install -y --allowerasing", QuoteString(el_packages.VERSIONLOCK_PLUGIN),
            *[QuoteString(f"{name}-{version}") for name in names],
            "&& if rpm -q", QuoteString(meta), ">/dev/null 2>&1; then dnf remove -y",
            QuoteString(meta), "; fi &&", el_packages.lock_installed_command(version))
        return
    others = [name for name in names if name not in info["nvidia"] and "nvidia" not in name]
    installed = {name: [evr] for name, evr in info["nvidia"].items()}
    if others:  # cuda-drivers: not among the fact's *nvidia* packages
        installed.update(host.get_fact(RpmPackages) or {})
    missing = [name for name in names
               if not any(el_packages.upstream(v) == version for v in installed.get(name, ()))]
    stale, add = el_packages.versionlock_changes(info["nvidia"], info["locks"], version)
    commands = []
    if stale:
        commands.append(_delete_locks(stale))
    if missing or not info["versionlock_plugin"]:
        commands.append(StringCommand(
            "dnf install -y", QuoteString(el_packages.VERSIONLOCK_PLUGIN),
            *[QuoteString(f"{name}-{version}") for name in names],
            "&&", el_packages.lock_installed_command(version)))
    elif add:
        commands.append(StringCommand("dnf versionlock add", *[QuoteString(a) for a in add]))
    if not commands:
        host.noop(f"the driver {version} is installed and its NVIDIA packages are locked")
        return
    yield from commands
