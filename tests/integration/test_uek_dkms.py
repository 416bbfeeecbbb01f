"""Issue 23 items 1, 2 and 4 over SSH, with real dkms (Debian's 3.2.2, repackaged as the
sandbox's EPEL `dkms` RPM) and kernels whose .config records the gcc that built them:

- OL8 on UEK 7 (gcc 11; OL8's gcc is 8.5) and OL9 on UEK 8 (gcc 14; OL9's is 11) build the
  NVIDIA module with the kernel's gcc toolset, OL8 and OL9 on RHCK with the system gcc;
  before issue 23 both UEK hosts failed with Kbuild's "the compiler differs" lines.
- The OL9 UEK host also has an older RHCK kernel-core installed (trait rhck-installed):
  EPEL 9 dkms's `(kernel-devel-matched if kernel-core)` must not bring a newer RHCK kernel.

Bare hosts: the converge from bare with real dkms is the point. A missing host fails.
"""
from __future__ import annotations

import re

import pytest

from tests.integration.dkms_read import assert_host_read_matches_dkms

UEK7 = "5.15.0-307.178.5.el8uek.x86_64"
RHCK9 = "5.14.0-503.11.1.el9_5.x86_64"
SPEC = {"hosts": 4, "ol": 4, "docker_hosts": 0, "overrides": {
    "ol8-01": {"kernel_release": UEK7, "traits": []},
    "ol8-02": {"traits": []},                                  # RHCK, the system gcc
    "ol9-03": {"traits": ["rhck-installed"]},                  # UEK 8 + an older RHCK
    "ol9-04": {"kernel_release": RHCK9}}}

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="converging from bare with real dkms is the point")]

NO_VERIFY_IMAGE = ("--data", "verify_image=null", "--data", "verify_image_archive=null")
KERNEL_PACKAGES = "rpm -qa --qf '%{NAME}-%{VERSION}-%{RELEASE}\\n' 'kernel*' | sort"


def _major(text: str) -> str:
    return re.search(r"(\d+)\.\d+\.\d+", text).group(1)


@pytest.fixture(scope="module")
def converged(fleet, ssh, pyinfra):
    names = [h["name"] for h in fleet["hosts"]]
    assert names == list(SPEC["overrides"]), names
    before = ssh("ol9-03", KERNEL_PACKAGES).stdout.split()
    assert "kernel-core-5.14.0-427.13.1.el9_4" in before, before   # trait rhck-installed
    first = pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE, check=False, timeout=1800)
    return {"before": before, "first": first}


def test_each_module_is_built_by_the_compiler_that_built_its_kernel(converged, fleet, ssh):
    first = converged["first"]
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    for h in fleet["hosts"]:
        name, release = h["name"], h["kernel_release"]
        assert ssh(name, "uname -r").stdout.strip() == release
        assert f", {release}, x86_64: installed" in ssh(name, "dkms status").stdout, name
        assert_host_read_matches_dkms(ssh, name)   # real dkms 3.2.2, real module builds
        built_by = ssh(name, f"sed -n 's/^CONFIG_CC_VERSION_TEXT=//p' "
                             f"/lib/modules/{release}/build/.config").stdout
        module = ssh(name, f"find /lib/modules/{release} -name nvidia.ko | xargs head -n 1").stdout
        assert _major(module.split("cc=")[1]) == _major(built_by), (name, module, built_by)
        assert "NVIDIA UNIX" in ssh(name, "cat /proc/driver/nvidia/version").stdout, name
        uek_toolset = release == UEK7 or release.startswith("6.12.0-")   # UEK 7 / UEK 8
        toolset_files = ssh(name, "ls /etc/dkms/nvidia.conf /etc/dkms/gpuhost-gcc-toolset.sh",
                            check=False).returncode == 0
        assert toolset_files == uek_toolset, (name, release)


def test_epel_dkms_brings_no_rhck_kernel_onto_the_uek_host(converged, ssh):
    after = ssh("ol9-03", KERNEL_PACKAGES).stdout.split()
    cores = [p for p in after if p.startswith("kernel-core-")]
    assert cores == [p for p in converged["before"] if p.startswith("kernel-core-")], after
    # what gpuhost added: the running UEK's devel package, userspace headers, and the
    # installed RHCK's kernel-devel(-matched), never a kernel of another version
    installed_rhck = cores[0].removeprefix("kernel-core-")
    for p in set(after) - set(converged["before"]):
        assert (p.startswith(("kernel-uek-devel-6.12.0", "kernel-headers-"))
                or p.endswith(installed_rhck)), (p, after)


def test_a_second_run_changes_nothing(converged, pyinfra):
    second = pyinfra("-y", "deploys/gpu_host.py", *NO_VERIFY_IMAGE, "--data", "full_check=true", check=False, timeout=900)
    assert second.returncode == 0 and second.totals["changed"] == 0, \
        (second.stdout + second.stderr)[-3000:]
