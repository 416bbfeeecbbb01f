"""Hosts that run driver 550.163.01 (proprietary, as ``auto`` picks below R560), for the
upgrade plans. Hand-written, in the format of gpuhost's fact script (tests/plans/scenarios.py
has the bare hosts and the converged 570 host the harness switches to after the install).

``respond`` answers the commands whose output depends on what the plan already did
(service states, lsmod, uptime around the reboot) from the commands recorded so far.
"""

from __future__ import annotations

import hashlib
import re

import scenarios
from gpuhost import aptdistros, el_packages, packages

FROM = "550.163.01"
TARGET = scenarios.DRIVER  # 570.172.08
# Releases whose plans start from another driver (it must build on their kernel): 580 -> 595
FROMS = {"debian13": "580.105.08", "ubuntu2604": "580.142"}


def from_of(name: str) -> str:
    return FROMS.get(name, FROM)


def target_of(data: dict) -> str:
    """The driver the fake host runs once switched: ``plan_converged_driver`` (the upgrade's
    target) where a plan sets it, else the scenario's (the fake host keeps answering it)."""
    return data.get("plan_converged_driver") or scenarios.driver_of(data["plan_scenario"])
_section = scenarios._section
_bare_host_data = scenarios.host_data

A100_XML = (
    '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>' + FROM +
    "</driver_version><cuda_version>12.4</cuda_version><attached_gpus>1</attached_gpus>"
    '<gpu id="00000000:07:00.0"><product_name>NVIDIA A100-SXM4-40GB</product_name>'
    "<uuid>GPU-00000000-1111-2222-3333-444444444444</uuid>"
    "<pci><pci_bus_id>00000000:07:00.0</pci_bus_id></pci>"
    "<fb_memory_usage><total>40960 MiB</total></fb_memory_usage>"
    "<persistence_mode>Enabled</persistence_mode><mig_mode><current_mig>Disabled"
    "</current_mig><pending_mig>Disabled</pending_mig></mig_mode>{processes}</gpu></nvidia_smi_log>"
)
PYTHON_PROCESS = (
    "<processes><process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A"
    "</compute_instance_id><pid>4242</pid><type>C</type><process_name>python3</process_name>"
    "<used_memory>1024 MiB</used_memory></process_info></processes>"
)


def _packages(name: str, version: str) -> tuple[str, str]:
    """(dpkg section, rpm section) of a host of scenario ``name`` running ``version``
    proprietary (its local repo package installed, unless it takes a network repository)."""
    tag = scenarios.SCENARIOS[name]["tag"]
    branch = packages.branch(version)
    repo = packages.local_repo_package(tag, version)
    if packages.family(tag) == "rhel":
        el = tag.replace("rhel", "el")
        rpm = "".join(f"{name}\t3:{version}-1.{el}\n" for name in
                      ("cuda-drivers", "nvidia-driver", "kmod-nvidia-latest-dkms"))
        return "", rpm + f"{repo}\t(none):1.0-1\n"
    suffix = "" if int(branch) >= aptdistros.release(tag).unversioned_from else f"-{branch}"
    rows = [f"cuda-drivers{suffix}", f"nvidia-driver{suffix}", f"nvidia-dkms{suffix}",
            f"nvidia-utils{suffix}", f"nvidia-kernel-common{suffix}"]
    if aptdistros.release(tag).driver_names == "debian":  # the same names on every branch
        rows = ["cuda-drivers", "nvidia-kernel-dkms", "nvidia-kernel-support",
                "nvidia-driver-cuda", "libcuda1", "nvidia-smi"]
    dpkg = "".join(f"{row}\t{version}-1\tii \n" for row in rows)
    if scenarios.SCENARIOS[name].get("network"):
        return dpkg, ""
    return dpkg + f"{repo}\t1.0-1\tii \n", ""


def running_output(name: str, version: str | None = None, busy: bool = False) -> str:
    """GpuHostState of OS scenario ``name`` running driver ``version`` (proprietary; default
    the scenario's ``from_of``)."""
    s = scenarios.SCENARIOS[name]
    version = version or from_of(name)
    rpm = packages.family(s["tag"]) == "rhel"
    dpkg, rpm_rows = _packages(name, version)
    xml = A100_XML.replace(FROM, version).format(processes=PYTHON_PROCESS if busy else "")
    return "".join([
        _section("os_release", 0, s["os"]),
        _section("kernel", 0, f"{s['kernel']}\nx86_64"),
        _section("proc_version", 0, f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}"
                 "  Mon Jun  2 12:00:00 UTC 2025\nGCC version:  gcc version 12.2.0"),
        _section("smi_xml", 0, xml),
        _section("lspci", 0, scenarios.A100_LSPCI),
        _section("dpkg", 127 if rpm else 0, dpkg),
        _section("rpm", 0 if rpm else 127, rpm_rows),
        _section("daemon_json", 0, '{"runtimes": {"nvidia": {"args": [], "path": '
                                   '"nvidia-container-runtime"}}}'),
        scenarios.KERNEL_XID,
    ])


def host_data(name: str, extra: dict) -> dict:
    """Host data: scenario ``name`` is ``<os scenario>`` or ``<os scenario>:busy`` (a python3
    process on GPU 0), ``<os scenario>:at570`` (already at the target) or
    ``<os scenario>:clients`` (DCGM and Fabric Manager running, GPU containers) or
    ``<os scenario>:nosystemd`` (a host that did not boot with systemd)."""
    base, _, variant = name.partition(":")
    # the local repo package of the driver the plan asks for (its name must match)
    data = _bare_host_data(base, {k: v for k, v in extra.items() if k == "nvidia_driver_version"})
    data["fake_responses"]["_gh()"] = (scenarios.converged_output(base) if variant == "at570"
                                       else running_output(base, busy=variant == "busy"))
    data["plan_variant"] = variant
    data.update(extra)
    return data


DAEMON_SHA = "d" * 64


def _pin_sha(version: str) -> str:
    return hashlib.sha256(packages.apt_pin(version).encode()).hexdigest()


def _service_state(name: str, record: list[str], variant: str) -> str:
    """nvidia-persistenced and any extra service run until the plan stops them; DCGM, nvsm,
    IMEX and Fabric Manager run on the ``clients`` variant only (``dcgm`` and the display
    managers are not installed: a headless server)."""
    if name in ("dcgm", "gdm", "gdm3", "lightdm", "sddm") or (
            name in ("nvidia-dcgm", "nvidia-fabricmanager", "nvsm", "nvidia-imex")
            and variant != "clients"):
        return "absent"
    state = "running"
    for line in record:
        if line == f"systemctl stop {name}":
            state = "stopped"
        elif line == f"systemctl start {name}":
            state = "running"
    return state


def _probe(command: str, variant: str, tag: str, record: list[str],
           versions: tuple[str, str] = (FROM, TARGET)) -> str:
    at_target = variant == "at570"
    listed = re.search(r"for s in (.*?) ?; do ", command)
    names = [n.strip("'") for n in listed.group(1).split()] if listed else []
    lines = ["init none" if variant == "nosystemd" else "init systemd"] + [f"service {n} {_service_state(n, record, variant)}" for n in names]
    if variant == "clients":
        docker = [line.split()[1] for line in record if line.startswith("docker st")]
        lines.append(f"container {'e' * 64} /web runc null")  # not a GPU container
        if not docker or docker[-1] == "start":  # the GPU containers
            lines.append(f"container {'c' * 64} /train nvidia null")
            lines.append(f"container {'d' * 64} /infer runc [{{\"Capabilities\":[[\"gpu\"]]}}]")
    modules = ["nvidia_uvm", "nvidia"]
    for line in record:
        match = re.match(r"modprobe (-r )?(\S+)", line)
        if match and match.group(1):
            modules = [m for m in modules if m != match.group(2)]
        elif match and match.group(2) not in modules:
            modules.append(match.group(2))
    lines += [f"module {m}" for m in modules]
    lines.append(f"daemon_json_sha256 {DAEMON_SHA}")
    if packages.family(tag) == "debian":
        lines.append(f"apt_pin_sha256 {_pin_sha(versions[1] if at_target else versions[0])}")
    else:
        lines += [f"dnf_stream {'570-open' if at_target else '550-dkms'}", "dnf_state enabled"]
    return "\n".join(lines) + "\n"


_INSTALL = re.compile(r"(apt-get|dnf)\b.*\binstall\b.*(nvidia-open|cuda-drivers)")


def mismatch_output(name: str, dkms_built: bool = True, target: str | None = None) -> str:
    """After the package switch, before a reboot or reload: the target (570) installed, the
    old driver (550) loaded (with ``dkms_built=False``: DKMS built nothing, yet the package
    scriptlet exited 0)."""
    out = scenarios.converged_output(name, driver=target)
    if not dkms_built:
        out = re.sub(r"@@gpuhost@@ dkms rc=0\n.*?\n(?=@@gpuhost@@)", "@@gpuhost@@ dkms rc=0\n\n",
                     out, flags=re.S)
    out = re.sub(r"(@@gpuhost@@ proc_version rc=0\n).*?\n(?=@@gpuhost@@)",
                 lambda m: m.group(1) + "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                 f"{from_of(name)}"
                 "  Mon Jun  2 12:00:00 UTC 2025\n", out, flags=re.S)
    return re.sub(r"@@gpuhost@@ smi_xml rc=0\n.*?\n(?=@@gpuhost@@)",
                  "@@gpuhost@@ smi_xml rc=18\nFailed to initialize NVML: Driver/library version "
                  "mismatch\n", out, flags=re.S)


def el_packaging_output(name: str, switched: bool) -> str:
    """gpuhost.facts.el.ElPackaging on an OL host gpuhost provisioned with 550 (its packages locked
    at 550 by dnf versionlock); after the package switch, 570's packages and 550's locks
    gone (the upgrade released them)."""
    tag = scenarios.SCENARIOS[name]["tag"]
    major = tag.removeprefix("rhel")
    version = scenarios.DRIVER if switched else FROM
    names = ("cuda-drivers", "nvidia-driver", "kmod-nvidia-latest-dkms")
    lines = [f"repo ol{major}_baseos_latest", "enabled 1",
             f"repo ol{major}_developer_EPEL", "enabled 1",
             f"rpm {el_packages.VERSIONLOCK_PLUGIN}\t(none):4.3.1-1.el{major}"]
    lines += [f"rpm {n}\t3:{version}-1.el{major}" for n in names]
    if not switched:
        lines += [f"lock {n}-3:{FROM}-1.el{major}.*" for n in names]
    return "\n".join(lines) + "\n"


def respond(host_data: dict, command: str, record: list[str]) -> str | None:
    """The answer to ``command`` when it depends on the plan so far, else None."""
    if scenarios.EL_PACKAGING.search(command):
        return el_packaging_output(host_data["plan_scenario"],
                                   any(_INSTALL.search(line) for line in record))
    if "_gh()" in command and any(_INSTALL.search(line) for line in record):
        switched = [i for i, line in enumerate(record) if _INSTALL.search(line)][-1]
        later = record[switched:]
        if not any("&& reboot )" in line or re.match(r"modprobe nvidia$", line)
                   for line in later):
            return mismatch_output(host_data["plan_scenario"],
                                   dkms_built=not host_data.get("plan_dkms_failed"),
                                   target=target_of(host_data))
        return None  # the harness answers with the converged host
    if 'echo "service $s $st"' in command:
        base = host_data["plan_scenario"]
        return _probe(command, host_data.get("plan_variant", ""),
                      scenarios.SCENARIOS[base]["tag"], record,
                      (from_of(base), target_of(host_data)))
    marker = "/var/lib/gpuhost/driver-upgrade.json"
    if marker in command and "stat -c" in command:  # files.File(marker)
        if f"upload {marker}" in record:
            return (f"user=root group=root mode=-rw------- atime=0 mtime=0 ctime=0 size=300 "
                    f"'{marker}'\n")
        return None
    if "/proc/uptime" in command:
        rebooted = any("&& reboot )" in line for line in record)
        return "5\n" if rebooted else "86400\n"
    return None
