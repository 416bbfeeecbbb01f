"""`nvidia-smi -q -x`: the XML log of the 550/570 era (DTD v12, tab indentation).

Element names and their order follow real 535-590 outputs; a subset of the leaves is
emitted (enough for every fact gpuhost reads, and then some). The health elements (ECC
counters, retired pages, remapped rows, PCIe link, clock event reasons, fabric) change
with the GPU generation and the driver branch: sandbox/README.md ("gpusim health
fields") names the real output each layout follows.
"""

from . import models

NA = "N/A"


def _esc(value):
    return (str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _render(node, depth, out):
    tag, body = node[0], node[1]
    attrs = "".join(f' {k}="{_esc(v)}"' for k, v in (node[2] if len(node) > 2 else {}).items())
    pad = "\t" * depth
    if isinstance(body, list):
        out.append(f"{pad}<{tag}{attrs}>")
        for child in body:
            _render(child, depth + 1, out)
        out.append(f"{pad}</{tag}>")
    elif body is None:  # an empty element written as open/close on two lines
        out.append(f"{pad}<{tag}{attrs}>")
        out.append(f"{pad}</{tag}>")
    elif isinstance(body, tuple):  # text on its own line (e.g. mig_devices "None")
        out.append(f"{pad}<{tag}{attrs}>")
        out.append(f"{pad}\t{_esc(body[0])}")
        out.append(f"{pad}</{tag}>")
    else:
        out.append(f"{pad}<{tag}{attrs}>{_esc(body)}</{tag}>")


def _mib(n):
    return f"{n} MiB"


def _mig_device(dev):
    return ("mig_device", [
        ("index", dev["index"]), ("gpu_instance_id", dev["gi"]),
        ("compute_instance_id", dev["ci"]),
        ("device_attributes", [("shared", [
            ("multiprocessor_count", dev["sm"]), ("copy_engine_count", dev["ce"]),
            ("encoder_count", dev["enc"]), ("decoder_count", dev["dec"]),
            ("ofa_count", dev["ofa"]), ("jpg_count", dev["jpeg"])])]),
        ("ecc_error_count", [("volatile_count", [("sram_uncorrectable", 0)])]),
        ("fb_memory_usage", [("total", _mib(dev["mem_total"])), ("reserved", _mib(0)),
                             ("used", _mib(dev["mem_used"])), ("free", _mib(dev["mem_free"]))]),
        ("bar1_memory_usage", [("total", _mib(dev["bar1_total"])), ("used", _mib(0)),
                               ("free", _mib(dev["bar1_total"]))]),
    ])


def _process(p):
    return ("process_info", [
        ("gpu_instance_id", NA if p["gi"] is None else p["gi"]),
        ("compute_instance_id", NA if p["ci"] is None else p["ci"]),
        ("pid", p["pid"]), ("type", p["type"]), ("process_name", p["name"]),
        ("used_memory", _mib(p["mem"]))])


def _pct(value):
    return NA if value is None else f"{value} %"


def _yes(flag):
    return "Yes" if flag else "No"


def _ecc_errors(h, br):
    vol, agg = h["ecc_volatile_unc"], h["ecc_aggregate_unc"]
    if h["ecc_layout"] == "bits":  # Kepler..Volta: per-unit single/double-bit blocks
        def unit(total):
            return [("device_memory", total), ("register_file", 0), ("l1_cache", 0),
                    ("l2_cache", 0), ("texture_memory", 0), ("texture_shm", NA), ("cbu", NA),
                    ("total", total)]
        return [("volatile", [("single_bit", unit(0)), ("double_bit", unit(vol))]),
                ("aggregate", [("single_bit", unit(0)), ("double_bit", unit(agg))])]
    if h["ecc_layout"] == "sram_dram":
        return [(kind, [("sram_correctable", 0), ("sram_uncorrectable", 0),
                        ("dram_correctable", 0), ("dram_uncorrectable", n)])
                for kind, n in (("volatile", vol), ("aggregate", agg))]
    split = [(kind, [("sram_correctable", 0), ("sram_uncorrectable_parity", 0),
                     ("sram_uncorrectable_secded", 0), ("dram_correctable", 0),
                     ("dram_uncorrectable", n)]) for kind, n in (("volatile", vol), ("aggregate", agg))]
    split[1][1].append(("sram_threshold_exceeded", "Yes" if h.get("sram_threshold") else "No"))
    split.append(("aggregate_uncorrectable_sram_sources", [
        (k, 0) for k in ("sram_l2", "sram_sm", "sram_microcontroller", "sram_pcie", "sram_other")]))
    if br >= 590:
        split += [("channel_repair_pending", "No"), ("tpc_repair_pending", "No"),
                  ("unrepairable_memory", "No")]
    return split


def _page_list(count, base):
    if not count:
        return None  # an empty element on two lines, as real outputs print it
    return [("retired_page", [("retired_page_address", f"0x{base + n:016x}")])
            for n in range(count)]


def _retired_pages(h):
    r = h["retired"]
    if r is None:  # GPUs that remap rows instead
        return [("multiple_single_bit_retirement", [("retired_count", NA),
                                                    ("retired_pagelist", NA)]),
                ("double_bit_retirement", [("retired_count", NA), ("retired_pagelist", NA)]),
                ("pending_blacklist", NA), ("pending_retirement", NA)]
    return [("multiple_single_bit_retirement", [("retired_count", r["single_bit"]),
                                                ("retired_pagelist", _page_list(0, 0))]),
            ("double_bit_retirement", [("retired_count", r["double_bit"]),
                                       ("retired_pagelist", _page_list(r["double_bit"],
                                                                       0x2ce8a4))]),
            ("pending_blacklist", _yes(r["pending"])), ("pending_retirement", _yes(r["pending"]))]


def _remapped_rows(h):
    r = h["remap"]
    if r is None:
        return NA
    names = ("max", "high", "partial", "low", "none")
    return [("remapped_row_corr", r["corr"]), ("remapped_row_unc", r["unc"]),
            ("remapped_row_pending", _yes(r["pending"])),
            ("remapped_row_failure", _yes(r["failure"])),
            ("row_remapper_histogram", [(f"row_remapper_histogram_{n}", f"{c} bank(s)")
                                        for n, c in zip(names, r["hist"], strict=True)])]


def _fabric(h, br):
    done = h["fabric"] == "Completed"
    body = [("state", h["fabric"] or NA), ("status", h.get("fabric_status") or NA)]
    if br >= 550:
        body += [("cliqueId", 0 if done else NA),
                 ("clusterUuid", "00000000-0000-0000-0000-000000000000" if done else NA)]
        keys = ("summary", "bandwidth", "route_recovery_in_progress", "route_unhealthy",
                "access_timeout_recovery", "incorrect_configuration") if br >= 590 else \
            ("bandwidth",)
        body.append(("health", [(k, NA) for k in keys]))
    return ("fabric", body)


def _link_info(h, br):
    gen = [("max_link_gen", h["gen_max"]), ("current_link_gen", h["gen_current"])]
    if br >= 525:
        gen += [("device_current_link_gen", h["gen_current"]),
                ("max_device_link_gen", h["gen_max"]), ("max_host_link_gen", h["gen_max"])]
    return ("pci_gpu_link_info", [
        ("pcie_gen", gen),
        ("link_widths", [("max_link_width", f"{h['width_max']}x"),
                         ("current_link_width", f"{h['width_current']}x")])])


def _event_reasons(h, br):
    word = "event" if br >= 535 else "throttle"
    return (f"clocks_{word}_reasons", [
        (f"clocks_{word}_reason_{r}", "Active" if r in h["throttle"] else "Not Active")
        for r in REASONS])


REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
           "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
           "sw_thermal_slowdown", "display_clocks_setting")


def _gpu(v, driver_version):
    h, br = v["health"], models.branch(driver_version)
    na2 = lambda a, b: [(a, NA), (b, NA)]  # noqa: E731
    mig_devices = [_mig_device(d) for d in v["mig_devices"]] or ("None",)
    clocks = [("graphics_clock", f"{v['clock_cur']} MHz"), ("sm_clock", f"{v['clock_cur']} MHz"),
              ("mem_clock", f"{v['clock_mem']} MHz"), ("video_clock", f"{v['clock_cur']} MHz")]
    power = [("power_state", v["pstate"]), ("power_draw", f"{v['power_draw']:.2f} W")] + [
        (k, f"{v['power_limit']:.2f} W") for k in
        ("current_power_limit", "requested_power_limit", "default_power_limit")] + [
        ("min_power_limit", f"{v['power_limit'] // 4:.2f} W"),
        ("max_power_limit", f"{v['power_limit']:.2f} W")]
    body = [
        ("product_name", v["name"]), ("product_brand", v["brand"]),
        ("product_architecture", v["arch"]), ("display_mode", "Disabled"),
        ("display_active", "Disabled"), ("persistence_mode", v["persistence"]),
        ("addressing_mode", "None"),
        ("mig_mode", [("current_mig", v["mig_current"]), ("pending_mig", v["mig_pending"])]),
        ("mig_devices", mig_devices),
        ("accounting_mode", "Disabled"), ("accounting_mode_buffer_size", 4000),
        ("driver_model", na2("current_dm", "pending_dm")),
        ("serial", v["serial"]), ("uuid", v["uuid"]), ("minor_number", v["minor"]),
        ("vbios_version", v["vbios"]), ("multigpu_board", "No"),
        ("board_id", f"0x{int(v['pci_bus'], 16) << 8:x}"),
        ("board_part_number", "692-2G506-0200-002"), ("gpu_part_number", v["part"]),
        ("gpu_fru_part_number", NA), ("gpu_module_id", v["index"] + 1),
        ("inforom_version", [("img_version", "G506.0200.00.04"), ("oem_object", "2.0"),
                             ("ecc_object", "6.16"), ("pwr_object", NA)]),
        ("gpu_operation_mode", na2("current_gom", "pending_gom")),
        ("gsp_firmware_version", driver_version),
        ("gpu_virtualization_mode", [("virtualization_mode", "None"),
                                     ("host_vgpu_mode", NA)]),
        ("gpu_reset_status", [("reset_required", "No"),
                              ("drain_and_reset_recommended", "No")]),
        ("ibmnpu", [("relaxed_ordering_mode", NA)]),
        ("pci", [
            ("pci_bus", v["pci_bus"]), ("pci_device", v["pci_device"]),
            ("pci_domain", v["pci_domain"]), ("pci_device_id", v["pci_device_id"]),
            ("pci_bus_id", v["bus_id"]), ("pci_sub_system_id", v["pci_subsys_id"]),
            _link_info(h, br),
            ("pci_bridge_chip", na2("bridge_chip_type", "bridge_chip_fw")),
            ("replay_counter", 0), ("replay_rollover_counter", 0),
            ("tx_util", "0 KB/s"), ("rx_util", "0 KB/s"),
            ("atomic_caps_inbound", NA), ("atomic_caps_outbound", NA)]),
        ("fan_speed", NA), ("performance_state", v["pstate"]),
        _event_reasons(h, br),
        ("fb_memory_usage", [("total", _mib(v["mem_total"])),
                             ("reserved", _mib(v["mem_reserved"])),
                             ("used", _mib(v["mem_used"])), ("free", _mib(v["mem_free"]))]),
        ("bar1_memory_usage", [("total", _mib(v["bar1_total"])), ("used", _mib(v["bar1_used"])),
                               ("free", _mib(v["bar1_total"] - v["bar1_used"]))]),
        ("cc_protected_memory_usage", [("total", _mib(0)), ("used", _mib(0)),
                                       ("free", _mib(0))]),
        ("compute_mode", "Default"),
        ("utilization", [("gpu_util", _pct(v["util_gpu"])), ("memory_util", _pct(v["util_mem"])),
                         ("encoder_util", _pct(0 if v["util_gpu"] is not None else None)),
                         ("decoder_util", _pct(0 if v["util_gpu"] is not None else None)),
                         ("jpeg_util", _pct(0 if v["util_gpu"] is not None else None)),
                         ("ofa_util", _pct(0 if v["util_gpu"] is not None else None))]),
        ("encoder_stats", [("session_count", 0), ("average_fps", 0), ("average_latency", 0)]),
        ("fbc_stats", [("session_count", 0), ("average_fps", 0), ("average_latency", 0)]),
        ("ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")]),
        ("ecc_errors", _ecc_errors(h, br)),
        ("retired_pages", _retired_pages(h)),
        ("remapped_rows", _remapped_rows(h)),
        ("temperature", [("gpu_temp", f"{v['temp']} C"), ("gpu_temp_tlimit", NA),
                         ("gpu_temp_max_threshold", "92 C"), ("gpu_temp_slow_threshold", "89 C"),
                         ("gpu_temp_max_gpu_threshold", "85 C"),
                         ("gpu_target_temperature", NA), ("memory_temp", NA),
                         ("gpu_temp_max_mem_threshold", NA)]),
        ("gpu_power_readings", power),
        ("clocks", clocks),
        ("max_clocks", [("graphics_clock", f"{v['clock_max']} MHz"),
                        ("sm_clock", f"{v['clock_max']} MHz"),
                        ("mem_clock", f"{v['clock_mem']} MHz"),
                        ("video_clock", f"{v['clock_max']} MHz")]),
        ("clock_policy", na2("auto_boost", "auto_boost_default")),
    ] + ([_fabric(h, br)] if br >= 525 else []) + [
        ("processes", [_process(p) for p in v["processes"]] or None),
        ("accounted_processes", None),
        ("capabilities", [("egm", "disabled")]),
    ]
    return ("gpu", body, {"id": v["bus_id"]})


def render(views, attached, driver_version, cuda_version, timestamp):
    """The document; `attached` is the GPU count of the machine (-i does not change it)."""
    out = ['<?xml version="1.0" ?>',
           '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>"]
    for node in (("timestamp", timestamp), ("driver_version", driver_version),
                 ("cuda_version", cuda_version), ("attached_gpus", attached)):
        _render(node, 1, out)
    for v in views:
        _render(_gpu(v, driver_version), 1, out)
        out.append("")  # real output leaves a blank line after each </gpu>
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"
