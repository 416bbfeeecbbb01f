"""The audit's newest offered kernel: the ``kernel_offered`` section (facts/script.py), its parser
(facts/offered_parsers.py), the fact's ``offered`` block (facts/assemble_kernel.py) and the
``kernel-newer-offered`` info finding (gpuhost/health/host.py).

Captured outputs (tests/fixtures/outputs/): ``kernel_offered__apt-bookworm-security.txt`` is
the section's apt part run by hand on a Debian 12 machine with bookworm's and
bookworm-security's lists (apt 2.6, 2026-11-29) for a host running 6.1.0-56-amd64;
``kernel_offered__dnf-no-repositories.txt`` is dnf 4.14's answer on a machine without
repositories."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from gpuhost.facts import script
from gpuhost.facts.assemble_kernel import offered
from gpuhost.facts.offered_parsers import parse_kernel_offered
from gpuhost.health import host as health_host

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "outputs"


def test_apt_policy_captured_on_bookworm():
    text = (FIXTURES / "kernel_offered__apt-bookworm-security.txt").read_text()
    assert parse_kernel_offered(text) == {
        "source": "apt", "newest": "6.1.0-56-amd64", "installed": False,
        "headers": "available", "error": None}


def test_apt_installed_image_headers_missing_and_apt_knowing_none():
    text = ("source apt\nlinux-image-6.8.0-71-generic:\n  Installed: 6.8.0-71.71\n"
            "  Candidate: 6.8.0-71.71\n  Version table:\n *** 6.8.0-71.71 100\n"
            "        100 /var/lib/dpkg/status\nlinux-headers-6.8.0-71-generic:\n"
            "  Installed: (none)\n  Candidate: (none)\n  Version table:\n")
    assert parse_kernel_offered(text) == {
        "source": "apt", "newest": "6.8.0-71-generic", "installed": True,
        "headers": "missing", "error": None}
    assert parse_kernel_offered("source apt\n") == {
        "source": "apt", "newest": None, "installed": False, "headers": None, "error": None}


def test_dnf_rows_installed_available_and_wrapped_and_its_error():
    text = ("source dnf\nInstalled Packages\n"
            "kernel.x86_64                4.18.0-553.el8_10               @anaconda\n"
            "kernel.x86_64   4.18.0-553.44.1.el8_10   @gpuhost_sandbox_kernels\n"
            "Available Packages\n"
            "kernel.x86_64                4.18.0-553.40.1.el8_10          gpuhost_sandbox_kernels\n"
            "kernel.x86_64\n                     4.18.0-553.100.1.el8_10         ol8_baseos_latest\n")
    assert parse_kernel_offered(text) == {
        "source": "dnf", "newest": "4.18.0-553.100.1.el8_10.x86_64", "installed": False,
        "headers": None, "error": None}
    text = (FIXTURES / "kernel_offered__dnf-no-repositories.txt").read_text()
    assert parse_kernel_offered(text) == {
        "source": "dnf", "newest": None, "installed": False, "headers": None,
        "error": "Error: No matching Packages to list"}


@pytest.mark.parametrize("text", ["", "junk\n", "apt-cache: not found\n"])
def test_no_source_line_is_not_read(text):
    assert parse_kernel_offered(text) is None


def test_an_unknown_source_is_a_value_error():
    with pytest.raises(ValueError, match="kernel_offered"):
        parse_kernel_offered("source zypper\n")


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_the_section_picks_the_newest_image_of_the_running_shape(tmp_path):
    """The section's own shell, with uname and apt-cache stubbed: 100 after 99 (sort -V), the
    -rt-, -cloud-, -dbg, -unsigned images and the meta package are other shapes."""
    names = ["6.1.0-99-amd64", "6.1.0-100-amd64", "6.1.0-101-rt-amd64", "6.1.0-102-cloud-amd64",
             "6.1.0-103-amd64-dbg", "6.1.0-104-amd64-unsigned", "amd64", "6.1.0-56-amd64"]
    _stub(tmp_path, "uname", "echo 6.1.0-56-amd64\n")
    _stub(tmp_path, "apt-cache", 'case "$1" in pkgnames) printf "linux-image-%s\\n" '
          + " ".join(names) + ';; policy) echo "policy $2 $3";; esac\n')
    _stub(tmp_path, "dnf", 'echo "dnf $*"\n')
    assert _section(tmp_path, 'ID=ubuntu\nID_LIKE=debian\n') == (
        "source apt\npolicy linux-image-6.1.0-100-amd64 linux-headers-6.1.0-100-amd64\n")
    # by os-release, not by which tools the host carries
    assert _section(tmp_path, 'ID="ol"\nID_LIKE="fedora"\n') == (
        "source dnf\ndnf -C -q list --showduplicates kernel\n")
    _stub(tmp_path, "uname", "echo 5.15.0-307.178.5.el8uek.x86_64\n")
    assert _section(tmp_path, 'ID="rocky"\nID_LIKE="rhel centos fedora"\n').endswith(
        "list --showduplicates kernel-uek\n")
    assert _section(tmp_path, 'ID=alpine\n', rc=127) == ""
    assert ("kernel_offered",) in script.CHAINS  # dnf -C takes a second: beside the rest


def _section(tmp_path: Path, os_release: str, rc: int = 0) -> str:
    (tmp_path / "os-release").write_text(os_release)
    code = script.SECTIONS["kernel_offered"].replace("/etc/os-release", str(tmp_path / "os-release"))
    proc = subprocess.run(["sh", "-c", code], text=True, capture_output=True,
                          env={**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert proc.returncode == rc, proc.stderr
    return proc.stdout


def _dkms(kernel, status="installed", module="nvidia"):
    return {"module": module, "version": "580.95.05", "kernel": kernel, "arch": "x86_64",
            "status": status}


def test_offered_is_proven_by_dkms_held_back_by_the_note_unknown_without_dkms():
    text = ("source dnf\nkernel.x86_64 4.18.0-553.44.1.el8_10 @gpuhost_sandbox_kernels\n"
            "kernel.x86_64 4.18.0-553.40.1.el8_10 gpuhost_sandbox_kernels\n")
    running, newest = "4.18.0-553.el8_10.x86_64", "4.18.0-553.44.1.el8_10.x86_64"
    proven = offered(text, running, [_dkms(running), _dkms(newest)], None)
    assert proven["newest"] == newest and proven["installed"] and proven["newer"]
    assert proven["proven"] is True and proven["held_back"] is False
    held = offered(text, running, [_dkms(running), _dkms(newest, "built")],
                   {"kernel": newest, "driver": "580.95.05", "reason": "error"})
    assert held["proven"] is False and held["held_back"] is True
    assert offered(text, running, [], None)["proven"] is None  # no DKMS module: cannot tell
    same = offered(text, newest, [_dkms(newest)], None)
    assert same["newer"] is False
    assert offered(None, running, [], None) is None
    assert offered("source zypper\n", running, [], None)["error"].startswith("kernel_offered")


@pytest.mark.parametrize("offer, words", [
    ({"newest": "6.8.0-71-generic", "installed": False, "newer": True, "proven": False,
      "held_back": False}, "6.8.0-71-generic (not installed; not proven: no NVIDIA module"),
    ({"newest": "6.8.0-71-generic", "installed": True, "newer": True, "proven": True,
      "held_back": False}, "6.8.0-71-generic (installed; proven: DKMS built"),
    ({"newest": "6.8.0-71-generic", "installed": True, "newer": True, "proven": False,
      "held_back": True}, "(installed; held back: DKMS could not build"),
    ({"newest": "6.8.0-71-generic", "installed": False, "newer": True, "proven": None,
      "held_back": False}, "does not come from DKMS: not proven by gpuhost"),
])
def test_a_newer_offered_kernel_is_an_info_finding(offer, words):
    found = _findings(offer)
    assert [f["severity"] for f in found] == ["info"] and words in found[0]["message"]


def test_no_finding_when_the_host_runs_the_newest_or_nothing_was_read():
    assert _findings({"newest": "6.8.0-51-generic", "installed": True, "newer": False,
                      "proven": None, "held_back": False}) == []
    assert _findings(None) == []


def _findings(offer):
    found = health_host.kernel_offered_findings({"kernel": {"offered": offer}})
    assert all(f["id"] == "kernel-newer-offered" for f in found)
    return found


def test_only_the_audit_reads_what_the_package_manager_offers():
    # the deploys' one read of a host stays what it was: no apt-cache/dnf list on every run
    from gpuhost.facts.host import AuditHostState, GpuHostState

    assert "kernel_offered" not in GpuHostState().command()
    assert "apt-cache pkgnames" not in GpuHostState().command()
    assert "apt-cache pkgnames" in AuditHostState().command()
