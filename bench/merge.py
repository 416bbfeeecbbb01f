"""Benchmark ``gpuhost report merge`` on 10,000 host records (no host, no sandbox).

    .venv/bin/python bench/merge.py [--hosts 10000] [--shards 10] [--runs 3]
                                    [--out bench/results/merge-10000.md]

Builds ``--shards`` audit documents (``gpuhost.audit/2``) of ``--hosts`` hosts in all, the
way the controllers of a sharded fleet write them: each host an 8-GPU H100 host state
assembled by the real fact code (facts.assemble.host_state from section outputs) with the
health fields filled, a few hosts with faults (Xid 79, a degraded PCIe link, a pending row
remap, a drifting driver, one unreachable host per shard). Then it times, ``--runs`` times
each (median, min, max):

* the CLI end to end, as an operator runs it: ``python -m gpuhost.cli report merge
  SHARD.json... --json OUT --html OUT`` (interpreter start, reading and parsing the shards,
  merging, the table on stdout, writing JSON and HTML), with the peak RSS of that process;
* its parts in this process: reading and parsing the shards and ``gpuhost.reports.merge.merge``
  (with Python's cyclic GC off, as the CLI does), ``render_json``, ``render_html``,
  ``render_table``.

Results: a Markdown table and the raw numbers as JSON next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuhost.facts import assemble  # noqa: E402
from gpuhost.facts.script import ALL_SECTIONS  # noqa: E402
from gpuhost.reports import audit  # noqa: E402
from gpuhost.cli import audit as cli_audit  # noqa: E402
from gpuhost.reports import merge  # noqa: E402
from gpuhost.reports import text as report  # noqa: E402

STAMP = "2026-11-24T08:00:00Z"
DRIVER = "580.95.05"
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
MODULE = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER}  Release Build  "
          "(builder@host)  Tue Jul  8 18:44:13 UTC 2025\n")
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
           "libnvidia-container-tools", "libnvidia-container1")
HEALTH = {"ecc_mode_current": "enabled", "ecc_volatile_uncorrectable": 0,
          "ecc_aggregate_uncorrectable": 0, "retired_pages_double_bit": None,
          "retired_pages_pending": None, "remapped_rows_uncorrectable": 0,
          "remapped_rows_pending": False, "remapped_rows_failure": False,
          "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16,
          "pcie_width_max": 16, "throttle_reasons_active": ["gpu_idle"],
          "fabric_state": "Completed"}


def smi_xml(gpus: int) -> str:
    body = "".join(
        f'<gpu id="00000000:{0x18 + 16 * i:02X}:00.0"><product_name>NVIDIA H100 80GB HBM3'
        "</product_name><product_architecture>Hopper</product_architecture>"
        "<persistence_mode>Enabled</persistence_mode><mig_mode><current_mig>Disabled"
        "</current_mig><pending_mig>Disabled</pending_mig></mig_mode>"
        f"<uuid>GPU-{i:08x}-1111-2222-3333-444444444444</uuid><pci><pci_bus_id>"
        f"00000000:{0x18 + 16 * i:02X}:00.0</pci_bus_id></pci><fb_memory_usage><total>"
        "81559 MiB</total></fb_memory_usage><processes></processes></gpu>"
        for i in range(gpus))
    return (f'<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>{DRIVER}</driver_version>'
            f"<cuda_version>13.0</cuda_version><attached_gpus>{gpus}</attached_gpus>{body}"
            "</nvidia_smi_log>\n")


def host_state(gpus: int = 8) -> dict:
    """One H100 HGX host as the fact returns it, with the health fields of state schema 2."""
    sections = {name: {"rc": 127, "out": ""} for name in ALL_SECTIONS}
    dpkg = f"nvidia-open\t{DRIVER}-1\tii \n" + "".join(f"{p}\t1.17.8-1\tii \n" for p in TOOLKIT)
    sections.update(os_release={"rc": 0, "out": DEBIAN},
                    kernel={"rc": 0, "out": "6.1.0-56-amd64\nx86_64"},
                    dpkg={"rc": 0, "out": dpkg}, proc_version={"rc": 0, "out": MODULE},
                    smi_xml={"rc": 0, "out": smi_xml(gpus)},
                    daemon_json={"rc": 0, "out": '{"runtimes": {"nvidia": {"path": '
                                                 '"nvidia-container-runtime", "args": []}}}'},
                    docker_version={"rc": 0, "out": "/usr/sbin/dockerd"})
    state = assemble.host_state(sections)
    for gpu in state["gpus"]:
        gpu["health"] = dict(HEALTH)
    state["health"] = {"xid_events": [], "xid_source": "journal", "gpus_missing": [],
                       "nvswitch_count": 4}
    state["schema"] = 2
    return state


def shard_document(index: int, hosts: int, template: dict) -> dict:
    """One controller's audit document of ``hosts`` hosts, a few with faults."""
    results: dict = {}
    for n in range(hosts):
        name = f"gpu-{index:02d}-{n:05d}"
        state = json.loads(json.dumps(template))  # an independent copy, as read from a host
        if n % 97 == 0:
            state["health"]["xid_events"] = [{"pci_bus_id": "0000:18:00", "xid": 79,
                                              "gpu_instance_id": None,
                                              "text": "GPU has fallen off the bus."}]
        if n % 53 == 0:
            state["gpus"][1]["health"]["pcie_width_current"] = 8
        if n % 71 == 0:
            state["gpus"][2]["health"]["remapped_rows_pending"] = True
        results[name] = state
    results[f"gpu-{index:02d}-down"] = audit.HostError("unreachable", "cannot connect")
    desired = {name: audit.desired_settings({"nvidia_driver_version": DRIVER if i % 89 else
                                             "580.82.07"})
               for i, name in enumerate(results)}
    return audit.build(results, desired, generated_at=STAMP)


def timed(func):
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def cli_run(files: list[Path], out: Path, page: Path) -> tuple[float, int, float]:
    """Wall time, exit status and peak RSS (MiB) of one ``gpuhost report merge``."""
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "w = time.perf_counter() - t; "
               "print(w, p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    argv = [sys.executable, "-m", "gpuhost.cli", "report", "merge", *map(str, files),
            "--json", str(out), "--html", str(page)]
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], cwd=ROOT, check=True,
                          capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    wall, code, rss = done.stdout.split()
    return float(wall), int(code), int(rss) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="bench/results/merge-10000.md")
    args = ap.parse_args()
    per = args.hosts // args.shards - 1  # plus one unreachable host per shard
    template = host_state()
    with tempfile.TemporaryDirectory(prefix="gpuhost-merge-bench-") as tmp:
        directory = Path(tmp)
        build_s, files = 0.0, []
        for index in range(args.shards):
            seconds, doc = timed(lambda index=index: shard_document(index, per, template))
            build_s += seconds
            path = directory / f"shard-{index:02d}.json"
            path.write_text(report.render_json(doc), encoding="utf-8")
            files.append(path)
        shard_bytes = sum(p.stat().st_size for p in files)
        cli = [cli_run(files, directory / "fleet.json", directory / "fleet.html")
               for _ in range(args.runs)]
        parts: dict[str, list[float]] = {k: [] for k in ("read", "merge", "json", "html", "table")}
        for _ in range(args.runs):
            with cli_audit.no_gc():  # as the CLI reads them
                seconds, docs = timed(lambda: [(str(p), json.loads(p.read_text()))
                                               for p in files])
            parts["read"].append(seconds)
            with cli_audit.no_gc():
                seconds, merged = timed(lambda docs=docs: merge.merge(docs))
            parts["merge"].append(seconds)
            for key, render in (("json", report.render_json), ("html", report.render_html),
                                ("table", report.render_table)):
                seconds, text = timed(lambda render=render, merged=merged: render(merged))
                parts[key].append(seconds)
        hosts = merged["summary"]["hosts"]
        out_json = (directory / "fleet.json").stat().st_size
        out_html = (directory / "fleet.html").stat().st_size
    codes = {code for _, code, _ in cli}
    result = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
        "hosts": hosts, "shards": args.shards, "runs": args.runs,
        "shard_json_mib": round(shard_bytes / 2**20, 1),
        "merged_json_mib": round(out_json / 2**20, 1), "html_mib": round(out_html / 2**20, 1),
        "build_shards_s": round(build_s, 2), "cli_exit_status": sorted(codes),
        "cli_wall_s": summary([w for w, _, _ in cli]),
        "cli_peak_rss_mib": max(r for _, _, r in cli),
        "parts_s": {k: summary(v) for k, v in parts.items()},
        "this_process_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "summary": {k: merged["summary"][k] for k in ("ok", "drift", "unreachable")}
        | {"health": {k: merged["summary"]["health"][k]
                      for k in ("healthy", "warning", "critical", "not_read")}},
    }
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")

    def row(label: str, s: dict) -> str:
        return f"| {label} | {s['median']:.2f} | {s['min']:.2f} | {s['max']:.2f} |"

    lines = [f"# `gpuhost report merge`: {hosts} host records in {args.shards} shards",
             "", f"Measured {result['date']} on {result['machine']} with `bench/merge.py` "
             f"(median, min and max of {args.runs} runs). Each host: an 8-GPU H100 host state "
             "with its health fields, as the audit keeps it (`facts` included).", "",
             f"Shards: {result['shard_json_mib']} MiB of JSON in all. Merged JSON "
             f"{result['merged_json_mib']} MiB, HTML {result['html_mib']} MiB. Exit status "
             f"{', '.join(map(str, sorted(codes)))}; merged summary: {result['summary']}.", "",
             "| step | median s | min s | max s |", "|---|---|---|---|",
             row("CLI end to end (`python -m gpuhost.cli report merge ... --json --html`)",
                 result["cli_wall_s"]),
             row("read and parse the shards", result["parts_s"]["read"]),
             row("`gpuhost.reports.merge.merge`", result["parts_s"]["merge"]),
             row("`render_json`", result["parts_s"]["json"]),
             row("`render_html`", result["parts_s"]["html"]),
             row("`render_table`", result["parts_s"]["table"]), "",
             f"Peak RSS of the CLI process: {result['cli_peak_rss_mib']:.0f} MiB. Building the "
             f"shards (not part of the merge) took {result['build_shards_s']} s.", ""]
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
