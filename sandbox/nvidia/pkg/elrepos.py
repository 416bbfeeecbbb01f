"""Build every Enterprise Linux vendor's fake repositories: for each release of each vendor
module (oracle.py, rocky.py, redhat.py) one signed repository per channel
(`<TOP>/<os>/<repo id>`), Docker's RHEL repository beside them
(`<TOP>/<os>/docker-ce-stable`, eldocker.py), the files a fresh install has
(`<TOP>/<os>/host-files/`, copied into each new host by sandbox/hosts.py), the key the
repositories are signed with (`<TOP>/gpgkey`) and the server URL they were built for
(`<TOP>/gpuhost_sandbox_url`).

A vendor module gives TOP, RELEASES, GPG_KEY_FILE, channels(os), packages(os) and
host_files(os); a new distribution is one module and one entry in VENDORS.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from . import oracle, redhat, rocky
from .common import (BASE_URL, OUT_DIR, code_digest, inputs_digest, log, mark_done,
                     replace_dir, sha256_file, up_to_date)
from .eldocker import DOCKER_REPO, docker_rpms
from .elrpms import URL_VAR
from .rpm import build_rpm, build_rpm_repo
from .signing import SigningKey

VENDORS = (oracle, rocky, redhat)
CODE = ("rpm", "elrpms", "elrepos", "debian_fetch", *(v.__name__.rsplit(".", 1)[1] for v in VENDORS))


def vendor(os_name: str):
    """The vendor module of an EL release name (ol10 -> oracle), None for another OS."""
    return next((v for v in VENDORS if os_name in v.RELEASES), None)


def releases() -> list[str]:
    return [r for v in VENDORS for r in v.RELEASES]


def release_dir(os_name: str, out: Path = OUT_DIR) -> Path:
    return out / vendor(os_name).TOP / os_name


def el_of(os_name: str) -> str:
    """ol10, rocky10, rhel10 -> el10"""
    return "el" + "".join(c for c in os_name if c.isdigit())


def build(key: SigningKey, force: bool = False) -> None:
    for os_name in releases():
        v = vendor(os_name)
        top = release_dir(os_name)
        el = el_of(os_name)
        docker = docker_rpms(el, force)
        digest = inputs_digest(code=code_digest(*CODE), key=key.fingerprint, os=os_name,
                               docker=[sha256_file(p) for p in docker], url=BASE_URL)
        stamps = [top / c / "repodata" / "repomd.xml.asc" for c in v.channels(os_name) + [DOCKER_REPO]]
        if not force and up_to_date(f"el-{os_name}", digest, stamps):
            log(f"{os_name} repos: up to date")
            continue
        t = time.monotonic()
        with replace_dir(top) as new:
            for channel, pkgs in v.packages(os_name).items():
                (new / channel).mkdir()
                for pkg in pkgs:
                    build_rpm(pkg, new / channel)
                build_rpm_repo(new / channel, key)
            (new / DOCKER_REPO).mkdir()
            for rpm in docker:  # signed in the repo copy, the cache stays unsigned
                shutil.copy2(rpm, new / DOCKER_REPO / rpm.name)
            build_rpm_repo(new / DOCKER_REPO, key)
            for path, text in v.host_files(os_name).items():
                dest = new / "host-files" / path.lstrip("/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
        key.export_armored(OUT_DIR / v.TOP / "gpgkey")
        (OUT_DIR / v.TOP / URL_VAR).write_text(BASE_URL + "\n")
        mark_done(f"el-{os_name}", digest)
        size = sum(p.stat().st_size for p in top.rglob("*.rpm")) // (1 << 20)
        log(f"{os_name} repos: built in {time.monotonic() - t:.1f}s ({size} MiB)")
