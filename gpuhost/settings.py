"""Every inventory key gpuhost reads, defined once: the ``Settings`` model
(``gpuhost.settings_keys``), read through this module.

Each field of ``Settings`` is one key: its Python type, its default (none: required), and in
its metadata the type as users write it, its meaning and its check (``gpuhost.checks``).
Everything else is derived from it: ``SETTINGS`` / ``BY_NAME`` (the key table),
``defaults()`` (read by ``inventories/group_data/all.py``), docs/settings.md
(``gpuhost.settings_docs``). The checks of keys against each other are in
``gpuhost.settings_cross``.

``validate_inventory(hosts)`` checks a whole inventory (every host, one line per problem
naming its hosts) once, before any host is contacted; ``validate(data)`` checks one host's
data; ``resolve(data)`` returns the frozen ``Settings`` (defaults applied), read by attribute
(``settings.nvidia_driver_version``), or raises ``SettingsError``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping

from gpuhost.checks import SHA256_RE, is_local_source, mask_url, on_mirror
from gpuhost.driver_repo import normalise_fingerprint
from gpuhost.settings_cross import cross_checks
from gpuhost.settings_docs import DOCS_BEGIN, DOCS_END, render_markdown_table, sync_docs
from gpuhost.settings_keys import (
    BY_NAME,
    DOCKER_REPO_GPGKEY,
    DOCKER_REPO_URL,
    SETTINGS,
    TOOLKIT_GPGKEY,
    TOOLKIT_REPO_URL,
    Setting,
    Settings,
    defaults,
)

__all__ = ["BY_NAME", "DOCKER_REPO_GPGKEY", "DOCKER_REPO_URL", "DOCS_BEGIN", "DOCS_END",
           "SETTINGS", "SHA256_RE", "TOOLKIT_GPGKEY", "TOOLKIT_REPO_URL", "Setting", "Settings",
           "SettingsError", "defaults", "docker_repo", "group_problems", "is_local_source",
           "mask_url", "on_mirror", "render_markdown_table", "resolve", "sync_docs",
           "toolkit_repo", "validate", "validate_inventory"]

GPUHOST_PREFIXES = ("nvidia_", "docker_", "container_toolkit_", "mig_", "upgrade_", "verify_",
                    "containerd_")


class SettingsError(ValueError):
    """Invalid inventory data; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid gpuhost settings:\n  " + "\n  ".join(self.problems))


def validate(data: Mapping, host_name: str | None = None) -> list[str]:
    """One line per problem in inventory ``data`` (a mapping; other keys are ignored except
    likely typos of gpuhost keys); an empty list when everything is valid."""
    problems = []
    merged = {**{s.name: None for s in SETTINGS}, **defaults()}
    for s in SETTINGS:
        value = data.get(s.name)
        if s.name not in data or (value is None and s.required):
            if s.required:
                problems.append(f"{s.name}: missing (required): {s.meaning}")
            continue
        found = [f"{s.name}: {p}" for p in s.check(s.name, value)]
        problems += found
        if not found:
            merged[s.name] = value
    for key in data:
        if isinstance(key, str) and key.startswith(GPUHOST_PREFIXES) and key not in BY_NAME:
            close = difflib.get_close_matches(key, BY_NAME, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{key}: unknown gpuhost setting{hint}; see docs/settings.md")
    problems += cross_checks(merged)  # on the values that passed their own check
    if host_name:
        problems = [f"{host_name}: {p}" for p in problems]
    return problems


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _freeze(v) for k, v in value.items()}
    return value


def resolve(data: Mapping, host_name: str | None = None) -> Settings:
    """Validated ``Settings`` with defaults applied (lists become tuples; URL settings given
    as one string become a mapping with that URL for every key); raises SettingsError."""
    problems = validate(data, host_name)
    if problems:
        raise SettingsError(problems)
    merged = {**defaults(), **{k: data[k] for k in BY_NAME if k in data}}
    for key, default in (("docker_repo_url", DOCKER_REPO_URL), ("docker_repo_gpgkey", DOCKER_REPO_GPGKEY),
                         ("container_toolkit_repo_url", TOOLKIT_REPO_URL),
                         ("container_toolkit_gpgkey", TOOLKIT_GPGKEY)):
        if isinstance(merged[key], str):
            merged[key] = {k: merged[key] for k in default}
    for src in merged["nvidia_local_repo"].values():
        src["sha256"] = src["sha256"].lower()
    for repo in merged["nvidia_driver_repo"].values():
        repo["fingerprint"] = normalise_fingerprint(repo["fingerprint"])
    return Settings(**{k: _freeze(v) for k, v in json.loads(json.dumps(merged)).items()})


def docker_repo(settings: Settings, os_id: str) -> tuple[str, str]:
    """(repository URL, gpg key URL) of Docker for os_id "debian", "ubuntu" or an EL id."""
    key = os_id if os_id in ("debian", "ubuntu") else "rhel"
    return settings.docker_repo_url[key], settings.docker_repo_gpgkey[key]


def toolkit_repo(settings: Settings, family: str) -> tuple[str, str]:
    """(repository URL, gpg key URL) of the toolkit for family "debian" (apt) or "rhel" (rpm)."""
    key = "apt" if family == "debian" else "rpm"
    return settings.container_toolkit_repo_url[key], settings.container_toolkit_gpgkey[key]


def group_problems(problems_by_host: Mapping[str, list[str]], limit: int = 4) -> list[str]:
    """One line per distinct problem, naming the hosts that have it (for fleet-wide errors)."""
    hosts_by_problem: dict[str, list[str]] = {}
    for host_name, problems in problems_by_host.items():
        for problem in problems:
            hosts_by_problem.setdefault(problem, []).append(host_name)
    lines = []
    for problem, hosts in hosts_by_problem.items():
        shown = ", ".join(hosts[:limit]) + (f" and {len(hosts) - limit} more" if len(hosts) > limit else "")
        lines.append(f"{problem}  [{shown}]")
    return lines


def validate_inventory(hosts: Mapping[str, Mapping]) -> list[str]:
    """Every problem of a whole inventory: ``hosts`` maps each host name to its data (as
    pyinfra merges it: ``host.data.dict()``). One line per distinct problem, naming the hosts
    that have it; an empty list when every host is valid.

    The one validation of gpuhost's settings: run it once, before any host is contacted
    (``inventories/preflight.py``, and ``roles.common.check_inventory`` for runs that did not
    go through the preflight).
    """
    return group_problems({name: validate(data) for name, data in hosts.items()})


if __name__ == "__main__":  # python -m gpuhost.settings docs/settings.md
    import sys
    from pathlib import Path

    doc = Path(sys.argv[1])
    doc.write_text(sync_docs(doc.read_text()))
    print(f"updated {doc}")
