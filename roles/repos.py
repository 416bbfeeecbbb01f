"""Package repositories and local package files, for the apt and dnf families."""

from __future__ import annotations


from pathlib import Path

from pyinfra.operations import apt, dnf, files, server

from roles.files import config_file
from roles.common import REMOTE_CACHE


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


def local_packages(label: str, paths: list[str], family: str) -> None:
    """Send package files from the controller (only when the host lacks the exact file) and
    install them with the package manager, which resolves their dependencies."""
    remote = []
    for path in paths:
        name = Path(path).name
        target = f"{REMOTE_CACHE}/packages/{name}"
        files.put(
            name=f"Send {name}",
            src=path,
            dest=target,
            mode="644",
            create_remote_dir=True,
        )
        remote.append(target)
    if family == "debian":
        apt.packages(name=f"Install {label} from local files", packages=remote)
    else:
        dnf.packages(name=f"Install {label} from local files", packages=remote)
