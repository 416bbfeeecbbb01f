"""Drift, CUDA answers and the audit document (gpuhost.reports.audit), on host states assembled by
the real fact code (facts.assemble.host_state) from hand-written section outputs (the
`make_state`, `desired`, `items` and `lgi_table` fixtures of tests/conftest.py)."""

from __future__ import annotations

import pytest

from gpuhost.reports import audit

def test_a_converged_host_has_no_drift(make_state, desired):
    assert audit.host_drift(make_state(), desired()) == []


def test_other_driver_says_what_is_and_what_is_wanted(make_state, items):
    drift = items(make_state(driver="550.163.01"))
    assert set(drift) == {"driver"}
    assert drift["driver"]["have"] == "550.163.01"
    assert drift["driver"]["want"] == "570.172.08"
    assert "550.163.01" in drift["driver"]["message"] and "570.172.08" in drift["driver"]["message"]


def test_packages_newer_than_the_module_is_a_pending_reboot(make_state, items):
    drift = items(make_state(driver="550.163.01", packages="570.172.08"))
    assert drift["reboot_pending"]["have"] == "loaded 550.163.01, packages 570.172.08"
    assert set(drift) == {"reboot_pending"}  # the packages are the wanted ones
    drift = items(make_state(driver="550.163.01", packages="560.35.03"))
    assert drift["driver"]["have"] == "560.35.03 (loaded 550.163.01)"
    assert set(drift) == {"driver", "reboot_pending"}


def test_installed_but_not_loaded_is_a_pending_reboot_only(make_state, items):
    drift = items(make_state(driver=None, packages="570.172.08"))
    assert set(drift) == {"reboot_pending"}
    assert "not loaded" in drift["reboot_pending"]["have"]


def test_no_driver_at_all(make_state, items):
    drift = items(make_state(driver=None, packages=""))
    assert drift["driver"]["have"] == "not installed"


def test_unset_driver_version_is_not_checked(make_state):
    drift = audit.host_drift(make_state(driver="550.163.01"),
                             audit.desired_settings({"container_toolkit_version": "1.17.8"}))
    assert drift == []


def test_toolkit_version_and_mixed_packages(make_state, items):
    assert items(make_state(toolkit="1.16.2"))["toolkit"]["have"] == "1.16.2"
    assert "toolkit" not in items(make_state(), container_toolkit_version="1.17.8-1")
    state = make_state()
    state["toolkit"].update(consistent=False, version=None, versions_seen=["1.16.2", "1.17.8"])
    assert "disagree" in items(state)["toolkit"]["message"]


def test_default_runtime_wanted(make_state, items):
    assert "default_runtime" not in items(make_state(), nvidia_default_runtime=False)
    drift = items(make_state(), nvidia_default_runtime=True)
    assert drift["default_runtime"]["have"] == "runc (unset)"
    configured = ('{"default-runtime": "nvidia", "runtimes": {"nvidia": '
                  '{"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}}}')
    assert items(make_state(daemon_json=configured), nvidia_default_runtime=True) == {}
    stale = items(make_state(daemon_json=configured, running_default="runc"),
                  nvidia_default_runtime=True)
    assert "restart Docker" in stale["default_runtime"]["message"]
    assert "Docker is not installed" in items(make_state(docker=False), nvidia_default_runtime=True)[
        "default_runtime"]["message"]


def test_missing_nvidia_runtime_and_broken_daemon_json(make_state, items):
    assert items(make_state(daemon_json=None))["nvidia_runtime"]["want"] == "defined"
    broken = items(make_state(daemon_json='{"runtimes": {,}'))
    assert set(broken) == {"daemon_json"}


def test_mig_mode_and_pending_change(make_state, desired, items):
    a100 = [("NVIDIA A100-SXM4-40GB", "Disabled", "Enabled")] * 2
    drift = audit.host_drift(make_state(gpus=a100), desired(mig_mode="enabled"))
    assert [i["item"] for i in drift] == ["mig_mode", "mig_mode"]
    assert "pending enabled" in drift[0]["have"]
    assert items(make_state(gpus=a100), mig_mode="disabled") == {}


def test_mig_on_hosts_without_mig_gpus(make_state, items):
    l4 = [("NVIDIA L4", "N/A", "N/A")] * 3
    assert items(make_state(gpus=l4), mig_mode="enabled")["mig_mode"]["have"] == "no MIG-capable GPU"
    assert items(make_state(gpus=l4), mig_mode="disabled") == {}
    lspci = '07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [20b0]" -ra1 "" ""\n'
    unknown = items(make_state(driver=None, packages="", lspci=lspci), mig_mode="enabled")
    assert unknown["mig_mode"]["have"].startswith("unknown")


def test_mig_layout_by_name_and_by_profile_id(make_state, items, lgi_table):
    gpus = [("NVIDIA A100-SXM4-40GB", "Enabled", "Enabled")]
    layout = lgi_table([(0, "3g.20gb", 9), (0, "3g.20gb", 9)])
    state = make_state(gpus=gpus, lgi=layout)
    assert items(state, mig_mode="enabled", mig_layout=["3g.20gb", "3g.20gb"]) == {}
    assert items(state, mig_mode="enabled", mig_layout=[9, "MIG 3g.20gb"]) == {}
    drift = items(state, mig_mode="enabled", mig_layout=["7g.40gb"])
    assert drift["mig_layout"]["have"] == "3g.20gb + 3g.20gb"
    assert drift["mig_layout"]["want"] == "7g.40gb"


def test_invalid_settings_stop_the_audit_with_every_problem():
    with pytest.raises(audit.AuditError) as error:
        audit.desired_settings({"nvidia_driver_version": 570, "mig_mode": "on",
                                "mig_layout": ["3g.20gb"]}, host_name="gpu-07")
    text = str(error.value)
    assert "gpu-07: nvidia_driver_version" in text and "quote it" in text
    assert "mig_mode" in text and "mig_layout" in text


@pytest.mark.parametrize(("raw", "expected"), [(12.4, "12.4"), ("12.8.1", "12.8.1"),
                                                ("12.8.0", "12.8.0"), (None, None), (13.0, "13.0")])
def test_cuda_option_accepts_float_int_and_str(raw, expected):
    assert audit.parse_cuda(raw) == expected


@pytest.mark.parametrize("raw", [12, "12.10", True, "twelve"])
def test_cuda_option_rejects_unknown_versions(raw):
    with pytest.raises(audit.AuditError, match="cuda="):
        audit.parse_cuda(raw)


def test_cuda_native_forward_minor_and_no(make_state):
    native = audit.cuda_answer(make_state(driver="550.163.01"), "12.4")
    assert (native["verdict"], native["driver_needed"]) == ("native", "550.54.14")
    # A100 is a data-center GPU: cuda-compat brings CUDA 12.8 to the 550 driver
    forward = audit.cuda_answer(make_state(driver="550.163.01"), "12.8")
    assert forward["verdict"] == "forward-compat" and forward["driver_needed"] == "570.26"
    geforce = [("NVIDIA GeForce RTX 4090", "N/A", "N/A")]
    minor = audit.cuda_answer(make_state(driver="550.163.01", gpus=geforce), "12.8")
    assert minor["verdict"] == "minor-version-compat"
    no = audit.cuda_answer(make_state(driver="550.163.01", gpus=geforce), "13.0")
    assert no["verdict"] == "no" and "580.65.06" in no["message"]
    none = audit.cuda_answer(make_state(driver=None, packages=""), "12.4")
    assert none["verdict"] == "no" and none["driver"] is None


def test_document_statuses_summary_and_exit_codes(make_state, desired):
    results = {"gpu-01": make_state(), "gpu-02": make_state(driver="550.163.01")}
    wants = {name: desired() for name in results}
    doc = audit.build(results, wants, cuda="12.4", generated_at="2026-01-01T00:00:00Z")
    assert doc["schema"] == "gpuhost.audit/2"
    assert [h["status"] for h in doc["hosts"]] == ["ok", "drift"]
    assert doc["summary"]["drift_items"] == {"driver": 1}
    assert doc["summary"]["driver_versions"] == {"550.163.01": 1, "570.172.08": 1}
    assert doc["summary"]["cuda"]["hosts"]["native"] == ["gpu-01", "gpu-02"]
    assert audit.exit_code(doc) == audit.EXIT_DRIFT
    assert doc["hosts"][0]["facts"]["driver"]["loaded_version"] == "570.172.08"
    results["gpu-03"] = audit.HostError("unreachable", "connection refused")
    wants["gpu-03"] = desired()
    doc = audit.build(results, wants)
    assert audit.exit_code(doc) == audit.EXIT_UNREACHABLE
    assert doc["hosts"][2]["observed"] is None and doc["hosts"][2]["error"] == "connection refused"
    assert audit.exit_code(audit.build({"a": make_state()}, {"a": desired()})) == audit.EXIT_OK


def test_host_error_status_is_checked():
    with pytest.raises(ValueError):
        audit.HostError("down", "x")


def test_urls_with_credentials_are_masked_in_the_kept_facts(make_state, desired):
    secret = ('{"proxies": {"http-proxy": "http://ops:s3cret@proxy.example:3128"}, '
              '"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}')
    doc = audit.build({"a": make_state(daemon_json=secret)}, {"a": desired()})
    facts = doc["hosts"][0]["facts"]
    assert facts["docker"]["config"]["proxies"]["http-proxy"] == "http://***@proxy.example:3128"
    assert "s3cret" not in repr(doc)
