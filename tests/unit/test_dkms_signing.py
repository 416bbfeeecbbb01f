"""Issue 23 item 3 without a host: which dkms line a Secure Boot host signs with
(facts/dkms.py), and the mechanism gpuhost picks for it (roles/boot_safety.py)."""
from __future__ import annotations

import subprocess

import pytest

from gpuhost.facts.dkms import DkmsSigning, dkms_line, parse_dkms_signing
from gpuhost.roles import boot_safety


@pytest.mark.parametrize("version, line", [
    ("2.8.7-2ubuntu2", "2.8"), ("2.8.4-3", "2.8"), ("3.0.10-8+deb12u1", "3"),
    ("3.0.11-1ubuntu13", "3"), ("3.4.3-2.el9", "3"), ("1:2.8.1-5", "2.8"),
    (None, None), ("", None), ("(none)", None)])
def test_dkms_line(version, line):
    assert dkms_line(version) == line


def test_parse_installed_wins_and_tools_are_read():
    got = parse_dkms_signing(["installed=2.8.7-2ubuntu2", "kmodsign=yes", "shim_mok_dir=yes"])
    assert got == {"version": "2.8.7-2ubuntu2", "source": "installed", "line": "2.8",
                   "kmodsign": True, "shim_mok_dir": True}


def test_parse_candidate_and_nothing():
    assert parse_dkms_signing(["candidate=3.0.11-1ubuntu13"])["source"] == "candidate"
    none = parse_dkms_signing(["candidate=(none)"])
    assert none["version"] is None and none["line"] is None and none["kmodsign"] is False


@pytest.mark.parametrize("dkms, distro, line", [
    ({"line": "2.8"}, "ubuntu2404", "2.8"),    # the host's version wins
    ({"line": "3"}, "ubuntu2204", "3"),
    ({"line": None}, "ubuntu2204", "2.8"),     # unknown: what jammy ships (2.8.7)
    ({"line": None}, "debian12", "3"), ({}, "rhel9", "3")])
def test_dkms_line_of_a_host(dkms, distro, line):
    assert boot_safety.dkms_line(dkms, distro) == line


def test_the_fact_command_is_valid_sh_and_reads_nothing_it_should_not():
    command = DkmsSigning().command()
    assert subprocess.run(["sh", "-n", "-c", command]).returncode == 0
    assert "MOK.priv" not in command       # the private key is never read by the fact
