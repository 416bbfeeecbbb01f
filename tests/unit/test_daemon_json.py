"""The daemon.json merge rules and the package plan (pure core)."""

from __future__ import annotations

import json

import pytest

from gpuhost import daemon_json, packages

USER = {
    "log-driver": "json-file",
    "data-root": "/srv/docker",
    "registry-mirrors": ["https://mirror.example"],
    "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}},
}


def test_every_user_key_and_other_runtime_is_kept():
    merged = daemon_json.merge(USER, default_runtime=False)
    for key in ("log-driver", "data-root", "registry-mirrors"):
        assert merged[key] == USER[key]
    assert merged["runtimes"]["kata"] == USER["runtimes"]["kata"]
    assert merged["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert "default-runtime" not in merged
    assert USER["runtimes"] == {"kata": {"path": "/usr/bin/kata-runtime"}}  # input untouched


@pytest.mark.parametrize("entry", [
    {"path": "nvidia-container-runtime", "args": []},
    {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []},
    {"path": "/usr/local/bin/nvidia-container-runtime", "runtimeArgs": ["--debug"]},
])
def test_an_existing_nvidia_runtime_in_any_style_is_left_as_written(entry):
    config = {"runtimes": {"nvidia": entry}}
    assert daemon_json.merge(config, default_runtime=False) == config


def test_a_runtime_named_nvidia_that_is_something_else_is_replaced():
    merged = daemon_json.merge({"runtimes": {"nvidia": {"path": "/bin/true"}}},
                               default_runtime=False)
    assert merged["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def test_default_runtime_only_when_asked_and_an_existing_one_is_respected():
    assert daemon_json.merge({}, default_runtime=True)["default-runtime"] == "nvidia"
    mine = {"default-runtime": "runc"}
    assert daemon_json.merge(mine, default_runtime=False)["default-runtime"] == "runc"


def test_extra_settings_merge_one_level_deep():
    config = {"log-opts": {"max-size": "10m", "max-file": "3"}}
    merged = daemon_json.merge(config, default_runtime=False,
                               extra={"log-opts": {"max-size": "100m"}, "live-restore": True})
    assert merged["log-opts"] == {"max-size": "100m", "max-file": "3"}
    assert merged["live-restore"] is True


def test_merge_is_idempotent_and_rendering_is_stable():
    once = daemon_json.merge(USER, default_runtime=True)
    assert daemon_json.merge(once, default_runtime=True) == once
    text = daemon_json.render(once)
    assert text.endswith("\n") and json.loads(text) == once
    assert daemon_json.render(json.loads(text)) == text
    assert daemon_json.changed_keys(USER, once) == ["default-runtime", "runtimes"]


def test_driver_packages_follow_nvidia_naming_per_family_and_branch():
    assert packages.driver_packages("debian12", "570.172.08", "open", False) == ["nvidia-open-570"]
    assert packages.driver_packages("ubuntu2204", "550.163.01", "proprietary", True) == [
        "cuda-drivers-550", "nvidia-fabricmanager-550"]
    assert packages.driver_packages("ubuntu2404", "590.48.01", "open", False) == [
        "nvidia-driver-pinning-590", "nvidia-open"]
    assert packages.driver_packages("rhel9", "570.172.08", "proprietary", True) == [
        "cuda-drivers", "nvidia-fabric-manager"]
    assert packages.module_stream("570.172.08", "open") == "570-open"
    assert packages.module_stream("550.163.01", "proprietary") == "550-dkms"


def test_apt_pin_never_catches_the_container_toolkit():
    import re

    pin = packages.apt_pin("570.172.08")
    pattern = re.search(r"^Package: /(.*)/$", pin, re.M).group(1)
    assert "Pin: version 570.172.08-*" in pin and "Pin-Priority: 1000" in pin
    for name in ("nvidia-open-570", "libnvidia-compute-570", "cuda-drivers-570",
                 "nvidia-dkms-570-open", "nvidia-fabricmanager-570"):
        assert re.match(pattern, name), name
    for name in packages.TOOLKIT_PACKAGES:
        assert not re.match(pattern, name), name


def test_local_repo_names_are_nvidias():
    assert packages.local_repo_filename("debian12", "570.172.08") == (
        "nvidia-driver-local-repo-debian12-570.172.08_1.0-1_amd64.deb")
    assert packages.local_repo_filename("rhel9", "570.172.08") == (
        "nvidia-driver-local-repo-rhel9-570.172.08-1.0-1.x86_64.rpm")
    assert packages.local_repo_dir("ubuntu2404", "570.172.08") == (
        "/var/nvidia-driver-local-repo-ubuntu2404-570.172.08")
    assert packages.toolkit_packages("rhel8", "1.17.8")[0] == "nvidia-container-toolkit-1.17.8-1"
    assert packages.toolkit_packages("debian12", "1.17.8-2")[3] == "libnvidia-container1=1.17.8-2"
