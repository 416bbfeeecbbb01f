"""Where a host's driver comes from (``nvidia_driver_source``), and the driver from NVIDIA's
network repository or a site mirror of it (``nvidia_driver_repo``).

``source(config, tag)`` decides, before any change: the local repo package where NVIDIA
publishes one for the distribution (``auto``'s choice), else the network repository, which
must then be configured (Ubuntu 26.04: no local repo package exists). ``verified`` checks the
repository on the controller once per run (``gpuhost.driver_repo.verify``: key fingerprint,
signed InRelease, index hashes, the driver's version present): a failure stops the run
while nothing has been changed on any host. ``install`` gives the host the same key (apt's
``signed-by``) and a deb822 source, or (dnf) a ``.repo`` with ``gpgcheck=1`` and that key; the
pin, version lock or module stream is the local repo's (``roles/nvidia_driver.py``).
"""

from __future__ import annotations

from pathlib import Path

from pyinfra import host

from gpuhost import aptdistros, artifacts, driver_repo, packages, settings
from gpuhost.roles.common import GpuhostError, fetch_key, is_armored, run_cache
from gpuhost.roles.repos import apt_repository, rpm_repository

SOURCES = "/etc/apt/sources.list.d/gpuhost-nvidia-driver.sources"
KEYRING = "/usr/share/keyrings/gpuhost-nvidia-driver"  # + .asc (armored) or .gpg
RPM_REPO = "/etc/yum.repos.d/gpuhost-nvidia-driver.repo"
RPM_KEY = "/etc/pki/rpm-gpg/gpuhost-nvidia-driver.asc"


def source(config: settings.Settings, tag: str) -> str:
    """``"local_repo"`` or ``"network"`` for a host of ``tag``; GpuhostError (one line) when
    the choice cannot work there."""
    release = aptdistros.RELEASES.get(tag)
    chosen = config.nvidia_driver_source
    if chosen == "auto":
        chosen = "network" if release and not release.local_repo else "local_repo"
    if chosen == "local_repo" and release and not release.local_repo:
        raise GpuhostError(
            f"{host.name}: NVIDIA publishes no local repo package for {release.name}: set "
            f"nvidia_driver_source: network (or auto) and nvidia_driver_repo[{tag}] to NVIDIA's "
            f"network repository ({driver_repo.NVIDIA_REPO.format(tag=tag)}) or your mirror of it")
    if chosen == "network" and tag not in config.nvidia_driver_repo:
        why = (f"NVIDIA publishes no local repo package for {release.name}, so the driver comes "
               "from NVIDIA's network repository" if release and not release.local_repo
               else "nvidia_driver_source is network, so the driver comes from NVIDIA's network "
               "repository")
        raise GpuhostError(
            f"{host.name}: nvidia_driver_repo has no entry for {tag!r}: {why}: add {tag}: "
            f"{{url: {driver_repo.NVIDIA_REPO.format(tag=tag)} (or your mirror), key: its "
            "signing key (URL or path), fingerprint: the key's fingerprint}")
    return chosen


def _get(config: settings.Settings):
    session = artifacts.make_session(proxy=config.http_proxy, retries=2, backoff_factor=0.5)

    def get(url: str, optional: bool = False) -> bytes | None:
        """The file at ``url``; None for a missing ``optional`` one (HTTP 404, no file)."""
        shown = settings.mask_url(url)
        if config.offline and not settings.on_mirror(url, config.offline_mirror_urls) \
                and not settings.is_local_source(url):
            raise driver_repo.RepoError(f"offline is set but {shown} is not under "
                                        "offline_mirror_urls")
        if url.startswith("file://"):
            try:
                return Path(url.removeprefix("file://")).read_bytes()
            except FileNotFoundError:
                if optional:
                    return None
                raise driver_repo.RepoError(f"cannot read {shown}: no such file") from None
            except OSError as error:
                raise driver_repo.RepoError(
                    f"cannot read {shown}: {error.strerror or error}") from None
        try:
            response = session.get(url, timeout=driver_repo.TIMEOUT)
        except Exception as error:  # requests raises many types; one line
            raise driver_repo.RepoError(
                f"cannot reach {shown} ({artifacts._reason(error)}): check the URL, the "
                "network or http_proxy") from None
        if optional and response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise driver_repo.RepoError(f"{shown} answered HTTP {response.status_code} "
                                        f"{response.reason}: check the URL")
        return response.content

    return get


def verified(config: settings.Settings, tag: str, version: str, flavor: str) -> driver_repo.Verified:
    """The repository of ``nvidia_driver_repo[tag]``, verified on the controller once per run;
    GpuhostError (one line, nothing changed on any host) when it cannot be."""
    cache = run_cache("driver_repos")
    entry = config.nvidia_driver_repo[tag]
    key = (tag, version, flavor, entry["url"], entry["key"], entry["fingerprint"])
    if key not in cache:
        meta = next(name for name in packages.driver_packages(tag, version, flavor, False)
                    if not name.startswith("nvidia-driver-pinning-"))
        try:
            signing_key = fetch_key(entry["key"], config)
            check = driver_repo.verify if packages.family(tag) == "debian" else \
                driver_repo.verify_rpm
            cache[key] = check(entry["url"], signing_key, entry["fingerprint"], version, meta,
                               _get(config), key_shown=settings.mask_url(entry["key"]))
        except (driver_repo.RepoError, GpuhostError, OSError) as error:
            raise GpuhostError(f"nvidia_driver_repo[{tag}] (checked on the controller, nothing "
                               f"was changed on any host): {error}") from None
    return cache[key]


def install(config: settings.Settings, tag: str, version: str, flavor: str) -> None:
    """Operations: the verified repository's key and its source (apt: deb822, apt-get update
    on change; dnf: a .repo with gpgcheck=1, the cache expired on change)."""
    repo = verified(config, tag, version, flavor)
    if packages.family(tag) == "rhel":
        rpm_repository("NVIDIA driver", driver_repo.armored(repo.key), RPM_KEY,
                       driver_repo.rpm_repo_file(repo.url, repo.signed_metadata, RPM_KEY), RPM_REPO)
        return
    keyring = f"{KEYRING}.{'asc' if is_armored(repo.key) else 'gpg'}"
    sources = ("# Managed by gpuhost (nvidia_driver_repo): NVIDIA's network repository or your\n"
               "# mirror of it; the driver's version is pinned in "
               f"{packages.APT_PIN}.\n"
               f"Types: deb\nURIs: {repo.url}\nSuites: /\nSigned-By: {keyring}\n")
    apt_repository("NVIDIA driver", repo.key, keyring, sources, SOURCES)
