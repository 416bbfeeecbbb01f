"""The NVIDIA driver from NVIDIA's local repo package (or its network repository:
``roles.driver_repo``), pinned, nouveau out of the way.

Steps: blacklist nouveau (initramfs rebuilt only when the blacklist changed), send the
verified local repo package to the host only when the host lacks that exact file, install it
and trust its key (or the verified network repository's key and source), select the branch (EL8/9: dnf module stream; EL10: none, the exact version; apt: the branch's
meta package) and pin it (apt preferences at 1000 + unattended-upgrades blacklist; dnf
versionlock at the exact version), then reboot only when the policy allows it and the state
needs it.
"""

from __future__ import annotations


from pyinfra import host, logger
from pyinfra.api import StringCommand, deploy, operation
from pyinfra.api import QuoteString
from pyinfra.facts.files import FileContents
from pyinfra.operations import apt, dnf, files, server

from gpuhost.facts.kernel import PackageAvailable
from gpuhost.facts.nvidia import LocalRepoKeyTrusted, NvidiaDriver
from gpuhost.facts.pyinfra_api import joined
from gpuhost.facts.services import ServiceInstalled
from gpuhost import aptdistros, el_packages, fabric, packages
from gpuhost.upgrade.reboot import needs_reboot
from gpuhost.settings import Settings
from gpuhost.roles import boot_safety, debian_archive, driver_repo, el_packaging, kernel_headers
from gpuhost.roles import fabric as fabric_role
from gpuhost.roles import signed_modules as signed_modules_role
from gpuhost.roles.files import config_file
from gpuhost.roles.common import (
    REMOTE_CACHE,
    choose_flavor,
    distro_tag,
    host_settings,
    host_state,
    local_repo_artifact,
)

NOUVEAU_CONF = "/etc/modprobe.d/gpuhost-blacklist-nouveau.conf"


@operation()
def local_repo(remote_file: str, distro_tag: str, version: str):
    """
    Install NVIDIA's local repo package from a file already on the host, and trust its key.

    + remote_file: the package on the host
    + distro_tag: NVIDIA's tag (``gpuhost.distro.DISTRO_TAGS``: ``debian12`` ... ``rhel10``)
    + version: the driver version the repo carries
    """
    name = packages.local_repo_package(distro_tag, version)
    repo_dir = packages.local_repo_dir(distro_tag, version)
    driver = host.get_fact(NvidiaDriver)
    installed = any(repo["package"] == name for repo in driver["local_repos"])
    family = packages.family(distro_tag)
    if family == "debian":
        # NVIDIA's .deb points apt at its keyring under /usr/share/keyrings but does not put
        # it there: apt-get update fails with NO_PUBKEY until it is copied.
        trusted = host.get_fact(LocalRepoKeyTrusted, repo_dir=repo_dir)
        if installed and trusted:
            host.noop(f"{name} is installed and its key is trusted")
            return
        if not installed:
            yield StringCommand("dpkg -i", QuoteString(remote_file))
        yield StringCommand(
            "found=0; for key in", joined(QuoteString(repo_dir), "/nvidia-driver-*-keyring.gpg"),
            '; do test -e "$key" || continue; install -m 644 "$key" /usr/share/keyrings/'
            ' || exit 1; found=1; done; test $found = 1 || { echo', QuoteString(
                f"gpuhost: {repo_dir} has no nvidia-driver-*-keyring.gpg; the local repo "
                "package looks damaged"
            ), ">&2; exit 1; }",
        )
        yield "apt-get update -qq"
    else:
        if installed:
            host.noop(f"{name} is installed")
            return
        yield StringCommand("dnf install -y", QuoteString(remote_file))
        yield "dnf clean expire-cache"


@operation()
def module_stream(stream: str, module: str = "nvidia-driver"):
    """
    Enable exactly one stream of a dnf module (EL8/EL9), resetting another enabled stream.

    + stream: e.g. ``570-open`` or ``570-dkms``
    + module: the module name
    """
    current = host.get_fact(FileContents, path=f"/etc/dnf/modules.d/{module}.module") or []
    enabled = {}
    for line in current:
        key, _, value = line.partition("=")
        enabled[key.strip()] = value.strip()
    if enabled.get("stream") == stream and enabled.get("state") == "enabled":
        host.noop(f"dnf module {module}:{stream} is enabled")
        return
    if enabled.get("stream"):
        yield StringCommand("dnf -y module reset", QuoteString(module))
    yield StringCommand("dnf -y module enable", QuoteString(f"{module}:{stream}"))


@operation()
def persistenced_package():
    """
    apt: ``nvidia-persistenced`` when the driver's packages did not bring the daemon and the
    local repo carries it as a package of its own (``nvidia_persistenced: true`` did nothing on
    such hosts: persistence mode stayed off, which the audit reports on data-center GPUs).
    Read when the run gets here, after the local repo's ``apt-get update``; pinned with the
    driver (gpuhost/packages.py).
    """
    if host.get_fact(ServiceInstalled, service="nvidia-persistenced"):
        host.noop("nvidia-persistenced is installed")
        return
    if not host.get_fact(PackageAvailable, package="nvidia-persistenced", family="debian"):
        host.noop("no nvidia-persistenced package in the repositories (see the warning below)")
        return
    yield ("DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confdef "
           "-o Dpkg::Options::=--force-confold install --no-install-recommends nvidia-persistenced")


def _service_exists(service: str) -> bool:
    if host.get_fact(ServiceInstalled, service=service):
        return True
    logger.warning(f"{host.name}: {service} is not installed by the driver packages; "
                   "not enabling it")
    return False


def install_driver_repo(config: Settings, tag: str, version: str, flavor: str) -> None:
    """The driver's repository, install and upgrade alike: NVIDIA's network repository (or a
    mirror) where ``nvidia_driver_source`` takes it (``roles.driver_repo``), else the local
    repo package."""
    if driver_repo.source(config, tag) == "network":
        driver_repo.install(config, tag, version, flavor)
    else:
        install_local_repo(config, tag, version)


def install_local_repo(config: Settings, tag: str, version: str) -> None:
    """Send the verified local repo package (only when the host lacks that exact file),
    install it and trust its key."""
    artifact = local_repo_artifact(config, tag)
    remote_file = f"{REMOTE_CACHE}/{artifact.name}"
    files.put(
        name=f"Send {artifact.name} (only if the host lacks this exact file)",
        src=str(artifact),
        dest=remote_file,
        mode="644",
        create_remote_dir=True,
    )
    local_repo(
        name=f"Install the {tag} local repo for driver {version}",
        remote_file=remote_file,
        distro_tag=tag,
        version=version,
    )


def reboot_needed(target: str) -> bool:
    """Read at execute time (a ``server.reboot`` ``_if``): ``gpuhost.upgrade.reboot.needs_reboot``,
    the one meaning install and upgrade share."""
    return needs_reboot(host.get_fact(NvidiaDriver), target)


def pin_driver(version: str, name: str) -> None:
    """apt hosts: the driver's packages pinned at ``version`` (``packages.APT_PIN``, priority
    1000) and kept away from unattended-upgrades; install and upgrade write both files so."""
    config_file(name=name, content=packages.apt_pin(version), dest=packages.APT_PIN, mode="644")
    config_file(
        name="Keep unattended-upgrades away from the driver",
        content=packages.unattended_upgrades_blacklist(),
        dest=packages.UNATTENDED,
        mode="644",
    )


_INITRAMFS = {"update-initramfs": "update-initramfs -u", "dracut": "dracut --force"}


def initramfs_command(tag: str) -> str:
    """Rebuild the initramfs with whichever tool the host has, the release's own first
    (``AptRelease.initramfs``: dracut on Ubuntu 26.04, update-initramfs on the others)."""
    first = aptdistros.RELEASES[tag].initramfs if tag in aptdistros.RELEASES else "update-initramfs"
    tools = [first, *(t for t in _INITRAMFS if t != first)]
    tests = [f"command -v {t} >/dev/null 2>&1; then {_INITRAMFS[t]}; " for t in tools]
    return ("if " + "elif ".join(tests)
            + "else echo 'gpuhost: no initramfs tool on this host, nothing to rebuild'; fi")


@deploy("NVIDIA driver")
def install() -> None:
    config = host_settings()
    state = host_state()
    tag = distro_tag(state)
    family = packages.family(tag)
    version = config.nvidia_driver_version
    flavor = choose_flavor(config, state)

    nouveau = config_file(
        name="Blacklist nouveau",
        content=(
            "# Managed by gpuhost: the NVIDIA driver cannot bind a GPU that nouveau holds.\n"
            "blacklist nouveau\noptions nouveau modeset=0\n"
        ),
        dest=NOUVEAU_CONF,
        mode="644",
    )
    server.shell(
        name="Rebuild the initramfs without nouveau",
        commands=[initramfs_command(tag)],
        _if=nouveau.did_change,
    )

    debian_archive.enable_contrib(tag, config.debian_enable_contrib)
    if config.nvidia_kernel_modules == "distribution":
        signed_modules_role.install(tag, version, state["os"]["kernel_release"])
    else:
        install_driver_repo(config, tag, version, flavor)

    fabric_kind = fabric.resolve(config.nvidia_fabric, config.nvidia_fabricmanager,
                                 fabric.switch_count(state))
    nvlink5 = bool(fabric.nvlink5_switches(state))
    wanted = fabric_role.wanted_packages(tag, version, flavor, fabric_kind, nvlink5)
    if config.nvidia_kernel_modules == "distribution":
        pass  # installed and pinned above (roles/signed_modules.py)
    elif family == "debian":
        pin_driver(version, name=f"Pin the driver packages at {version}")
        if aptdistros.release(tag).needs_zstd:
            apt.packages(name="zstd (dkms compresses the modules it builds with it, without "
                              "depending on it)", packages=["zstd"], no_recommends=True)
        apt.packages(
            name=f"Install the {flavor} driver {version} ({', '.join(wanted)})",
            packages=wanted,
            no_recommends=True,
        )
    else:
        el_packaging.repositories(config, state)
        if packages.has_module_streams(tag):
            stream = packages.module_stream(version, flavor)
            module_stream(name=f"Select the dnf module stream nvidia-driver:{stream}",
                          stream=stream)
            dnf.packages(
                name=f"Install the {flavor} driver {version} ({', '.join(wanted)})",
                packages=wanted,
            )
            el_packaging.version_lock(
                name=f"Lock the NVIDIA packages at {version} (dnf versionlock)",
                version=version)
        else:  # EL10: no module streams (NVIDIA's R620 table): exact version, locked
            el_packaging.install_locked(
                name=el_packages.install_name(flavor, version, wanted, state["driver"]),
                names=wanted, version=version, flavor=flavor)

    # After the local repo (and the apt-get update it brings): see future_headers
    if config.nvidia_kernel_modules == "dkms":
        kernel_headers.install_future()

    if config.reboot_policy == "when_needed" and config.nvidia_kernel_modules == "dkms":
        # the module must be there for the kernel the reboot starts (issue 14: never reboot
        # into a kernel without the driver); fails this host, with DKMS's errors, instead
        boot_safety.module_for_next_boot(
            name="The NVIDIA module is installed for the next boot's kernel",
            version=version,
            _if=lambda: reboot_needed(version),
        )
    if config.reboot_policy == "when_needed" and config.nvidia_kernel_modules == "distribution":
        signed_modules_role.module_for_next_boot(  # the same gate for the signed modules
            name="The signed NVIDIA module package is installed for the next boot's kernel",
            version=version, _if=lambda: reboot_needed(version))
    if config.reboot_policy == "when_needed":
        server.reboot(
            name="Reboot to load the NVIDIA driver (reboot_policy: when_needed)",
            reboot_timeout=config.reboot_timeout,
            _if=lambda: reboot_needed(version),
        )

    # The fabric (Fabric Manager, or IMEX) before persistenced, DCGM and containers; at boot
    # its drop-in orders Fabric Manager before containers, DCGM and kubelet (roles/fabric.py)
    fabric_role.configure(fabric_kind, version, family, config.nvidia_imex_peers, nvlink5,
                          config.kubernetes_profile)

    # Services that need the loaded driver: enabled now, started once the module is loaded
    # (after the reboot above, or on the next boot when reboot_policy is never).
    for service, label, wanted_service in (
        ("nvidia-persistenced", "nvidia-persistenced", config.nvidia_persistenced),
    ):
        if not wanted_service:
            continue
        if service == "nvidia-persistenced" and family == "debian":
            persistenced_package(name="nvidia-persistenced (its own package in the local repo)")
        server.service(
            name=f"Enable {label}",
            service=service,
            running=None,
            enabled=True,
            _if=lambda service=service: _service_exists(service),
        )
        server.service(
            name=f"Run {label} (driver loaded)",
            service=service,
            running=True,
            _if=lambda service=service: _service_exists(service)
            and host.get_fact(NvidiaDriver)["state"] == "loaded",
        )
