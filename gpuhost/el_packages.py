"""Oracle Linux (EL8/EL9) packaging: Oracle's channels, container-tools vs Docker, the exact
version lock of the driver, dnf's proxy (pure, no pyinfra). docs/real-hosts.md has the
vendor sources of each fact below."""

from __future__ import annotations

import re


# OL8's container-tools packages: Docker's containerd.io obsoletes and conflicts with runc
# (podman and buildah require it), so `dnf install docker-ce containerd.io` stops on them.
EL_CONTAINER_TOOLS = ("podman", "buildah", "runc", "containers-common")
VERSIONLOCK_PLUGIN = "python3-dnf-plugin-versionlock"
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"


def ol_channels(major: str) -> dict[str, str]:
    """Oracle's channel ids NVIDIA's driver needs on OL8/OL9: CodeReady Builder (enabled
    by NVIDIA's guide) and developer EPEL (the only source of dkms)."""
    return {"codeready": f"ol{major}_codeready_builder", "epel": f"ol{major}_developer_EPEL"}


def epel_release_package(major: str) -> str:
    """Oracle's package that installs the developer EPEL .repo file (in BaseOS)."""
    return f"oracle-epel-release-el{major}"


def el_repos_to_enable(os_id: str, major: str, setting: tuple[str, ...] | None) -> list[str]:
    """The repository ids to enable on an EL host: the ``el_enable_repos`` setting, or by
    default Oracle's channels on Oracle Linux (nothing on other EL distributions)."""
    if setting is not None:
        return list(setting)
    if os_id == "ol":
        return list(ol_channels(major).values())
    return []


def dkms_missing_message(major: str, enabled: list[str]) -> str:
    """Why the driver cannot install when no enabled repository carries dkms."""
    epel = ol_channels(major)["epel"]
    if epel in enabled:
        where = (f"gpuhost enabled {epel} (el_enable_repos), yet it offers no dkms here: "
                 "check that channel or your mirror of it")
    else:
        where = (f"dkms comes from Oracle's {epel} channel, which gpuhost did not enable "
                 f"(el_enable_repos): add {epel}, or the id of your mirror of it, to "
                 "el_enable_repos")
    return (f"gpuhost: NVIDIA's kmod-nvidia-*-dkms packages need dkms, and no enabled "
            f"repository provides it. {where}, then run again.")


def container_tools_message(host: str, installed: list[str]) -> str:
    return (f"{host}: {', '.join(installed)} installed: Docker's containerd.io obsoletes and "
            "conflicts with runc, so dnf cannot install Docker next to them. Set "
            "docker_replace_podman: true to remove them first (as Docker's RHEL guide "
            "does), or docker_source: none to keep them; nothing was changed on this host")


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
