"""The NVIDIA CDI spec as a fact (gpuhost.runtime.cdi, facts cdi_specs) and container_runtime_mode
(issue 16): parsing, freshness, the audit's finding and drift, the mode rule, daemon.json."""

from __future__ import annotations

import hashlib

from pathlib import Path

import pytest

from gpuhost import health
from gpuhost.reports import audit
from gpuhost.runtime import cdi, daemon_json as rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
SPEC = (FIXTURES / "nvidia__2x-a100__570.172.08__mig.yaml").read_text()
A100_MIG = [("NVIDIA A100-SXM4-40GB", "Enabled", "Enabled"),
            ("NVIDIA A100-SXM4-40GB", "Disabled", "Disabled")]
SMI_LIST = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-1111-2222-3333-444444444444)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000000)\n"
            "  MIG 3g.20gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-00000001-1111-2222-3333-444444444444)\n")
LGI = [(0, "3g.20gb", 9), (0, "3g.20gb", 9)]


def section(*files: tuple[str, str]) -> str:
    return "".join(f"==> {path} <==\n{text}\n" for path, text in files)


@pytest.fixture
def host(make_state, lgi_table):
    """A host with two A100s, GPU 0 in MIG mode with two 3g.20gb devices, driver 570.172.08."""
    def make(specs: str | None, *, driver="570.172.08", smi_list=SMI_LIST, lgi=LGI,
             toolkit="1.18.2", running_default="runc", boot_unit=None):
        return make_state(driver=driver, gpus=A100_MIG, smi_list=smi_list, lgi=lgi_table(lgi),
                          cdi_specs=specs, toolkit=toolkit, running_default=running_default,
                          cdi_boot_unit=boot_unit)
    return make


def test_a_spec_is_parsed_for_its_kind_devices_and_the_driver_version_of_its_libraries():
    spec = cdi.parse_spec("/var/run/cdi/nvidia.yaml", SPEC)
    assert spec["kind"] == "nvidia.com/gpu" and spec["cdi_version"] == "0.5.0"
    assert spec["devices"][:3] == ["0", "0:0", "0:1"] and "all" in spec["devices"]
    # libnvidia-egl-wayland.so.1.1.13 and the firmware path carry no driver version
    assert spec["driver_versions"] == ["570.172.08"]
    assert spec["error"] is None


def test_a_json_spec_and_a_broken_one():
    import json
    import yaml

    as_json = json.dumps(yaml.safe_load(SPEC))
    assert cdi.parse_spec("/etc/cdi/nvidia.json", as_json)["devices"] == cdi.parse_spec(
        "x", SPEC)["devices"]
    broken = cdi.parse_spec("/etc/cdi/nvidia.yaml", "kind: [nvidia.com/gpu\n")
    assert broken["error"].startswith("not valid YAML/JSON") and broken["devices"] == []
    assert cdi.parse_spec("/etc/cdi/x.yaml", "- a\n")["error"] == "not a CDI spec (no mapping at the top)"


def test_the_section_output_is_split_per_file():
    text = section(("/etc/cdi/vendor.yaml", "kind: vendor.com/dev\ndevices: []"),
                   ("/var/run/cdi/nvidia.yaml", SPEC))
    files = cdi.split_files(text)
    assert [path for path, _ in files] == ["/etc/cdi/vendor.yaml", "/var/run/cdi/nvidia.yaml"]
    assert cdi.parse_specs(text)[1]["driver_versions"] == ["570.172.08"]


def test_a_spec_matching_the_gpus_mig_devices_and_loaded_driver_is_fresh(host):
    state = host(section(("/var/run/cdi/nvidia.yaml", SPEC)))
    judged = cdi.judge(state)
    assert judged["status"] == "fresh", judged
    assert judged["devices"] == ["0", "0:0", "0:1", "1", "GPU-00000000-1111-2222-3333-444444444444",
                                 "GPU-00000001-1111-2222-3333-444444444444",
                                 "MIG-aaaaaaaa-0000-5000-8000-000000000000",
                                 "MIG-aaaaaaaa-0000-5000-8000-000000000001", "all"]
    assert [f for f in health.findings(state) if f["id"].startswith("cdi")] == []


def test_a_mig_change_makes_the_spec_stale(host):
    """One MIG device destroyed: the spec names 0:1 and its UUID, which are gone."""
    smi = SMI_LIST.replace(
        "  MIG 3g.20gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)\n", "")
    state = host(section(("/var/run/cdi/nvidia.yaml", SPEC)), smi_list=smi, lgi=LGI[:1])
    judged = cdi.judge(state)
    assert judged["status"] == "stale"
    assert judged["problems"] == ["/var/run/cdi/nvidia.yaml: names device(s) the host does not "
                                  "have: 0:1, MIG-aaaaaaaa-0000-5000-8000-000000000001"]
    [finding] = [f for f in health.findings(state) if f["id"] == "cdi-spec-stale"]
    assert finding["severity"] == "warning" and finding["gpu"] is None
    assert "0:1" in finding["message"] and "nvidia-ctk cdi generate" in finding["message"]


def test_a_new_mig_device_the_spec_lacks_makes_it_stale(host):
    smi = SMI_LIST.replace("GPU 1:", "  MIG 1g.5gb      Device  2: (UUID: MIG-new)\nGPU 1:")
    judged = cdi.judge(host(section(("/var/run/cdi/nvidia.yaml", SPEC)), smi_list=smi))
    assert judged["problems"] == ["/var/run/cdi/nvidia.yaml: lacks device(s) the host has: "
                                  "0:2, MIG-new"]


def test_a_driver_upgrade_makes_the_spec_stale(host):
    """Loaded 580 now, the spec's libraries are 570's."""
    judged = cdi.judge(host(section(("/etc/cdi/nvidia.yaml", SPEC)), driver="580.95.05"))
    assert judged["status"] == "stale"
    assert judged["problems"] == ["/etc/cdi/nvidia.yaml: its libraries are driver 570.172.08, "
                                  "the loaded driver is 580.95.05"]


def test_every_nvidia_spec_is_judged_and_other_vendors_are_ignored(host):
    old = SPEC.replace("570.172.08", "550.163.01")
    state = host(section(("/etc/cdi/nvidia.yaml", old), ("/etc/cdi/other.yaml", "kind: x.com/y"),
                         ("/var/run/cdi/nvidia.yaml", SPEC)))
    judged = cdi.judge(state)
    assert judged["specs"] == ["/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml"]
    assert [p.split(":")[0] for p in judged["problems"]] == ["/etc/cdi/nvidia.yaml"]


def test_no_spec_is_missing_and_no_driver_is_unknown(host):
    assert cdi.judge(host(None))["status"] == "missing"
    unknown = host(section(("/var/run/cdi/nvidia.yaml", SPEC)), driver=None)
    assert cdi.judge(unknown)["status"] == "unknown"
    assert [f for f in health.findings(unknown) if f["id"].startswith("cdi")] == []
    assert cdi.judge({"gpus": []})["status"] == "unread"  # a state from before issue 16


@pytest.mark.parametrize(("setting", "toolkit", "docker", "mode"), [
    ("legacy", "1.18.2", "28.2.0", "legacy"),
    ("cdi", "1.17.8", "20.10.24", "cdi"),
    ("auto", "1.18.2", "25.0.0", "cdi"),
    ("auto", "1.18.2", "28.3.3", "cdi"),
    ("auto", "1.18.0", "26.1.5+dfsg1", "cdi"),
    ("auto", "1.17.8", "28.3.3", "legacy"),      # the toolkit keeps no spec fresh
    ("auto", "1.18.2", "24.0.7", "legacy"),      # Docker has no CDI devices
    ("auto", "1.18.2", "20.10.24+dfsg1", "legacy"),
    ("auto", "1.18.2", None, "legacy"),          # unknown: never a surprise
    ("auto", "1.20.0", "26.0.2", "legacy"),      # schema 0.7.0 needs Docker 26.1.0
    ("auto", "1.19.1", "25.0.5", "legacy"),
    ("auto", "1.20.0", "26.1.0", "cdi"),
    ("auto", "1.19.0", "25.0.5", "cdi"),         # 1.19.0 still wrote the older schema
])
def test_the_mode_rule(setting, toolkit, docker, mode):
    assert cdi.resolve_mode(setting, toolkit, docker) == mode


def test_the_spec_schema_of_toolkit_1_19_1_and_newer_needs_docker_26_1_and_containerd_1_7_16():
    """toolkit#1860, cloud-native-docs PR #419."""
    too_old = cdi.runtime_too_old_for_schema
    assert too_old("Docker", "1.20.0", "26.0.2") and too_old("Docker", "1.19.1", "25.0.0")
    assert not too_old("Docker", "1.20.0", "26.1.0") and not too_old("Docker", "1.18.2", "25.0.0")
    assert not too_old("Docker", "1.20.0", None)  # not known (not installed yet)
    assert too_old("containerd", "1.20.0", "containerd containerd.io 1.7.15 926c9586f")
    assert not too_old("containerd", "1.20.0", "containerd containerd.io 1.7.16 83031836b")
    assert too_old("containerd", "1.20.0",  # Debian 12's
                   "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u1")
    assert not too_old("containerd", "1.20.0", "containerd github.com/containerd/containerd/v2 "
                       "v2.3.0 abc")
    line = cdi.schema_refusal("Docker", "1.20.0", "26.0.2")
    assert "\n" not in line and "Docker 26.1.0 is the first" in line
    assert "container_toolkit_version 1.18.2" in line


def test_docker_without_cdi():
    assert cdi.docker_lacks_cdi("20.10.24+dfsg1") and cdi.docker_lacks_cdi("24.0.9")
    assert not cdi.docker_lacks_cdi("25.0.0") and not cdi.docker_lacks_cdi(None)


def test_cdi_mode_adds_docker_cdi_and_keeps_the_runtime_and_the_users_keys():
    existing = {"features": {"buildkit": True}, "log-driver": "json-file",
                "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime",
                                        "runtimeArgs": []}}}
    extra = rules.mode_settings({"log-opts": {"max-size": "10m"}}, "cdi")
    merged, managed = rules.apply_settings(existing, default_runtime=False, extra=extra,
                                           previous=None)
    assert merged["features"] == {"buildkit": True, "cdi": True}
    assert merged["runtimes"] == existing["runtimes"]  # left as the user wrote it
    assert merged["log-driver"] == "json-file" and merged["log-opts"] == {"max-size": "10m"}
    # back to legacy: gpuhost's features.cdi goes, the user's buildkit stays
    again, _ = rules.apply_settings(merged, default_runtime=False,
                                    extra=rules.mode_settings({"log-opts": {"max-size": "10m"}},
                                                              "legacy"), previous=managed)
    assert again["features"] == {"buildkit": True}
    assert rules.is_nvidia_runtime(again["runtimes"]["nvidia"])
    # a features.cdi the inventory sets wins
    assert rules.mode_settings({"features": {"cdi": False}}, "cdi") == {"features": {"cdi": False}}
    assert rules.mode_settings(None, "legacy") == {}


def test_the_audit_drift_in_cdi_mode(host):
    want = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.18.2"}
    missing = host(None)
    cdi_items = [i for i in audit.host_drift(missing, audit.desired_settings(
        {**want, "container_runtime_mode": "cdi"})) if i["item"] == "cdi_spec"]
    assert cdi_items == [{"item": "cdi_spec", "have": "missing", "want": "fresh",
                          "message": "cdi-spec-missing: no nvidia.com/gpu CDI spec in /etc/cdi "
                                     "or /var/run/cdi (container_runtime_mode cdi): run the "
                                     "deploy"}]
    # legacy (the default), and auto with this host's Docker 20.10: no spec needed
    for mode in ("legacy", "auto"):
        desired = audit.desired_settings({**want, "container_runtime_mode": mode})
        assert [i for i in audit.host_drift(missing, desired) if i["item"] == "cdi_spec"] == []
    stale = host(section(("/var/run/cdi/nvidia.yaml", SPEC)), driver="580.95.05")
    [item] = [i for i in audit.host_drift(stale, audit.desired_settings(
        {**want, "nvidia_driver_version": "580.95.05", "container_runtime_mode": "cdi"}))
        if i["item"] == "cdi_spec"]
    assert item["have"] == "stale" and item["message"].startswith("cdi-spec-stale: ")


def test_the_boot_unit_is_read_and_its_absence_is_drift_in_cdi_mode(host):
    """gpuhost-cdi-spec.service: the section's sha256sum and is-enabled lines; missing or
    disabled is the drift item cdi_boot_unit in cdi mode only."""
    text = cdi.boot_unit_text("/var/run/cdi/nvidia.yaml")
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert "ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml" in text
    assert "Before=docker.service containerd.service kubelet.service" in text
    # never ordered after multi-user.target: Docker is wanted by it (a cycle, NVIDIA #1735)
    assert "multi-user.target" not in text.split("[Install]")[0]
    spec = section(("/var/run/cdi/nvidia.yaml", SPEC))
    want = audit.desired_settings({"nvidia_driver_version": "570.172.08",
                                   "container_toolkit_version": "1.18.2",
                                   "container_runtime_mode": "cdi"})

    def items(state):
        return [(i["item"], i["have"]) for i in audit.host_drift(state, want)
                if i["item"].startswith("cdi")]

    enabled = host(spec, boot_unit=f"{digest}  {cdi.BOOT_UNIT_PATH}\nenabled\n")
    assert enabled["cdi"]["boot_unit"] == {"sha256": digest, "enabled": True}
    assert items(enabled) == []
    disabled = host(spec, boot_unit=f"{digest}  {cdi.BOOT_UNIT_PATH}\ndisabled\n")
    assert items(disabled) == [("cdi_boot_unit", "disabled")]
    absent = host(spec)
    assert absent["cdi"]["boot_unit"] is None
    assert items(absent) == [("cdi_boot_unit", "missing")]
    legacy = audit.desired_settings({"nvidia_driver_version": "570.172.08",
                                     "container_toolkit_version": "1.18.2"})
    assert [i for i in audit.host_drift(absent, legacy) if i["item"].startswith("cdi")] == []
    # the section's path is gpuhost.runtime.cdi's
    from gpuhost.facts.script import SECTIONS
    assert SECTIONS["cdi_boot_unit"].count(cdi.BOOT_UNIT_PATH) == 2


FAILED_UNIT = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=start-limit-hit\n"
DONE_UNIT = "LoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\n"


def test_nvidias_refresh_unit_is_read_and_a_failed_one_is_a_health_finding(make_state):
    """Issue 37: nvidia-cdi-refresh.service started before the driver was active hits its start
    limit and stays failed (Azure/aks-gpu PR #175): the warning cdi-refresh-failed; a unit that
    ran (oneshot: inactive, result success) or none at all is no finding."""
    assert cdi.parse_refresh_unit(0, FAILED_UNIT) == {
        "active": "failed", "sub": "failed", "result": "start-limit-hit", "failed": True}
    assert cdi.parse_refresh_unit(0, DONE_UNIT)["failed"] is False
    assert cdi.parse_refresh_unit(0, "LoadState=not-found\nActiveState=inactive\n") is None
    assert cdi.parse_refresh_unit(3, "") is None
    failed = make_state(toolkit="1.20.0", cdi_refresh_unit=FAILED_UNIT)
    [finding] = [f for f in health.findings(failed) if f["id"] == "cdi-refresh-failed"]
    assert finding["severity"] == "warning"
    assert "start-limit-hit" in finding["message"] and "run gpuhost's deploy" in finding["message"]
    for unit in (DONE_UNIT, None):
        state = make_state(toolkit="1.20.0", cdi_refresh_unit=unit)
        assert "cdi-refresh-failed" not in {f["id"] for f in health.findings(state)}
