"""The headers meta package of a Debian or Ubuntu kernel, from its release string (pure).

The meta package follows kernel updates of one flavour with their headers, so DKMS builds the
NVIDIA module for the next kernel too. It must be the running (or next boot's) kernel's
flavour: ``linux-headers-generic`` on an AWS kernel pulls headers of a kernel the host does
not run, DKMS builds for them, and the AWS kernel's next update gets no headers (found by a
review of gpuhost against the vendors' documents, 2026-11).

Naming, as the archives carry it (packages.ubuntu.com and packages.debian.org, read
2026-11-27):

- Debian: ``<ABI>-<flavour>`` -> ``linux-headers-<flavour>``: ``6.1.0-56-amd64`` ->
  ``linux-headers-amd64``, ``6.1.0-56-cloud-amd64`` -> ``linux-headers-cloud-amd64``,
  ``-rt-amd64``, ``-arm64`` likewise (source package linux-signed-amd64 / linux, "Header
  files for Linux <flavour> configuration (meta-package)").
- Ubuntu: ``<version>-<ABI>-<flavour>``. Each LTS series has its GA kernel (22.04: 5.15,
  24.04: 6.8; Canonical kernel team docs, "HWE kernels"); a newer version on that series is
  an HWE (or rolling cloud) kernel.
  - ``generic``, ``lowlatency`` (and their ``-64k``): GA -> ``linux-headers-<flavour>``,
    newer -> ``linux-headers-<flavour>-hwe-<series>`` (``linux-headers-generic-hwe-22.04``).
  - ``oem``: ``linux-headers-oem-<series>``.
  - cloud and other flavours (``aws``, ``azure``, ``gcp``, ``oracle``, ``nvidia``, ...):
    ``linux-headers-<flavour>`` rolls to newer kernels (noble's ``linux-headers-azure`` is
    built from linux-meta-azure-6.17), and ``linux-headers-<flavour>-lts-<series>`` stays on
    the GA version (jammy's ``linux-headers-aws-lts-22.04`` 5.15.0.1114, ``-gcp-lts-22.04``,
    ``-oracle-lts-22.04``; noble's ``linux-headers-aws-lts-24.04`` 6.8.0-1063): a GA-version
    kernel -> the ``-lts-`` one, a newer one -> the rolling one.

A name the host's repositories lack is a warning, not a failure (``roles/kernel_headers.py``
``future_headers``).
"""

from __future__ import annotations

import re

UBUNTU_SERIES = {"ubuntu2204": ("22.04", "5.15"), "ubuntu2404": ("24.04", "6.8")}
HWE_FLAVOURS = ("generic", "lowlatency", "generic-64k", "lowlatency-64k")
_UBUNTU = re.compile(r"^(\d+\.\d+)\.\d+-\d+-([a-z0-9][a-z0-9-]*)$")
_DEBIAN = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:-\d+|\+bpo)-([a-z0-9][a-z0-9-]*)$")


def headers_meta(tag: str, release: str) -> str:
    """``linux-headers-...`` for kernel ``release`` (``uname -r``) on ``tag`` (debian12,
    ubuntu2204, ubuntu2404). A release string of another shape: the distribution's default
    flavour (``linux-headers-amd64`` / ``linux-headers-generic``)."""
    if tag in UBUNTU_SERIES:
        series, ga = UBUNTU_SERIES[tag]
        match = _UBUNTU.match(release or "")
        if not match:
            return "linux-headers-generic"
        version, flavour = match.groups()
        if flavour in HWE_FLAVOURS:
            return f"linux-headers-{flavour}" + ("" if version == ga else f"-hwe-{series}")
        if flavour == "oem":
            return f"linux-headers-oem-{series}"
        return f"linux-headers-{flavour}" + (f"-lts-{series}" if version == ga else "")
    match = _DEBIAN.match(release or "")
    return f"linux-headers-{match.group(1)}" if match else "linux-headers-amd64"
