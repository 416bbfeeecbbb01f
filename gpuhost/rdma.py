"""GPUDirect RDMA readiness (``nvidia_gpudirect_rdma``, docs/rdma.md; issue 25 item 5).

Pure: what the host's RDMA NICs, ``nvidia-smi topo -m`` and the PCIe bridges' ACS control
bits say, what the setting asks for on this host, and what is wrong (drift items and
health findings). The facts come from the ``rdma`` / ``rdma_topo`` sections of
``facts.script`` (``facts.assemble_rdma.rdma_state``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CHOICES = ("off", "auto", "peermem", "dmabuf")
MODULE = "nvidia_peermem"
MODULES_LOAD = "/etc/modules-load.d/nvidia-peermem.conf"
# DMA-BUF export of GPU memory: NVIDIA's open kernel modules on Linux 5.12 or newer
# (docs/rdma.md, "DMA-BUF")
DMABUF_MIN_KERNEL = (5, 12)

# nvidia-smi topo -m's legend, nearest first (docs/rdma.md, "Topology")
LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS")
# Beyond PXB NCCL turns GPUDirect RDMA off unless NCCL_NET_GDR_LEVEL says otherwise
# (NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr: netGdrLevel = PATH_PXB)
GDR_OFF = ("PHB", "NODE", "SYS")
_SLOT = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_REDIRECT = ("ReqRedir+", "CmpltRedir+")


def settings_problems(mode: str, flavor: str) -> list[str]:
    """Misfits refused before any host is contacted."""
    if mode == "dmabuf" and flavor == "proprietary":
        return ["nvidia_gpudirect_rdma: dmabuf needs NVIDIA's open kernel modules (the "
                "proprietary module cannot export GPU memory as DMA-BUF): set "
                "nvidia_driver_flavor open or auto, or nvidia_gpudirect_rdma peermem"]
    return []


# --- parsers -------------------------------------------------------------------------------

def parse_section(text: str) -> dict[str, Any]:
    """The ``rdma`` section: ``gpu SLOT``, ``nic SLOT``, ``switch SLOT`` (Mellanox PCI
    functions; ``switch``: VPD with SW_MNG, an NVLink 5 switch tray's management port),
    ``ib NAME SLOT nic|switch`` (/sys/class/infiniband), ``path SLOT SYSFS_PATH``,
    ``acs SLOT FLAGS...`` (lspci's ACSCtl line), ``lspci missing``, ``peermem
    loaded|not_loaded``, ``persist FILE``, ``peer_api exported|absent`` (ib_core's
    peer-memory API in /proc/kallsyms; absent: an inbox RDMA stack)."""
    out: dict[str, Any] = {"gpus": [], "nics": {}, "switches": {}, "paths": {}, "acs": {},
                           "acs_read": True, "peermem_loaded": None, "persisted_in": [],
                           "peer_api": None}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        tag, args = parts[0], parts[1:]
        if tag == "gpu" and args:
            out["gpus"].append(args[0])
        elif tag in ("nic", "switch") and args:
            (out["switches"] if tag == "switch" else out["nics"]).setdefault(args[0], None)
        elif tag == "ib" and len(args) == 3 and _SLOT.match(args[1]):
            name, slot, kind = args
            (out["switches"] if kind == "switch" else out["nics"])[slot] = name
        elif tag == "path" and len(args) == 2:
            chain = [part for part in args[1].split("/") if _SLOT.match(part)]
            out["paths"][args[0]] = chain[:-1] if chain and chain[-1] == args[0] else chain
        elif tag == "acs" and args:
            out["acs"][args[0]] = [flag for flag in args[1:] if flag != "ACSCtl:"]
        elif tag == "lspci" and args == ["missing"]:
            out["acs_read"] = False
        elif tag == "peermem" and args:
            out["peermem_loaded"] = args[0] == "loaded"
        elif tag == "persist" and args:
            out["persisted_in"].append(args[0])
        elif tag == "peer_api" and args and args[0] in ("exported", "absent"):
            out["peer_api"] = args[0]
    for slot in out["switches"]:
        out["nics"].pop(slot, None)
    return out


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Older drivers' name for SYS: "SOC = Connection traversing PCIe as well as the SMP link
# between CPU sockets(e.g. QPI)" (their legend; NODE/SYS split it later)
LINK_ALIASES = {"SOC": "SYS"}


def parse_topo(text: str) -> dict[str, Any]:
    """``nvidia-smi topo -m``: ``{"columns": [...], "matrix": {row: {column: link}},
    "nic_names": {"NIC0": "mlx5_0"}}``. Older drivers name the NIC columns by device
    (``mlx5_0``), newer ones ``NIC0`` with a "NIC Legend". Every shape seen in real
    captures (tests/fixtures/rdma/README.md): tab-separated or pasted with spaces, the
    header indented or not, underlined with ANSI escapes (nvidia-smi prints them around the
    header, captured by scripts too), the legacy ``SOC`` link. Raises ValueError without a
    header, without a matrix row, or when a row's own cell is not ``X`` (a misread matrix
    is never returned)."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    # the header: GPU0 first, column names after it (a matrix row has X second)
    at = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"]
               and line.split()[1:2] != ["X"]), None)
    if at is None:
        raise ValueError("nvidia-smi topo -m: no header line with GPU0")
    columns = []
    for token in lines[at].split():
        if token == "CPU":  # "CPU Affinity", "NUMA Affinity", "GPU NUMA ID" follow
            break
        columns.append(token)
    matrix: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}
    legend = False
    for line in lines[at + 1:]:
        tokens = line.split()
        if tokens[:1] in (["Legend:"], ["NIC"]):  # the legends follow the matrix
            legend = True
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            names[match.group(1)] = match.group(2)
        elif not legend and tokens and tokens[0] in columns and len(tokens) > len(columns):
            row = dict(zip(columns, tokens[1:len(columns) + 1], strict=True))
            if row.get(tokens[0]) != "X":
                raise ValueError(f"nvidia-smi topo -m: row {tokens[0]} has no X in its own "
                                 f"column ({line.strip()[:80]!r}): the matrix is misread")
            matrix[tokens[0]] = row
    if not matrix:
        raise ValueError("nvidia-smi topo -m: no matrix row under the header")
    return {"columns": columns, "matrix": matrix, "nic_names": names}


# --- decisions -----------------------------------------------------------------------------

def kernel_version(release: str | None) -> tuple[int, int] | None:
    match = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def dmabuf_possible(state: Mapping[str, Any]) -> bool | None:
    """DMA-BUF needs the open module loaded and Linux 5.12+; None: not known (no module)."""
    loaded = (state.get("driver") or {}).get("loaded") or {}
    version = kernel_version((state.get("os") or {}).get("kernel_release"))
    if not loaded.get("flavor") or version is None:
        return None
    return loaded["flavor"] == "open" and version >= DMABUF_MIN_KERNEL


def inbox(rdma: Mapping[str, Any]) -> bool:
    """An inbox RDMA stack: ib_core is loaded and exports no peer-memory API, so
    ``modprobe nvidia_peermem`` fails with -EINVAL (nvidia-peermem.c nv_mem_client_init
    without NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT; NVIDIA/gpu-operator#2868)."""
    return rdma.get("peer_api") == "absent"


def wanted(mode: str, rdma: Mapping[str, Any]) -> str:
    """What this host gets: ``peermem`` (module loaded, then loaded at boot), ``dmabuf``
    (nothing loaded, gpuhost's modules-load.d file removed), ``inbox`` (peermem asked, but
    the RDMA stack has no peer-memory API: as dmabuf, the audit says why), ``none``
    (nothing touched), or ``refuse`` (peermem asked on a host without RDMA NIC)."""
    nics = bool(rdma.get("nics"))
    if mode in ("auto", "peermem") and nics and inbox(rdma):
        return "inbox"
    if mode == "auto":
        return "peermem" if nics else "none"
    if mode == "peermem":
        return "peermem" if nics else "refuse"
    return "dmabuf" if mode == "dmabuf" else "none"


INBOX_WHY = (f"the host's RDMA stack is the kernel's inbox one: ib_core exports no peer-memory "
             f"API (ib_register_peer_memory_client is not in /proc/kallsyms; only MLNX_OFED / "
             f"DOCA-OFED has it), so {MODULE} cannot load (modprobe: Invalid argument)")


def modules_load_conf() -> str:
    return ("# Managed by gpuhost (nvidia_gpudirect_rdma): GPUDirect RDMA's peer memory client,\n"
            "# loaded at boot; it pulls in nvidia and ib_core (docs/rdma.md)\n"
            f"{MODULE}\n")


def drift(state: Mapping[str, Any], mode: str) -> list[tuple[str, str, str, str]]:
    """(item, have, want, message) of GPUDirect RDMA against ``nvidia_gpudirect_rdma``."""
    rdma = state.get("rdma") or {}
    if wanted(mode, rdma) != "peermem" or rdma.get("peermem_loaded") is None:
        return []
    items = []
    if not rdma["peermem_loaded"]:
        items.append(("gpudirect_rdma", f"{MODULE} not loaded", f"{MODULE} loaded",
                      f"the host has RDMA NICs and {MODULE} is not loaded: NCCL cannot use "
                      "GPUDirect RDMA (GPU memory goes through host memory); run the deploy"))
    if not rdma.get("persisted_in"):
        items.append(("gpudirect_rdma_boot", "not loaded at boot", MODULES_LOAD,
                      f"no modules-load.d file names {MODULE}: it is gone after the next "
                      "reboot; run the deploy"))
    return items


def nearest_nics(topo: Mapping[str, Any], switch_names: set[str]) -> dict[str, tuple[str, str]]:
    """GPU row -> (NIC name, link) of its nearest NIC (NVLink switch ports left out)."""
    names = topo.get("nic_names") or {}
    nic_columns = [c for c in topo.get("columns", []) if not c.startswith("GPU")
                   and names.get(c, c) not in switch_names]
    found = {}
    for row, links in (topo.get("matrix") or {}).items():
        if not row.startswith("GPU"):
            continue
        said = {c: LINK_ALIASES.get(links.get(c, ""), links.get(c)) for c in nic_columns}
        ranked = [(LINKS.index(said[c]), names.get(c, c), said[c]) for c in nic_columns
                  if said[c] in LINKS]
        if ranked:
            _rank, name, link = min(ranked)
            found[row] = (name, link)
    return found


def acs_redirects(rdma: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Bridges with ACS redirect on between a GPU and a NIC under the same PCIe root port:
    ``[{"bridge", "gpu", "nic", "flags"}]``. Peer traffic of such a pair stays below the
    root port unless a port on its way redirects it up to the root complex."""
    paths, acs = rdma.get("paths") or {}, rdma.get("acs") or {}
    found, seen = [], set()
    for gpu in rdma.get("gpus") or []:
        for nic in rdma.get("nics") or {}:
            a, b = paths.get(gpu) or [], paths.get(nic) or []
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if not common:
                continue  # different root ports: through the root complex anyway
            for bridge in a[common:] + b[common:]:
                flags = acs.get(bridge) or []
                if any(f in flags for f in _REDIRECT) and bridge not in seen:
                    seen.add(bridge)
                    found.append({"bridge": bridge, "gpu": gpu, "nic": nic, "flags": flags})
    return found
