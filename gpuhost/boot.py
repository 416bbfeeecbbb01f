"""Will the host load its NVIDIA module after the next boot? Pure answers from the kernel
fact (``gpuhost.facts.kernel.KernelHeaders``: ``next_boot``, ``secure_boot``, ``mok_enrolled``,
``dkms``), shared by the deploy's checks before a reboot (``roles.boot_safety``) and the
audit's health findings (``gpuhost.health``). No pyinfra; the only I/O is reading a
certificate file on the controller (``cert_fingerprint``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuhost.dkms_names import is_nvidia_module


def cert_der(data: bytes) -> bytes:
    """The DER bytes of a PEM or DER certificate."""
    if b"-----BEGIN CERTIFICATE-----" in data:
        body = data.split(b"-----BEGIN CERTIFICATE-----", 1)[1].split(b"-----END", 1)[0]
        return base64.b64decode(b"".join(body.split()))
    return data


def fingerprint(der: bytes) -> str:
    """SHA1 fingerprint as ``mokutil --list-enrolled`` prints it (lower case here)."""
    digest = hashlib.sha1(der).hexdigest()  # noqa: S324 - what mokutil shows, not security
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def cert_fingerprint(path: str) -> str:
    """The SHA1 fingerprint of the certificate file ``path`` (PEM or DER); OSError when it
    cannot be read."""
    return fingerprint(cert_der(Path(path).expanduser().read_bytes()))


def enrolled(kernel: Mapping[str, Any], fp: str) -> bool:
    """Whether the MOK with SHA1 fingerprint ``fp`` is enrolled on the host."""
    return fp in (kernel.get("mok_enrolled") or [])


def dkms_builds_nvidia(kernel: Mapping[str, Any]) -> bool:
    """DKMS knows the NVIDIA module (any version, any kernel): the module of a new kernel
    comes from a DKMS build."""
    return any(is_nvidia_module(entry.get("module")) for entry in kernel.get("dkms") or [])


def next_boot_module(kernel: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Whether DKMS has the NVIDIA module ``version`` for the kernel the next boot starts.

    ``{"case", "release", "differs", "missing_headers"}`` where ``case`` is
    ``installed`` (DKMS has it for that kernel), ``buildable`` (another kernel boots next and
    its headers are there: ``dkms install`` can build it), ``no_headers`` (another kernel
    boots next and has no headers: nothing can build it) or ``not_built`` (DKMS did not
    install it for the kernel that boots next, e.g. a build that failed silently)."""
    nxt = kernel["next_boot"]
    answer = {"release": nxt["kernel_release"], "differs": bool(nxt["differs"]),
              "missing_headers": list(nxt.get("headers_packages_missing") or [])}
    if version in (nxt.get("nvidia_module") or []):
        return {**answer, "case": "installed"}
    if nxt["differs"]:
        return {**answer, "case": "buildable" if nxt["headers_installed"] else "no_headers"}
    return {**answer, "case": "not_built"}


def secure_boot_refuses(kernel: Mapping[str, Any]) -> bool:
    """Secure Boot is on, DKMS builds the NVIDIA module and no MOK is enrolled at all: the
    kernel will refuse every module DKMS signs (``Key was rejected by service``), whoever
    signed it. The one case gpuhost can tell without knowing the signing key."""
    return (kernel.get("secure_boot") == "enabled" and kernel.get("mok_enrolled") == []
            and dkms_builds_nvidia(kernel))
