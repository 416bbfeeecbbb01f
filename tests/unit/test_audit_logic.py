"""Drift, CUDA answers and the audit document (gpuhost.audit), on host states assembled by
the real fact code (facts.assemble.host_state) from hand-written section outputs."""

from __future__ import annotations

import pytest

from facts import assemble
from facts.script import ALL_SECTIONS
from gpuhost import audit

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
MODULE = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  "
          "(builder@host)  Tue Jul  8 18:44:13 UTC 2025\nGCC version:  gcc version 12.2.0\n")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "libnvidia-container-tools", "libnvidia-container1")
ARCH = {"A100": "Ampere", "H100": "Hopper", "L4": "Ada Lovelace", "T4": "Turing",
        "GeForce RTX 4090": "Ada Lovelace"}


def smi_xml(gpus: list[tuple[str, str, str]], driver: str) -> str:
    """``nvidia-smi -q -x`` for GPUs given as (product name, current MIG, pending MIG)."""
    body = ""
    for index, (name, current, pending) in enumerate(gpus):
        arch = next(a for key, a in ARCH.items() if key in name)
        body += (f'<gpu id="00000000:{7 + index:02X}:00.0"><product_name>{name}</product_name>'
                 f"<product_architecture>{arch}</product_architecture>"
                 "<persistence_mode>Enabled</persistence_mode><mig_mode>"
                 f"<current_mig>{current}</current_mig><pending_mig>{pending}</pending_mig>"
                 f"</mig_mode><uuid>GPU-0000000{index}-1111-2222-3333-444444444444</uuid>"
                 f"<pci><pci_bus_id>00000000:{7 + index:02X}:00.0</pci_bus_id></pci>"
                 "<fb_memory_usage><total>40960 MiB</total></fb_memory_usage>"
                 "<processes></processes></gpu>")
    return (f'<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>{driver}</driver_version>'
            f"<cuda_version>12.8</cuda_version><attached_gpus>{len(gpus)}</attached_gpus>"
            f"{body}</nvidia_smi_log>\n")


def lgi_table(rows: list[tuple[int, str, int]]) -> str:
    """``nvidia-smi mig -lgi`` with (gpu, profile name, profile id) rows."""
    lines = ["+----------------------------------------------------+",
             "| GPU instances:                                     |",
             "| GPU   Name             Profile  Instance   Placement  |",
             "|                          ID       ID       Start:Size |",
             "|====================================================|"]
    for number, (gpu, profile, pid) in enumerate(rows):
        lines += [f"|   {gpu}  MIG {profile:<12} {pid:>4}     {number + 1:>4}        0:4     |",
                  "+----------------------------------------------------+"]
    return "\n".join(lines) + "\n"


def make_state(driver: str | None = "570.172.08", packages: str | None = None,
               gpus: list[tuple[str, str, str]] | None = None, toolkit: str | None = "1.17.8",
               docker: bool = True, daemon_json: str | None = '{"runtimes": {"nvidia": '
               '{"path": "nvidia-container-runtime", "args": []}}}', running_default: str | None
               = None, lgi: str | None = None, lspci: str | None = None, os_release: str = DEBIAN):
    """A GpuHostState as the fact returns it; ``packages`` defaults to the loaded driver's."""
    sections = {name: {"rc": 127, "out": ""} for name in ALL_SECTIONS}
    sections.update({name: {"rc": 3, "out": ""} for name in ("proc_version", "daemon_json")})
    sections["os_release"] = {"rc": 0, "out": os_release}
    sections["kernel"] = {"rc": 0, "out": "6.1.0-56-amd64\nx86_64"}
    packages = driver if packages is None else packages
    dpkg = f"nvidia-open\t{packages}-1\tii \n" if packages else ""
    if toolkit:
        dpkg += "".join(f"{name}\t{toolkit}-1\tii \n" for name in TOOLKIT_PACKAGES)
    sections["dpkg"] = {"rc": 0, "out": dpkg}
    gpus = [("NVIDIA A100-SXM4-40GB", "Disabled", "Disabled")] if gpus is None else gpus
    if driver:
        sections["proc_version"] = {"rc": 0, "out": MODULE.format(v=driver)}
        sections["smi_xml"] = {"rc": 0, "out": smi_xml(gpus, driver)}
    elif packages:
        sections["smi_xml"] = {"rc": 9, "out": "NVIDIA-SMI has failed because it couldn't "
                               "communicate with the NVIDIA driver."}
    if lgi is not None:
        sections["mig_lgi"] = {"rc": 0, "out": lgi}
    if lspci is not None:
        sections["lspci"] = {"rc": 0, "out": lspci}
    if docker:
        sections["docker_version"] = {"rc": 0, "out": "Docker version 20.10.24, build 297e128"}
        if daemon_json is not None:
            sections["daemon_json"] = {"rc": 0, "out": daemon_json}
        if running_default:
            sections["docker_info"] = {"rc": 0, "out": f'{{"nvidia":{{}},"runc":{{}}}}\t'
                                                       f"{running_default}\t20.10.24"}
    return assemble.host_state(sections)


def desired(**overrides):
    data = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8"}
    data.update(overrides)
    return audit.desired_settings(data)


def items(state, **overrides):
    return {item["item"]: item for item in audit.host_drift(state, desired(**overrides))}


def test_a_converged_host_has_no_drift():
    assert audit.host_drift(make_state(), desired()) == []


def test_other_driver_says_what_is_and_what_is_wanted():
    drift = items(make_state(driver="550.163.01"))
    assert set(drift) == {"driver"}
    assert drift["driver"]["have"] == "550.163.01"
    assert drift["driver"]["want"] == "570.172.08"
    assert "550.163.01" in drift["driver"]["message"] and "570.172.08" in drift["driver"]["message"]


def test_packages_newer_than_the_module_is_a_pending_reboot():
    drift = items(make_state(driver="550.163.01", packages="570.172.08"))
    assert drift["reboot_pending"]["have"] == "loaded 550.163.01, packages 570.172.08"
    assert set(drift) == {"reboot_pending"}  # the packages are the wanted ones
    drift = items(make_state(driver="550.163.01", packages="560.35.03"))
    assert drift["driver"]["have"] == "560.35.03 (loaded 550.163.01)"
    assert set(drift) == {"driver", "reboot_pending"}


def test_installed_but_not_loaded_is_a_pending_reboot_only():
    drift = items(make_state(driver=None, packages="570.172.08"))
    assert set(drift) == {"reboot_pending"}
    assert "not loaded" in drift["reboot_pending"]["have"]


def test_no_driver_at_all():
    drift = items(make_state(driver=None, packages=""))
    assert drift["driver"]["have"] == "not installed"


def test_unset_driver_version_is_not_checked():
    drift = audit.host_drift(make_state(driver="550.163.01"),
                             audit.desired_settings({"container_toolkit_version": "1.17.8"}))
    assert drift == []


def test_toolkit_version_and_mixed_packages():
    assert items(make_state(toolkit="1.16.2"))["toolkit"]["have"] == "1.16.2"
    assert "toolkit" not in items(make_state(), container_toolkit_version="1.17.8-1")
    state = make_state()
    state["toolkit"].update(consistent=False, version=None, versions_seen=["1.16.2", "1.17.8"])
    assert "disagree" in items(state)["toolkit"]["message"]


def test_default_runtime_wanted():
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


def test_missing_nvidia_runtime_and_broken_daemon_json():
    assert items(make_state(daemon_json=None))["nvidia_runtime"]["want"] == "defined"
    broken = items(make_state(daemon_json='{"runtimes": {,}'))
    assert set(broken) == {"daemon_json"}


def test_mig_mode_and_pending_change():
    a100 = [("NVIDIA A100-SXM4-40GB", "Disabled", "Enabled")] * 2
    drift = audit.host_drift(make_state(gpus=a100), desired(mig_mode="enabled"))
    assert [i["item"] for i in drift] == ["mig_mode", "mig_mode"]
    assert "pending enabled" in drift[0]["have"]
    assert items(make_state(gpus=a100), mig_mode="disabled") == {}


def test_mig_on_hosts_without_mig_gpus():
    l4 = [("NVIDIA L4", "N/A", "N/A")] * 3
    assert items(make_state(gpus=l4), mig_mode="enabled")["mig_mode"]["have"] == "no MIG-capable GPU"
    assert items(make_state(gpus=l4), mig_mode="disabled") == {}
    lspci = '07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [20b0]" -ra1 "" ""\n'
    unknown = items(make_state(driver=None, packages="", lspci=lspci), mig_mode="enabled")
    assert unknown["mig_mode"]["have"].startswith("unknown")


def test_mig_layout_by_name_and_by_profile_id():
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


def test_cuda_native_forward_minor_and_no():
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


def test_document_statuses_summary_and_exit_codes():
    results = {"gpu-01": make_state(), "gpu-02": make_state(driver="550.163.01")}
    wants = {name: desired() for name in results}
    doc = audit.build(results, wants, cuda="12.4", generated_at="2026-01-01T00:00:00Z")
    assert doc["schema"] == "gpuhost.audit/1"
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


def test_urls_with_credentials_are_masked_in_the_kept_facts():
    secret = ('{"proxies": {"http-proxy": "http://ops:s3cret@proxy.example:3128"}, '
              '"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}')
    doc = audit.build({"a": make_state(daemon_json=secret)}, {"a": desired()})
    facts = doc["hosts"][0]["facts"]
    assert facts["docker"]["config"]["proxies"]["http-proxy"] == "http://***@proxy.example:3128"
    assert "s3cret" not in repr(doc)
