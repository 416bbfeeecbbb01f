"""Oracle Linux packaging rules (gpuhost.packages, facts.el, gpuhost.settings): Oracle's
channels, container-tools vs Docker, dnf versionlock entries."""
from __future__ import annotations

from gpuhost.facts.el import parse_el_packaging
from gpuhost import el_packages, settings


def test_default_repos_are_oracles_channels_only_on_oracle_linux():
    assert el_packages.el_repos_to_enable("ol", "8", None) == ["ol8_codeready_builder",
                                                             "ol8_developer_EPEL"]
    assert el_packages.el_repos_to_enable("ol", "9", None) == ["ol9_codeready_builder",
                                                             "ol9_developer_EPEL"]
    assert el_packages.el_repos_to_enable("rhel", "9", None) == []
    assert el_packages.el_repos_to_enable("ol", "9", ()) == []
    assert el_packages.el_repos_to_enable("ol", "9", ("mirror_epel",)) == ["mirror_epel"]


def test_dkms_message_names_the_channel_and_the_setting():
    text = el_packages.dkms_missing_message("8", [])
    assert "ol8_developer_EPEL" in text and "el_enable_repos" in text
    assert "offers no dkms" in el_packages.dkms_missing_message("9", ["ol9_developer_EPEL"])


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
