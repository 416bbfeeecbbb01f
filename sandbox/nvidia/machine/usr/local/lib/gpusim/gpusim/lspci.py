"""`lspci` for the simulated machine: its NVIDIA GPUs (and NVSwitches) with real PCI ids.

Supported: plain, -n, -nn, -mm / -m (machine readable), -D (domain), -k (kernel driver),
-v (same as -k here), -d VENDOR[:DEVICE] and -s [[DOMAIN:]BUS:]SLOT[.FUNC] filters.
A host bridge and a network controller are listed too, so filters have work to do.
"""

import sys

from . import host, models

CLASSES = {"0302": "3D controller", "0600": "Host bridge", "0680": "Bridge",
           "0200": "Ethernet controller", "0207": "Infiniband controller"}
NVIDIA = ("10de", "NVIDIA Corporation")
OTHERS = [("00:00.0", "0600", ("8086", "Intel Corporation"), "1237",
           "440FX - 82441FX PMC [Natoma]", "02", None, None),
          ("00:03.0", "0200", ("1af4", "Red Hat, Inc."), "1000", "Virtio network device",
           None, ("1af4", "0001"), "virtio-pci")]


def devices(machine, state):
    info = models.model(machine["gpu_model"])
    driver = "nvidia" if state.get("driver") else None
    # Host trait unknown-pci-ids: the host's pci.ids predates these devices, so lspci
    # prints pciutils' fallback for an id it has no name for: "Device 2901", with -nn
    # "Device [2901]" (the name "Device" stands for it here, see render()).
    unknown = "unknown-pci-ids" in (machine.get("traits") or [])
    out = list(OTHERS[:1])
    for i in range(machine["gpu_count"]):
        name = "Device" if unknown else info["pci_name"]
        out.append((host.lspci_slot(machine, i), info["class"], NVIDIA, info["pci_device"],
                    name, "a1", ("10de", info["pci_subsys"]), driver))
    if machine.get("nvswitch") and info.get("nvswitch"):
        dev, name, count = info["nvswitch"]
        for n in range(count):
            out.append((f"{0xc4 + n:02x}:00.0", "0680", NVIDIA, dev,
                        "Device" if unknown else name, "a1", ("10de", "1622"), None))
    out.extend(nvlink5_switches(machine))
    out.extend(rdma_nics(machine))
    out.append(OTHERS[1])
    return sorted(out, key=lambda dev: dev[0])  # lspci lists by bus number


def nvlink5_switches(machine):
    """The management functions of an NVLink 5 board's switches (models.NVLINK5_SWITCH),
    as lspci tuples; none unless the machine has switches (``nvswitch``) and its model
    has NVLink 5 ones. Bound to mlx5_core (the driver container waits for mlx5_core and
    ib_umad before it starts NVLSM)."""
    info = models.model(machine["gpu_model"])
    count = (info.get("nvlink5_switches") or 0) if machine.get("nvswitch") else 0
    sw = models.NVLINK5_SWITCH
    return [(f"{sw['first_bus'] + n:02x}:00.0", sw["class"], sw["vendor"], sw["device"],
             sw["name"], None, sw["subsys"], "mlx5_core") for n in range(count)]


# Host trait rdma-nic (sandbox/traits/rdma.py): one ConnectX-7 InfiniBand NIC beside GPU 0
# (PCI 15b3:1021 "MT2910 Family [ConnectX-7]" in pci.ids, class 0x0207; NVIDIA's driver
# container counts Mellanox vendor 0x15b3 functions before it loads nvidia-peermem). No VPD
# with SW_MNG: that is what tells it from an NVLink 5 switch's management function.
RDMA_NIC = {"vendor": ("15b3", "Mellanox Technologies"), "device": "1021",
            "name": "MT2910 Family [ConnectX-7]", "class": "0207", "subsys": ("15b3", "0041"),
            "first_bus": 0xa8}


def rdma_nics(machine):
    """The host's RDMA NICs as lspci tuples (trait rdma-nic: one), bound to mlx5_core."""
    if "rdma-nic" not in (machine.get("traits") or []):
        return []
    nic = RDMA_NIC
    return [(f"{nic['first_bus']:02x}:00.0", nic["class"], nic["vendor"], nic["device"],
             nic["name"], None, nic["subsys"], "mlx5_core")]


def _vpd_resource(tag, data):
    return bytes([tag]) + len(data).to_bytes(2, "little") + data


def vpd(machine):
    """slot -> the PCI VPD bytes of each function that has one: an NVLink 5 switch's
    management function carries "SW_MNG" (what NVIDIA's driver container greps for). The
    layout is PCI's (identifier string 0x82, read-only fields 0x90, end 0x78); the field
    values are the sandbox's own."""
    out = {}
    for n, dev in enumerate(nvlink5_switches(machine)):
        fields = b"".join(key + bytes([len(value)]) + value for key, value in (
            (b"PN", b"GPUSIM-NVL5-SW"), (b"SN", f"GPUSIM{n:04d}".encode()),
            (b"V3", b"SW_MNG"), (b"RV", b"\x00")))
        out[dev[0]] = (_vpd_resource(0x82, b"NVIDIA NVLink 5 switch management (gpusim)")
                       + _vpd_resource(0x90, fields) + b"\x78")
    return out


def _matches(dev, vendor, device, slot):
    if vendor and dev[2][0] != vendor:
        return False
    if device and dev[3] != device:
        return False
    if slot:
        want = slot.lower().split(":")
        have = ("0000:" + dev[0]).split(":")
        return have[-len(want):] == want or (slot.lower() in dev[0] and "." not in slot)
    return True


def render(devs, opts):
    nn, n, mm, dom, kern = (opts.get(k) for k in ("nn", "n", "mm", "D", "k"))
    lines = []
    for slot, cls, (vid, vname), did, dname, rev, subsys, driver in devs:
        where = ("0000:" if dom else "") + slot
        cname = CLASSES[cls]
        rev_txt = f" (rev {rev})" if rev else ""
        if dname == "Device" and not nn:  # pciutils' name for an id its pci.ids lacks
            dname = f"Device {did}"
        if mm:
            q = (lambda text, code: f'"{text} [{code}]"' if nn else f'"{text}"')  # noqa: E731
            line = f"{where} {q(cname, cls)} {q(vname, vid)} {q(dname, did)}"
            line += f" -r{rev}" if rev else ""
            if subsys:
                sub_name = NVIDIA[1] if subsys[0] == "10de" else vname
                line += (f" {q(sub_name, subsys[0])} " +
                         (f'"Device [{subsys[1]}]"' if nn else f'"Device {subsys[1]}"'))
            else:
                line += ' "" ""'
        elif n and not nn:
            line = f"{where} {cls}: {vid}:{did}{rev_txt}"
        elif nn:
            line = f"{where} {cname} [{cls}]: {vname} {dname} [{vid}:{did}]{rev_txt}"
        else:
            line = f"{where} {cname}: {vname} {dname}{rev_txt}"
        lines.append(line)
        if kern and not mm:
            if subsys:
                lines.append(f"\tSubsystem: {vname} Device {subsys[1]}")
            if driver:
                lines.append(f"\tKernel driver in use: {driver}")
            if vid == "10de" and cls == "0302":
                lines.append("\tKernel modules: nvidia")
    return "".join(line + "\n" for line in lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, vendor, device, slot = {}, None, None, None
    while argv:
        arg = argv.pop(0)
        if arg in ("-d", "-s") and argv:
            value = argv.pop(0)
            if arg == "-d":
                vendor, _, device = value.lower().partition(":")
                vendor, device = vendor or None, device or None
            else:
                slot = value
        elif arg in ("-mm", "-m"):
            opts["mm"] = True
        elif arg in ("-nn", "-n", "-D", "-k"):
            opts[arg.lstrip("-")] = True
        elif arg in ("-v", "-vv", "-vvv"):
            opts["k"] = True
        elif arg.startswith("-") and len(arg) > 2 and set(arg[1:]) <= set("mnDkv"):
            opts["mm"] = opts.get("mm") or arg.count("m") >= 1
            opts["nn"] = arg.count("n") >= 2
            opts["n"] = arg.count("n") == 1
            opts["D"] = "D" in arg
            opts["k"] = "k" in arg or "v" in arg
        else:
            sys.stderr.write(f"lspci: gpusim's lspci does not support {arg}\n")
            return 2
    try:
        with host.Session(write=False) as s:
            devs = [d for d in devices(s.machine, s.state) if _matches(d, vendor, device, slot)]
    except host.SimError as err:
        sys.stderr.write(err.message.rstrip("\n") + "\n")
        return err.rc
    sys.stdout.write(render(devs, opts))
    return 0
