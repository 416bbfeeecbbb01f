"""gpuhost.facts.kernel.PackageAvailable's apt check, run for real against this Debian machine's apt:
a package with a candidate is available; a name apt knows only as referred to (a purely
virtual package: `apt-cache show` exits 0 for it, yet `apt-get install` says "has no
installation candidate", which stopped the VM's deploy) is not."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuhost.facts.kernel import PackageAvailable


def _available(package: str) -> bool:
    if shutil.which("apt-cache") is None:
        pytest.fail("apt-cache is missing: these tests run on Debian (make deps)")
    command = PackageAvailable().command(package, family="debian")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    return PackageAvailable().process(out.stdout.splitlines())


def test_a_package_with_a_candidate_is_available():
    assert _available("libc6") is True


def test_a_purely_virtual_or_unknown_name_is_not():
    assert _available("mail-transport-agent") is False
    assert _available("no-such-package-gpuhost") is False
