"""The composite fact's ``dkms`` section (facts/script.py, ``dkms_status``) against real
``dkms status``: what both say, module, version, kernel, arch and state (dkms' notes aside)."""
from __future__ import annotations

from gpuhost.facts.parsers import parse_dkms_status, split_sections
from gpuhost.facts.script import build_script


def states(text: str) -> list[tuple]:
    return sorted((e["module"], e["version"], e["kernel"], e["arch"], e["status"])
                  for e in parse_dkms_status(text))


def assert_host_read_matches_dkms(ssh, name: str) -> list[tuple]:
    """On a sandbox host: the section, as the composite fact runs it, reads the tree (no
    hand-over to dkms) and says what the host's real ``dkms status`` says. Returns the states."""
    section = split_sections(ssh(name, build_script(["dkms"])).stdout)["dkms"]
    real = ssh(name, "dkms status").stdout
    assert section["rc"] == 0 and section["out"].startswith("# read from /var/lib/dkms"), section
    assert states(section["out"]) == states(real), (name, real, section["out"])
    assert states(real), f"{name}: dkms lists nothing"
    return states(real)
