"""Fixtures shared by the product tests (tests/unit, tests/integration, ...).

GpuHostState values assembled by the real fact code (facts.assemble.host_state) from
hand-written section outputs, and what the audit makes of them (factories as fixtures):

    make_state   make_state(driver="570.172.08", packages=None, gpus=None, toolkit=..., docker=True,
                 daemon_json=..., running_default=None, lgi=None, lspci=None, os_release=DEBIAN,
                 smi_list=None, cdi_specs=None)
    desired      desired(**settings) -> gpuhost.reports.audit.desired_settings of a 570/1.17.8 inventory
    items        items(state, **settings) -> {drift item: entry} against desired(**settings)
    lgi_table    lgi_table([(gpu, profile name, profile id), ...]) -> `nvidia-smi mig -lgi`
    smi_xml      smi_xml([(product, current MIG, pending MIG), ...], driver) -> `nvidia-smi -q -x`
    with_health  with_health(state, gpu=None, host=None, quiet=QUIET_HEALTH) -> the state with
                 facts schema 2's health fields: every GPU quiet (``gpu`` overrides fields),
                 a readable kernel log without Xid (``host`` overrides fields)
    audit_fleet  audit_fleet(cuda="12.4") -> a gpuhost.audit/2 document with every kind of
                 host (ok, reboot pending, MIG drift, no driver, failed, unreachable, L4 on 535)

The sandbox fleet fixtures (fleet, pyinfra, ssh, ...) are in the root conftest.py.
"""

from __future__ import annotations

import pytest

from gpuhost.facts import assemble
from gpuhost.facts.script import ALL_SECTIONS
from gpuhost.reports import audit

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
MODULE = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  "
          "(builder@host)  Tue Jul  8 18:44:13 UTC 2025\nGCC version:  gcc version 12.2.0\n")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "libnvidia-container-tools", "libnvidia-container1")
ARCH = {"A100": "Ampere", "H100": "Hopper", "L4": "Ada Lovelace", "T4": "Turing",
        "GeForce RTX 4090": "Ada Lovelace"}


def _smi_xml(gpus: list[tuple[str, str, str]], driver: str) -> str:
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


def _lgi_table(rows: list[tuple[int, str, int]]) -> str:
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


def _make_state(driver: str | None = "570.172.08", packages: str | None = None,
               gpus: list[tuple[str, str, str]] | None = None, toolkit: str | None = "1.17.8",
               docker: bool = True, daemon_json: str | None = '{"runtimes": {"nvidia": '
               '{"path": "nvidia-container-runtime", "args": []}}}', running_default: str | None
               = None, lgi: str | None = None, lspci: str | None = None, os_release: str = DEBIAN,
               smi_list: str | None = None, cdi_specs: str | None = None,
               cdi_boot_unit: str | None = None, cdi_refresh_unit: str | None = None):
    """A GpuHostState as the fact returns it; ``packages`` defaults to the loaded driver's."""
    sections = {name: {"rc": 127, "out": ""} for name in ALL_SECTIONS}
    sections.update({name: {"rc": 3, "out": ""} for name in ("proc_version", "daemon_json")})
    sections["os_release"] = {"rc": 0, "out": os_release}
    sections["kernel"] = {"rc": 0, "out": "6.1.0-56-amd64\nx86_64"}
    # this boot's kernel log, read from the journal, without an Xid
    sections["kernel_xid"] = {"rc": 0, "out": "source=journal\n"}
    packages = driver if packages is None else packages
    dpkg = f"nvidia-open\t{packages}-1\tii \n" if packages else ""
    if toolkit:
        dpkg += "".join(f"{name}\t{toolkit}-1\tii \n" for name in TOOLKIT_PACKAGES)
    sections["dpkg"] = {"rc": 0, "out": dpkg}
    gpus = [("NVIDIA A100-SXM4-40GB", "Disabled", "Disabled")] if gpus is None else gpus
    if driver:
        sections["proc_version"] = {"rc": 0, "out": MODULE.format(v=driver)}
        sections["smi_xml"] = {"rc": 0, "out": _smi_xml(gpus, driver)}
    elif packages:
        sections["smi_xml"] = {"rc": 9, "out": "NVIDIA-SMI has failed because it couldn't "
                               "communicate with the NVIDIA driver."}
    if lgi is not None:
        sections["mig_lgi"] = {"rc": 0, "out": lgi}
    if smi_list is not None:  # `nvidia-smi -L` (MIG device UUIDs)
        sections["smi_list"] = {"rc": 0, "out": smi_list}
    if cdi_specs is not None:  # the cdi_specs section: "==> PATH <==" and each file
        sections["cdi_specs"] = {"rc": 0, "out": cdi_specs}
    if cdi_boot_unit is not None:  # gpuhost's boot unit: "SHA256  PATH" and is-enabled
        sections["cdi_boot_unit"] = {"rc": 0, "out": cdi_boot_unit}
    if cdi_refresh_unit is not None:  # `systemctl show` of NVIDIA's nvidia-cdi-refresh.service
        sections["cdi_refresh_unit"] = {"rc": 0, "out": cdi_refresh_unit}
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


def _desired(**overrides):
    data = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8"}
    data.update(overrides)
    return audit.desired_settings(data)


def _items(state, **overrides):
    return {item["item"]: item for item in audit.host_drift(state, _desired(**overrides))}


# --- a fleet with every kind of host ----------------------------------------------------------

def _fleet(cuda: str | None = "12.4") -> dict:
    a100_mig = [("NVIDIA A100-SXM4-40GB", "Enabled", "Enabled")] * 2
    results = {
        "gpu-01": _make_state(),
        "gpu-02": _make_state(driver="550.163.01", packages="570.172.08"),
        "gpu-03": _make_state(gpus=a100_mig, lgi=_lgi_table([(0, "3g.20gb", 9), (0, "3g.20gb", 9),
                                                              (1, "7g.40gb", 0)])),
        "gpu-04": _make_state(driver=None, packages=""),
        "gpu-05": audit.HostError("failed", "could not load fact: facts.host.GpuHostState"),
        "gpu-06": audit.HostError("unreachable", "cannot connect to 127.77.9.9 port 2222"),
        "gpu-<07>": _make_state(driver="535.183.01", gpus=[("NVIDIA L4", "N/A", "N/A")] * 4),
    }
    wants = {name: _desired() for name in results}
    wants["gpu-03"] = _desired(mig_mode="enabled", mig_layout=["3g.20gb", "3g.20gb"])
    return audit.build(results, wants, cuda=cuda, generated_at="2026-11-22T10:00:00Z")


@pytest.fixture
def make_state():
    return _make_state


# A GPU's health dict (facts schema 2, parser-contract.md "Health fields") with nothing wrong
QUIET_HEALTH = {"ecc_mode_current": "enabled", "ecc_volatile_uncorrectable": 0,
                "ecc_aggregate_uncorrectable": 0, "retired_pages_double_bit": None,
                "retired_pages_pending": None, "remapped_rows_uncorrectable": 0,
                "remapped_rows_pending": False, "remapped_rows_failure": False,
                "pcie_gen_current": 4, "pcie_gen_max": 4, "pcie_width_current": 16,
                "pcie_width_max": 16, "throttle_reasons_active": [], "fabric_state": "N/A",
                "nvlink": None}


def _with_health(state: dict, gpu: dict | None = None, host: dict | None = None,
                 quiet: dict = QUIET_HEALTH) -> dict:
    for entry in state["gpus"]:
        entry["health"] = {**quiet, **(gpu or {})}
    state["health"] = {"xid_events": [], "xid_source": "journal", "gpus_missing": [],
                       "nvswitch_count": 0, **(host or {})}
    state["schema"] = 2
    return state


@pytest.fixture
def with_health():
    return _with_health


@pytest.fixture
def desired():
    return _desired


@pytest.fixture
def items():
    return _items


@pytest.fixture
def lgi_table():
    return _lgi_table


@pytest.fixture
def smi_xml():
    return _smi_xml


@pytest.fixture
def audit_fleet():
    return _fleet
