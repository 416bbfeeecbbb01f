"""The operations of a driver upgrade that change packages: the other local repos removed,
the dnf module stream moved, the driver's packages switched in one transaction. Each reads
the host at execute time and does only what is still to do. Used as
``roles.upgrade.ops.NAME``.
"""

from __future__ import annotations

from packaging.version import Version

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpuhost.facts.nvidia import NvidiaDriver
from gpuhost.facts.pyinfra_api import joined
from gpuhost import packages
from gpuhost.upgrade import is_branched, old_packages
from gpuhost.roles.upgrade.ops_gpu import _probe


@operation()
def remove_local_repos(distro_tag: str, keep_version: str):
    """
    Remove every NVIDIA local repo package but the target's, with its sources and the
    keyrings only it used.

    + distro_tag: the host's distribution tag
    + keep_version: the driver version whose local repo stays
    """
    repos = host.get_fact(NvidiaDriver)["local_repos"]
    old = [repo for repo in repos if repo["version"] != keep_version]
    if not old:
        host.noop(f"only the {keep_version} local repo is installed")
        return
    keep_dir = packages.local_repo_dir(distro_tag, keep_version)
    for repo in old:
        old_dir = packages.local_repo_dir(repo["distro"], repo["version"])
        if packages.family(distro_tag) == "debian":
            # A keyring file the new repo also ships stays: both are usually NVIDIA's key.
            yield StringCommand(
                "for key in", joined(QuoteString(old_dir), "/nvidia-driver-*-keyring.gpg"),
                '; do test -e "$key" || continue; name="${key##*/}"; test -e',
                joined(QuoteString(keep_dir), '/"$name"'),
                '|| rm -f "/usr/share/keyrings/$name"; done',
            )
            yield StringCommand("DEBIAN_FRONTEND=noninteractive apt-get purge -y",
                                QuoteString(repo["package"]))
        else:
            yield StringCommand("dnf remove -y", QuoteString(repo["package"]))
    if packages.family(distro_tag) == "debian":
        yield "apt-get update -qq"
    else:
        yield "dnf clean expire-cache"


@operation()
def switch_module_stream(stream: str, module: str = "nvidia-driver"):
    """
    Move the dnf module to ``stream`` (EL8/EL9): ``module switch-to`` when another stream is
    enabled (stream and packages in one transaction), ``module enable`` when none is.

    + stream: e.g. ``570-open``
    + module: the module name
    """
    probe = _probe()
    if probe["dnf_stream"] == stream and probe["dnf_state"] == "enabled":
        host.noop(f"dnf module {module}:{stream} is enabled")
        return
    if probe["dnf_stream"] and probe["dnf_state"] == "enabled":
        yield StringCommand("dnf -y module switch-to", QuoteString(f"{module}:{stream}"),
                            "--allowerasing")
    else:
        if probe["dnf_stream"]:
            yield StringCommand("dnf -y module reset", QuoteString(module))
        yield StringCommand("dnf -y module enable", QuoteString(f"{module}:{stream}"))


@operation()
def switch_packages(distro_tag: str, version: str, flavor: str, wanted: list[str],
                    remove: list[str] | None = None):
    """
    Install the target branch's driver packages and remove the old branch's, in one
    package manager transaction (apt: ``install NEW... OLD-``).

    + distro_tag: the host's distribution tag
    + version: the target driver version
    + flavor: ``open`` or ``proprietary``
    + wanted: the target's packages (``gpuhost.packages.driver_packages``)
    + remove: more packages to remove with the old branch's (the driver facts do not list
      them: Canonical's linux-modules-nvidia-<branch>-server-open-<kernel>)
    """
    driver = host.get_fact(NvidiaDriver)
    installed = driver["packages"]
    old = old_packages(list(installed), version, flavor, wanted) + list(remove or ())
    # The pinning package (branch >= 590) is not a driver package in the facts: the
    # installed version stands for it.
    missing = [name for name in wanted
               if name not in installed and not name.startswith("nvidia-driver-pinning-")]
    if driver["installed_versions"] == [version] and not missing and not old:
        host.noop(f"the {flavor} driver {version} packages are installed")
        return
    if packages.family(distro_tag) == "debian":
        # A downgrade (allowed by upgrade_allow_downgrade, refused before any host otherwise)
        # takes packages that keep their name across branches (nvidia-persistenced, the
        # unversioned companions) to an older version: apt needs to be told so.
        older = any(Version(v) > Version(version) for v in driver["installed_versions"])
        yield StringCommand(
            "dpkg --configure -a && DEBIAN_FRONTEND=noninteractive apt-get install -y",
            *(["--allow-downgrades"] if older else []),
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold",
            "--no-install-recommends", *[QuoteString(name) for name in wanted],
            *[QuoteString(f"{name}-") for name in old],
        )
    else:
        yield StringCommand("dnf install -y --allowerasing",
                            *[QuoteString(f"{name}-{version}") for name in wanted])
        # The other flavour's meta package, if the transaction above did not erase it.
        for name in (name for name in old if not is_branched(name)):
            yield StringCommand("if rpm -q", QuoteString(name),
                                ">/dev/null 2>&1; then dnf remove -y", QuoteString(name), "; fi")
