"""Enterprise Linux packaging rules (gpuhost.el_packages, facts.el, gpuhost.settings): each
vendor's channels, container-tools vs Docker, dnf versionlock entries, RHEL registration."""
from __future__ import annotations

import pytest

from gpuhost.facts.el import RhsmRegistered, parse_el_packaging
from gpuhost import el_packages, settings


def test_default_repos_are_each_vendors_channels():
    plan = el_packages.repo_plan("ol", "8.10", "x86_64", None)
    assert plan["config_manager"] == ["ol8_codeready_builder", "ol8_developer_EPEL"]
    assert plan["epel_release"] == "oracle-epel-release-el8" and not plan["registration"]
    assert el_packages.repo_plan("ol", "9.5", "x86_64", None)["config_manager"] == [
        "ol9_codeready_builder", "ol9_developer_EPEL"]
    # OL10: Oracle's EPEL channel follows the update level
    assert el_packages.repo_plan("ol", "10.1", "x86_64", None)["config_manager"] == [
        "ol10_codeready_builder", "ol10_u1_developer_EPEL"]
    rhel = el_packages.repo_plan("rhel", "10.0", "aarch64", None)
    assert rhel["subscription"] == ["codeready-builder-for-rhel-10-aarch64-rpms"]
    assert rhel["config_manager"] == ["epel"] and rhel["registration"]
    assert rhel["epel_release"].endswith("/epel-release-latest-10.noarch.rpm")
    for os_id in ("rocky", "almalinux"):
        assert el_packages.repo_plan(os_id, "9.6", "x86_64", None)["config_manager"] == [
            "crb", "epel"]
        assert el_packages.repo_plan(os_id, "8.10", "x86_64", None)["config_manager"] == [
            "powertools", "epel"]
    # the setting wins; el_repo_urls alone enables nothing more and needs no registration
    assert el_packages.repo_plan("ol", "9.5", "x86_64", ())["config_manager"] == []
    assert el_packages.repo_plan("ol", "9.5", "x86_64", ("mirror_epel",))["config_manager"] \
        == ["mirror_epel"]
    mirrored = el_packages.repo_plan("rhel", "9.6", "x86_64", None,
                                     {"site-epel": {"baseurl": "https://m/e", "gpgkey": "https://m/k"}})
    assert mirrored["config_manager"] == mirrored["subscription"] == []
    assert not mirrored["registration"] and mirrored["epel"] == "epel"


def test_dkms_message_names_the_channel_and_the_setting():
    text = el_packages.dkms_missing_message("ol8_developer_EPEL", [])
    assert "ol8_developer_EPEL" in text and "el_enable_repos" in text and "el_repo_urls" in text
    assert "offers no dkms" in el_packages.dkms_missing_message("epel", ["crb", "epel"])


def test_release_package_names_and_the_lock_command():
    assert el_packages.release_package_name("oracle-epel-release-el10") == "oracle-epel-release-el10"
    assert el_packages.release_package_name(
        "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm") == "epel-release"
    command = el_packages.lock_installed_command("580.105.08")
    assert "grep -F -e ':580.105.08-'" in command and command.endswith("dnf versionlock add $locks")
    assert 'test -n "$locks"' in command  # no package at that version: fail, lock nothing
    with pytest.raises(ValueError):
        el_packages.lock_installed_command("580; reboot")


def test_mirror_repo_file_and_unregistered_message():
    text = el_packages.mirror_repo_file({"site-epel": {"baseurl": "https://m/epel/10/x86_64",
                                                       "gpgkey": "https://m/RPM-GPG-KEY-EPEL-10"}})
    assert "[site-epel]\n" in text and "gpgcheck=1\n" in text and "enabled=1\n" in text
    assert "baseurl=https://m/epel/10/x86_64\n" in text
    line = el_packages.unregistered_message("gpu-07")
    assert "\n" not in line and line.startswith("gpu-07: this RHEL host is not registered")
    assert "subscription-manager register" in line and "el_repo_urls" in line
    assert "el_enable_repos" in line and "rhui" in line  # cloud images: RHUI's ids
    assert "has no subscription-manager" in el_packages.unregistered_message("gpu-07", False)


def test_settings_el_repo_urls_are_checked():
    base = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
            "nvidia_local_repo": {"rhel10": {"path": "/x.rpm", "sha256": "0" * 64}}}
    good = {"site-epel": {"baseurl": "https://m/epel/$releasever/$basearch",
                          "gpgkey": "https://m/RPM-GPG-KEY-EPEL-10"}}
    assert settings.validate({**base, "el_repo_urls": good}) == []
    problems = settings.validate({**base, "el_repo_urls": {
        "a;b": {"baseurl": "https://m/x", "gpgkey": "https://m/k"},
        "nokey": {"baseurl": "https://m/x"},
        "badurl": {"baseurl": "https://m/x; rm -rf /", "gpgkey": "https://m/k"}}})
    assert any("[a;b]" in p for p in problems)
    assert any("[nokey]" in p and "both required" in p for p in problems)
    assert any("[badurl] baseurl:" in p for p in problems)
    assert settings.resolve(base).el_repo_urls is None


def test_settings_el_enable_repos_and_docker_replace_podman_are_checked():
    base = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
            "nvidia_local_repo": {"rhel9": {"path": "/x.rpm", "sha256": "0" * 64}}}
    assert settings.validate({**base, "el_enable_repos": ["ol9_developer_EPEL"],
                              "docker_replace_podman": True}) == []
    problems = settings.validate({**base, "el_enable_repos": ["a; rm -rf /"],
                                  "docker_replace_podman": "yes"})
    assert any(p.startswith("el_enable_repos: [0]") for p in problems)
    assert any(p.startswith("docker_replace_podman:") for p in problems)
    resolved = settings.resolve(base)
    assert resolved.el_enable_repos is None and resolved.docker_replace_podman is False


def test_el_packaging_fact_reads_repos_packages_and_locks():
    info = parse_el_packaging([
        "repo ol8_baseos_latest", "repo ol8_codeready_builder", "enabled 0",
        "repo ol8_developer_EPEL", "enabled=1", "enabled 1",
        "rpm nvidia-open\t3:570.172.08-1.el8", "rpm dkms\t(none):3.2.1-1.el8",
        "rpm python3-dnf-plugin-versionlock\t(none):4.3.1-1.el8",
        "lock nvidia-open-3:570.172.08-1.el8.*"])
    assert info["repos"] == {"ol8_baseos_latest": True, "ol8_codeready_builder": False,
                             "ol8_developer_EPEL": True}
    assert info["nvidia"] == {"nvidia-open": "3:570.172.08-1.el8"}
    assert info["packages"]["dkms"] == "3.2.1-1.el8" and info["versionlock_plugin"]
    assert info["locks"] == ["nvidia-open-3:570.172.08-1.el8.*"]


def test_versionlock_entries_are_exact_and_stale_driver_locks_go():
    installed = {"nvidia-open": "3:570.172.08-1.el8", "kmod-nvidia-open-dkms": "3:570.172.08-1.el8",
                 "nvidia-container-toolkit": "1.17.8-1", "nvidia-driver-local-repo-rhel8-570.172.08":
                 "1.0-1"}
    locks = ["nvidia-open-3:550.163.01-1.el8.*", "nvidia-container-toolkit-0:1.17.8-1.*",
             "kmod-nvidia-open-dkms-3:570.172.08-1.el8.*"]
    stale, add = el_packages.versionlock_changes(installed, locks, "570.172.08")
    assert stale == ["nvidia-open-3:550.163.01-1.el8.*"]  # the toolkit's lock stays
    assert add == ["nvidia-open-3:570.172.08-1.el8"]
    converged = locks[1:] + ["nvidia-open-3:570.172.08-1.el8.*"]
    assert el_packages.versionlock_changes(installed, converged, "570.172.08") == ([], [])
    assert el_packages.versionlock_spec("nvidia-x", "570.172.08-1") == "nvidia-x-0:570.172.08-1.*"


def test_container_tools_message_names_packages_and_setting():
    text = el_packages.container_tools_message("ol8-01", ["podman", "runc"])
    assert "podman, runc" in text and "docker_replace_podman: true" in text
    assert "nothing was changed" in text


def test_rhsm_registered_fact_reads_subscription_managers_answer():
    fact = RhsmRegistered()
    assert fact.process(["registered"]) is True
    assert fact.process(["unregistered"]) is False
    assert fact.process(["absent"]) is None
    assert "subscription-manager identity" in fact.command()
