"""NVIDIA Container Toolkit 1.17.8: the four packages as a signed apt flat repo and rpm repo.

Layout under OUT_DIR/toolkit/: deb/ (flat repo `deb URL /`), rpm/ (repodata), gpgkey
(armored public key), plus nvidia-container-toolkit.list / .repo like NVIDIA serves.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .common import (BASE_URL, GPUSIM_SRC, OUT_DIR, TOOLKIT_COMMIT, TOOLKIT_VERSION,
                     BuildError, code_digest, inputs_digest, log, mark_done, replace_dir,
                     template, up_to_date, write)
from .deb import DebPackage, build_deb, build_flat_repo
from .rpm import RpmPackage, build_rpm, build_rpm_repo
from .signing import SigningKey

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
            "libnvidia-container-tools", "libnvidia-container1")
CONF = "/etc/nvidia-container-runtime/config.toml"


def payloads(version: str = TOOLKIT_VERSION) -> dict[str, dict[str, tuple[str, int]]]:
    sub = {"VERSION": version, "COMMIT": TOOLKIT_COMMIT}
    return {
        "libnvidia-container1": {
            "/usr/share/doc/libnvidia-container1/README.gpuhost":
                ("Simulated libnvidia-container (gpuhost sandbox): no library inside.\n", 0o644)},
        "libnvidia-container-tools": {
            "/usr/bin/nvidia-container-cli": (template("nvidia-container-cli", **sub), 0o755)},
        "nvidia-container-toolkit-base": {
            "/usr/bin/nvidia-ctk": (template("nvidia-ctk", **sub), 0o755),
            "/usr/bin/nvidia-container-runtime":
                (template("nvidia-container-runtime", **sub), 0o755),
            CONF: (template("config.toml"), 0o644),
            # python3-minimal has no json module: the tools fall back to this reader/writer
            # (the GPU simulator's, sandbox/nvidia/gpusim/jsonlite.py).
            "/usr/lib/nvidia-container-toolkit/jsonlite.py": (jsonlite_source(), 0o644)},
        "nvidia-container-toolkit": {
            "/usr/bin/nvidia-container-runtime-hook":
                (template("nvidia-container-runtime-hook"), 0o755)},
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
                   conffiles=[CONF], section="utils"),
        DebPackage("nvidia-container-toolkit", v, "NVIDIA Container toolkit (simulated)",
                   depends=[f"nvidia-container-toolkit-base (= {v})",
                            f"libnvidia-container-tools (>= {v})",
                            "libnvidia-container-tools (<< 2.0.0)"],
                   files=files["nvidia-container-toolkit"], section="utils"),
    ]


def rpm_packages(version: str = TOOLKIT_VERSION) -> list[RpmPackage]:
    files = payloads(version)

    def pkg(name, summary, **kw):
        return RpmPackage(name=name, version=version, release="1", summary=summary,
                          files=files[name], **kw)

    return [
        pkg("libnvidia-container1", "NVIDIA container runtime library (simulated)"),
        pkg("libnvidia-container-tools", "NVIDIA container runtime library (tools, simulated)",
            requires=[f"libnvidia-container1 >= {version}-1"]),
        pkg("nvidia-container-toolkit-base", "NVIDIA Container Toolkit Base (simulated)",
            config_files=[CONF]),
        pkg("nvidia-container-toolkit", "NVIDIA Container Toolkit (simulated)",
            requires=[f"nvidia-container-toolkit-base == {version}-1",
                      f"libnvidia-container-tools >= {version}-1",
                      "libnvidia-container-tools < 2.0.0"]),
    ]


def build(key: SigningKey, force: bool = False) -> None:
    base = OUT_DIR / "toolkit"
    digest = inputs_digest(code=code_digest("deb", "rpm", "toolkit"), key=key.fingerprint,
                           v=TOOLKIT_VERSION, url=BASE_URL,
                           jsonlite=hashlib.sha256(jsonlite_source().encode()).hexdigest())
    outputs = [base / "deb" / "InRelease", base / "rpm" / "repodata" / "repomd.xml.asc",
               base / "gpgkey"]
    if not force and up_to_date("toolkit", digest, outputs):
        log(f"container toolkit {TOOLKIT_VERSION} repos: up to date")
        return
    t = time.monotonic()
    key.export_armored(base / "gpgkey")
    with replace_dir(base / "deb") as deb_dir:
        for p in deb_packages():
            build_deb(p, deb_dir)
        build_flat_repo(deb_dir, key,
                        origin="https://nvidia.github.io/libnvidia-container/stable/deb",
                        label="NVIDIA CONTAINER TOOLKIT",
                        description="NVIDIA Container Toolkit (gpuhost sandbox simulation)")
        write(deb_dir / "nvidia-container-toolkit.list", f"deb {BASE_URL}/toolkit/deb /\n")
    with replace_dir(base / "rpm") as rpm_dir:
        for p in rpm_packages():
            build_rpm(p, rpm_dir)
        build_rpm_repo(rpm_dir, key)
        write_rpm_repo_file(rpm_dir)
    mark_done("toolkit", digest)
    log(f"container toolkit {TOOLKIT_VERSION} repos: built in {time.monotonic() - t:.1f}s")


def write_rpm_repo_file(rpm_dir) -> None:
    write(rpm_dir / "nvidia-container-toolkit.repo",
          f"[nvidia-container-toolkit]\nname=nvidia-container-toolkit\n"
          f"baseurl={BASE_URL}/toolkit/rpm\nrepo_gpgcheck=1\ngpgcheck=0\nenabled=1\n"
          f"gpgkey={BASE_URL}/toolkit/gpgkey\nsslverify=1\n"
          "sslcacert=/etc/pki/tls/certs/ca-bundle.crt\n")


