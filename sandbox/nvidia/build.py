"""Build the sandbox's fake NVIDIA artifacts into /var/cache/gpuhost/nvidia/.

    python -m sandbox.nvidia.build [--only PART ...] [--force]

Idempotent and incremental: each artifact is rebuilt only when its inputs (templates,
simulator sources, versions, signing key) changed. Writes manifest.json as described in
docs/architecture.md ("Sandbox interfaces"). Run as root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from sandbox.nvidia.pkg import common, elrepos, netrepo
from sandbox.nvidia.pkg.common import (APT_DISTROS, BASE_URL, DEFAULT_DRIVER, DRIVER_VERSIONS, OUT_DIR,
                                       RPM_DISTROS, TOOLKIT_VERSION, TOOLKIT_VERSIONS, BuildError,
                                       build_lock, code_digest, inputs_digest, log, mark_done, need_tools, sha256_file,
                                       tree_digest, up_to_date)
from sandbox.nvidia.pkg.localrepo import build_apt_local_repo, build_rpm_local_repo
from sandbox.nvidia.pkg.signing import SigningKey

PARTS = ("local-repos", "network-repos", "toolkit", "el-repos", "docker-repo", "verify-image")


def local_repo_filename(version: str, distro: str) -> str:
    if distro.startswith("rhel"):
        return f"nvidia-driver-local-repo-{distro}-{version}-1.0-1.x86_64.rpm"
    return f"nvidia-driver-local-repo-{distro}-{version}_1.0-1_amd64.deb"


def simulator_digest() -> str:
    src = os.environ.get("GPUHOST_GPUSIM_SRC", str(common.GPUSIM_SRC))
    from pathlib import Path
    return tree_digest(Path(src))


def writable(path) -> bool:
    while not path.exists():
        path = path.parent
    return os.access(path, os.W_OK)


def build_local_repos(key: SigningKey, force: bool, versions: list[str],
                      distros: list[str]) -> None:
    code = code_digest("deb", "rpm", "driver", "driver_debian", "localrepo")
    sim = simulator_digest()
    for version in versions:
        outdir = OUT_DIR / "local-repos" / version
        for distro in distros:
            if not common.builds(version, distro):
                continue
            out = outdir / local_repo_filename(version, distro)
            digest = inputs_digest(code=code, sim=sim, key=key.fingerprint, v=version, d=distro)
            name = f"local-repo-{distro}-{version}"
            if not force and up_to_date(name, digest, [out]):
                log(f"{out.name}: up to date")
                continue
            t = time.monotonic()
            if distro.startswith("rhel"):
                built = build_rpm_local_repo(version, distro, key, outdir)
            else:
                built = build_apt_local_repo(version, distro, key, outdir)
            if built != out:
                raise BuildError(f"built {built.name}, expected {out.name}")
            mark_done(name, digest)
            log(f"{out.name}: built in {time.monotonic() - t:.1f}s "
                f"({out.stat().st_size // 1024} KiB)")


def manifest(key_fingerprint: str) -> dict:
    local = {}
    for version in DRIVER_VERSIONS:
        local[version] = {}
        for distro in APT_DISTROS + RPM_DISTROS:
            if not common.builds(version, distro):
                continue
            fname = local_repo_filename(version, distro)
            path = OUT_DIR / "local-repos" / version / fname
            local[version][distro] = {
                "file": fname, "url": f"{BASE_URL}/local-repos/{version}/{fname}",
                "sha256": sha256_file(path) if path.exists() else None}
    return {
        "driver_versions": list(DRIVER_VERSIONS),
        "default_driver": DEFAULT_DRIVER,
        "local_repos": local,
        # NVIDIA's CUDA network repositories (sandbox/nvidia/pkg/netrepo.py)
        "network_repos": netrepo.manifest(key_fingerprint),
        "toolkit": {"version": TOOLKIT_VERSION, "versions": list(TOOLKIT_VERSIONS),
                    "apt": {"url": f"{BASE_URL}/toolkit/deb", "gpgkey": f"{BASE_URL}/toolkit/gpgkey"},
                    "rpm": {"url": f"{BASE_URL}/toolkit/rpm", "gpgkey": f"{BASE_URL}/toolkit/gpgkey"}},
        # Docker's RHEL repository beside each Enterprise Linux release's channels
        # (sandbox/nvidia/pkg/elrepos.py), by the sandbox's os name
        "ol_repos": {os_name: {"url": f"{BASE_URL}/{elrepos.vendor(os_name).TOP}/{os_name}/docker-ce-stable",
                               "gpgkey": f"{BASE_URL}/{elrepos.vendor(os_name).TOP}/gpgkey"}
                     for os_name in elrepos.releases()},
        # Docker's "Docker CE for Debian" (sandbox/nvidia/pkg/dockerce.py): docker-ce 26
        # ("debian") and docker-ce 28.5 with containerd.io 2.1 ("debian-28")
        "docker_repos": {"debian": {"url": f"{BASE_URL}/docker/debian",
                                    "gpgkey": f"{BASE_URL}/docker/debian/gpg"},
                         "debian-28": {"url": f"{BASE_URL}/docker/debian-28",
                                       "gpgkey": f"{BASE_URL}/docker/debian-28/gpg"}},
        "verify_image": {"name": "gpuhost/verify:sandbox",
                         "archive": str(OUT_DIR / "verify-image.tar")},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox.nvidia.build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=PARTS, help="build only this part")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    ap.add_argument("--driver-version", action="append", choices=DRIVER_VERSIONS,
                    help="local repos: only this driver version (repeatable)")
    ap.add_argument("--distro", action="append", choices=APT_DISTROS + RPM_DISTROS,
                    help="local repos: only this distro tag (repeatable)")
    args = ap.parse_args(argv)
    parts = args.only or list(PARTS)
    if os.geteuid() != 0 and ("verify-image" in parts or not writable(OUT_DIR)):
        print(f"error: run as root (the build writes {OUT_DIR} and runs mmdebstrap for the "
              "verify image)", file=sys.stderr)
        return 1
    versions = args.driver_version or list(DRIVER_VERSIONS)
    distros = args.distro or list(APT_DISTROS + RPM_DISTROS)
    t0 = time.monotonic()
    try:
        with build_lock():
            return build(parts, versions, distros, args.force, t0)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def build(parts: list[str], versions: list[str], distros: list[str], force: bool,
          t0: float) -> int:
    """Build the requested parts (under the build lock), then write manifest.json."""
    need_tools("gpg", "dpkg-deb", "apt-ftparchive", "rpmbuild", "rpmsign", "createrepo_c",
               "modifyrepo_c")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    key = SigningKey().ensure()
    key.export_armored(OUT_DIR / "gpgkey")
    log(f"signing key {key.fingerprint} (public key: {OUT_DIR / 'gpgkey'})")
    # The verify image is mmdebstrap fetching and unpacking Debian packages (about a minute
    # from cold) and shares nothing with the signed repositories: it runs beside them.
    image_job = None
    if "verify-image" in parts:
        from sandbox.nvidia.pkg import image
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-image")
        image_job = pool.submit(image.build, force)
        pool.shutdown(wait=False)
    if "local-repos" in parts:
        build_local_repos(key, force, versions, distros)
    if "network-repos" in parts:
        netrepo.build(key, force)
    if "toolkit" in parts:
        from sandbox.nvidia.pkg import toolkit
        toolkit.build(key, force)
    if "el-repos" in parts:
        from sandbox.nvidia.pkg import elrepos
        elrepos.build(key, force)
    if "docker-repo" in parts:
        from sandbox.nvidia.pkg import dockerce
        dockerce.build(key, force)
    if image_job is not None:
        image_job.result()  # its BuildError, if any, is raised here
    path = OUT_DIR / "manifest.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest(key.fingerprint), indent=2) + "\n")
    tmp.replace(path)
    log(f"wrote {path}; done in {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
