"""Every parser of what the NVIDIA tools and the host print, under one name: the parser
contract (``facts.parser_contract``; the team's corpus checker imports this module).

Text in, plain data out. No pyinfra, no I/O. Every public function raises only
``ValueError`` (its message names the format it expected), whatever the input. They live
by tool:

- ``facts.smi_xml``: ``nvidia-smi -q -x`` with its health fields;
- ``facts.smi_text``: ``nvidia-smi -L``, ``--query-*``, ``mig -lgi/-lci/-lgip``, its error
  messages, ``nvlink -s/-e``;
- ``facts.driver_parsers``: /proc/driver/nvidia/version, the kernel log's Xid/SXid lines,
  the Container Toolkit's ``--version`` lines;
- ``facts.host_parsers``: the host's own outputs (os-release, lspci, dpkg/rpm, dkms,
  daemon.json, the composite fact's sections).
"""
from gpuhost.facts.driver_parsers import parse_driver_version_file, parse_tool_version, parse_xid_lines
from gpuhost.facts.host_parsers import (
    parse_daemon_json,
    parse_dkms_status,
    parse_dpkg_query,
    parse_lspci_nvidia,
    parse_os_release,
    parse_pci_sysfs,
    parse_rpm_query,
    parse_run_lock,
    split_sections,
)
from gpuhost.facts.smi_text import (
    classify_smi_error,
    parse_mig_compute_instances,
    parse_mig_gpu_instance_profiles,
    parse_mig_gpu_instances,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_query_csv,
    parse_smi_list,
)
from gpuhost.facts.smi_xml import parse_smi_xml

__all__ = [
    "classify_smi_error",
    "parse_daemon_json",
    "parse_dkms_status",
    "parse_dpkg_query",
    "parse_driver_version_file",
    "parse_lspci_nvidia",
    "parse_pci_sysfs",
    "parse_mig_compute_instances",
    "parse_mig_gpu_instance_profiles",
    "parse_mig_gpu_instances",
    "parse_nvlink_errors",
    "parse_nvlink_status",
    "parse_os_release",
    "parse_query_csv",
    "parse_rpm_query",
    "parse_run_lock",
    "parse_smi_list",
    "parse_smi_xml",
    "parse_tool_version",
    "parse_xid_lines",
    "split_sections",
]
