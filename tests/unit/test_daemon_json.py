"""The daemon.json merge rules and the package plan (pure core)."""

from __future__ import annotations

import json

import pytest

from gpuhost import packages
from gpuhost.runtime import daemon_json

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
    assert packages.driver_packages("ubuntu2404", "570.172.08", "open", False) == ["nvidia-open-570"]
    # debian12: Debian's packaging, unversioned (tests/unit/test_debian_names.py)
    assert packages.driver_packages("debian12", "570.172.08", "open", False) == [
        "nvidia-open", "nvidia-smi"]
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


# --- issue 14 item 4: option types, keys gpuhost wrote, flag clashes -----------------------

def test_docker_daemon_settings_are_checked_against_dockers_option_types():
    from gpuhost.runtime.daemon_json import option_problems

    assert option_problems({"log-driver": 5}) == [
        "'log-driver' must be a string (Docker's dockerd reference), got 5"]
    assert option_problems({"log-opts": {"max-file": 3}})[0].startswith("'log-opts' must be an object of string")
    assert option_problems({"live-restore": "yes"})
    assert option_problems({"mtu": True})  # a bool is not an integer
    assert option_problems({"log-driver": "json-file", "log-opts": {"max-size": "10m"},
                            "live-restore": True, "mtu": 1500, "dns": ["10.0.0.2"]}) == []
    assert "docker_daemon_allow_unknown_keys" in option_problems({"log-drivr": "x"})[0]
    assert option_problems({"log-drivr": "x"}, allow_unknown=True) == []


def test_the_settings_refuse_log_driver_5_and_unknown_keys_unless_allowed():
    from gpuhost import settings as S

    base = {"nvidia_driver_version": "570.172.08"}
    assert any("'log-driver' must be a string" in p for p in
               S.validate({**base, "docker_daemon_settings": {"log-driver": 5}}))
    assert any("not a daemon.json option" in p for p in
               S.validate({**base, "docker_daemon_settings": {"no-such": 1}}))
    assert not any("docker_daemon" in p for p in S.validate(
        {**base, "docker_daemon_settings": {"no-such": 1}, "docker_daemon_allow_unknown_keys": True}))


def test_a_setting_removed_from_the_inventory_is_removed_but_hand_written_keys_stay():
    from gpuhost.runtime.daemon_json import apply_settings

    first, managed = apply_settings({"debug": False}, default_runtime=True,
                                    extra={"log-opts": {"max-size": "10m"}, "mtu": 1400},
                                    previous=None)
    assert first["log-opts"] == {"max-size": "10m"} and first["mtu"] == 1400
    first["log-opts"]["max-file"] = "3"  # added by hand inside a managed object
    again, _ = apply_settings(first, default_runtime=False, extra={}, previous=managed)
    assert again == {"debug": False, "log-opts": {"max-file": "3"},
                     "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    # a value changed by hand is the user's now
    changed = {**first, "mtu": 9000}
    kept, _ = apply_settings(changed, default_runtime=True, extra={}, previous=managed)
    assert kept["mtu"] == 9000 and kept["default-runtime"] == "nvidia"


def test_a_hand_written_key_that_the_unit_passes_as_a_flag_is_found():
    from gpuhost.runtime.daemon_json import clash_message, dockerd_flags, flag_clashes

    argv = dockerd_flags("/usr/sbin/dockerd -H fd:// --containerd=/run/c.sock $DOCKER_OPTS",
                         {"DOCKER_OPTS": "--iptables=false --bridge=none"})
    assert argv[-2:] == ["--iptables=false", "--bridge=none"]
    clashes = flag_clashes({"hosts": ["unix:///x"], "iptables": False, "debug": True}, argv)
    assert clashes == [("hosts", "-H"), ("iptables", "--iptables")]
    assert 'sets "hosts" (flag -H), "iptables" (flag --iptables), which docker.service' in \
        clash_message("/etc/docker/daemon.json", clashes)
    assert flag_clashes({"live-restore": True}, argv) == []


def test_the_daemon_view_fact_reads_the_unit_the_environment_and_the_running_daemon():
    from gpuhost.facts.container import DockerDaemonView

    view = DockerDaemonView().process([
        "realpath=/srv/conf/daemon.json",
        'managed={"settings": {"mtu": 1400}, "default-runtime": false}',
        "unit=yes",
        "execstart={ path=/usr/sbin/dockerd ; argv[]=/usr/sbin/dockerd -H fd:// $DOCKER_OPTS ; "
        "ignore_errors=no ; start_time=[n/a] }",
        "environment=HTTP_PROXY=http://p:3128",
        'envline=DOCKER_OPTS="--iptables=false --bridge=none"',
        'daemon={"nvidia":{},"runc":{}}|runc|false|2',
    ])
    assert view["realpath"] == "/srv/conf/daemon.json"
    assert view["managed"] == {"settings": {"mtu": 1400}, "default-runtime": False}
    assert view["exec_start"] == "/usr/sbin/dockerd -H fd:// $DOCKER_OPTS"
    assert view["environment"] == {"HTTP_PROXY": "http://p:3128",
                                   "DOCKER_OPTS": "--iptables=false --bridge=none"}
    assert view["daemon"] == {"running": True, "runtimes": ["nvidia", "runc"],
                              "default_runtime": "runc", "live_restore": False,
                              "containers_running": 2}
    assert DockerDaemonView().process(["realpath=/etc/docker/daemon.json"])["daemon"]["running"] is False
