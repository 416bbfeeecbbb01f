"""The converged stamp (gpuhost/stamp.py): its section, its parser and the fast path's
judgement. The witness script runs here in this machine's own ``sh`` against its own files
(what it prints is only checked for form: tests/integration/test_gpu_host.py checks it on
real hosts)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost import settings, stamp
from gpuhost.facts import parsers
from gpuhost.facts.assemble import host_state
from gpuhost.facts.script import ALL_SECTIONS, SECTIONS, build_script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plans"))
import scenarios  # noqa: E402

THEN = ["file /etc/docker/daemon.json " + "a" * 64, "kernel 6.1.0-56-amd64",
        "pkg docker-ce 5:28.5.1-1~debian.12~bookworm ii", "unit docker.service enabled active"]
HEADER = "gpuhost-converged 1\ndigest " + "d" * 64 + "\nversion 0.1.0\nwritten 1795811723\n"


def _section(changes: list[str], watched: str = "watched 1 1 1") -> str:
    """The stamp section's output: the header, what differs, the counts."""
    return HEADER + f"{stamp.CHANGED}\n" + "".join(line + "\n" for line in changes) + watched + "\n"


def test_a_host_without_a_stamp_has_none_and_is_stale():
    assert stamp.parse(3, "") is None
    assert stamp.parse(None, "") is None
    assert stamp.stale(None, "d" * 64) == ["no stamp of a successful gpuhost run"]


def test_an_unchanged_host_with_the_same_digest_is_not_stale():
    parsed = stamp.parse(0, _section([], "watched 21 17 7"))
    assert parsed["format"] == stamp.FORMAT and parsed["version"] == "0.1.0"
    assert parsed["changes"] == [] and parsed["watched"] == {"file": 21, "pkg": 17, "unit": 7}
    assert stamp.stale(parsed, "d" * 64) == []
    assert stamp.summary(parsed) == ("as wanted, unchanged since gpuhost's run of 2026-11-27 "
                                     "20:35 UTC: 21 files, 17 packages, 7 units")


def test_another_digest_is_stale_whatever_the_witness():
    parsed = stamp.parse(0, _section([]))
    assert stamp.stale(parsed, "e" * 64) == ["settings or gpuhost's code changed since the last run"]


def test_every_kind_of_difference_is_named():
    changes = ["- file /etc/docker/daemon.json", "+ file /etc/docker/daemon.json",
               "+ file /etc/apt/sources.list.d/x.list", "- kernel 6.1.0-56-amd64",
               "+ kernel 6.1.0-57-amd64", "- pkg docker-ce 5:28.5.1-1~debian.12~bookworm ii",
               "- unit docker.service enabled active", "+ unit docker.service enabled inactive"]
    found = stamp.stale(stamp.parse(0, _section(changes)), "d" * 64)
    assert found == ["new file /etc/apt/sources.list.d/x.list", "/etc/docker/daemon.json changed",
                     "kernel: 6.1.0-56-amd64 -> 6.1.0-57-amd64", "pkg docker-ce is gone",
                     "unit docker.service: enabled active -> enabled inactive"]


def test_a_stamp_of_another_format_or_cut_short_is_stale():
    assert stamp.stale(stamp.parse(0, "gpuhost-converged 9\ndigest x\n"), "x") == [
        "a stamp gpuhost cannot read ('gpuhost-converged 9')"]
    cut = stamp.parse(0, HEADER)  # the section stopped before its counts
    assert stamp.stale(cut, "d" * 64) == [
        "the stamp's witness was not read (the section was cut short)"]


def _settings(**extra):
    data = scenarios.host_data("debian12", {})
    data = {k: v for k, v in data.items() if not k.startswith(("plan_", "fake_"))}
    return settings.resolve({**data, **extra})


def test_the_digest_follows_the_settings_but_not_full_check(tmp_path):
    base = stamp.run_digest(_settings())
    assert stamp.run_digest(_settings()) == base
    assert stamp.run_digest(_settings(full_check=True)) == base
    assert stamp.run_digest(_settings(nvidia_persistenced=False)) != base
    config = tmp_path / "mig.yaml"
    config.write_text("version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n"
                      "      mig-enabled: false\n")
    with_file = stamp.run_digest(_settings(mig_config_file=str(config)))
    config.write_text(config.read_text() + "# edited\n")
    assert stamp.run_digest(_settings(mig_config_file=str(config))) != with_file


def test_the_digest_covers_gpuhosts_code(monkeypatch):
    base = stamp.run_digest(_settings())
    monkeypatch.setattr(stamp, "code_digest", lambda: "0" * 64)
    assert stamp.run_digest(_settings()) != base
    assert "full_check" in {f.name for f in dataclasses.fields(settings.Settings)}


def test_the_composite_fact_carries_the_stamp_section_last():
    assert ALL_SECTIONS[-1] == "stamp"
    state = host_state(parsers.split_sections(scenarios.bare_output("debian12") + "\n"))
    assert state["stamp"] is None


def _sh(script: str) -> str:
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_witness_script_runs_in_a_posix_shell_and_prints_only_witness_lines():
    out = _sh(f"_gh_dpkg=$( ({SECTIONS['dpkg']}) 2>&1); _gh_rpm=$( ({SECTIONS['rpm']}) 2>&1); "
              + stamp.WITNESS)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("kernel ")
    kinds = {line.split()[0] for line in lines}
    assert kinds <= {"kernel", "file", "cache", "pkg", "unit"}, kinds
    for line in lines:
        if line.startswith("file "):
            path, digest = line.split()[1:]
            assert path.startswith("/") and len(digest) == 64


def test_the_section_compares_on_the_host_and_sends_no_digest(tmp_path):
    """The stamp section as the composite fact runs it, with the stamp's path moved to a
    temporary file holding THEN: the header, then only what differs (a file line without its
    sha256), then the counts of now."""
    fake = tmp_path / "converged"
    fake.write_text(HEADER + "--\n" + "\n".join(THEN) + "\n")
    script = build_script(("dpkg", "rpm", "stamp")).replace(stamp.PATH, str(fake))
    out = _sh(script)
    rc, text = _section_of(out, "stamp")
    parsed = stamp.parse(rc, text)
    assert parsed["digest"] == "d" * 64 and parsed["written"] == "1795811723"
    assert ("-", "file /etc/docker/daemon.json") in parsed["changes"] or \
        ("+", "file /etc/docker/daemon.json") in parsed["changes"], parsed["changes"]
    assert ("-", "pkg docker-ce 5:28.5.1-1~debian.12~bookworm ii") in parsed["changes"]
    changed = text.partition(stamp.CHANGED)[2]
    assert "a" * 64 not in out and not any(len(word) == 64 for word in changed.split())
    assert set(parsed["watched"]) == {"file", "pkg", "unit"}


def test_an_unchanged_witness_gives_no_change(tmp_path):
    now = _sh(f"_gh_dpkg=$( ({SECTIONS['dpkg']}) 2>&1); _gh_rpm=$( ({SECTIONS['rpm']}) 2>&1); "
              + stamp.WITNESS)
    fake = tmp_path / "converged"
    fake.write_text(HEADER + "--\n" + now)
    script = build_script(("dpkg", "rpm", "stamp")).replace(stamp.PATH, str(fake))
    parsed = stamp.parse(*_section_of(_sh(script), "stamp"))
    assert parsed["changes"] == [] and stamp.stale(parsed, "d" * 64) == []


def _section_of(out: str, name: str) -> tuple[int, str]:
    entry = parsers.split_sections(out)[name]
    return entry["rc"], entry["out"]


@pytest.mark.parametrize("kind", ["file", "pkg", "unit", "kernel"])
def test_a_line_that_appears_or_goes_is_a_difference(kind):
    line = {"file": "file /x " + "0" * 64, "pkg": "pkg a 1 ii", "unit": "unit a.service x y",
            "kernel": "kernel 1"}[kind]
    assert stamp.differences([("+", line)]) and stamp.differences([("-", line)])
    assert stamp.differences([]) == []


GOLDEN = Path(__file__).resolve().parents[1] / "plans" / "golden"


def test_every_file_a_golden_plan_writes_is_in_the_witness():
    """A file gpuhost writes outside the witness would let a hand edit of it go unseen by the
    fast path (docs/converged.md, "Limits")."""
    import fnmatch
    import re

    written = set()
    for plan in GOLDEN.glob("*.plan"):
        for line in plan.read_text().splitlines():
            target = re.match(r"^(?:upload|mv -f \S+) (\S+)$", line)
            if target:
                written.add(target.group(1).removesuffix(".gpuhost-new"))
    assert len(written) > 15, written
    globs = (*stamp.WITNESS_FILES, stamp.CACHE_FILES)
    unwatched = sorted(p for p in written if not any(fnmatch.fnmatch(p, g) for g in globs))
    assert unwatched == [], unwatched


def test_a_boot_that_runs_the_cdi_boot_unit_is_no_witness_change(tmp_path):
    """Issue 37: the deploy leaves gpuhost-cdi-spec.service enabled and inactive, the next boot
    runs it (active): the witness writes its active state as "-", so the first run after a
    reboot still takes the fast path; docker's active state is still witnessed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text("#!/bin/sh\nprintf 'Id=docker.service\\nUnitFileState=enabled\\n"
                         "ActiveState=%s\\n\\nId=gpuhost-cdi-spec.service\\n"
                         "UnitFileState=enabled\\nActiveState=%s\\n' \"$DOCKER\" \"$SPEC\"\n")
    systemctl.chmod(0o755)

    def units(docker: str, spec: str) -> list[str]:
        out = _sh(f"PATH={bin_dir}:$PATH DOCKER={docker} SPEC={spec}; export DOCKER SPEC; "
                  + stamp.WITNESS)
        return [line for line in out.splitlines() if line.startswith("unit ")]

    after_deploy, after_boot = units("active", "inactive"), units("active", "active")
    assert after_deploy == after_boot == ["unit docker.service enabled active",
                                          "unit gpuhost-cdi-spec.service enabled -"]
    assert units("inactive", "active")[0] == "unit docker.service enabled inactive"
