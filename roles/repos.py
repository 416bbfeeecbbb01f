"""Package repositories and local package files, for the apt and dnf families."""

from __future__ import annotations


from pathlib import Path

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages
from pyinfra.operations import apt, files, server

from gpuhost import pkgfile
from gpuhost.roles.common import REMOTE_CACHE, GpuhostError
from gpuhost.roles.files import config_file


def apt_repository(label: str, key: bytes, keyring: str, sources: str, sources_file: str):
    """A signed apt repository: its keyring and its sources file; apt-get update on change."""
    put_key = config_file(
        name=f"Trust the {label} signing key",
        content=key,
        dest=keyring,
        mode="644",
    )
    put_sources = config_file(
        name=f"Add the {label} apt repository",
        content=sources,
        dest=sources_file,
        mode="644",
    )
    apt.update(
        name=f"apt-get update ({label} repository changed)",
        _if=[lambda: put_key.did_change() or put_sources.did_change()],
    )


def rpm_repository(label: str, key: bytes, key_file: str, repo: str, repo_file: str):
    """A signed dnf repository: its key and its .repo file; the cache expires on change."""
    put_key = config_file(
        name=f"Trust the {label} signing key",
        content=key,
        dest=key_file,
        mode="644",
    )
    server.shell(
        name=f"Import the {label} signing key into rpm",
        commands=[f"rpm --import {key_file}"],
        _if=put_key.did_change,
    )
    put_repo = config_file(
        name=f"Add the {label} dnf repository",
        content=repo,
        dest=repo_file,
        mode="644",
    )
    server.shell(
        name=f"Expire the dnf cache ({label} repository changed)",
        commands=["dnf clean expire-cache"],
        _if=put_repo.did_change,
    )


@operation()
def install_package_files(packages: list[tuple[str, str, str]], family: str):
    """
    Install package files already on the host, unless it has each one's exact version.

    (pyinfra's apt.packages / dnf.packages compare file paths with installed package names,
    which never match: a converged host would reinstall on every run.)

    + packages: ``(name, version, remote path)`` of each file, read on the controller
    + family: "debian" (apt) or "rhel" (dnf)
    """
    installed = host.get_fact(DebPackages if family == "debian" else RpmPackages) or {}
    missing = [(name, version) for name, version, _ in packages
               if version not in installed.get(name, ())]
    if not missing:
        host.noop("installed: " + ", ".join(f"{n} {v}" for n, v, _ in packages))
        return
    paths = [QuoteString(remote) for _, _, remote in packages]
    if family == "debian":
        yield StringCommand(
            "DEBIAN_FRONTEND=noninteractive apt-get -y --allow-downgrades",
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install",
            *paths)
    else:
        yield StringCommand("dnf install -y --allowerasing", *paths)


def local_packages(label: str, paths: list[str], family: str) -> None:
    """Send package files from the controller (only when the host lacks the exact file) and
    install them with the package manager, which resolves their dependencies, unless the
    host already has each one's name at that file's version (read on the controller)."""
    found = []
    for path in paths:
        try:
            package = pkgfile.read(path)
        except pkgfile.PackageFileError as error:
            raise GpuhostError(f"{label}: {error}") from error
        name = Path(path).name
        target = f"{REMOTE_CACHE}/packages/{name}"
        files.put(
            name=f"Send {name}",
            src=path,
            dest=target,
            mode="644",
            create_remote_dir=True,
        )
        found.append((package.name, package.version, target))
    install_package_files(name=f"Install {label} from local files", packages=found,
                          family=family)
