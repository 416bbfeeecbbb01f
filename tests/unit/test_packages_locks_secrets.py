"""Issue 13 items 5, 6, 7, 9, 10: package repositories, pins, local files and secrets."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpuhost import el_packages, packages, settings
from gpuhost.runtime import docker_packages
from gpuhost.roles import common

NVIDIA_TOOLKIT_KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"


def test_toolkit_rpm_repo_follows_nvidias_file():
    # NVIDIA's stable/rpm/nvidia-container-toolkit.repo: signed metadata, TLS verified.
    text = packages.toolkit_rpm_repo("https://mirror.example/toolkit/rpm/$basearch")
    lines = text.splitlines()
    assert "repo_gpgcheck=1" in lines and "gpgcheck=0" in lines
    assert "sslverify=1" in lines and "sslcacert=/etc/pki/tls/certs/ca-bundle.crt" in lines
    assert "baseurl=https://mirror.example/toolkit/rpm/$basearch" in lines
    assert "gpgkey=file:///etc/pki/rpm-gpg/nvidia-container-toolkit.asc" in lines


@pytest.fixture(scope="module")
def foreign_key(tmp_path_factory) -> bytes:
    """An armored public key that is not NVIDIA's (made here, no passphrase)."""
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-generate-key",
                    "not nvidia <x@example.invalid>", "ed25519", "sign", "never"],
                   env=env, check=True, capture_output=True)
    return subprocess.run(["gpg", "--armor", "--export"], env=env, check=True,
                          capture_output=True).stdout


def test_a_toolkit_key_without_nvidias_fingerprint_is_refused(foreign_key):
    with pytest.raises(common.GpuhostError, match="refusing to trust it"):
        common.check_key_fingerprint(NVIDIA_TOOLKIT_KEY_URL, foreign_key)


def test_a_mirrors_key_is_not_held_to_a_vendor_fingerprint(foreign_key):
    common.check_key_fingerprint("http://mirror.example/toolkit/gpgkey", foreign_key)


PROXY = "http://ops:s3cr3t@proxy.example:3128"


def test_dnf_conf_gets_the_proxy_in_main_and_keeps_every_other_line():
    stock = "[main]\ngpgcheck=1\ninstallonly_limit=3\n# proxy=commented\n"
    assert el_packages.dnf_conf_with_proxy(stock, PROXY) == (
        "[main]\nproxy=http://ops:s3cr3t@proxy.example:3128\ngpgcheck=1\ninstallonly_limit=3\n"
        "# proxy=commented\n")
    replaced = el_packages.dnf_conf_with_proxy("[main]\nproxy = http://old:3128\n[x]\nproxy=y\n",
                                            "http://new:3128")
    assert replaced == "[main]\nproxy=http://new:3128\n[x]\nproxy=y\n"
    assert el_packages.dnf_conf_with_proxy(None, "http://p:3128") == "[main]\nproxy=http://p:3128\n"
    converged = el_packages.dnf_conf_with_proxy(stock, PROXY)
    assert el_packages.dnf_conf_with_proxy(converged, PROXY) == converged


def test_a_deb_files_name_and_version_are_read_on_the_controller(tmp_path):
    from gpuhost import pkgfile

    root = tmp_path / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: docker-ce\nVersion: 5:27.5.1-1~debian.12~bookworm\nArchitecture: amd64\n"
        "Maintainer: x <x@example.invalid>\nDescription: test\n")
    deb = tmp_path / "docker-ce.deb"
    subprocess.run(["dpkg-deb", "-Zxz", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    assert pkgfile.read(deb) == pkgfile.PackageFile(
        "docker-ce", "5:27.5.1-1~debian.12~bookworm", "amd64")
    broken = tmp_path / "broken.deb"
    broken.write_bytes(b"not a package")
    with pytest.raises(pkgfile.PackageFileError, match="neither a .deb"):
        pkgfile.read(broken)


def test_an_rpm_files_name_and_version_are_read_on_the_controller(tmp_path):
    from gpuhost import pkgfile

    if not shutil.which("rpmbuild"):
        pytest.skip("rpmbuild is not installed (make deps installs it)")
    spec = tmp_path / "t.spec"
    spec.write_text("Name: docker-ce\nVersion: 27.5.1\nRelease: 1.el9\nEpoch: 3\n"
                    "Summary: t\nLicense: none\nBuildArch: x86_64\n%description\nt\n"
                    "%files\n")
    subprocess.run(["rpmbuild", "-bb", "--define", f"_topdir {tmp_path}", str(spec)],
                   check=True, capture_output=True)
    rpm = next((tmp_path / "RPMS").rglob("*.rpm"))
    # rpm -q --qf '%{VERSION}-%{RELEASE}' (pyinfra's RpmPackages) shows no epoch either
    assert pkgfile.read(rpm) == pkgfile.PackageFile("docker-ce", "27.5.1-1.el9", "x86_64")


def test_docker_version_matches_docker_and_debian_package_versions():
    for installed in ("5:27.5.1-1~debian.12~bookworm", "3:27.5.1-1.el9", "27.5.1-1.el9",
                      "27.5.1+dfsg1-1+deb12u1"):
        assert docker_packages.docker_version_matches(installed, "27.5.1"), installed
    for installed in ("5:27.5.10-1~debian.12~bookworm", "3:27.5.0-1.el9", "127.5.1-1"):
        assert not docker_packages.docker_version_matches(installed, "27.5.1"), installed
    pin = docker_packages.docker_apt_pin("docker", "27.5.1")
    assert "Package: docker-ce docker-ce-cli\n" in pin
    assert "Pin: version /^([0-9]+:)?27\\.5\\.1([-~+]|$)/\n" in pin


def test_docker_version_is_validated_with_the_other_settings():
    from gpuhost import settings

    base = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
            "nvidia_local_repo": {"debian12": {"path": "/x.deb", "sha256": "0" * 64}}}
    assert settings.validate({**base, "docker_version": "27.5.1"}) == []
    assert any(p.startswith("docker_version:") for p in
               settings.validate({**base, "docker_version": "latest"}))
    assert any("docker_source is local" in p for p in settings.validate(
        {**base, "docker_version": "27.5.1", "docker_source": "local",
         "docker_local_packages": ["/d.deb"]}))


def test_an_upgrade_moves_the_branch_companions_the_host_has():
    # issue 13 item 9: before, old_packages removed nvidia-imex-570 / libnvidia-nscq-570 and
    # nothing installed the target branch's
    from gpuhost.upgrade import companions

    had = ["libnvidia-nscq-570", "nvidia-fabricmanager-570", "nvidia-imex-570"]
    assert companions(had, "ubuntu2404", "575.57.08") == [
        "libnvidia-nscq-575", "nvidia-fabricmanager-575", "nvidia-imex-575"]
    # From 580 the companions lose the branch on apt AND dnf (NVIDIA's driver container,
    # real-host review A3); before, gpuhost asked for nvidia-fabricmanager-580 on apt
    # (Canonical's differently versioned build) and nvidia-fabric-manager / libnvidia-nscq-580
    # on EL (no such packages)
    assert companions(had, "ubuntu2404", "580.95.05") == [
        "libnvidia-nscq", "nvidia-fabricmanager", "nvidia-imex"]
    assert companions(had, "ubuntu2404", "590.44.01") == [
        "libnvidia-nscq", "nvidia-fabricmanager", "nvidia-imex"]
    el = ["nvidia-fabric-manager", "libnvidia-nscq-570"]
    assert companions(el, "rhel9", "575.57.08") == ["libnvidia-nscq-575", "nvidia-fabric-manager"]
    assert companions(el, "rhel9", "580.95.05") == ["libnvidia-nscq", "nvidia-fabricmanager"]
    # ... and back down: a downgrade below 580 takes the old spellings again
    assert companions(["nvidia-fabricmanager", "libnvidia-nscq"], "rhel9", "570.172.08") == [
        "libnvidia-nscq", "nvidia-fabric-manager"]
    assert companions([], "debian12", "580.95.05") == []
    assert packages.driver_packages("ubuntu2404", "590.44.01", "open", True)[-1] == \
        "nvidia-fabricmanager"


def test_fabric_manager_has_each_branch_and_family_name():
    fm = packages.fabricmanager_package
    assert (fm("ubuntu2204", "570.172.08"), fm("rhel8", "570.172.08")) == (
        "nvidia-fabricmanager-570", "nvidia-fabric-manager")
    assert {fm(tag, v) for tag in ("debian12", "ubuntu2404", "rhel9")
            for v in ("580.95.05", "595.71.05", "620.10.01")} == {"nvidia-fabricmanager"}
    assert packages.driver_packages("rhel9", "580.95.05", "open", True) == [
        "nvidia-open", "nvidia-fabricmanager"]
    assert packages.driver_packages("ubuntu2404", "580.95.05", "open", True) == [
        "nvidia-open-580", "nvidia-fabricmanager"]
    assert packages.driver_packages("debian12", "580.95.05", "open", True) == [
        "nvidia-open", "nvidia-smi", "nvidia-fabricmanager"]


def test_an_upgrade_removes_the_companion_the_target_spells_otherwise():
    from gpuhost.upgrade import old_packages

    # EL 570 -> 580: nvidia-fabric-manager is replaced by nvidia-fabricmanager
    installed = ["cuda-drivers", "nvidia-fabric-manager", "libnvidia-nscq-570", "nvidia-driver"]
    wanted = ["cuda-drivers", "nvidia-fabricmanager", "libnvidia-nscq"]
    assert old_packages(installed, "580.95.05", "proprietary", wanted) == [
        "libnvidia-nscq-570", "nvidia-fabric-manager"]


def test_r620_proprietary_is_refused_before_any_host():
    base = {"nvidia_driver_version": "620.10.01", "container_toolkit_version": "1.17.8",
            "nvidia_local_repo": {"debian12": {"path": "/x.deb", "sha256": "0" * 64}}}
    assert settings.validate({**base, "nvidia_driver_flavor": "open"}) == []
    assert settings.validate({**base, "nvidia_driver_flavor": "auto"}) == []
    problems = settings.validate({**base, "nvidia_driver_flavor": "proprietary"})
    assert len(problems) == 1 and "no proprietary kernel modules" in problems[0]
    assert settings.validate({**base, "nvidia_driver_version": "595.71.05",
                              "nvidia_driver_flavor": "proprietary"}) == []


def test_display_managers_nvsm_and_imex_are_stopped_before_the_driver_moves():
    from gpuhost.upgrade import CLIENT_SERVICES, services_to_check

    for name in ("gdm", "gdm3", "lightdm", "sddm", "nvsm", "nvidia-imex"):
        assert name in CLIENT_SERVICES
    # display managers before anything else (they hold nvidia_drm), persistenced last
    assert CLIENT_SERVICES.index("gdm3") < CLIENT_SERVICES.index("nvidia-dcgm")
    assert CLIENT_SERVICES[-1] == "nvidia-persistenced"
    assert services_to_check({"upgrade_stop_services": ["nvsm", "slurmd"]})[-1] == "slurmd"


def test_reboot_timeout_is_a_setting_with_a_default_for_slow_posting_servers():
    from gpuhost import settings

    assert settings.BY_NAME["reboot_timeout"].default == 1800
    base = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
            "nvidia_local_repo": {"debian12": {"path": "/x.deb", "sha256": "0" * 64}}}
    assert settings.validate({**base, "reboot_timeout": 3600}) == []
    for bad in (10, "600", True, 10**6):
        assert any(p.startswith("reboot_timeout:") for p in
                   settings.validate({**base, "reboot_timeout": bad})), bad


def test_the_dnf_conf_fact_never_reads_the_proxy_value_back(tmp_path):
    # pyinfra prints fact output at -vvv: the proxy's password must not be in it
    from gpuhost.facts.dnf import DnfConfRedacted

    conf = tmp_path / "dnf.conf"
    conf.write_text(f"[main]\ngpgcheck=1\nproxy = {PROXY}\n[other]\nproxy=keep\n")
    command = DnfConfRedacted().command(str(conf)).get_raw_value()
    out = subprocess.run(command, shell=True, capture_output=True, text=True, check=True).stdout
    text = DnfConfRedacted().process(out.splitlines())
    assert "s3cr3t" not in text
    assert text == "[main]\ngpgcheck=1\nproxy=<redacted by gpuhost>\n[other]\nproxy=keep"
    # what gpuhost uploads is built from the redacted text: the proxy line is replaced anyway
    assert el_packages.dnf_conf_with_proxy(text, PROXY) == (
        f"[main]\ngpgcheck=1\nproxy={PROXY}\n[other]\nproxy=keep\n")
