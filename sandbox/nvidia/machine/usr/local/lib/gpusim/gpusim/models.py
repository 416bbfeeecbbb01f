"""Hardware and driver facts the simulator needs: GPU models, MIG profiles, driver eras.

Figures come from NVIDIA's documentation, real captured outputs (nvidia-smi -q/-x/table/lgip
of the same GPUs, the team's corpus) and the PCI ID database. Where a figure
was not available it is marked "approx" and only feeds cosmetic columns.
"""

# One MIG GPU-instance profile: (id, name, memory slices (placement size), compute slices,
# allowed placement starts, GiB as -lgip prints it, MiB of a MIG device, SM, DEC, ENC, CE,
# JPEG, OFA, max count).
_A100_40GB_PROFILES = [
    (19, "1g.5gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), "4.75", 4864, 14, 0, 0, 1, 0, 0, 7),
    (20, "1g.5gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), "4.75", 4864, 14, 1, 0, 1, 1, 1, 1),
    (15, "1g.10gb", 2, 1, (0, 2, 4, 6), "9.75", 9984, 14, 1, 0, 1, 0, 0, 4),
    (14, "2g.10gb", 2, 2, (0, 2, 4), "9.75", 9984, 28, 1, 0, 2, 0, 0, 3),
    (9, "3g.20gb", 4, 3, (0, 4), "19.62", 20096, 42, 2, 0, 3, 0, 0, 2),
    (5, "4g.20gb", 4, 4, (0,), "19.62", 20096, 56, 2, 0, 4, 0, 0, 1),
    (0, "7g.40gb", 8, 7, (0,), "39.38", 40320, 98, 5, 0, 7, 1, 1, 1),
]
# H100 SXM5 80GB: memory figures from a 570.169 H100 capture, SM/engine counts from the
# 590.48.01 H100 80GB HBM3 MIG table in the corpus (1g=16, 2g=32, 3g=60 SMs).
_H100_80GB_PROFILES = [
    (19, "1g.10gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), "9.75", 9984, 16, 1, 0, 1, 1, 0, 7),
    (20, "1g.10gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), "9.75", 9984, 16, 1, 0, 1, 1, 1, 1),
    (15, "1g.20gb", 2, 1, (0, 2, 4, 6), "19.62", 20096, 16, 1, 0, 1, 1, 0, 4),
    (14, "2g.20gb", 2, 2, (0, 2, 4), "19.62", 20096, 32, 2, 0, 2, 2, 0, 3),
    (9, "3g.40gb", 4, 3, (0, 4), "39.50", 40448, 60, 3, 0, 3, 3, 0, 2),
    (5, "4g.40gb", 4, 4, (0,), "39.50", 40448, 64, 4, 0, 4, 4, 0, 1),
    (0, "7g.80gb", 8, 7, (0,), "79.25", 81152, 132, 7, 0, 8, 7, 1, 1),
]

# B200 (GB100): profile names and counts from NVIDIA's MIG User Guide (v580, "Supported MIG
# Profiles", table "GPU Instance Profiles on B200", read 2026-11-27); ids and placements
# from a real B200 `nvidia-smi mig -lgip`/`-lgipp` (p6-b200.48xlarge, quoted in
# gpuhost/data/mig_profiles.json): 19, 20, 15, 14, 9, 5, 0 with the A100 placements.
# GiB/MiB, SM and engine columns are approx (cosmetic).
_B200_PROFILES = [
    (19, "1g.23gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), "22.12", 22656, 18, 1, 0, 1, 1, 0, 7),
    (20, "1g.23gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), "22.12", 22656, 18, 1, 0, 1, 1, 1, 1),
    (15, "1g.45gb", 2, 1, (0, 2, 4, 6), "44.50", 45568, 18, 1, 0, 1, 1, 0, 4),
    (14, "2g.45gb", 2, 2, (0, 2, 4), "44.50", 45568, 36, 2, 0, 2, 2, 0, 3),
    (9, "3g.90gb", 4, 3, (0, 4), "89.25", 91392, 60, 3, 0, 3, 3, 0, 2),
    (5, "4g.90gb", 4, 4, (0,), "89.25", 91392, 72, 4, 0, 4, 4, 0, 1),
    (0, "7g.180gb", 8, 7, (0,), "178.00", 182272, 144, 7, 0, 8, 7, 1, 1),
]
# RTX PRO 6000 Blackwell Server Edition (GB202, 4 compute slices, at most 4 instances):
# profile names and counts from the same guide's table "GPU Instance Profiles on RTX PRO
# 6000" (attribute profiles +me, +gfx, +me.all, -me); ids and placements from a real
# `nvidia-smi mig -i 0 -lgip`/`-lgipp` of that card (quoted in gpuhost/data/mig_profiles.json):
# memory placements on a 12-unit grid, {0,3,6,9}:3 for 1g, {0,6}:6 for 2g, {0}:12 for 4g.
# GiB/MiB, SM and engine columns are approx (cosmetic).
_RTX_PRO_6000_PROFILES = [
    (14, "1g.24gb", 3, 1, (0, 3, 6, 9), "23.62", 24192, 46, 1, 1, 1, 1, 0, 4),
    (21, "1g.24gb+me", 3, 1, (0, 3, 6, 9), "23.62", 24192, 46, 1, 1, 1, 1, 1, 1),
    (47, "1g.24gb+gfx", 3, 1, (0, 3, 6, 9), "23.62", 24192, 46, 1, 1, 1, 1, 0, 4),
    (65, "1g.24gb+me.all", 3, 1, (0, 3, 6, 9), "23.62", 24192, 46, 4, 4, 1, 4, 1, 1),
    (67, "1g.24gb-me", 3, 1, (0, 3, 6, 9), "23.62", 24192, 46, 0, 0, 1, 0, 0, 4),
    (5, "2g.48gb", 6, 2, (0, 6), "47.25", 48384, 94, 2, 2, 2, 2, 0, 2),
    (35, "2g.48gb+gfx", 6, 2, (0, 6), "47.25", 48384, 94, 2, 2, 2, 2, 0, 2),
    (64, "2g.48gb+me.all", 6, 2, (0, 6), "47.25", 48384, 94, 4, 4, 2, 4, 1, 1),
    (66, "2g.48gb-me", 6, 2, (0, 6), "47.25", 48384, 94, 0, 0, 2, 0, 0, 2),
    (0, "4g.96gb", 12, 4, (0,), "94.50", 96768, 188, 4, 4, 4, 4, 1, 1),
    (32, "4g.96gb+gfx", 12, 4, (0,), "94.50", 96768, 188, 4, 4, 4, 4, 1, 1),
]

PROFILE_KEYS = ("id", "name", "mem_slices", "compute", "placements", "gib", "mib", "sm",
                "dec", "enc", "ce", "jpeg", "ofa", "max")


def _profiles(rows):
    return [dict(zip(PROFILE_KEYS, row, strict=True)) for row in rows]


# Compute-instance profiles: id -> compute slices (NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0,
# _2_SLICE 1, _3_SLICE 2, _4_SLICE 3, _7_SLICE 4). A GI of g slices offers every c <= g
# (7g: 1, 2, 3, 4, 7; 4g: 1, 2, 3, 4; 3g: 1, 2, 3; 2g: 1, 2; 1g: 1).
CI_PROFILE_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7}

# MIG geometry of a GPU: compute slices, memory placement units, GI ids (size -> start ->
# id) and where a new GI goes when several placements are free.
# Seven-slice GPUs (A100, H100, B200): GI ids as recent drivers number them (matches
# 580.126.09 and 570.169 captures: the upper half of the memory is numbered first); seven 1g
# GIs on an empty GPU get ids 9, 7, 8, 11, 12, 13, 14 (observed); the other sizes' order is
# a documented guess that keeps the layouts NVIDIA documents creatable (3g first into the
# upper half).
GEOMETRY_7 = {
    "compute_slices": 7, "memory_units": 8,
    "gi_ids": {8: {0: 0}, 4: {4: 1, 0: 2}, 2: {4: 3, 6: 4, 0: 5, 2: 6},
               1: {4: 7, 5: 8, 6: 9, 7: 10, 0: 11, 1: 12, 2: 13, 3: 14}},
    "preference": {1: (6, 4, 5, 0, 1, 2, 3), 2: (0, 2, 4, 6), 4: (4, 0), 8: (0,)},
}
# RTX PRO 6000 Blackwell: 4 compute slices on a 12-unit memory grid (its -lgipp). GI ids and
# the order of free placements were not seen: a guess in the seven-slice GPUs' style (the
# upper half numbered first, a 2g into the upper half first).
GEOMETRY_4_GB202 = {
    "compute_slices": 4, "memory_units": 12,
    "gi_ids": {12: {0: 0}, 6: {6: 1, 0: 2}, 3: {6: 3, 9: 4, 0: 5, 3: 6}},
    "preference": {3: (0, 3, 6, 9), 6: (6, 0), 12: (0,)},
}

GPU_MODELS = {
    "A100-SXM4-40GB": {
        "name": "NVIDIA A100-SXM4-40GB", "brand": "NVIDIA", "arch": "Ampere",
        "compute_cap": "8.0", "memory_mib": 40960, "reserved_mib": 434, "bar1_mib": 65536,
        "bar1_mig_ratio": 0.37266, "pci_device": "20b0", "pci_subsys": "134f",
        "pci_name": "GA100 [A100 SXM4 40GB]", "class": "0302", "power_limit": 400,
        "power_idle": 52, "max_link_gen": 4, "vbios": "92.00.45.00.03",
        "part": "20B0-884-A1", "mig": True, "nvswitch": ("1af1", "GA100 [A100 NVSwitch]", 6),
        "bus_ids": ("07:00", "0F:00", "47:00", "4E:00", "87:00", "90:00", "B7:00", "BD:00"),
        "clocks": (1410, 1215), "profiles": _profiles(_A100_40GB_PROFILES),
        "geometry": GEOMETRY_7, "mig_min_driver": "450.80.02",
        "remap_banks": 640, "nvlink": (12, "25 GB/s"),
    },
    "H100-80GB-HBM3": {
        "name": "NVIDIA H100 80GB HBM3", "brand": "NVIDIA", "arch": "Hopper",
        "compute_cap": "9.0", "memory_mib": 81559, "reserved_mib": 552, "bar1_mib": 131072,
        "bar1_mig_ratio": 0.377495, "pci_device": "2330", "pci_subsys": "16c1",
        "pci_name": "GH100 [H100 SXM5 80GB]", "class": "0302", "power_limit": 700,
        "power_idle": 70, "max_link_gen": 5, "vbios": "96.00.74.00.1C",
        "part": "2330-885-A1", "mig": True, "nvswitch": ("22a3", "GH100 [H100 NVSwitch]", 4),
        "bus_ids": ("18:00", "2A:00", "3A:00", "5D:00", "9A:00", "AB:00", "BA:00", "DB:00"),
        "clocks": (1980, 2619), "profiles": _profiles(_H100_80GB_PROFILES),
        "geometry": GEOMETRY_7, "mig_min_driver": "525.85.12",
        "remap_banks": 3072, "nvlink": (18, "26.562 GB/s"),
    },
    "L4": {
        "name": "NVIDIA L4", "brand": "NVIDIA", "arch": "Ada Lovelace",
        "compute_cap": "8.9", "memory_mib": 23034, "reserved_mib": 556, "bar1_mib": 32768,
        "pci_device": "27b8", "pci_subsys": "16ca", "pci_name": "AD104GL [L4]",
        "class": "0302", "power_limit": 72, "power_idle": 16, "max_link_gen": 4,
        "vbios": "95.04.29.00.06", "part": "27B8-895-A1", "mig": False, "nvswitch": None,
        "bus_ids": ("01:00", "21:00", "41:00", "61:00", "81:00", "A1:00", "C1:00", "E1:00"),
        "clocks": (2040, 6251), "profiles": [], "remap_banks": 96,
    },
    "T4": {
        "name": "Tesla T4", "brand": "NVIDIA", "arch": "Turing",
        "compute_cap": "7.5", "memory_mib": 15360, "reserved_mib": 256, "bar1_mib": 256,
        "pci_device": "1eb8", "pci_subsys": "12a2", "pci_name": "TU104GL [Tesla T4]",
        "class": "0302", "power_limit": 70, "power_idle": 10, "max_link_gen": 3,
        "vbios": "90.04.96.00.02", "part": "1EB8-895-A1", "mig": False, "nvswitch": None,
        "bus_ids": ("00:1E", "00:1D", "00:1C", "00:1B", "00:1A", "00:19", "00:18", "00:17"),
        "clocks": (1590, 5001), "profiles": [],
    },
    "V100-SXM2-16GB": {
        "name": "Tesla V100-SXM2-16GB", "brand": "Tesla", "arch": "Volta",
        "compute_cap": "7.0", "memory_mib": 16384, "reserved_mib": 0, "bar1_mib": 16384,
        "pci_device": "1db1", "pci_subsys": "1212", "pci_name": "GV100GL [Tesla V100 SXM2 16GB]",
        "class": "0302", "power_limit": 300, "power_idle": 42, "max_link_gen": 3,
        "vbios": "88.00.43.00.01", "part": "1DB1-895-A1", "mig": False,
        "nvswitch": ("1ac2", "Device 1ac2", 6),
        "bus_ids": ("06:00", "07:00", "0A:00", "0B:00", "85:00", "86:00", "89:00", "8A:00"),
        "clocks": (1530, 877), "profiles": [], "nvlink": (6, "25.781 GB/s"),
    },
    # Pre-Turing PCIe cards and a GPU newer than gpuhost's NVIDIA table snapshot. Names and
    # PCI device ids: NVIDIA's supported-gpus.json (525: 0x1DB4 "Tesla V100-PCIE-16GB",
    # 0x15F8 "Tesla P100-PCIE-16GB"); B200 0x2901: NVIDIA's gpu-admin-tools devid_chips.py
    # puts 0x2900-0x297F in GB100 (Blackwell). pci.ids names: pciutils' pci.ids. Subsystem
    # ids, memory, clocks, power, vbios and bus ids are approx (cosmetic columns only).
    "V100-PCIE-16GB": {
        "name": "Tesla V100-PCIE-16GB", "brand": "Tesla", "arch": "Volta",
        "compute_cap": "7.0", "memory_mib": 16384, "reserved_mib": 0, "bar1_mib": 16384,
        "pci_device": "1db4", "pci_subsys": "1214", "pci_name": "GV100GL [Tesla V100 PCIe 16GB]",
        "class": "0302", "power_limit": 250, "power_idle": 25, "max_link_gen": 3,
        "vbios": "88.00.4F.00.09", "part": "1DB4-893-A1", "mig": False, "nvswitch": None,
        "bus_ids": ("18:00", "3B:00", "3C:00", "5E:00", "5F:00", "86:00", "AF:00", "D8:00"),
        "clocks": (1380, 877), "profiles": [],
    },
    "P100-PCIE-16GB": {
        "name": "Tesla P100-PCIE-16GB", "brand": "Tesla", "arch": "Pascal",
        "compute_cap": "6.0", "memory_mib": 16384, "reserved_mib": 0, "bar1_mib": 16384,
        "pci_device": "15f8", "pci_subsys": "118f", "pci_name": "GP100GL [Tesla P100 PCIe 16GB]",
        "class": "0302", "power_limit": 250, "power_idle": 26, "max_link_gen": 3,
        "vbios": "86.00.3A.00.02", "part": "0900-2H400-0000-000", "mig": False, "nvswitch": None,
        "bus_ids": ("04:00", "06:00", "07:00", "08:00", "0C:00", "0D:00", "0E:00", "0F:00"),
        "clocks": (1328, 715), "profiles": [],
    },
    "B200": {
        "name": "NVIDIA B200", "brand": "NVIDIA", "arch": "Blackwell",
        "compute_cap": "10.0", "memory_mib": 183359, "reserved_mib": 1024, "bar1_mib": 262144,
        "bar1_mig_ratio": 0.375, "pci_device": "2901", "pci_subsys": "1999",
        "pci_name": "GB100 [B200]", "class": "0302", "power_limit": 1000, "power_idle": 140,
        "max_link_gen": 5, "vbios": "97.00.4B.00.01", "part": "2901-886-A1", "mig": True,
        "nvswitch": None,
        "bus_ids": ("1B:00", "43:00", "52:00", "61:00", "9D:00", "C3:00", "D1:00", "DF:00"),
        "clocks": (1965, 3996), "profiles": _profiles(_B200_PROFILES), "remap_banks": 3072,
        "geometry": GEOMETRY_7, "mig_min_driver": "570.133.20",
        # HGX B200: 2 NVLink 5 switch chips (NVIDIA's HGX B200 specification: "NVIDIA NVLink
        # Switch 2x"), seen by the host through their management function (NVLINK5_SWITCH)
        "nvlink5_switches": 2,
        # 18 NVLink 5 links (NVIDIA's B200 datasheet: 1.8 TB/s NVLink per GPU, 18 links);
        # the per-link text nvidia-smi prints is approx (H100's 26.562 GB/s doubled)
        "nvlink": (18, "53.125 GB/s"),
    },
    # RTX PRO 6000 Blackwell Server Edition: PCI 10de:2bb5 (NVIDIA's supported-gpus.json, R590 era;
    # mig-parted's device filter 0x2BB510DE); 97887 MiB (gpuhost/data/gpu_models.json); MIG
    # from R575 (>= 575.51.03: the MIG User Guide's "Getting Started" prerequisites, read
    # 2026-11-27). pci.ids name, subsystem, power, vbios, clocks and bus ids are approx.
    "RTX-PRO-6000-Blackwell-Server": {
        "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "brand": "NVIDIA",
        "arch": "Blackwell", "compute_cap": "12.0", "memory_mib": 97887, "reserved_mib": 580,
        "bar1_mib": 131072, "bar1_mig_ratio": 0.375, "pci_device": "2bb5",
        "pci_subsys": "204e", "pci_name": "GB202GL [RTX PRO 6000 Blackwell Server Edition]",
        "class": "0302", "power_limit": 600, "power_idle": 30, "max_link_gen": 5,
        "vbios": "98.02.52.00.02", "part": "2BB5-895-A1", "mig": True, "nvswitch": None,
        "bus_ids": ("17:00", "3D:00", "63:00", "85:00", "9B:00", "BD:00", "D5:00", "E7:00"),
        "clocks": (2430, 14001), "profiles": _profiles(_RTX_PRO_6000_PROFILES),
        "remap_banks": 192, "geometry": GEOMETRY_4_GB202, "mig_min_driver": "575.51.03",
    },
}

# Pre-Turing GPUs have no GSP: the open kernel module refuses them (probe -> ENODEV).
OPEN_MODULE_ARCHS = ("Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell")
# ... and Blackwell has no proprietary module support (NVIDIA's driver installation guide).
OPEN_ONLY_ARCHS = ("Blackwell",)
# MIG mode survives a reboot only on Ampere (InfoROM bit); Hopper+ forgets it at unload.
MIG_MODE_PERSISTS = ("Ampere",)

# Health layouts of `nvidia-smi -q -x` / `-q` (sandbox/README.md, "gpusim health fields",
# names the real file each follows). Dynamic page retirement: Kepler to Turing (NVIDIA,
# "Dynamic Page Retirement", availability: "K20 and newer Tesla products, including the
# Tesla V100 and T4"); row remapping: GA100, GA10x, AD10x, GH100, GB10x (NVIDIA, "GPU Memory
# Error Management", supported GPUs). Row remapper histogram sizes (`remap_banks`): L4 96
# (L4 550.90.07 capture), A100 640 (A100-SXM4-80GB 555.42.02 capture, approx for the 40GB),
# H100 3072 (H100 NVL 550.54.14 capture, approx for the SXM5), B200 approx.
PAGE_RETIREMENT_ARCHS = ("Pascal", "Volta", "Turing")
# ECC counters as single_bit/double_bit blocks (parser contract: Kepler to Volta); Turing
# and newer print SRAM/DRAM counters.
ECC_BIT_LAYOUT_ARCHS = ("Pascal", "Volta")
# NVML's GPU fabric info (nvmlDeviceGetGpuFabricInfo): "For Hopper or newer fully supported
# devices"; an A100 HGX prints N/A (A100-SXM4-80GB 535.54.03 capture).
FABRIC_ARCHS = ("Hopper", "Blackwell")
# An NVLink 5 switch (HGX B200/B300) is not an NVIDIA 0x0680 bridge: the host sees its
# management function as an InfiniBand device whose VPD holds "SW_MNG" (NVIDIA's driver
# container, gpu-driver-container@06a208c rhel9/nvidia-driver _assert_nvlink5_system: grep
# SW_MNG /sys/class/infiniband/*/device/vpd). PCI id and VPD layout approx: Mellanox
# 15b3:1021 "MT2910 Family [ConnectX-7]" (pci.ids), class 0x0207 (InfiniBand controller).
NVLINK5_SWITCH = {"vendor": ("15b3", "Mellanox Technologies"), "device": "1021",
                  "name": "MT2910 Family [ConnectX-7]", "class": "0207",
                  "subsys": ("15b3", "0026"), "first_bus": 0xe4}
# "nvlink": (links, speed as `nvidia-smi nvlink -s` prints an active link) of the SXM
# models, from public captures: A100-SXM4-40GB 12 x "25 GB/s" (driver 535.161.08),
# H100 80GB HBM3 18 x "26.562 GB/s" (stas00/ml-engineering), Tesla V100-SXM2-16GB
# 6 x "25.781 GB/s" (sandbox/README.md "NVLink"). PCIe models have none.

# Newest CUDA a driver branch supports, as nvidia-smi prints it: the CUDA release whose
# toolkit ships that branch (NVIDIA's CUDA release notes, table 3, in
# gpuhost/data/cuda_drivers.json: 590 -> 13.1, 595 -> 13.2, 610 -> 13.3); 620: 13.5, the
# cuda_compat of NVIDIA's redistrib_620.70.06.json (release date 2026-11-04).
CUDA_BY_BRANCH = {
    470: "11.4", 510: "11.6", 515: "11.7", 520: "11.8", 525: "12.0", 530: "12.1",
    535: "12.2", 545: "12.3", 550: "12.4", 555: "12.5", 560: "12.6", 565: "12.7",
    570: "12.8", 575: "12.9", 580: "13.0", 590: "13.1", 595: "13.2", 610: "13.3",
    620: "13.5",
}
# Build dates printed in /proc/driver/nvidia/version (approx for unlisted versions).
BUILD_DATES = {
    "550.163.01": "Fri Apr 25 17:52:54 UTC 2025",
    "570.172.08": "Tue Jul  8 17:48:18 UTC 2025",
}
# `gcc --version` of the distribution a module was built on (GCC version: line).
GCC_BY_OS = {
    "debian12": "gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) ",
    "debian13": "gcc version 14.2.0 (Debian 14.2.0-19) ",
    "ubuntu2204": "gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) ",
    "ubuntu2404": "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) ",
    "rhel8": "gcc version 8.5.0 20210514 (Red Hat 8.5.0-22) (GCC) ",
    "rhel9": "gcc version 11.4.1 20231218 (Red Hat 11.4.1-3) (GCC) ",
    "ol8": "gcc version 8.5.0 20210514 (Red Hat 8.5.0-22.0.1) (GCC) ",
    "ol9": "gcc version 11.4.1 20231218 (Red Hat 11.4.1-3.0.1) (GCC) ",
}


def branch(version):
    """'570.172.08' -> 570."""
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return 0


def cuda_version(driver_version):
    major = branch(driver_version)
    best = None
    for br in sorted(CUDA_BY_BRANCH):
        if br <= major:
            best = CUDA_BY_BRANCH[br]
    return best or "N/A"


def nvml_version(driver_version):
    """NVML prints the first two fields: '570.172.08' -> '570.172'."""
    return ".".join(str(driver_version).split(".")[:2])


def model(key):
    try:
        return GPU_MODELS[key]
    except KeyError:
        known = ", ".join(sorted(GPU_MODELS))
        raise ValueError(f"unknown gpu_model {key!r} in machine.json (known: {known})") from None


def profile_by_token(model_info, token):
    """A -cgi token: profile id ('9'), short name ('3g.20gb') or full name ('MIG 3g.20gb')."""
    token = token.strip()
    for prof in model_info["profiles"]:
        if token.isdigit() and int(token) == prof["id"]:
            return prof
        if token in (prof["name"], "MIG " + prof["name"]):
            return prof
    return None


def bar1_mig_mib(model_info, mem_slices):
    units = model_info["geometry"]["memory_units"]
    return int(model_info["bar1_mib"] * mem_slices / units * model_info["bar1_mig_ratio"])


def mig_supported(model_info, driver_version):
    """MIG needs a MIG GPU and a driver at least its first MIG driver (NVIDIA's MIG User
    Guide, "Getting Started": B200 R570 >= 570.133.20, RTX PRO 6000 R575 >= 575.51.03)."""
    if not model_info["mig"]:
        return False
    if not driver_version:
        return True
    have = tuple(int(x) for x in str(driver_version).split(".") if x.isdigit())
    need = tuple(int(x) for x in model_info["mig_min_driver"].split("."))
    return have >= need
