"""Issue 23 item 7: the headers meta package is the running kernel's flavour's (cloud and HWE
kernels), in the plan of a bare host and from the release string alone
(gpuhost.kernel_meta). Each failed before: the plan installed linux-headers-generic /
linux-headers-amd64 whatever the kernel."""

from __future__ import annotations

import re

import pytest

from gpuhost.kernel_meta import headers_meta
from tests.plans.test_plans import run_plan

META = re.compile(r"apt-get .*install --no-install-recommends (linux-headers-[a-z0-9.-]+)$")


@pytest.mark.parametrize("scenario, kernel, meta", [
    ("ubuntu2204", "6.8.0-1012-aws", "linux-headers-aws"),
    ("ubuntu2204", "6.8.0-52-generic", "linux-headers-generic-hwe-22.04"),
    ("ubuntu2404", "6.8.0-1020-azure", "linux-headers-azure-lts-24.04"),
    ("debian12", "6.1.0-56-cloud-amd64", "linux-headers-cloud-amd64"),
])
def test_the_plan_installs_the_running_flavours_meta_package(scenario, kernel, meta):
    result = run_plan(scenario, {"plan_kernel": kernel})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert f"linux-headers-{kernel}" in " ".join(lines)  # the running kernel's own headers
    assert [m.group(1) for m in map(META.search, lines) if m] == [meta], lines


@pytest.mark.parametrize("tag, release, meta", [
    ("debian12", "6.1.0-56-amd64", "linux-headers-amd64"),
    ("debian12", "6.1.0-56-cloud-amd64", "linux-headers-cloud-amd64"),
    ("debian12", "6.1.0-56-rt-amd64", "linux-headers-rt-amd64"),
    ("debian12", "6.12.9+bpo-amd64", "linux-headers-amd64"),
    ("ubuntu2204", "5.15.0-130-generic", "linux-headers-generic"),
    ("ubuntu2204", "6.8.0-52-generic", "linux-headers-generic-hwe-22.04"),
    ("ubuntu2204", "6.8.0-52-lowlatency", "linux-headers-lowlatency-hwe-22.04"),
    ("ubuntu2204", "5.15.0-1045-aws", "linux-headers-aws-lts-22.04"),
    ("ubuntu2204", "6.8.0-1012-aws", "linux-headers-aws"),
    ("ubuntu2204", "5.15.0-1060-oracle", "linux-headers-oracle-lts-22.04"),
    ("ubuntu2204", "6.5.0-1024-oem", "linux-headers-oem-22.04"),
    ("ubuntu2404", "6.8.0-51-generic", "linux-headers-generic"),
    ("ubuntu2404", "6.14.0-29-generic", "linux-headers-generic-hwe-24.04"),
    ("ubuntu2404", "6.17.0-1022-azure", "linux-headers-azure"),
    ("ubuntu2404", "6.8.0-1030-gcp", "linux-headers-gcp-lts-24.04"),
    ("ubuntu2404", "not-a-release", "linux-headers-generic"),
])
def test_meta_package_from_the_release_string(tag, release, meta):
    assert headers_meta(tag, release) == meta
