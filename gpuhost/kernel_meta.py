"""The headers meta package of a Debian or Ubuntu kernel, from its release string (pure).

The meta package follows kernel updates of one flavour with their headers, so DKMS builds the
NVIDIA module for the next kernel too. It must be the running (or next boot's) kernel's
flavour: ``linux-headers-generic`` on an AWS kernel pulls headers of a kernel the host does
not run, DKMS builds for them, and the AWS kernel's next update gets no headers (found by a
review of gpuhost against the vendors' documents, 2026-11).

The naming of each distribution, with its sources, is in its module of
``gpuhost.aptdistros`` (``debian.headers_meta``, ``ubuntu.headers_meta_for``). A name the
host's repositories lack is a warning, not a failure (``roles/kernel_headers.py``
``future_headers``).
"""

from __future__ import annotations

from gpuhost import aptdistros


def headers_meta(tag: str, release: str) -> str:
    """``linux-headers-...`` for kernel ``release`` (``uname -r``) on apt distribution
    ``tag`` (debian12, debian13, ubuntu2204, ubuntu2404, ubuntu2604). A release string of
    another shape: the distribution's default flavour (``linux-headers-amd64`` /
    ``linux-headers-generic``)."""
    return aptdistros.release(tag).headers_meta(release)
