"""kubernetes_profile (gpuhost.kubernetes, docs/kubernetes.md): contradictions refused before
any host is read, one line each; the audit's finding when the node's IMEX contradicts the
profile, and CDI in containerd judged per profile."""

from __future__ import annotations

import pytest

from gpuhost import converged, kubernetes
from gpuhost import settings as S
from gpuhost.reports import audit

from tests.unit.test_settings import minimal

NVL = {"nvidia_fabric": "nvl", "nvidia_imex_peers": ["10.0.0.1", "10.0.0.2"]}


def test_the_default_is_none_and_a_bad_value_is_one_line_naming_the_choices():
    assert S.defaults()["kubernetes_profile"] == "none"
    [problem] = S.validate(minimal(kubernetes_profile="dra-host"))
    assert problem.startswith("kubernetes_profile:") and "dra-host-managed-imex" in problem


@pytest.mark.parametrize("profile", ["dra", "dra-host-managed-imex", "gpu-operator"])
def test_every_profile_needs_containerds_nvidia_runtime(profile):
    problems = S.validate(minimal(kubernetes_profile=profile, **NVL))
    assert len(problems) == 1, problems
    assert "containerd_nvidia_runtime: true" in problems[0] and profile in problems[0]
    assert S.validate(minimal(kubernetes_profile=profile, containerd_nvidia_runtime=True,
                              **NVL)) == []


def test_host_managed_imex_without_an_nvl_fabric_is_refused():
    [problem] = S.validate(minimal(kubernetes_profile="dra-host-managed-imex",
                                   containerd_nvidia_runtime=True))
    assert "nvidia_fabric is auto" in problem and "kubernetes_profile: dra" in problem


def _state(make_state, enabled: str, active: str) -> dict:
    state = make_state()
    state["fabric"] = {"services": {"nvidia-imex": {"enabled": enabled, "active": active}},
                       "nvlsm": {}}
    return state


def _items(state: dict, **want) -> list[str]:
    desired = audit.desired_settings({"nvidia_driver_version": "570.172.08",
                                      "container_toolkit_version": "1.17.8", **want})
    return [r["item"] for r in converged.judge(state, desired).reasons]


def test_dra_with_imex_running_is_drift_and_masked_is_not(make_state):
    want = {"kubernetes_profile": "dra", **{k: v for k, v in NVL.items() if k != "nvidia_imex_peers"}}
    assert "kubernetes_imex" in _items(_state(make_state, "enabled", "active"), **want)
    assert "kubernetes_imex" in _items(_state(make_state, "disabled", "inactive"), **want)
    assert "kubernetes_imex" not in _items(_state(make_state, "masked", "inactive"), **want)


def test_back_to_none_on_nvl_a_masked_imex_is_drift(make_state):
    want = {"kubernetes_profile": "none", "nvidia_fabric": "nvl"}
    assert "kubernetes_imex" in _items(_state(make_state, "masked", "inactive"), **want)
    assert "kubernetes_imex" not in _items(_state(make_state, "enabled", "active"), **want)
    # a host without NVL (auto: no NVSwitch) is not judged on IMEX
    assert "kubernetes_imex" not in _items(_state(make_state, "masked", "inactive"),
                                           kubernetes_profile="none")


def test_the_message_says_what_is_wrong_and_what_to_do():
    [(_item, have, want, message)] = kubernetes.drift(
        {"fabric": {"services": {"nvidia-imex": {"enabled": "enabled", "active": "active"}}}},
        "dra", "nvl")
    assert (have, want) == ("enabled/active", "masked/inactive")
    assert "one IMEX daemon per ComputeDomain" in message and message.endswith("run the deploy")


def test_cdi_in_containerd_per_profile():
    assert [p for p in kubernetes.PROFILES if kubernetes.cdi_in_containerd(p)] == [
        "dra", "dra-host-managed-imex"]
    assert [p for p in kubernetes.PROFILES if kubernetes.imex_masked(p)] == ["dra"]


def test_a_dra_profile_on_a_containerd_without_cdi_is_refused_in_one_line():
    debian = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
    problem = kubernetes.containerd_problem("dra", debian)
    assert "containerd 1.6.20~ds1 does not have" in problem and "\n" not in problem
    assert kubernetes.containerd_problem("none", debian) is None
    assert kubernetes.containerd_problem("gpu-operator", debian) is None
    assert kubernetes.containerd_problem("dra", "containerd containerd.io v2.1.9 abc") is None
    assert kubernetes.containerd_problem("dra-host-managed-imex",
                                         "containerd containerd.io 1.7.27 05044ec") is None
