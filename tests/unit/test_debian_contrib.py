"""Issue 13 item 8: Debian's contrib component for NVIDIA's Debian packages, in gpuhost's own
sources file (facts.apt_sources, roles.debian_archive)."""

from __future__ import annotations

import subprocess

from gpuhost.facts.apt_sources import REDACTED, AptSources, parse_apt_sources
from gpuhost.roles.debian_archive import CONTRIB_FILE, contrib_entries, contrib_sources

NETINST = """@@gpuhost-file@@ /etc/apt/sources.list
#deb cdrom:[Debian GNU/Linux 12.8.0 _Bookworm_ - Official amd64 NETINST]/ bookworm main

deb http://deb.debian.org/debian/ bookworm main non-free-firmware
deb-src http://deb.debian.org/debian/ bookworm main non-free-firmware
deb http://security.debian.org/debian-security bookworm-security main non-free-firmware
deb http://deb.debian.org/debian/ bookworm-updates main non-free-firmware
"""

# the layout of Debian's cloud images: deb822, one stanza for the archive, one for security
CLOUD = """@@gpuhost-file@@ /etc/apt/sources.list.d/debian.sources
Types: deb deb-src
URIs: mirror+file:///etc/apt/mirrors/debian.list
Suites: bookworm bookworm-updates bookworm-backports
Components: main

Types: deb deb-src
URIs: mirror+file:///etc/apt/mirrors/debian-security.list
Suites: bookworm-security
Components: main
"""

SANDBOX = """@@gpuhost-file@@ /etc/apt/sources.list
deb [signed-by=/etc/apt/keyrings/gpuhost-sandbox-archive.gpg] http://127.77.0.1:8000/debian bookworm main
@@gpuhost-file@@ /etc/apt/sources.list.d/docker.sources
Types: deb
URIs: https://download.docker.com/linux/debian
Suites: bookworm
Components: stable
Signed-By: /etc/apt/keyrings/docker.asc
"""


def test_a_netinst_host_gets_contrib_for_each_of_its_debian_suites():
    stanzas, skipped = contrib_entries(parse_apt_sources(NETINST), "bookworm")
    assert skipped == []
    assert stanzas == [
        {"uris": "http://deb.debian.org/debian/", "suites": ["bookworm", "bookworm-updates"],
         "signed_by": None},
        {"uris": "http://security.debian.org/debian-security", "suites": ["bookworm-security"],
         "signed_by": None}]
    text = contrib_sources(stanzas)
    assert "URIs: http://deb.debian.org/debian/\nSuites: bookworm bookworm-updates\n" \
           "Components: contrib\n" in text
    assert "Signed-By" not in text


def test_deb822_sources_and_signed_by_are_copied_so_apt_sees_one_source():
    stanzas, _ = contrib_entries(parse_apt_sources(CLOUD), "bookworm")
    assert [s["suites"] for s in stanzas] == [
        ["bookworm", "bookworm-updates", "bookworm-backports"], ["bookworm-security"]]
    stanzas, _ = contrib_entries(parse_apt_sources(SANDBOX), "bookworm")
    # Docker's "stable" component is not Debian's archive: only the sandbox mirror gets contrib
    assert stanzas == [{"uris": "http://127.77.0.1:8000/debian", "suites": ["bookworm"],
                        "signed_by": "/etc/apt/keyrings/gpuhost-sandbox-archive.gpg"}]
    assert ("Signed-By: /etc/apt/keyrings/gpuhost-sandbox-archive.gpg"
            in contrib_sources(stanzas).splitlines())


def test_an_inline_signed_by_key_keeps_its_continuation_lines():
    text = ("@@gpuhost-file@@ /etc/apt/sources.list.d/debian.sources\nTypes: deb\n"
            "URIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n"
            "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n abc\n"
            " -----END PGP PUBLIC KEY BLOCK-----\n")
    stanzas, _ = contrib_entries(parse_apt_sources(text), "bookworm")
    out = contrib_sources(stanzas)
    assert ("Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n abc\n"
            " -----END PGP PUBLIC KEY BLOCK-----\n") in out


def test_nothing_to_add_when_the_host_has_contrib_or_is_not_debian_12():
    has = NETINST.replace("main non-free-firmware", "main contrib non-free-firmware")
    assert contrib_entries(parse_apt_sources(has), "bookworm") == ([], [])
    # contrib in a separate line of the user's also counts
    extra = NETINST + "deb http://deb.debian.org/debian bookworm contrib\n"
    stanzas, _ = contrib_entries(parse_apt_sources(extra), "bookworm")
    assert [s["suites"] for s in stanzas] == [["bookworm-security"], ["bookworm-updates"]]
    other = NETINST.replace("bookworm", "trixie")
    assert contrib_entries(parse_apt_sources(other), "bookworm") == ([], [])


def test_gpuhost_own_file_and_disabled_sources_do_not_count():
    ours = contrib_sources([{"uris": "http://deb.debian.org/debian/",
                             "suites": ["bookworm"], "signed_by": None}])
    text = NETINST + f"@@gpuhost-file@@ {CONTRIB_FILE}\n" + ours
    stanzas, _ = contrib_entries(parse_apt_sources(text), "bookworm")
    assert stanzas[0]["suites"] == ["bookworm", "bookworm-updates"]  # same answer as without
    disabled = CLOUD.replace("Components: main\n\nTypes", "Components: main\nEnabled: no\n\nTypes")
    stanzas, _ = contrib_entries(parse_apt_sources(disabled), "bookworm")
    assert [s["suites"] for s in stanzas] == [["bookworm-security"]]


def test_a_uri_with_credentials_is_never_copied():
    text = ("@@gpuhost-file@@ /etc/apt/sources.list\n"
            f"deb https://{REDACTED}@mirror.example/debian bookworm main\n")
    stanzas, skipped = contrib_entries(parse_apt_sources(text), "bookworm")
    assert stanzas == [] and skipped == [f"https://{REDACTED}@mirror.example/debian"]


def test_the_fact_command_redacts_credentials_before_they_leave_the_host(tmp_path):
    # the fact's own shell, with /etc/apt pointed at a scratch directory
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "deb https://user:s3cret@mirror.example/debian bookworm main\n")
    (tmp_path / "sources.list.d" / "x.sources").write_text(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n")
    command = AptSources().command().replace("/etc/apt", str(tmp_path))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert "s3cret" not in out and "user" not in out
    entries = AptSources().process(out.splitlines())
    assert [e["uris"] for e in entries] == [[f"https://{REDACTED}@mirror.example/debian"],
                                            ["http://deb.debian.org/debian"]]
