"""Never leave a host that cannot load its driver after the reboot (issue 14, items 1-3).

- Secure Boot: before anything is installed, refuse a Secure Boot host unless the inventory
  provides a module signing key whose certificate the host has enrolled (``mokutil
  --list-enrolled``); with one, DKMS is configured to sign with it (framework.conf.d
  ``mok_signing_key`` / ``mok_certificate``). gpuhost never runs ``mokutil --import``: an
  enrolment waits for a person at the console (MokManager) on the next boot.
- Before a reboot: ``dkms status`` must show the NVIDIA module installed for the kernel the
  boot loader starts next; the module is built for that kernel when its headers are there;
  otherwise the host fails with DKMS's own error lines (the tail of make.log) and is not
  rebooted (NVIDIA's package scriptlets exit 0 when the build fails:
  open-gpu-kernel-modules#805).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.operations import files, server

from gpuhost import aptdistros
from gpuhost.facts.dkms import DkmsSigning
from gpuhost.facts.files import FileDigest
from gpuhost.facts.kernel import KernelHeaders
from gpuhost.boot import cert_der, enrolled, fingerprint, next_boot_module
from gpuhost.roles.common import GpuhostError, fail_command, host_settings, host_state
from gpuhost.roles.files import config_file

KEY_DIR = "/etc/gpuhost/mok"
KEY_PATH = f"{KEY_DIR}/gpuhost-module-signing.key"
CERT_PATH = f"{KEY_DIR}/gpuhost-module-signing.der"
DKMS_SIGNING_CONF = "/etc/dkms/framework.conf.d/gpuhost-module-signing.conf"
# Where dkms 2.8 signs from (its sign_build: `kmodsign sha512 MOK.priv MOK.der`)
SHIM_MOK_DIR = "/var/lib/shim-signed/mok"


def dkms_line(dkms: dict, distro_tag: str | None) -> str:
    """The dkms line whose signing mechanism this host needs: the version read on the host,
    else the one its release ships (Ubuntu 22.04: 2.8.7; every other supported OS 3.x:
    ``gpuhost.aptdistros``)."""
    if dkms.get("line"):
        return dkms["line"]
    release = aptdistros.RELEASES.get(distro_tag or "")
    return release.dkms_line if release else "3"


def secure_boot_problem(kernel: dict, key: str | None, cert: str | None) -> str | None:
    """Why this Secure Boot host cannot get a loadable module, or None."""
    if kernel.get("secure_boot") != "enabled":
        return None
    if not key or not cert:
        return ("Secure Boot is enabled: the kernel would refuse the NVIDIA module DKMS builds "
                "(\"Key was rejected by service\"). Set nvidia_module_signing_key and "
                "nvidia_module_signing_cert to a key pair whose certificate is enrolled on this "
                "host (mokutil --import CERT, confirmed at the console on the next boot), on "
                "Ubuntu set nvidia_kernel_modules: distribution (Canonical's signed modules, "
                "nothing to enrol), or turn Secure Boot off; nothing was changed")
    try:
        der = cert_der(Path(cert).expanduser().read_bytes())
        Path(key).expanduser().stat()
    except OSError as error:
        return f"cannot read the module signing key or certificate: {error}"
    fp = fingerprint(der)
    if not enrolled(kernel, fp):
        return (f"Secure Boot is enabled and the certificate {cert} (SHA1 {fp}) is not enrolled "
                "on this host (mokutil --list-enrolled): enrol it (mokutil --import, confirmed "
                "at the console on the next boot) before running gpuhost; nothing was changed")
    return None


def check_secure_boot() -> bool:
    """At plan time, before any other operation of this host: refuse (one failing
    operation, return False) or, with an enrolled key, configure DKMS to sign."""
    config = host_settings()
    if config.nvidia_kernel_modules == "distribution":
        return True  # signed by the distribution, with a key its shim trusts: nothing to enrol
    kernel = host_state()["kernel"]
    dkms = host.get_fact(DkmsSigning) if kernel.get("secure_boot") == "enabled" else {}
    try:
        problem = secure_boot_problem(kernel, config.nvidia_module_signing_key,
                                      config.nvidia_module_signing_cert)
        if (not problem and kernel.get("secure_boot") == "enabled" and not dkms["kmodsign"]
                and dkms_line(dkms, kernel.get("distro_tag")) == "2.8"):
            problem = (f"Secure Boot is enabled and dkms {dkms['version'] or '2.8'} signs "
                       "modules only with kmodsign, which this host lacks: install sbsigntool "
                       "(Ubuntu's kmodsign), then run gpuhost again; nothing was changed")
        if problem:
            raise GpuhostError(f"{host.name}: {problem}")
    except GpuhostError as error:
        server.shell(name="gpuhost cannot provision this host", commands=[fail_command(str(error))])
        return False
    if kernel.get("secure_boot") == "enabled":
        files.directory(name="A private directory for the module signing key", path=KEY_DIR,
                        mode="700", user="root", group="root", present=True)
        files.put(name="Module signing key (mode 0600)",
                  src=str(Path(config.nvidia_module_signing_key).expanduser()),
                  dest=KEY_PATH, mode="600", user="root", group="root")
        files.put(name="Module signing certificate (the enrolled MOK)",
                  src=str(Path(config.nvidia_module_signing_cert).expanduser()),
                  dest=CERT_PATH, mode="644", user="root", group="root")
        config_file(
            name="DKMS signs modules with the enrolled key",
            content=("# Managed by gpuhost: Secure Boot is on; DKMS signs the modules it builds\n"
                     "# with this key, whose certificate is enrolled as a MOK.\n"
                     f"mok_signing_key={KEY_PATH}\nmok_certificate={CERT_PATH}\n"),
            dest=DKMS_SIGNING_CONF, mode="644")
        if dkms_line(dkms, kernel.get("distro_tag")) == "2.8":
            files.directory(name="shim-signed's MOK directory (where dkms 2.8 signs from)",
                            path=SHIM_MOK_DIR, present=True)
            for local, src, name, mode in (
                    (config.nvidia_module_signing_key, KEY_PATH, "MOK.priv", "600"),
                    (config.nvidia_module_signing_cert, CERT_PATH, "MOK.der", "644")):
                digest = hashlib.sha256(Path(local).expanduser().read_bytes()).hexdigest()
                keep_and_copy(name=f"dkms 2.8 signs with the enrolled key: {SHIM_MOK_DIR}/{name}",
                              src=src, dest=f"{SHIM_MOK_DIR}/{name}", sha256=digest, mode=mode)
    return True


@operation()
def keep_and_copy(src: str, dest: str, sha256: str, mode: str):
    """
    ``dest`` a copy of the host's file ``src`` (whose content has ``sha256``) with ``mode``,
    owned by root; a different file found at ``dest`` is kept beside it as
    ``DEST.gpuhost-backup-<UTC time>`` (it may be a key someone enrolled). The copy is made
    on the host (``install -m``: never readable by others, nothing on a command line but
    paths).

    + src: path on the host (already in place, e.g. the key gpuhost sent)
    + dest: path on the host
    + sha256: the content's digest
    + mode: octal permissions
    """
    current = host.get_fact(FileDigest, path=dest)
    if current and current["sha256"] == sha256:
        if current["mode"] != mode:
            yield StringCommand("chmod", QuoteString(mode), QuoteString(dest))
        else:
            host.noop(f"{dest} is up to date")
        return
    if current:
        yield StringCommand("sh -c", QuoteString(
            'cp -p "$1" "$1.gpuhost-backup-$(date -u +%Y%m%dT%H%M%SZ)"'), "sh", QuoteString(dest))
    new = f"{dest}.gpuhost-new"
    yield StringCommand("install -m", QuoteString(mode), "-o root -g root", QuoteString(src),
                        QuoteString(new))
    yield StringCommand("mv -f", QuoteString(new), QuoteString(dest))


def _log_lines(kernel: dict, version: str) -> str:
    logs = kernel.get("dkms_logs") or {}
    text = logs.get(f"/var/lib/dkms/nvidia/{version}/build/make.log") or "\n".join(logs.values())
    lines = [line for line in text.splitlines() if line.strip()][-8:]
    return " | ".join(lines) if lines else "no make.log found under /var/lib/dkms/nvidia"


@operation()
def module_for_next_boot(version: str):
    """
    Make sure the NVIDIA module ``version`` is installed by DKMS for the kernel the next boot
    starts; build it when that kernel's headers are there; else fail this host with DKMS's
    own error lines (no reboot follows a failed operation).

    + version: the driver version the host must load after the reboot
    """
    kernel = host.get_fact(KernelHeaders)
    answer = next_boot_module(kernel, version)
    release = answer["release"]
    if answer["case"] == "installed":
        host.noop(f"DKMS has nvidia {version} installed for kernel {release} (next boot)")
        return
    if answer["case"] == "buildable":
        yield StringCommand(
            "dkms install -m nvidia -v", QuoteString(version), "-k", QuoteString(release),
            "|| {", fail_command(
                f"DKMS could not build nvidia {version} for kernel {release}, which the next "
                "boot starts; see its make.log under /var/lib/dkms/nvidia; not rebooting"), "; }")
        return
    if answer["case"] == "no_headers":
        yield fail_command(
            f"the next boot starts kernel {release} (not the running {kernel['kernel_release']}), "
            f"which has no headers ({', '.join(answer['missing_headers']) or 'none found'} "
            "not installable), so the NVIDIA module cannot be built for it: not rebooting. "
            "Make the running kernel the default boot entry or add the repository with those "
            "headers, then run again")
        return
    yield fail_command(
        f"DKMS did not install the NVIDIA module {version} for kernel {release} (the package "
        f"scriptlet does not report a failed build): {_log_lines(kernel, version)}; not rebooting")
