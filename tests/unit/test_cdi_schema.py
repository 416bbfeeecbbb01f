"""The CDI spec schema of toolkit 1.19.1+ (0.7.0) against the engines that read it
(gpuhost.runtime.cdi_schema): the one-line refusal before any change for Docker and
containerd, the podman warning, and containerd 2.3 accepted with the same drop-in."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuhost.runtime import cdi_schema as S

DEBIAN12_CONTAINERD = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1"
CONTAINERD_23 = "containerd github.com/containerd/containerd/v2 v2.3.0 8c3d5f0a"


def settings(**over):
    base = {"container_toolkit_version": "1.20.0", "docker_source": "distro",
            "docker_version": None}
    return SimpleNamespace(**{**base, **over})


def host(docker="20.10.24+dfsg1", containerd=DEBIAN12_CONTAINERD, installed=True):
    return {"docker": {"docker_version": docker, "docker_installed": installed},
            "containerd": {"installed": containerd is not None, "version": containerd}}


def test_debian12s_docker_and_containerd_are_refused_in_one_line_naming_both_versions():
    line = S.preflight_problem(settings(), host(), docker_cdi=True, containerd_cdi=True)
    assert line is not None and "\n" not in line
    assert line.startswith("container_runtime_mode is cdi but Docker 20.10.24+dfsg1 and "
                           "containerd 1.6.20~ds1 cannot read the CDI spec schema 0.7.0 that "
                           "toolkit 1.20.0 writes (Docker 26.1.0 and containerd 1.7.16 are the "
                           "first that do)"), line
    # what to do: the three ways out
    assert "upgrade to Docker 26.1.0 and containerd 1.7.16 or newer" in line
    assert "container_toolkit_version 1.18.2" in line and "container_runtime_mode legacy" in line


def test_one_engine_alone_and_docker_older_than_25_is_told_26_1_not_25():
    line = S.preflight_problem(settings(), host(), docker_cdi=True, containerd_cdi=False)
    assert "Docker 20.10.24+dfsg1 cannot read" in line and "containerd" not in line
    assert "(Docker 26.1.0 is the first that does)" in line
    line = S.preflight_problem(settings(), host(docker="27.5.1"), docker_cdi=True,
                               containerd_cdi=True)
    assert "but containerd 1.6.20~ds1 cannot read" in line and "Docker" not in line.split(":")[0]


@pytest.mark.parametrize("over, state, why", [
    ({"container_toolkit_version": "1.18.2"}, host(docker="25.0.5"), "schema 0.5.0: read"),
    ({"container_toolkit_version": "1.19.0"}, host(docker="25.0.5"),
     "1.19.0 still wrote the older schema"),
    ({}, host(docker="26.1.5+dfsg1", containerd="containerd containerd.io 1.7.16 83031836b"),
     "new enough"),
    ({"docker_source": "docker"}, host(), "Docker's repository replaces docker.io: checked "
                                          "after the Docker step"),
    ({}, host(docker=None, containerd=None, installed=False), "nothing installed yet"),
    ({"docker_source": "distro", "docker_version": "26.1.5"}, host(),
     "pinned to a version that reads it (containerd may come with it: later)"),
])
def test_no_refusal_before_any_change(over, state, why):
    assert S.preflight_problem(settings(**over), state, docker_cdi=True,
                               containerd_cdi=True) is None, why


def test_a_pinned_docker_too_old_is_refused_before_it_is_installed():
    line = S.preflight_problem(settings(docker_source="docker", docker_version="26.0.2"),
                               host(docker=None, containerd=None, installed=False),
                               docker_cdi=True, containerd_cdi=True)
    assert "Docker 26.0.2 cannot read" in line


def test_a_docker_without_cdi_on_toolkit_1_18_is_refused_before_any_change_too():
    line = S.preflight_problem(settings(container_toolkit_version="1.18.2"), host(),
                               docker_cdi=True, containerd_cdi=True)
    assert line.startswith("container_runtime_mode is cdi but Docker 20.10.24+dfsg1 has no CDI "
                           "support (Docker 25.0 is the first"), line


def test_legacy_mode_and_no_drop_in_cdi_check_nothing():
    assert S.preflight_problem(settings(), host(), docker_cdi=False, containerd_cdi=False) is None


def test_the_late_checks_name_26_1_for_a_docker_without_cdi():
    """roles.cdi.require_docker_cdi checks the schema first: a Docker 20.10 host on toolkit
    1.20 is told the version that reads the spec, not the first with CDI (25.0)."""
    assert S.runtime_too_old_for_schema("Docker", "1.20.0", "20.10.24+dfsg1")
    assert S.docker_lacks_cdi("20.10.24+dfsg1")
    assert "Docker 26.1.0 is the first" in S.schema_refusal("Docker", "1.20.0", "20.10.24+dfsg1")


def test_containerd_2_3_reads_schema_0_7_and_takes_the_version_3_drop_in():
    """containerd 2.3 (the first annual LTS): no real binary in Debian's archive; the rules
    treat it as every 2.x: config version 3, the io.containerd.cri.v1.runtime plugin."""
    from gpuhost import kubernetes
    from gpuhost.runtime import containerd as C

    assert not S.runtime_too_old_for_schema("containerd", "1.20.0", CONTAINERD_23)
    assert S.engine_version(CONTAINERD_23) == "2.3.0"
    assert kubernetes.containerd_problem("dra", CONTAINERD_23) is None
    assert C.major_version(CONTAINERD_23) == 2
    assert C.config_version({}, 2) == 3
    config = C.parse('version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n')
    assert C.problems(config, C.CONFIG, 3, 2) == []
    drop_in = C.drop_in_config(config, 3, enable_cdi=True)
    cri = drop_in["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["enable_cdi"] is True
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == C.BINARY
    assert drop_in == C.drop_in_config(config, C.config_version(config, C.major_version(
        "containerd containerd.io 2.1.9 abc")), enable_cdi=True)  # the 2.1 drop-in, as proven


SPEC_07 = {"path": "/var/run/cdi/nvidia.yaml", "kind": "nvidia.com/gpu", "cdi_version": "0.7.0"}
SPEC_05 = {**SPEC_07, "cdi_version": "0.5.0"}


@pytest.mark.parametrize("podman, specs, warned", [
    ("4.3.1+ds1", [SPEC_07], True),        # Debian 12's
    ("4.9.3", [SPEC_07], True),            # Ubuntu 24.04's (toolkit#1860)
    ("4.3.1+ds1", [SPEC_05], False),       # toolkit 1.18's spec: read
    ("5.1.0", [SPEC_07], False),
    (None, [SPEC_07], False),              # no podman
    ("4.3.1+ds1", [], False),              # no spec
    ("4.3.1+ds1", [{**SPEC_07, "kind": "example.com/dev"}], False),
])
def test_podman_older_than_5_1_next_to_a_schema_0_7_spec_is_a_warning(podman, specs, warned):
    from gpuhost import health

    state = {"cdi": {"specs": specs, "podman": podman}}
    problem = S.podman_problem(state)
    assert (problem is not None) == warned
    found = [f for f in health.findings(state) if f["id"] == "cdi-spec-podman-unreadable"]
    assert len(found) == int(warned)
    if warned:
        assert found[0]["severity"] == "warning"
        assert "older than 5.1.0, the first podman NVIDIA lists" in problem
        assert "/var/run/cdi/nvidia.yaml" in problem
        assert "\n" not in problem


def test_the_fact_reads_podmans_package_version():
    from gpuhost.facts.assemble_container import cdi_state

    sections = {"dpkg": {"rc": 0, "out": "podman\t4.3.1+ds1-8+deb12u1\tii \n"},
                "cdi_specs": {"rc": 0, "out": ""}}
    assert cdi_state(sections)["podman"] == "4.3.1+ds1"
    assert cdi_state({"cdi_specs": {"rc": 0, "out": ""}})["podman"] is None


@pytest.mark.parametrize("over, installed, kept", [
    ({"docker_source": "none"}, False, True),
    ({"docker_source": "distro"}, True, True),
    ({"docker_source": "distro"}, False, False),          # apt installs Docker (and containerd)
    ({"docker_source": "distro", "docker_version": "20.10.24"}, True, False),  # pinned: may move
    ({"docker_source": "docker"}, True, False),           # Docker's packages replace Debian's
    ({"docker_source": "local"}, True, False),
])
def test_which_runs_keep_dockers_packages(over, installed, kept):
    """What the before-any-change checks may trust (the DRA profile's containerd too)."""
    assert S.docker_packages_kept(settings(**over), host(installed=installed)) is kept


def test_the_deploys_check_before_any_change_refuses_and_logs_podman(monkeypatch):
    """roles.cdi.preflight_problem (called by roles.common.host_ready): cdi mode with the
    containerd drop-in on Debian 12's engines is the one line; podman 4.3.1 beside a schema
    0.7.0 spec is logged as a warning and refuses nothing; a DRA profile on containerd 1.6
    with docker_source none is refused before any change too."""
    from gpuhost.roles import cdi as role

    logged = []
    monkeypatch.setattr(role, "host", SimpleNamespace(log=lambda text, *a: logged.append(text)))
    state = {**host(), "cdi": {"specs": [SPEC_07], "podman": "4.3.1+ds1"}}
    monkeypatch.setattr(role, "host_state", lambda: state)
    config = settings(container_runtime_mode="cdi", containerd_nvidia_runtime=True,
                      kubernetes_profile="none")
    monkeypatch.setattr(role, "host_settings", lambda: config)
    line = role.preflight_problem()
    assert "Docker 20.10.24+dfsg1 and containerd 1.6.20~ds1 cannot read" in line
    assert len(logged) == 1 and logged[0].startswith("warning: podman 4.3.1+ds1 is older")

    config = settings(container_runtime_mode="legacy", containerd_nvidia_runtime=False,
                      kubernetes_profile="none")
    assert role.preflight_problem() is None  # podman alone refuses nothing
    config = settings(container_runtime_mode="legacy", containerd_nvidia_runtime=True,
                      kubernetes_profile="dra", docker_source="none")
    assert "kubernetes_profile: dra needs CDI in containerd" in role.preflight_problem()
    state["containerd"]["version"] = "containerd containerd.io 1.7.10 4e1fe7492"
    line = role.preflight_problem()
    assert line.startswith("kubernetes_profile dra turns CDI on in containerd but containerd "
                           "1.7.10 cannot read the CDI spec schema 0.7.0"), line
    assert line.endswith("or use kubernetes_profile none; gpuhost left the runtime's "
                         "configuration as it was"), line
