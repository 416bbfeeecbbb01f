"""`nvidia-smi topo -m` for the simulated machine: the GPU/NIC matrix, its legend and the
"NIC Legend" of drivers that name NIC columns NIC0.. (the layout of the public captures in
NVIDIA/nccl#1505, 2024-11-06, and deepseek-ai/DeepEP#60, 2025-03-10; values are gpusim's).

The machine's GPUs are split over two NUMA nodes (the first half on node 0, CPUs 0-15;
the rest on node 1, CPUs 16-31). GPUs on an NVSwitch board see each other over their bonded
NVLinks (NV<links>), elsewhere NODE (same node) or SYS (across the inter-socket link). An
RDMA NIC (lspci.rdma_nics) sits under the PCIe switch of GPU 0: PIX to it, NODE to the
other GPUs of node 0, SYS to node 1's. Every mlx5_core function (NVLink 5 switch ports too)
gets an mlx5_N name in bus order, as the kernel probes them; only NICs are columns.

The header is underlined with ANSI escapes (ESC[4m ... ESC[0m) whether or not stdout is a
terminal, as real nvidia-smi prints it: public captures by scripts (Python subprocess,
kubectl exec, CI logs) carry "\t\x1b[4mGPU0\tGPU1...\tGPU NUMA ID\x1b[0m"
(tests/fixtures/rdma/README.md names them).
"""

from . import lspci, models, nvlink

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _node(index, count):
    return 0 if index < max(1, (count + 1) // 2) else 1


def _mlx5_names(machine):
    functions = sorted(dev[0] for dev in lspci.devices(machine, {}) if dev[7] == "mlx5_core")
    return {slot: f"mlx5_{n}" for n, slot in enumerate(functions)}


def render(machine, indexes):
    count = machine["gpu_count"]
    links, _speed = nvlink.links(models.model(machine["gpu_model"]))
    nvswitch = bool(machine.get("nvswitch")) and links
    nics = [dev[0] for dev in lspci.rdma_nics(machine)]
    names = _mlx5_names(machine)
    gpus = [f"GPU{n}" for n in range(len(indexes))]
    columns = gpus + [f"NIC{n}" for n in range(len(nics))]
    nodes = {f"GPU{n}": _node(i, count) for n, i in enumerate(indexes)}
    nodes.update({f"NIC{n}": 0 for n in range(len(nics))})

    def link(a, b):
        if a == b:
            return " X "
        if a.startswith("GPU") and b.startswith("GPU") and nvswitch:
            return f"NV{links}"
        if {a, b} == {"GPU0", "NIC0"} and indexes and indexes[0] == 0:
            return "PIX"
        return "NODE" if nodes[a] == nodes[b] else "SYS"

    lines = ["\t\x1b[4m" + "\t".join(columns) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"]
    for row in columns:
        cells = [link(row, col) for col in columns]
        if row.startswith("GPU"):
            node = nodes[row]
            cells += ["0-15" if node == 0 else "16-31", str(node), "", "N/A"]
        lines.append(row + "\t" + "\t".join(cells))
    text = "\n".join(lines) + "\n" + LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(
            f"  NIC{n}: {names.get(slot, 'mlx5_' + str(n))}\n" for n, slot in enumerate(nics))
    return text
