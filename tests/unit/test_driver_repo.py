"""nvidia_driver_repo: the setting's checks, and the controller's verification of a network
repository against a real signed flat apt repository (tests/netrepo.py: gpg, apt-ftparchive),
served over HTTP: the good key, a wrong key, a mirror re-signed with another key, an
unreachable mirror, a mirror without the driver's version, a mirror caught mid-sync; and apt
itself accepting the repository gpuhost verified, with the same key."""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from gpuhost import driver_repo, settings as S
from gpuhost.roles import driver_repo as role
from tests import netrepo

VERSION = "595.71.05"
PACKAGES = [("nvidia-open", f"{VERSION}-0ubuntu1"), (f"nvidia-driver-pinning-{VERSION}", "1.0-1"),
            ("nvidia-open", "580.142-0ubuntu1")]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    base = tmp_path_factory.mktemp("netrepo")
    home = base / "gnupg"
    fingerprint = netrepo.make_key(home)
    netrepo.publish(base / "repo", home, PACKAGES)
    key = netrepo.export_key(home, base / "key.asc")
    other_home = base / "other-gnupg"
    other = netrepo.make_key(other_home, "someone else")
    other_key = netrepo.export_key(other_home, base / "other.asc")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(base))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"base": base, "home": home, "other_home": other_home, "fingerprint": fingerprint,
           "key": key, "other": other, "other_key": other_key,
           "url": f"http://127.0.0.1:{server.server_port}/repo/"}
    server.shutdown()
    for h in (home, other_home):
        netrepo.stop_agent(h)


def _settings(**extra) -> S.Settings:
    return S.resolve({"nvidia_driver_version": VERSION, "container_toolkit_version": "1.18.2",
                      "nvidia_driver_repo": {"ubuntu2604": {
                          "url": "https://mirror.example/cuda/ubuntu2604/x86_64/",
                          "key": "/etc/keys/nvidia.asc", "fingerprint": "A" * 40}}, **extra})


def _verify(url: str, key: Path, fingerprint: str, version: str = VERSION):
    get = role._get(_settings())
    return driver_repo.verify(url, key.read_bytes(), fingerprint, version, "nvidia-open", get,
                              key_shown=str(key))


def test_the_good_key_verifies_and_the_host_gets_that_key(repo):
    verified = _verify(repo["url"], repo["key"], repo["fingerprint"].lower())
    assert verified.url == repo["url"] and verified.key == repo["key"].read_bytes()


def test_a_key_without_the_configured_fingerprint_is_refused_in_one_line(repo):
    with pytest.raises(driver_repo.RepoError) as info:
        _verify(repo["url"], repo["other_key"], repo["fingerprint"])
    message = str(info.value)
    assert "\n" not in message and repo["other"] in message and repo["fingerprint"] in message
    assert "refusing to trust it" in message


def test_a_mirror_signed_by_another_key_than_the_configured_one_is_refused(repo):
    # the key and fingerprint agree, but the repository is not signed with that key
    with pytest.raises(driver_repo.RepoError) as info:
        _verify(repo["url"], repo["other_key"], repo["other"])
    message = str(info.value)
    assert "\n" not in message and "InRelease is not signed by the configured key" in message
    assert repo["other"] in message and "gpgv:" in message


def test_an_unreachable_mirror_is_one_line_naming_it(repo):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/cuda/"
    with pytest.raises(driver_repo.RepoError) as info:
        _verify(url, repo["key"], repo["fingerprint"])
    message = str(info.value)
    assert "\n" not in message and f"cannot reach {url}InRelease" in message
    with pytest.raises(driver_repo.RepoError, match=r"answered HTTP 404"):
        _verify(repo["url"].replace("/repo/", "/nothing/"), repo["key"], repo["fingerprint"])


def test_a_mirror_without_the_drivers_version_names_what_it_has(repo):
    with pytest.raises(driver_repo.RepoError) as info:
        _verify(repo["url"], repo["key"], repo["fingerprint"], version="595.58.03")
    assert "has no nvidia-open at 595.58.03 (it has: 580.142-0ubuntu1, 595.71.05-0ubuntu1)" \
        in str(info.value)


def test_an_index_that_does_not_match_the_signed_hashes_is_refused(repo, tmp_path):
    copy = repo["base"] / "midsync"
    shutil.copytree(repo["base"] / "repo", copy)
    (copy / "Packages.gz").write_bytes(b"truncated")
    with pytest.raises(driver_repo.RepoError, match="does not match the sha256 its signed "
                                                    "InRelease gives"):
        _verify(repo["url"].replace("/repo/", "/midsync/"), repo["key"], repo["fingerprint"])


def _apt(tmp_path: Path, url: str, key: Path) -> str:
    (tmp_path / "lists/partial").mkdir(parents=True)
    (tmp_path / "cache/archives/partial").mkdir(parents=True)
    (tmp_path / "parts").mkdir()
    sources = tmp_path / "driver.sources"
    sources.write_text(f"Types: deb\nURIs: {url}\nSuites: /\nSigned-By: {key}\n")
    opts = [f"-oDir::Etc::sourcelist={sources}", f"-oDir::Etc::sourceparts={tmp_path}/parts",
            f"-oDir::State::Lists={tmp_path}/lists", f"-oDir::Cache={tmp_path}/cache",
            "-oDebug::NoLocking=1", "-oAPT::Sandbox::User=root"]
    update = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True)
    policy = subprocess.run(["apt-cache", *opts, "policy", "nvidia-open"], capture_output=True,
                            text=True)
    return update.stdout + update.stderr + policy.stdout


def test_apt_accepts_the_verified_repository_with_the_same_key_and_refuses_another(repo, tmp_path):
    """The deb822 source gpuhost writes (Suites: /, Signed-By: the verified key) is one apt
    reads; with another key apt refuses it as gpuhost's verification does."""
    said = _apt(tmp_path / "good", repo["url"], repo["key"])
    assert f"Candidate: {VERSION}-0ubuntu1" in said, said
    said = _apt(tmp_path / "bad", repo["url"], repo["other_key"])
    assert "NO_PUBKEY" in said or "not signed" in said, said
    assert "Candidate: (none)" in said or "Unable to locate" in said or "nvidia-open:" not in said


def test_the_setting_is_checked_before_anything_is_read():
    good = {"url": "https://mirror.example/cuda/ubuntu2604/x86_64/",
            "key": "https://mirror.example/keys/nvidia.asc",
            "fingerprint": "eb69 3b30 35cd 5710 e231 e123 a4b4 6996 3bf8 63cc"}
    assert driver_repo.check_setting("k", {"ubuntu2604": good, "debian13": good}) == []
    problems = driver_repo.check_setting("k", {
        "ubuntu2604": {**good, "url": "https://mirror.example/cuda"},
        "debian13": {**good, "fingerprint": "3bf863cc"},
        "ubuntu2404": {"url": good["url"]},
        "rhel10": good, "sles15": good,
    })
    assert any("[ubuntu2604] url:" in p and "must end with /" in p for p in problems)
    assert any("[debian13] fingerprint:" in p and "40 hex digits" in p for p in problems)
    assert any("[ubuntu2404]" in p and "all three required" in p for p in problems)
    assert any("unknown distro tag 'sles15'" in p for p in problems)
    assert len(problems) == 4  # rhel10: dnf repositories are taken too
    resolved = _settings(nvidia_driver_repo={"ubuntu2604": good})
    assert resolved.nvidia_driver_repo["ubuntu2604"]["fingerprint"] == \
        "EB693B3035CD5710E231E123A4B469963BF863CC"


def test_a_source_without_its_setting_is_refused_by_the_inventory_check():
    base = {"nvidia_driver_version": VERSION, "container_toolkit_version": "1.18.2"}
    assert any(p.startswith("nvidia_local_repo: not set (nor nvidia_driver_repo)") for p in S.validate(base))
    assert any("nvidia_driver_repo: empty, but nvidia_driver_source is network" in p
               for p in S.validate({**base, "nvidia_driver_source": "network",
                                    "nvidia_local_repo": {}}))
    assert S.validate({**base, "nvidia_driver_repo": {"ubuntu2604": {
        "url": "https://m.example/u/", "key": "/k.asc", "fingerprint": "A" * 40}}}) == []
    assert any("nvidia_driver_source:" in p for p in S.validate({**base,
                                                                "nvidia_driver_source": "nvidia"}))


def test_offline_the_network_repository_must_be_on_a_mirror():
    base = {"nvidia_driver_version": VERSION, "container_toolkit_version": "1.18.2",
            "offline": True, "offline_mirror_urls": ["https://mirror.site/"],
            "docker_source": "distro", "container_toolkit_source": "local",
            "container_toolkit_local_packages": ["/pkgs/t.deb"]}
    on = {"url": "https://mirror.site/cuda/ubuntu2604/x86_64/", "key": "/keys/nvidia.asc",
          "fingerprint": "A" * 40}
    assert S.validate({**base, "nvidia_driver_repo": {"ubuntu2604": on}}) == []
    off = {**on, "url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2604/"
                        "x86_64/"}
    problems = S.validate({**base, "nvidia_driver_repo": {"ubuntu2604": off}})
    assert len(problems) == 1 and problems[0].startswith(
        "nvidia_driver_repo[ubuntu2604].url: \"https://developer.download.nvidia.com/"), problems


@pytest.fixture(scope="module")
def rpm_repo(repo):
    """dnf repositories beside the apt one: NVIDIA's layout (packages, unsigned metadata) and
    a mirror that signs its repomd.xml."""
    base = repo["base"]
    pkgs = [("nvidia-open", VERSION, "1.el10"), ("nvidia-open", "580.142", "1.el10")]
    netrepo.publish_rpm(base / "rpm", None, pkgs)
    netrepo.publish_rpm(base / "rpm-signed", repo["home"], pkgs)
    netrepo.publish_rpm(base / "rpm-other", repo["other_home"], pkgs)
    return {name: repo["url"].replace("/repo/", f"/{name}/")
            for name in ("rpm", "rpm-signed", "rpm-other")}


def _verify_rpm(url: str, key: Path, fingerprint: str, version: str = VERSION):
    get = role._get(_settings())
    return driver_repo.verify_rpm(url, key.read_bytes(), fingerprint, version, "nvidia-open",
                                  get, key_shown=str(key))


def test_dnf_repositories_are_verified_as_far_as_they_are_signed(repo, rpm_repo):
    plain = _verify_rpm(rpm_repo["rpm"], repo["key"], repo["fingerprint"])
    assert plain.signed_metadata is False  # NVIDIA's: packages signed, dnf checks them
    assert "gpgcheck=1\nrepo_gpgcheck=0\n" in driver_repo.rpm_repo_file(
        plain.url, plain.signed_metadata, "/etc/pki/rpm-gpg/k.asc")
    signed = _verify_rpm(rpm_repo["rpm-signed"], repo["key"], repo["fingerprint"])
    assert signed.signed_metadata is True
    assert "repo_gpgcheck=1" in driver_repo.rpm_repo_file(signed.url, True, "/k.asc")
    with pytest.raises(driver_repo.RepoError, match="repomd.xml is not signed by the "
                                                    "configured key"):
        _verify_rpm(rpm_repo["rpm-other"], repo["key"], repo["fingerprint"])
    with pytest.raises(driver_repo.RepoError, match="refusing to trust it"):
        _verify_rpm(rpm_repo["rpm"], repo["other_key"], repo["fingerprint"])
    with pytest.raises(driver_repo.RepoError, match=r"has no nvidia-open at 595.58.03 \(it has: "
                                                    r"580.142-1.el10, 595.71.05-1.el10\)"):
        _verify_rpm(rpm_repo["rpm"], repo["key"], repo["fingerprint"], "595.58.03")
    with pytest.raises(driver_repo.RepoError, match="repodata/repomd.xml answered HTTP 404"):
        _verify_rpm(repo["url"], repo["key"], repo["fingerprint"])  # an apt repository


def test_a_binary_key_is_armored_for_rpm(repo, tmp_path):
    binary = netrepo.export_key(repo["home"], tmp_path / "key.gpg", armor=False)
    armored = driver_repo.armored(binary.read_bytes())
    assert armored.startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert driver_repo.key_fingerprints(armored) == {repo["fingerprint"]}
