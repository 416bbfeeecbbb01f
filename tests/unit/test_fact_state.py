"""The facts' assembly from section outputs (hand-written host outputs, no pyinfra run)."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest
from pyinfra.api.exceptions import FactProcessError

from gpuhost.facts import assemble, parsers
from gpuhost.facts.container import ContainerToolkit, DockerDaemonConfig
from gpuhost.facts.host import GpuHostState
from gpuhost.facts.kernel import KernelHeaders
from gpuhost.facts.mig import MigState
from gpuhost.facts.nvidia import NvidiaDriver, NvidiaGpus
from gpuhost.facts.script import ALL_SECTIONS, MARKER, READ_SECTIONS, build_script

DEBIAN_OS = textwrap.dedent(
    """\
    PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
    NAME="Debian GNU/Linux"
    VERSION_ID="12"
    ID=debian
    """
)
OL9_OS = textwrap.dedent(
    """\
    NAME="Oracle Linux Server"
    VERSION="9.5"
    ID="ol"
    ID_LIKE="fedora"
    VERSION_ID="9.5"
    PRETTY_NAME="Oracle Linux Server 9.5"
    """
)
UBUNTU_OS = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n'

OPEN_570 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
    "(dvs-builder@U16-I1-N07-12-3)  Tue Jul  8 18:44:13 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n"
)
PROP_550 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  Thu Apr 24 21:42:20 UTC 2025\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"
)


def smi_xml(gpus: list[tuple[str, str]], driver: str = "570.172.08", cuda: str = "12.8") -> str:
    """A small but well-formed ``nvidia-smi -q -x`` document: (product name, mig mode)."""
    body = []
    for index, (name, mig) in enumerate(gpus):
        body.append(
            f"""
  <gpu id="00000000:{7 + index:02X}:00.0">
    <product_name>{name}</product_name>
    <product_architecture>Ampere</product_architecture>
    <persistence_mode>Enabled</persistence_mode>
    <mig_mode><current_mig>{mig}</current_mig><pending_mig>{mig}</pending_mig></mig_mode>
    <uuid>GPU-1111111{index}-2222-3333-4444-555555555555</uuid>
    <pci><pci_bus_id>00000000:{7 + index:02X}:00.0</pci_bus_id></pci>
    <fb_memory_usage><total>40960 MiB</total><used>0 MiB</used><free>40960 MiB</free></fb_memory_usage>
    <processes></processes>
  </gpu>"""
        )
    return (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        f"<nvidia_smi_log>\n  <driver_version>{driver}</driver_version>\n"
        f"  <cuda_version>{cuda}</cuda_version>\n  <attached_gpus>{len(gpus)}</attached_gpus>"
        + "".join(body)
        + "\n</nvidia_smi_log>\n"
    )


def host(**sections: tuple[int, str]) -> dict:
    """Sections as ``split_sections`` returns them; absent tools by default."""
    result = {name: {"rc": 127, "out": ""} for name in ALL_SECTIONS}
    result["proc_version"] = {"rc": 3, "out": ""}
    result["daemon_json"] = {"rc": 3, "out": ""}
    result["headers_build"] = {"rc": 3, "out": ""}
    for name, (rc, out) in sections.items():
        result[name] = {"rc": rc, "out": out}
    return result


def as_output(sections: dict) -> list[str]:
    """What the remote script prints for these sections, as pyinfra hands it to process()."""
    text = "".join(f"{MARKER}{name} rc={s['rc']}\n{s['out']}\n" for name, s in sections.items())
    return text.splitlines()


BARE = host(os_release=(0, DEBIAN_OS), kernel=(0, "6.1.0-56-amd64\nx86_64"), dpkg=(0, ""))

LOADED = host(
    os_release=(0, DEBIAN_OS),
    kernel=(0, "6.1.0-56-amd64\nx86_64"),
    dpkg=(
        0,
        "nvidia-open-570\t570.172.08-1\tii \n"
        "nvidia-dkms-570-open\t570.172.08-1\thi \n"
        "nvidia-utils-570\t570.172.08-1\tii \n"
        "nvidia-driver-local-repo-debian12-570.172.08\t1.0-1\tii \n"
        "linux-headers-6.1.0-56-amd64\t6.1.158-1\tii \n"
        "nvidia-container-toolkit\t1.17.8-1\tii \n"
        "nvidia-container-toolkit-base\t1.17.8-1\tii \n"
        "libnvidia-container-tools\t1.17.8-1\tii \n"
        "libnvidia-container1\t1.17.8-1\tii \n",
    ),
    proc_version=(0, OPEN_570),
    smi_xml=(0, smi_xml([("NVIDIA A100-SXM4-40GB", "Disabled")] * 2)),
    headers_build=(0, "/usr/src/linux-headers-6.1.0-56-amd64"),
    daemon_json=(
        0,
        '{"log-driver": "json-file", "runtimes": {"nvidia": '
        '{"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}},'
        ' "default-runtime": "nvidia"}',
    ),
    nvidia_ctk=(0, "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: abc"),
    nvidia_container_cli=(0, "cli-version: 1.17.8\nlib-version: 1.17.8"),
)


def test_bare_host_is_a_normal_not_installed_state():
    value = assemble.host_state(BARE)
    assert value["os"]["distro_tag"] == "debian12"
    assert value["driver"]["state"] == "not_installed"
    assert value["driver"]["reboot_required"] is False
    assert value["gpus"] == []
    assert value["mig"] == {"gpus": [], "enabled_gpus": [], "layout": {}}
    assert value["docker"]["exists"] is False and value["docker"]["valid"] is True
    assert value["toolkit"]["installed"] is False and value["toolkit"]["consistent"] is True
    assert value["kernel"]["headers_packages"] == ["linux-headers-6.1.0-56-amd64"]
    assert value["kernel"]["headers_installed"] is False


def test_loaded_driver_and_configured_runtime():
    value = assemble.host_state(LOADED)
    driver = value["driver"]
    assert driver["state"] == "loaded"
    assert driver["loaded"]["flavor"] == "open"
    assert driver["installed_version"] == "570.172.08"
    assert driver["installed_flavor"] == "open"
    assert driver["held_packages"] == ["nvidia-dkms-570-open"]
    assert driver["local_repos"][0]["distro"] == "debian12"
    assert driver["newest_cuda"] is not None and driver["newest_cuda"].startswith("12.")
    assert [gpu["model"] for gpu in value["gpus"]] == ["A100-SXM4-40GB"] * 2
    assert value["gpus"][0]["compute_capability"] == "8.0"
    docker = value["docker"]
    assert docker["nvidia_runtime"] == {
        "defined": True,
        "path": "/usr/bin/nvidia-container-runtime",
        "style": "runtimeArgs",
        "args": [],
    }
    assert docker["nvidia_is_default"] is True
    assert value["toolkit"]["version"] == "1.17.8" and value["toolkit"]["consistent"] is True
    assert value["kernel"]["headers_installed"] is True
    assert value["kernel"]["headers_packages_missing"] == []


def test_packages_newer_than_the_loaded_module_is_a_mismatch():
    sections = host(
        os_release=(0, UBUNTU_OS),
        kernel=(0, "5.15.0-130-generic\nx86_64"),
        dpkg=(0, "cuda-drivers-570\t570.172.08-0ubuntu1\tii \n"),
        proc_version=(0, PROP_550),
        smi_xml=(18, "Failed to initialize NVML: Driver/library version mismatch\n"
                     "NVML library version: 570.172"),
    )
    driver = assemble.driver_state(sections)
    assert driver["state"] == "library_mismatch"
    assert driver["smi_error"] == "library_mismatch"
    assert driver["loaded_version"] == "550.163.01"
    assert driver["installed_flavor"] == "proprietary"
    assert driver["reboot_required"] is True


def test_installed_but_not_loaded():
    sections = host(dpkg=(0, "nvidia-open-570\t570.172.08-1\tii \n"),
                    smi_xml=(9, "NVIDIA-SMI has failed because it couldn't communicate with the "
                                "NVIDIA driver. Make sure that the latest NVIDIA driver is "
                                "installed and running."))
    driver = assemble.driver_state(sections)
    assert driver["state"] == "installed_not_loaded"
    assert driver["smi_error"] == "driver_not_loaded"


def test_oracle_uek8_needs_uek_devel_and_the_gcc_toolset():
    sections = host(
        os_release=(0, OL9_OS),
        kernel=(0, "6.12.0-100.28.2.2.el9uek.x86_64\nx86_64"),
        rpm=(0, "kernel-headers\t(none):5.14.0-503.11.1.el9_5\n"),
    )
    kernel = assemble.kernel_state(sections)
    assert kernel["distro_tag"] == "rhel9"
    assert kernel["flavour"] == "uek"
    assert "kernel-uek-devel-6.12.0-100.28.2.2.el9uek.x86_64" in kernel["headers_packages"]
    assert kernel["gcc_toolset"] == "gcc-toolset-14"
    assert kernel["gcc_toolset_installed"] is False
    assert "kernel-uek-devel-6.12.0-100.28.2.2.el9uek.x86_64" in kernel["headers_packages_missing"]


def test_invalid_daemon_json_is_a_state_not_an_exception():
    sections = host(daemon_json=(0, '{\n  "log-driver": "json-file",\n  "runtimes": {\n}'))
    docker = assemble.docker_state(sections)
    assert docker["exists"] is True and docker["valid"] is False
    assert "line" in docker["error"] and "column" in docker["error"]
    assert docker["config"] == {}


def test_args_style_and_relative_path_count_as_the_nvidia_runtime():
    sections = host(daemon_json=(0, '{"runtimes": {"nvidia": {"args": [], "path": '
                                    '"nvidia-container-runtime"}}}'))
    docker = assemble.docker_state(sections)
    assert docker["nvidia_runtime"]["defined"] is True
    assert docker["nvidia_runtime"]["style"] == "args"
    assert docker["nvidia_is_default"] is False


def test_toolkit_versions_that_disagree_are_inconsistent():
    sections = host(
        dpkg=(0, "nvidia-container-toolkit\t1.17.8-1\tii \n"
                 "nvidia-container-toolkit-base\t1.17.8-1\tii \n"
                 "libnvidia-container-tools\t1.16.2-1\tii \n"
                 "libnvidia-container1\t1.16.2-1\tii \n"),
        nvidia_ctk=(0, "NVIDIA Container Toolkit CLI version 1.17.8"),
    )
    toolkit = assemble.toolkit_state(sections)
    assert toolkit["consistent"] is False and toolkit["version"] is None
    assert toolkit["versions_seen"] == ["1.16.2", "1.17.8"]


def test_gpus_come_from_lspci_when_the_driver_does_not_answer():
    sections = host(lspci=(0, '0000:07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" '
                              '"GH100 [H100 SXM5 80GB] [2330]" -ra1 "NVIDIA Corporation [10de]" '
                              '"Device [16c1]"\n'))
    gpus = assemble.gpus_state(sections)
    assert len(gpus) == 1 and gpus[0]["source"] == "lspci"
    assert gpus[0]["model"] == "H100-80GB-HBM3" and gpus[0]["architecture"] == "hopper"
    assert gpus[0]["mig_capable"] is True


@pytest.mark.parametrize(
    "fact_class", [NvidiaDriver, NvidiaGpus, MigState, KernelHeaders, DockerDaemonConfig,
                   ContainerToolkit, GpuHostState],
)
def test_every_fact_reads_a_bare_host_without_nulls(fact_class):
    fact = fact_class()
    value = fact.process(as_output(BARE))
    assert value is not None
    assert value == fact.default() or fact_class in (KernelHeaders, GpuHostState)


def test_unparsable_output_fails_only_that_host():
    sections = dict(LOADED, smi_xml={"rc": 0, "out": "<nvidia_smi_log><gpu>truncated"})
    with pytest.raises(FactProcessError):
        NvidiaGpus().process(as_output(sections))


def test_the_composite_fact_is_one_shell_command_that_always_succeeds(tmp_path):
    script = GpuHostState().command()
    assert script == build_script(READ_SECTIONS)
    # run it here, on a machine without NVIDIA software: it exits 0 and prints every section
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    sections = parsers.split_sections(run.stdout)
    assert set(sections) == set(READ_SECTIONS)
    value = assemble.host_state(sections)
    assert value["driver"]["state"] == "not_installed"
    assert value["kernel"]["offered"] is None   # the audit's section, not read here


# --- health (issue 15): state["health"], each GPU's "health", section kernel_xid ---------------

HEALTH_KEYS = {"ecc_mode_current", "ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable",
               "retired_pages_double_bit", "retired_pages_pending", "remapped_rows_uncorrectable",
               "remapped_rows_pending", "remapped_rows_failure", "pcie_gen_current", "pcie_gen_max",
               "pcie_width_current", "pcie_width_max", "throttle_reasons_active", "fabric_state",
               "fabric_status", "sram_threshold_exceeded",
               "nvlink"}  # the last one from nvidia-smi nvlink -s/-e, not from the XML
# An HGX-like bus: three A100s (nvidia-smi lists 07 and 08 only), two NVSwitches, an audio
# function; sysfs prints the domain, nvidia-smi its 8-digit form.
SYSFS_3_GPUS = (
    "0000:07:00.0 0x20b0 0x030200 0x10de 0x134f 0xa1\n"
    "0000:08:00.0 0x20b0 0x030200 0x10de 0x134f 0xa1\n"
    "0000:09:00.0 0x20b0 0x030200 0x10de 0x134f 0xa1\n"
    "0000:c4:00.0 0x1af1 0x068000 0x10de 0x1652 0xa1\n"
    "0000:c5:00.0 0x1af1 0x068000 0x10de 0x1652 0xa1\n"
    "0000:09:00.1 0x10f0 0x040300 0x10de 0x0000 -\n"
)
JOURNAL_XIDS = (
    "source=journal\n"
    "[ 8123.456789] gpu-01 kernel: NVRM: Xid (PCI:0000:08:00): 79, pid='<unknown>', "
    "name=<unknown>, GPU has fallen off the bus.\n"
    "Jul 14 02:11:48 gpu-01 kernel: nvidia-nvswitch0: SXid (PCI:0000:c4:00.0): 12028, "
    "Non-fatal, Link 32 egress non-posted PRIV error (First)\n"
)


def test_schema_2_has_host_health_and_a_health_dict_per_gpu():
    sections = dict(LOADED, pci_sysfs={"rc": 0, "out": SYSFS_3_GPUS},
                    kernel_xid={"rc": 0, "out": JOURNAL_XIDS})
    value = assemble.host_state(sections)
    assert value["schema"] == 2
    assert value["health"] == {
        "xid_events": [
            # journalctl -o short-monotonic: the line's time is the event's identity (T4-11)
            {"pci_bus_id": "0000:08:00", "xid": 79, "gpu_instance_id": None,
             "text": "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
             "time": 8123.456789},
            {"pci_bus_id": "0000:c4:00.0", "sxid": 12028,
             "text": "Non-fatal, Link 32 egress non-posted PRIV error (First)", "time": None}],
        "xid_source": "journal",
        "gpus_missing": ["0000:09:00.0"],  # on the bus, not in nvidia-smi's list
        "nvswitch_count": 2,
        "recovered": {},  # no `gpuhost recover` this boot
    }
    assert [gpu["source"] for gpu in value["gpus"]] == ["nvidia-smi"] * 2
    for gpu in value["gpus"]:
        assert set(gpu["health"]) == HEALTH_KEYS


def test_gpu_health_values_come_from_the_xml():
    xml = smi_xml([("NVIDIA A100-SXM4-40GB", "Disabled")]).replace(
        "<processes></processes>",
        "<ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode><ecc_errors><volatile>"
        "<sram_uncorrectable>0</sram_uncorrectable><dram_uncorrectable>3</dram_uncorrectable>"
        "</volatile></ecc_errors><remapped_rows><remapped_row_unc>3</remapped_row_unc>"
        "<remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No"
        "</remapped_row_failure></remapped_rows><processes></processes>")
    (gpu,) = assemble.gpus_state(host(smi_xml=(0, xml)))
    assert gpu["health"]["ecc_volatile_uncorrectable"] == 3
    assert (gpu["health"]["remapped_rows_pending"], gpu["health"]["remapped_rows_failure"]) == (
        True, False)


def test_bare_host_health_is_empty_not_missing():
    assert assemble.host_state(BARE)["health"] == {
        "xid_events": [], "xid_source": None, "gpus_missing": None, "nvswitch_count": 0,
        "recovered": {}}


@pytest.mark.parametrize(("smi", "missing"), [
    ((127, ""), None),  # no nvidia-smi: no driver, nobody "missing"
    ((9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."), None),
    ((124, ""), None),  # timed out: the driver state says it
    ((6, "No devices were found"), ["0000:07:00.0", "0000:08:00.0", "0000:09:00.0"]),
])
def test_gpus_missing_needs_an_answer_from_nvidia_smi(smi, missing):
    sections = host(smi_xml=smi, pci_sysfs=(0, SYSFS_3_GPUS), dkms=(0, ""))
    value = assemble.host_state(sections)
    assert value["health"]["gpus_missing"] == missing
    assert value["health"]["nvswitch_count"] == 2
    assert [gpu["health"] for gpu in value["gpus"]] == [None] * 3  # seen on the PCI bus only


def test_lspci_without_sysfs_slot_as_printed_and_nvswitches_by_class_id():
    lspci = (
        '07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [A100 SXM4 40GB] [20b0]"'
        ' -ra1 "NVIDIA Corporation [10de]" "Device [134f]"\n'
        '08:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [A100 SXM4 40GB] [20b0]"'
        ' -ra1 "NVIDIA Corporation [10de]" "Device [134f]"\n'
        'c4:00.0 "Bridge [0680]" "NVIDIA Corporation [10de]" "GA100 [NVSwitch] [1af1]"'
        ' -ra1 "NVIDIA Corporation [10de]" "Device [1652]"\n')
    sections = host(smi_xml=(0, smi_xml([("NVIDIA A100-SXM4-40GB", "Disabled")])),
                    lspci=(0, lspci), pci_sysfs=(3, ""))
    health = assemble.health_state(sections)
    assert health["gpus_missing"] == ["08:00.0"]
    assert health["nvswitch_count"] == 1


@pytest.mark.parametrize(("section", "events", "source"), [
    ((0, "source=dmesg\n[ 8123.402293] NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=a, DBE\n"),
     [(48, "0000:07:00")], "dmesg"),
    ((0, "source=dmesg\n"), [], "dmesg"),  # a readable log without Xids
    ((0, "source=journal"), [], "journal"),
    ((3, ""), [], None),  # neither the journal nor dmesg readable
    ((127, ""), [], None),
    ((0, "NVRM: Xid (PCI:0000:07:00): 48, no source line\n"), [], None),
    ((0, "source=syslog\nNVRM: Xid (PCI:0000:07:00): 48, x\n"), [], None),
])
def test_kernel_xid_section(section, events, source):
    health = assemble.health_state(host(kernel_xid=section))
    assert [(e["xid"], e["pci_bus_id"]) for e in health["xid_events"]] == events
    assert health["xid_source"] == source


def _fake_tools(tmp_path, journal: str | None, dmesg: str | None) -> dict:
    """PATH with a journalctl printing ``journal`` (None: not installed) and a dmesg printing
    ``dmesg`` (None: refused, as under dmesg_restrict)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("journalctl", "dmesg"):
        (tmp_path / name).write_text({"journalctl": journal, "dmesg": dmesg}[name] or "")
    if journal is not None:
        (bindir / "journalctl").write_text(f"#!/bin/sh\ncat {tmp_path / 'journalctl'}\n")
    (bindir / "dmesg").write_text(
        "#!/bin/sh\n" + (f"cat {tmp_path / 'dmesg'}\n" if dmesg is not None else
                         "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\n"
                         "exit 1\n"))
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    # the system's tools (sh, awk, timeout, ...) but not its journalctl/dmesg
    system = tmp_path / "system"
    system.mkdir()
    for name in ("sh", "grep", "tail", "timeout", "cat", "mktemp", "rm", "printf", "echo", "awk"):
        found = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True)
        if found.stdout.startswith("/"):
            (system / name).symlink_to(found.stdout.strip())
    return {"PATH": f"{bindir}:{system}"}


def _run_kernel_xid(env: dict) -> dict:
    run = subprocess.run(["sh", "-c", build_script(["kernel_xid"])], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    return parsers.split_sections(run.stdout)["kernel_xid"]


def test_kernel_xid_reads_the_journal_and_sends_back_only_the_last_200_xid_lines(tmp_path):
    lines = [f"Jul 14 02:{i // 60:02d}:{i % 60:02d} h kernel: NVRM: Xid (PCI:0000:07:00): 13, "
             f"pid={i}, name=a, Graphics Exception" for i in range(250)]
    noise = ["Jul 14 01:00:00 h kernel: Linux version 6.1.0-56-amd64",
             "Jul 14 01:00:01 h kernel: nvidia-nvswitch0: using MSI"]
    env = _fake_tools(tmp_path, journal="\n".join(noise[:1] + lines + noise[1:]) + "\n",
                      dmesg="[1.0] NVRM: Xid (PCI:0000:09:00): 79, from dmesg\n")
    result = _run_kernel_xid(env)
    out_lines = result["out"].splitlines()
    assert result["rc"] == 0 and out_lines[0] == "source=journal"
    assert len(out_lines) == 1 + 200  # the newest 200 Xid lines, no other kernel line
    assert "pid=50," in out_lines[1] and "pid=249," in out_lines[-1]
    health = assemble.health_state({"kernel_xid": result})
    assert health["xid_source"] == "journal" and len(health["xid_events"]) == 200


@pytest.mark.parametrize("journal", [None, "", "-- No entries --\n"])
def test_kernel_xid_falls_back_to_dmesg_when_the_journal_has_no_kernel_message(tmp_path, journal):
    env = _fake_tools(tmp_path, journal=journal,
                      dmesg="[    0.000000] Linux version 6.1.0-56-amd64\n"
                            "[ 8123.402293] NVRM: Xid (PCI:0000:09:00): 79, pid='<unknown>', "
                            "name=<unknown>, GPU has fallen off the bus.\n")
    result = _run_kernel_xid(env)
    assert result["rc"] == 0
    health = assemble.health_state({"kernel_xid": result})
    assert health["xid_source"] == "dmesg"
    assert [(e["xid"], e["pci_bus_id"]) for e in health["xid_events"]] == [(79, "0000:09:00")]


def test_kernel_xid_without_a_readable_log_is_an_empty_result_not_a_failure(tmp_path):
    result = _run_kernel_xid(_fake_tools(tmp_path, journal="", dmesg=None))
    assert (result["rc"], result["out"].strip()) == (3, "")
    assert assemble.health_state({"kernel_xid": result})["xid_source"] is None


NVLINK_S = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111110-2222-3333-4444-555555555555)\n"
            "\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n\t Link 2: 25 GB/s\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
            "\t Link 0: 25 GB/s\n\t Link 1: 25 GB/s\n\t Link 2: 25 GB/s\n")
NVLINK_E = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111110-2222-3333-4444-555555555555)\n"
            + "".join(f"\t Link {n}: Replay Errors: {n}\n\t Link {n}: Recovery Errors: 0\n"
                      f"\t Link {n}: CRC Errors: {2 * n}\n\n" for n in range(3))
            + "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
            + "".join(f"\t Link {n}: Replay Errors: 0\n\t Link {n}: Recovery Errors: 1\n"
                      f"\t Link {n}: CRC Errors: 0\n\n" for n in range(3)))


def test_each_gpu_health_carries_its_nvlink_summary_matched_by_uuid():
    value = assemble.host_state(dict(LOADED, nvlink_status={"rc": 0, "out": NVLINK_S},
                                     nvlink_errors={"rc": 0, "out": NVLINK_E}))
    first, second = (gpu["health"]["nvlink"] for gpu in value["gpus"])
    assert first == {"links_total": 3, "links_active": 2, "links_inactive": [1],
                     "all_inactive": False, "replay_errors": 3, "recovery_errors": 0,
                     "crc_errors": 6}
    assert (second["links_active"], second["recovery_errors"]) == (3, 3)


def test_nvlink_counters_unread_and_no_nvlink_at_all():
    skipped = assemble.host_state(dict(LOADED, nvlink_status={"rc": 0, "out": NVLINK_S},
                                       nvlink_errors={"rc": 4, "out": ""}))
    assert skipped["gpus"][0]["health"]["nvlink"]["crc_errors"] is None
    pcie = assemble.host_state(dict(LOADED, nvlink_status={"rc": 0, "out": (
        "GPU 0: NVIDIA L4 (UUID: GPU-11111110-2222-3333-4444-555555555555)\n"
        "GPU 1: NVIDIA L4 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n")}))
    assert [gpu["health"]["nvlink"] for gpu in pcie["gpus"]] == [None, None]
    old = assemble.host_state(LOADED)  # the section absent (a gpuhost before it): None
    assert [gpu["health"]["nvlink"] for gpu in old["gpus"]] == [None, None]


def _run_nvlink(tmp_path, xml_rc: int, status: str) -> tuple[dict, list[str]]:
    """The smi chain with a fake nvidia-smi: (sections, the nvidia-smi calls it made)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    (tmp_path / "xml").write_text(smi_xml([("NVIDIA A100-SXM4-40GB", "Disabled")] * 2))
    (tmp_path / "s").write_text(status)
    (tmp_path / "e").write_text(NVLINK_E)
    calls = tmp_path / "calls"
    smi = bindir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in\n'
                   f'"-q -x") [ {xml_rc} = 0 ] || exit {xml_rc}; cat {tmp_path / "xml"};;\n'
                   f'"nvlink -s") cat {tmp_path / "s"};;\n"nvlink -e") cat {tmp_path / "e"};;\n'
                   'esac\n')
    smi.chmod(0o755)
    script = build_script(["smi_xml", "nvlink_status", "nvlink_errors"])
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    assert run.returncode == 0, run.stderr
    made = calls.read_text().splitlines() if calls.exists() else []
    return parsers.split_sections(run.stdout), made


def test_nvlink_sections_read_the_counters_only_when_a_link_is_up(tmp_path):
    sections, calls = _run_nvlink(tmp_path / "up", 0, NVLINK_S)
    assert calls == ["-q -x", "nvlink -s", "nvlink -e"]
    assert sections["nvlink_errors"]["rc"] == 0
    assert assemble.host_state(sections)["gpus"][1]["health"]["nvlink"]["recovery_errors"] == 3
    # no NVLink (PCIe cards): one short call, no counters
    sections, calls = _run_nvlink(tmp_path / "pcie", 0, "GPU 0: NVIDIA L4 (UUID: GPU-1)\n")
    assert calls == ["-q -x", "nvlink -s"] and sections["nvlink_errors"]["rc"] == 4
    # the driver does not answer: nothing more is asked of it
    sections, calls = _run_nvlink(tmp_path / "down", 9, NVLINK_S)
    assert calls == ["-q -x"]
    assert (sections["nvlink_status"]["rc"], sections["nvlink_errors"]["rc"]) == (4, 4)
