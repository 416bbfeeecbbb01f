"""gpuhost.facts.services.ServiceInstalled's command, run for real in a shell against unit files in a
scratch tree (the directories it looks in, moved there)."""

from __future__ import annotations

import subprocess

from gpuhost.facts.services import ServiceInstalled


def installed(tmp_path, service: str) -> bool:
    command = ServiceInstalled().command(service).replace("/lib/systemd/system",
                                                          str(tmp_path / "lib"))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    return ServiceInstalled().process(out.stdout.splitlines())


def test_a_unit_file_in_lib_systemd_is_found(tmp_path):
    # before: `test -e "$d/" 'nvidia-persistenced.service'` (two words) was never true, so
    # gpuhost never enabled nvidia-persistenced on Debian/Ubuntu hosts
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "nvidia-persistenced.service").write_text("[Unit]\n")
    assert installed(tmp_path, "nvidia-persistenced")
    assert not installed(tmp_path, "nvidia-fabricmanager")
