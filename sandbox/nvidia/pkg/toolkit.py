"""NVIDIA Container Toolkit 1.17.8, 1.18.2, 1.19.1 and 1.20.0: the four packages of each
version in one signed apt flat repo and one rpm repo (like NVIDIA's, which serve every release
side by side).

Layout under OUT_DIR/toolkit/: deb/ (flat repo `deb URL /`), rpm/ (repodata), gpgkey
(armored public key), plus nvidia-container-toolkit.list / .repo like NVIDIA serves.

1.18 and 1.19 (NVIDIA's packaging @v1.18.2, @v1.19.1): nvidia-container-toolkit-base also
ships nvidia-cdi-refresh.{service,path} in /etc/systemd/system and
/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env, and its postinst (rpm: %post base)
enables both units with --now and starts the service once when systemd is running or
degraded. 1.19.1's service first runs `nvidia-smi -L`.
1.20 (@v1.20.0): the units are in /lib/systemd/system (rpm: %{_unitdir}), the rpm ships the
preset 90-nvidia-container-toolkit.preset; the deb's postinst is debhelper's
(`dh $@ --with systemd`: enable, then start), the rpm's %post is `%systemd_post` (the preset)
and its %posttrans removes enablement links left pointing at the old /etc units, re-enables,
then starts the path and the service. Started while the driver is not active, the service
fails, restarts each second and, past StartLimitBurst=5 in 10 s, stays failed (Azure/aks-gpu
PR #175).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .common import (BASE_URL, GPUSIM_SRC, OUT_DIR, TOOLKIT_COMMITS, TOOLKIT_VERSION,
                     TOOLKIT_VERSIONS, BuildError, code_digest, inputs_digest, log, mark_done, replace_dir,
                     template, up_to_date, write)
from .deb import DebPackage, build_deb, build_flat_repo
from .rpm import RpmPackage, build_rpm, build_rpm_repo
from .signing import SigningKey

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1")
CONF = "/etc/nvidia-container-runtime/config.toml"
REFRESH_ENV = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
REFRESH_UNITS = ("nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path")
# NVIDIA's nvidia-container-toolkit-base.postinst / %post base @v1.18.2, shortened
REFRESH_ENABLE = (  # one line: it also goes into a Lua string of the rpm's %post
    'if command -v systemctl >/dev/null 2>&1; then '
    'case "$(systemctl is-system-running 2>/dev/null || true)" in running|degraded) '
    'systemctl daemon-reload || echo "Warning: Failed to reload systemd daemon" >&2; '
    'systemctl enable --now nvidia-cdi-refresh.path '
    '|| echo "Warning: Failed to enable nvidia-cdi-refresh.path" >&2; '
    'systemctl enable --now nvidia-cdi-refresh.service '
    '|| echo "Warning: Failed to enable nvidia-cdi-refresh.service" >&2; '
    'echo "Regenerating NVIDIA CDI specification..."; '
    'systemctl start nvidia-cdi-refresh.service '
    '|| echo "Warning: Failed to trigger CDI refresh" >&2;; esac; fi')


def has_cdi_refresh(version: str) -> bool:
    """1.18.0 and newer ship and enable nvidia-cdi-refresh (CHANGELOG / packaging @v1.18.2)."""
    return release(version) >= (1, 18)


def release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


# packaging/debian/nvidia-container-toolkit-base.install @v1.20.0 vs @v1.19.1
def unit_dir(version: str, family: str = "deb") -> str:
    if release(version) < (1, 20):
        return "/etc/systemd/system"
    return "/lib/systemd/system" if family == "deb" else "/usr/lib/systemd/system"


PRESET = "/usr/lib/systemd/system-preset/90-nvidia-container-toolkit.preset"
# deployments/systemd/90-nvidia-container-toolkit.preset @v1.20.0
PRESET_TEXT = "enable nvidia-cdi-refresh.path\nenable nvidia-cdi-refresh.service\n"
# deployments/systemd/nvidia-cdi-refresh.service @v1.19.1 and @v1.20.0: the driver must answer
# before the spec is generated
SMI_EXEC = ("ExecStart=/bin/sh -c '/usr/bin/nvidia-smi -L || /usr/sbin/nvidia-smi -L || "
            "/usr/lib/wsl/lib/nvidia-smi -L'\n")
# 1.20's enablement links left by 1.18/1.19 point at /etc/systemd/system/UNIT, which the
# upgrade removed: the rpm's %posttrans @v1.20.0 drops them and enables again (shortened)
_STALE_LINKS = (
    "for u in nvidia-cdi-refresh.path nvidia-cdi-refresh.service; do "
    "w=/etc/systemd/system/multi-user.target.wants/$u; "
    'if [ -L "$w" ] && [ "$(readlink "$w")" = "/etc/systemd/system/$u" ]; then rm -f "$w"; fi; '
    "done; ")
# debhelper's postinst snippets for `dh $@ --with systemd` (enable, daemon-reload, start),
# shortened; the rpm's %post (`%systemd_post`: preset on first install) and %posttrans
REFRESH_ENABLE_120_DEB = (
    "if [ -d /run/systemd/system ]; then " + _STALE_LINKS
    + "systemctl daemon-reload >/dev/null || true; "
    "systemctl enable nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 "
    "|| true; "
    "systemctl start nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 "
    "|| true; fi")
# (the sandbox's Lua scriptlets pass no install count: "first install" is read as the service
# not enabled yet)
REFRESH_POST_120_RPM = (
    "if command -v systemctl >/dev/null 2>&1 && "
    "! systemctl is-enabled -q nvidia-cdi-refresh.service 2>/dev/null; then "
    "systemctl preset nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 "
    "|| :; fi")
REFRESH_POSTTRANS_120_RPM = (
    "if command -v systemctl >/dev/null 2>&1; then " + _STALE_LINKS
    + "systemctl daemon-reload >/dev/null 2>&1 || :; "
    "systemctl enable nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 || :; "
    "systemctl start nvidia-cdi-refresh.path >/dev/null 2>&1 || :; "
    "systemctl start nvidia-cdi-refresh.service >/dev/null 2>&1 || :; fi")


def refresh_files(version: str, family: str) -> dict[str, tuple[str, int]]:
    if not has_cdi_refresh(version):
        return {}
    sub = {"VERSION": version, "UNIT_TAG": f"v{version}",
           "SMI_EXEC": SMI_EXEC if release(version) >= (1, 19, 1) else ""}
    files = {f"{unit_dir(version, family)}/{unit}": (template(unit, **sub), 0o644)
             for unit in REFRESH_UNITS}
    files[REFRESH_ENV] = (template("nvidia-cdi-refresh.env"), 0o644)
    if release(version) >= (1, 20) and family == "rpm":
        files[PRESET] = (PRESET_TEXT, 0o644)
    return files


def deb_scripts(version: str) -> dict[str, str]:
    if not has_cdi_refresh(version):
        return {}
    body = REFRESH_ENABLE_120_DEB if release(version) >= (1, 20) else REFRESH_ENABLE
    return {"postinst": "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then\n"
                        + body + "\nfi\nexit 0\n"}


def rpm_scriptlets(version: str) -> dict[str, list[str]]:
    if not has_cdi_refresh(version):
        return {}
    if release(version) >= (1, 20):
        return {"post": ["/bin/sh", "-c", REFRESH_POST_120_RPM + "; exit 0"],
                "posttrans": ["/bin/sh", "-c", REFRESH_POSTTRANS_120_RPM + "; exit 0"]}
    return {"post": ["/bin/sh", "-c", REFRESH_ENABLE + "; exit 0"]}


def payloads(version: str = TOOLKIT_VERSION,
             family: str = "deb") -> dict[str, dict[str, tuple[str, int]]]:
    sub = {"VERSION": version, "COMMIT": TOOLKIT_COMMITS[version]}
    refresh = refresh_files(version, family)
    return {
        "libnvidia-container1": {
            "/usr/share/doc/libnvidia-container1/README.gpuhost":
                ("Simulated libnvidia-container (gpuhost sandbox): no library inside.\n", 0o644)},
        "libnvidia-container-tools": {
            "/usr/bin/nvidia-container-cli": (template("nvidia-container-cli", **sub), 0o755)},
        "nvidia-container-toolkit-base": {
            "/usr/bin/nvidia-ctk": (template("nvidia-ctk", **sub), 0o755),
            # the CLI itself, imported by /usr/bin/nvidia-ctk: its bytecode is cached
            "/usr/lib/nvidia-container-toolkit/nvidia_ctk.py":
                (template("nvidia_ctk.py", **sub), 0o644),
            "/usr/bin/nvidia-container-runtime":
                (template("nvidia-container-runtime", **sub), 0o755),
            CONF: (template("config.toml"), 0o644),
            # python3-minimal has no json module: the tools fall back to this reader/writer
            # (the GPU simulator's, sandbox/nvidia/gpusim/jsonlite.py).
            "/usr/lib/nvidia-container-toolkit/jsonlite.py": (jsonlite_source(), 0o644),
            **refresh},
        "nvidia-container-toolkit": {
            "/usr/bin/nvidia-container-runtime-hook":
                (template("nvidia-container-runtime-hook", **sub), 0o755)},
    }


def jsonlite_source() -> str:
    src = Path(os.environ.get("GPUHOST_GPUSIM_SRC", GPUSIM_SRC)) / "jsonlite.py"
    if not src.exists():
        raise BuildError(f"{src} is missing (the GPU simulator's JSON module, needed by the "
                         "toolkit tools on python3-minimal hosts)")
    return src.read_text()


def deb_packages(version: str = TOOLKIT_VERSION) -> list[DebPackage]:
    v = f"{version}-1"
    files = payloads(version)
    return [
        DebPackage("libnvidia-container1", v, "NVIDIA container runtime library (simulated)",
                   files=files["libnvidia-container1"], section="libs"),
        DebPackage("libnvidia-container-tools", v, "NVIDIA container runtime library (command-line tools, simulated)",
                   depends=[f"libnvidia-container1 (>= {v})"],
                   files=files["libnvidia-container-tools"], section="utils"),
        DebPackage("nvidia-container-toolkit-base", v, "NVIDIA Container Toolkit Base (simulated)",
                   depends=["python3-minimal"], files=files["nvidia-container-toolkit-base"],
                   conffiles=[CONF] + ([REFRESH_ENV] if has_cdi_refresh(version) else []),
                   scripts=deb_scripts(version),
                   section="utils"),
        DebPackage("nvidia-container-toolkit", v, "NVIDIA Container toolkit (simulated)",
                   depends=[f"nvidia-container-toolkit-base (= {v})",
                            f"libnvidia-container-tools (>= {v})",
                            "libnvidia-container-tools (<< 2.0.0)"],
                   files=files["nvidia-container-toolkit"], section="utils"),
    ]


def rpm_packages(version: str = TOOLKIT_VERSION) -> list[RpmPackage]:
    files = payloads(version, "rpm")

    def pkg(name, summary, **kw):
        return RpmPackage(name=name, version=version, release="1", summary=summary,
                          files=files[name], **kw)

    return [
        pkg("libnvidia-container1", "NVIDIA container runtime library (simulated)"),
        pkg("libnvidia-container-tools", "NVIDIA container runtime library (tools, simulated)",
            requires=[f"libnvidia-container1 >= {version}-1"]),
        pkg("nvidia-container-toolkit-base", "NVIDIA Container Toolkit Base (simulated)",
            config_files=[CONF] + ([REFRESH_ENV] if has_cdi_refresh(version) else []),
            scriptlets=rpm_scriptlets(version)),
        pkg("nvidia-container-toolkit", "NVIDIA Container Toolkit (simulated)",
            requires=[f"nvidia-container-toolkit-base == {version}-1",
                      f"libnvidia-container-tools >= {version}-1",
                      "libnvidia-container-tools < 2.0.0"]),
    ]


def build(key: SigningKey, force: bool = False) -> None:
    base = OUT_DIR / "toolkit"
    digest = inputs_digest(code=code_digest("deb", "rpm", "toolkit"), key=key.fingerprint,
                           v=",".join(TOOLKIT_VERSIONS), url=BASE_URL,
                           jsonlite=hashlib.sha256(jsonlite_source().encode()).hexdigest())
    outputs = [base / "deb" / "InRelease", base / "rpm" / "repodata" / "repomd.xml.asc",
               base / "gpgkey"]
    shown = " and ".join(TOOLKIT_VERSIONS)
    if not force and up_to_date("toolkit", digest, outputs):
        log(f"container toolkit {shown} repos: up to date")
        return
    t = time.monotonic()
    key.export_armored(base / "gpgkey")
    with replace_dir(base / "deb") as deb_dir:
        for version in TOOLKIT_VERSIONS:
            for p in deb_packages(version):
                build_deb(p, deb_dir)
        build_flat_repo(deb_dir, key,
                        origin="https://nvidia.github.io/libnvidia-container/stable/deb",
                        label="NVIDIA CONTAINER TOOLKIT",
                        description="NVIDIA Container Toolkit (gpuhost sandbox simulation)")
        write(deb_dir / "nvidia-container-toolkit.list", f"deb {BASE_URL}/toolkit/deb /\n")
    with replace_dir(base / "rpm") as rpm_dir:
        for version in TOOLKIT_VERSIONS:
            for p in rpm_packages(version):
                build_rpm(p, rpm_dir)
        build_rpm_repo(rpm_dir, key)
        write_rpm_repo_file(rpm_dir)
    mark_done("toolkit", digest)
    log(f"container toolkit {shown} repos: built in {time.monotonic() - t:.1f}s")


def write_rpm_repo_file(rpm_dir) -> None:
    write(rpm_dir / "nvidia-container-toolkit.repo",
          f"[nvidia-container-toolkit]\nname=nvidia-container-toolkit\n"
          f"baseurl={BASE_URL}/toolkit/rpm\nrepo_gpgcheck=1\ngpgcheck=0\nenabled=1\n"
          f"gpgkey={BASE_URL}/toolkit/gpgkey\nsslverify=1\n"
          "sslcacert=/etc/pki/tls/certs/ca-bundle.crt\n")


