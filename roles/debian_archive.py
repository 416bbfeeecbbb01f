"""Debian: Debian's ``contrib`` component, which NVIDIA's Debian packages need.

NVIDIA's installation guide for Debian starts with ``add-apt-repository contrib``: its
Debian-style driver packages depend on packages Debian ships only in contrib (in bookworm
``nvidia-installer-cleanup``, ``nvidia-support``, ``nvidia-kernel-common``,
``glx-alternative-nvidia``; which of them a given NVIDIA release pulls in is not documented:
docs/real-hosts.md). ``add-apt-repository`` edits the user's own source lines; gpuhost
instead writes its own file, ``/etc/apt/sources.list.d/gpuhost-debian-contrib.sources``,
with ``contrib`` for the same URIs and suites (and the same ``Signed-By``: apt refuses one
source with two different ones) — nothing the user wrote is touched, and
``debian_enable_contrib: false`` removes the file again.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.operations import apt, files

from gpuhost import aptdistros
from gpuhost.facts.apt_sources import REDACTED, AptSources
from gpuhost.roles.files import config_file

CONTRIB_FILE = "/etc/apt/sources.list.d/gpuhost-debian-contrib.sources"


def _debian_suite(suite: str, codename: str) -> bool:
    return suite == codename or suite.startswith(codename + "-")


def contrib_entries(entries: list[dict], codename: str) -> tuple[list[dict], list[str]]:
    """The deb822 stanzas (uris, suites, signed_by) that add ``contrib`` where the host's
    Debian archive sources lack it, and the URIs left out because they carry credentials
    (read redacted: gpuhost cannot copy them).

    An archive source is an enabled ``deb`` entry with ``main`` for a suite of this release
    (``bookworm``, ``bookworm-updates``, ``bookworm-security``, ...); it has contrib when any
    entry (of any file but gpuhost's own) gives that URI and suite ``contrib``.
    """
    theirs = [e for e in entries if e["file"] != CONTRIB_FILE and e["enabled"]]
    have = {(uri.rstrip("/"), suite) for e in theirs if "contrib" in e["components"]
            for uri in e["uris"] for suite in e["suites"]}
    wanted: dict[tuple[str, str | None], list[str]] = {}
    skipped: list[str] = []
    for entry in theirs:
        if "main" not in entry["components"]:
            continue
        for uri in entry["uris"]:
            for suite in entry["suites"]:
                if not _debian_suite(suite, codename) or (uri.rstrip("/"), suite) in have:
                    continue
                if REDACTED in uri:
                    if uri not in skipped:
                        skipped.append(uri)
                    continue
                suites = wanted.setdefault((uri, entry["signed_by"]), [])
                if suite not in suites:
                    suites.append(suite)
    stanzas = [{"uris": uri, "suites": suites, "signed_by": signed_by}
               for (uri, signed_by), suites in wanted.items()]
    return stanzas, skipped


def contrib_sources(stanzas: list[dict]) -> str:
    """gpuhost's deb822 file for ``stanzas`` (``contrib_entries``)."""
    out = ["# Managed by gpuhost (debian_enable_contrib): Debian's contrib component for the",
           "# suites this host already uses. NVIDIA's Debian packages depend on packages Debian",
           "# ships in contrib (NVIDIA's guide: add-apt-repository contrib). Your own source",
           "# files are not changed; set debian_enable_contrib: false to remove this file."]
    for stanza in stanzas:
        out += ["", "Types: deb", f"URIs: {stanza['uris']}",
                f"Suites: {' '.join(stanza['suites'])}", "Components: contrib"]
        signed_by = stanza["signed_by"]
        if signed_by:
            lines = signed_by.split("\n")
            out.append(f"Signed-By: {lines[0]}".rstrip())
            out += lines[1:]  # an inline key keeps its continuation lines as they were
    return "\n".join(out) + "\n"


def _remove(name: str) -> None:
    removed = files.file(name=name, path=CONTRIB_FILE, present=False)
    apt.update(name="apt-get update (contrib sources removed)", _if=removed.did_change)


def enable_contrib(tag: str, enabled: bool) -> None:
    """Operations: gpuhost's contrib sources file written (or removed), apt-get update on
    change. Debian only; nothing on Ubuntu (NVIDIA's Ubuntu packages need no contrib)."""
    release = aptdistros.RELEASES.get(tag)
    if release is None or not release.contrib:
        return
    codename = release.codename
    entries = host.get_fact(AptSources)
    ours = [e for e in entries if e["file"] == CONTRIB_FILE]
    if not enabled:
        if ours:
            _remove("Remove gpuhost's contrib sources (debian_enable_contrib: false)")
        return
    stanzas, skipped = contrib_entries(entries, codename)
    for uri in skipped:
        logger.warning(f"{host.name}: WARNING: the Debian source {uri} carries credentials in its "
                       "URI, which gpuhost does not copy: add 'contrib' to that source yourself "
                       "(NVIDIA's Debian packages need it) or set debian_enable_contrib: false")
    if not stanzas:
        if not ours:
            if not any(_debian_suite(s, codename) for e in entries for s in e["suites"]):
                logger.warning(
                    f"{host.name}: WARNING: no {codename} source in /etc/apt (an offline "
                    "mirror under other suite names?): gpuhost cannot add Debian's contrib "
                    "component, which NVIDIA's Debian packages need; make sure your mirror "
                    "carries it, or set debian_enable_contrib: false to silence this")
            host.noop("Debian's contrib component is enabled in the host's own sources")
            return
        # contrib came from the user's own sources since: gpuhost's file is not needed
        _remove("Remove gpuhost's contrib sources (the host's own sources have contrib)")
        return
    written = config_file(
        name=f"Enable Debian's contrib component ({CONTRIB_FILE})",
        content=contrib_sources(stanzas), dest=CONTRIB_FILE, mode="644")
    apt.update(name="apt-get update (contrib sources changed)", _if=written.did_change)
