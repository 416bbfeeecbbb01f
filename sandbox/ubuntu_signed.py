"""Stand-ins of Canonical's signed NVIDIA modules in the sandbox's Ubuntu archive (issue 39;
sandbox/README.md, "Canonical's signed NVIDIA modules").

Canonical builds the NVIDIA server drivers' modules for each of its kernels
(``linux-restricted-modules``) and signs them with a key its shim makes the kernel trust, so
Secure Boot hosts need no MOK. Per release the archive here carries, in ``<codename>-updates``
``restricted``:

- ``linux-modules-nvidia-<branch>-server-open-<running kernel>`` (version: the kernel's ABI
  and upload, ``6.8.0-51.52+1``): ``/lib/modules/<kernel>/kernel/nvidia-<branch>srv/nvidia.ko``,
  a gpusim module signed by the stand-in of Canonical's key (``KEY``/``CERT``). Canonical's
  real package links the module at install time from ``linux-objects-nvidia-*`` and
  ``linux-signatures-nvidia-*``; the stand-in ships the signed file itself. No package for
  the newer kernel: a host must not boot into it without one.
- ``nvidia-headless-no-dkms-<branch>-server-open`` (the user-space record gpusim reads,
  ``nvidia-persistenced`` and its unit, which Canonical's ``nvidia-compute-utils-*`` carries)
  and ``nvidia-utils-<branch>-server`` (``nvidia-smi`` running the host's simulator, the
  libraries' names),
  versioned ``<driver>-0ubuntu0.<release>.1``.

The simulated firmware trusts ``CERT`` as it trusts Canonical's key: the secure-boot traits
put it in its db (``etc/gpusim/firmware/db``), never in the MOK list.
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from . import paths
from .util import SandboxError

# codename -> the drivers whose signed modules the sandbox's archive carries (two on noble:
# the rolling upgrade moves a host from one branch to the other)
SIGNED = {"noble": ("580.95.05", "595.71.05"), "resolute": ("595.71.05",)}
KEY_DIR = paths.MIRROR_CACHE / "canonical-signing-standin"
KEY = KEY_DIR / "module-signing.key"
CERT = KEY_DIR / "module-signing.der"
CN = "Canonical Ltd. Kernel Module Signing (gpuhost sandbox stand-in)"
DB_NAME = "canonical-module-signing-standin.der"
MAGIC = b"~Module signature appended~\n"
_LOCK = threading.Lock()
# nvidia-smi: the host's own simulator (every sandbox host has it, /usr/local/lib/gpusim),
# not a copy in the package, so the archive does not change with the simulator.
NVIDIA_SMI = ("#!/bin/sh\n# nvidia-smi of the gpuhost sandbox: the GPU simulator, not NVIDIA's tool.\n"
              "exec python3 -S -c 'import sys; sys.path.insert(0, \"/usr/local/lib/gpusim\"); "
              "from gpusim.smi import main; sys.exit(main())' \"$@\"\n")


def signing_cert() -> Path:
    """The stand-in key's certificate (DER), made once with openssl."""
    with _LOCK:
        if not (KEY.exists() and CERT.exists()):
            KEY_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
            proc = subprocess.run(
                ["openssl", "req", "-new", "-x509", "-nodes", "-days", "36500", "-subj",
                 f"/CN={CN}", "-newkey", "rsa:2048", "-keyout", str(KEY), "-outform", "DER",
                 "-out", str(CERT)], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SandboxError(f"openssl could not make the stand-in of Canonical's module "
                                   f"signing key: {proc.stderr.strip()}")
            KEY.chmod(0o600)
    return CERT


def signed_module(version: str, cert_der: bytes) -> bytes:
    """A gpusim open module of ``version`` with an appended signature naming the
    certificate by issuer and serial (as gpusim's ``sign-file`` stand-in writes one)."""
    from .nvidia.gpusim.firmware import issuer_serial

    issuer, serial = issuer_serial(cert_der)
    blob = b"gpusim-pkcs7:" + issuer + serial
    body = f"gpusim-module version={version} flavor=open\n".encode()
    return body + blob + b"\0\0\2\0\0\0\0\0" + len(blob).to_bytes(4, "big") + MAGIC


def packages(codename: str, version_id: str, kernel: str, kernel_version: str) -> list:
    """The stand-in packages of ``codename`` (``sandbox.nvidia.pkg.deb.DebPackage``)."""
    return [p for version in SIGNED[codename]
            for p in _packages(version, version_id, kernel, kernel_version)]


def _packages(version: str, version_id: str, kernel: str, kernel_version: str) -> list:
    from .nvidia.pkg.deb import DebPackage
    from .nvidia.pkg.driver import library_files, persistenced_files

    br = version.split(".")[0]
    cert = signing_cert().read_bytes()
    user_version = f"{version}-0ubuntu0.{version_id}.1"
    userspace = json.dumps({"version": version, "flavor": "open"}, indent=2) + "\n"
    note = "Stand-in of the gpuhost sandbox (sandbox/ubuntu_signed.py): no real driver inside."
    return [
        DebPackage(f"linux-modules-nvidia-{br}-server-open-{kernel}", f"{kernel_version}+1",
                   f"Linux kernel nvidia modules for version {kernel}\n{note}",
                   section="restricted/kernel",
                   files={f"/lib/modules/{kernel}/kernel/nvidia-{br}srv/nvidia.ko":
                          (signed_module(version, cert), 0o644)}),
        DebPackage(f"nvidia-headless-no-dkms-{br}-server-open", user_version,
                   f"NVIDIA headless metapackage - no DKMS\n{note}", section="restricted/libs",
                   files={"/usr/lib/gpusim/userspace.json": (userspace, 0o644),
                          **persistenced_files(version)}),
        DebPackage(f"nvidia-utils-{br}-server", user_version,
                   f"NVIDIA Server Driver support binaries\n{note}", section="restricted/utils",
                   files={"/usr/bin/nvidia-smi": (NVIDIA_SMI, 0o755),
                          **library_files(version, "/usr/lib/x86_64-linux-gnu")}),
    ]


def build(codename: str, version_id: str, kernel: str, kernel_version: str,
          out: Path) -> list[Path]:
    """Build the stand-ins of ``codename`` into ``out``."""
    from .nvidia.pkg.deb import build_deb

    return [build_deb(p, out) for p in packages(codename, version_id, kernel, kernel_version)]
