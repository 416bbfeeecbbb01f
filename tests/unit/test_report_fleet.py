"""The audit report at fleet scale (issue 40): 254 hosts without a driver read as a few
lines. Identical drift is one entry with its hosts (a hostlist for many) in the table, the
HTML and the JSON (``summary.drift_groups``), hosts are in natural order (gpu-2 before
gpu-10) in every output, and a host whose GPUs could not be read is "not read", never
"healthy", in the table, JSON, HTML and metrics, and never passes the audit's exit status.
The hosts are built by the fact code (tests/conftest.py's make_state)."""

from __future__ import annotations

import json
import random
import re
from datetime import date
from pathlib import Path

import jsonschema
import pytest

from gpuhost import health
from gpuhost.reports import audit, baseline, groups, hostlist, merge, prom, text as report

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(json.loads((ROOT / "docs/audit.schema.json").read_text()))
STAMP = "2026-11-22T10:00:00Z"
# one A100 on the PCI bus, as `lspci -mm -nn -d 10de:` prints it (no sysfs: lspci is read)
LSPCI = ('07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [A100 SXM4 40GB] '
         '[20b0]" -ra1 "NVIDIA Corporation [10de]" "Device [134f]"\n')


@pytest.fixture
def bare(make_state):
    """A sandbox host as `sandbox up` makes it: a GPU on the PCI bus, no driver."""
    return lambda: make_state(driver=None, packages="", lspci=LSPCI)


@pytest.fixture
def bare_fleet(bare, desired):
    """254 bare hosts, handed to the audit in random order."""
    names = [f"gpu-{n}" for n in range(1, 255)]
    random.Random(40).shuffle(names)
    return audit.build({name: bare() for name in names}, {name: desired() for name in names},
                       cuda="12.4", generated_at=STAMP)


def test_natural_order_and_hostlists():
    names = ["gpu-10", "gpu-100", "gpu-101", "gpu-11", "gpu-2", "gpu-1", "login"]
    assert hostlist.natural_sorted(names) == [
        "gpu-1", "gpu-2", "gpu-10", "gpu-11", "gpu-100", "gpu-101", "login"]
    assert hostlist.compact(f"gpu-{n}" for n in range(1, 251)) == "gpu-[1-250]"
    assert hostlist.compact(["gpu-03", "gpu-01", "gpu-02", "gpu-07", "node-4", "login"]) == \
        "gpu-[01-03,07], login, node-4"
    assert hostlist.compact(["r1-gpu-1", "r1-gpu-2", "r2-gpu-1"]) == "r1-gpu-[1-2], r2-gpu-1"
    # a zero-padded number and a plain one never share a range (gpu-09, gpu-10 do: width 2)
    assert hostlist.compact(["gpu-9", "gpu-010"]) == "gpu-[9,010]"
    assert hostlist.compact([f"gpu-{n:02}" for n in range(1, 13)]) == "gpu-[01-12]"
    assert hostlist.compact([f"gpu-{n}" for n in range(1, 30, 2)], limit=3) == \
        "gpu-[1,3,5], +12 more"


def test_hosts_are_in_natural_order_in_every_output(bare_fleet):
    expected = [f"gpu-{n}" for n in range(1, 255)]
    assert expected[8:11] == ["gpu-9", "gpu-10", "gpu-11"] and expected[99] == "gpu-100"
    document = json.loads(report.render_json(bare_fleet))
    assert [h["name"] for h in document["hosts"]] == expected
    assert document["summary"]["cuda"]["hosts"]["no"] == expected
    assert document["summary"]["drift_groups"][0]["hosts"] == expected
    table = report.render_table(bare_fleet)
    assert re.findall(r"^(gpu-\d+) ", table, re.M) == expected
    detail = report.render_table(bare_fleet, details=True)
    assert re.findall(r"^  (gpu-\d+) +drift ", detail, re.M) == expected
    page = report.render_html(bare_fleet)
    assert re.findall(r'<tr class="drift" data-host="([^"]+)"', page) == expected  # hosts
    by_host = re.search(r'<details id="drift-by-host">.*?</details>', page, re.S).group(0)
    assert re.findall(r'<tr class="drift"><td>([^<]+)</td>', by_host) == expected
    findings = re.search(r'<details id="findings-by-host">.*?</details>', page, re.S).group(0)
    assert re.findall(r'<tr data-finding="gpus-not-read"><td>([^<]+)</td>', findings) == expected
    # a group's tooltip names every host, in the same order
    titles = re.findall(r'<td class="hosts" title="([^"]+)"', page)
    assert titles and all(title.split(", ") == expected for title in titles)
    metrics = prom.render(bare_fleet["hosts"], STAMP)
    assert re.findall(r'^gpuhost_host_read\{host="([^"]+)"\}', metrics, re.M) == expected


def test_merge_and_baseline_keep_natural_order(bare, desired):
    def shard(numbers):
        names = [f"gpu-{n}" for n in numbers]
        return audit.build({n: bare() for n in names}, {n: desired() for n in names},
                           generated_at=STAMP)

    merged = merge.merge([("a", shard([10, 2, 100])), ("b", shard([1, 11, 9]))])
    assert [h["name"] for h in merged["hosts"]] == [
        "gpu-1", "gpu-2", "gpu-9", "gpu-10", "gpu-11", "gpu-100"]
    change = baseline.compare(shard([1]), merged)
    assert change["hosts_new"] == ["gpu-2", "gpu-9", "gpu-10", "gpu-11", "gpu-100"]


def test_identical_drift_is_one_group_with_its_hosts(bare_fleet, make_state, desired):
    drift = groups.drift_groups(bare_fleet)
    assert [(g["status"], g["item"], len(g["hosts"])) for g in drift] == [
        ("drift", "driver", 254)]
    assert drift[0]["message"] == "driver not installed, want 570.172.08"
    assert groups.hosts_text(drift[0]["hosts"]) == "gpu-[1-254]"
    # 254 hosts, one drift: one entry of two lines, not 254; --details: one line per host
    table = report.render_table(bare_fleet)
    problems = table.split("Problems")[1].split("\n\n")[0].splitlines()[1:]
    assert problems == ["  drift       [driver] 254 hosts: gpu-[1-254]",
                        "              driver not installed, want 570.172.08"]
    detail = report.render_table(bare_fleet, details=True)
    assert len(re.findall(r"^  gpu-\d+ +drift +driver not installed", detail, re.M)) == 254
    # the JSON: the grouped view beside every host's own items and the per-item counts
    document = json.loads(report.render_json(bare_fleet))
    assert sorted(VALIDATOR.iter_errors(document), key=str) == []
    assert document["summary"]["drift_groups"] == [{
        "status": "drift", "item": "driver", "message": "driver not installed, want 570.172.08",
        "count": 254, "hosts": [f"gpu-{n}" for n in range(1, 255)], "hostlist": "gpu-[1-254]"}]
    assert document["summary"]["drift_items"] == {"driver": 254}
    assert all([i["item"] for i in h["drift"]] == ["driver"] for h in document["hosts"])
    # different drift stays apart; errors group by their text
    mixed = audit.build({"a1": make_state(driver="550.163.01"), "a2": make_state(),
                         "a3": make_state(driver="550.163.01"),
                         "b1": audit.HostError("failed", "could not load fact")},
                        {n: desired() for n in ("a1", "a2", "a3", "b1")}, generated_at=STAMP)
    assert [(g["status"], g["item"], g["hosts"]) for g in groups.drift_groups(mixed)] == [
        ("failed", None, ["b1"]), ("drift", "driver", ["a1", "a3"])]
    assert [(g["count"], g["hostlist"]) for g in mixed["summary"]["drift_groups"]] == [
        (1, "b1"), (2, "a[1,3]")]


def test_the_html_drift_table_has_one_row_per_distinct_drift(bare_fleet):
    page = report.render_html(bare_fleet)
    section = re.search(r'<section id="drift">.*?</section>', page, re.S).group(0)
    rows = re.findall(r'<tr class="group drift" data-item="(\w+)" data-hosts="(\d+)">', section)
    assert rows == [("driver", "254")]
    assert '<td class="hosts" title="gpu-1, gpu-2, gpu-3,' in section
    assert ">gpu-[1-254]</td>" in section
    # every host's items one click away
    detail = re.search(r'<details id="drift-by-host">.*?</details>', section, re.S).group(0)
    assert detail.count('<tr class="drift">') == 254
    # the CUDA answers too: one row for the 254 hosts without a driver
    cuda = re.search(r'<section id="cuda">.*?</section>', page, re.S).group(0)
    assert re.findall(r'data-verdict="(\w+)" data-hosts="(\d+)"', cuda) == [("no", "254")]
    # what reads at first sight (all but the per-host lists behind <details> and the host
    # table at the end): one row for why no GPU was read, one drift row, one CUDA row
    head = re.sub(r"<details.*?</details>", "", page.split('<section id="hosts">')[0], flags=re.S)
    assert re.findall(r'<tr class="group[^"]*" data-(\w+)="([^"]+)" data-hosts="(\d+)"', head) == [
        ("finding", "gpus-not-read", "254"), ("item", "driver", "254"), ("verdict", "no", "254")]
    assert head.count("<tr") == 6  # those three and their tables' headers


def test_a_host_whose_gpus_could_not_be_read_is_not_read(bare_fleet, bare, make_state):
    state = bare()
    assert health.gpus_read(state) is False
    found = health.findings(state)
    assert [(f["id"], f["severity"]) for f in found] == [("gpus-not-read", "info")]
    assert "no NVIDIA driver is installed" in found[0]["message"]
    assert health.status(found) == "not_read"
    # installed but not loaded: the reason says so
    loaded_not = make_state(driver=None, packages="570.172.08", lspci=LSPCI)
    by_id = {f["id"]: f for f in health.findings(loaded_not, today=date(2026, 11, 22))}
    assert "driver 570.172.08 is installed but not loaded" in by_id["gpus-not-read"]["message"]
    assert by_id["lifecycle-eol"]["severity"] == "warning"  # R570: known, yet not read ranks
    assert health.status(by_id.values()) == "not_read"  # above it
    # nothing to read: no GPU at all; a GPU nvidia-smi answers for: read
    assert health.gpus_read(make_state(driver=None, packages="")) is None
    assert health.gpus_read(make_state()) is True
    assert health.status(health.findings(make_state(driver=None, packages=""))) == "healthy"

    document = json.loads(report.render_json(bare_fleet))
    assert sorted(VALIDATOR.iter_errors(document), key=str) == []
    assert {h["health"]["status"] for h in document["hosts"]} == {"not_read"}
    summary = document["summary"]["health"]
    assert (summary["healthy"], summary["not_read"], summary["unhealthy"]) == (0, 254, 0)
    assert document["summary"]["exit_code"] == audit.EXIT_DRIFT  # no driver: drift, not 4
    table = report.render_table(bare_fleet)
    assert re.search(r"^gpu-1 .* not read +drift: driver$", table, re.M)
    assert " ok " not in table.split("\n\n")[0]
    assert "health: 0 healthy, 0 warning, 0 critical, 254 not read -> exit 2" in table
    # why: one entry, its own message (grouped by it: no "e.g.")
    assert re.search(r"^  INFO +\[gpus-not-read\] 254 hosts: gpu-\[1-254\]\n +NVIDIA GPUs on "
                     r"the PCI bus that nvidia-smi could not read \(no NVIDIA driver", table, re.M)
    page = report.render_html(bare_fleet)
    assert page.count('<td class="health not_read">not read</td>') == 254
    assert '<div class="card health-not_read"><b>254</b>not read</div>' in page
    assert '<div class="card health-healthy"><b>0</b>healthy</div>' in page
    assert 'data-health="not_read"><title>254 host(s) not read' in page
    assert 'data-health="healthy"' not in page
    # why, in the health table itself (not behind the info findings' <details>)
    grouped = re.search(r'<section id="health">.*?<table class="grouped">(.*?)</table>', page,
                        re.S).group(1)
    assert 'data-finding="gpus-not-read" data-hosts="254"' in grouped
    metrics = prom.render(bare_fleet["hosts"], STAMP)
    assert 'gpuhost_health_status{host="gpu-1",status="not_read"} 1' in metrics
    assert 'gpuhost_health_status{host="gpu-1",status="healthy"} 0' in metrics
    assert 'gpuhost_health_findings{host="gpu-1",id="gpus-not-read"} 1' in metrics
    assert 'gpuhost_host_read{host="gpu-1"} 1' in metrics  # the host itself was read
    current = re.findall(r'^gpuhost_health_status\{host="[^"]+",status="(\w+)"\} 1$', metrics,
                         re.M)
    assert current == ["not_read"] * 254  # not one host healthy


def hung(make_state, with_health, **health_fields):
    """The driver loaded and nvidia-smi timed out: GPUs only from the PCI bus."""
    state = with_health(make_state(), host=health_fields)
    state["driver"]["smi_error"] = "timed_out"
    for gpu in state["gpus"]:
        gpu.update(source="sysfs", health=None)
    state["health"]["gpus_missing"] = None
    return state


def test_a_loaded_driver_whose_nvidia_smi_does_not_answer_is_a_warning(
        make_state, with_health, desired):
    state = hung(make_state, with_health)
    found = [f for f in health.findings(state) if f["id"] == "gpus-not-read"]
    assert [f["severity"] for f in found] == ["warning"]
    assert "the driver is loaded but nvidia-smi timed out" in found[0]["message"]
    assert health.status(health.findings(state)) == "not_read"  # not read outranks warning
    xid79 = {"pci_bus_id": "0000:07:00", "xid": 79, "gpu_instance_id": None, "text": "x"}
    assert health.status(health.findings(hung(make_state, with_health,
                                              xid_events=[xid79]))) == "critical"

    def build(fail_on):
        return audit.build({"h": hung(make_state, with_health)}, {"h": desired()},
                           generated_at="2026-01-01T00:00:00Z", fail_on=fail_on)

    # the driver is as wanted, so no drift says why: GPUs not read fail the audit (4)
    assert audit.exit_code(build("critical")) == audit.EXIT_UNHEALTHY
    assert audit.exit_code(build("warning")) == audit.EXIT_UNHEALTHY
    assert audit.exit_code(build("never")) == audit.EXIT_OK  # health kept out
    label = report.health_label(build("critical")["hosts"][0])
    assert label.startswith("not read; warning: ")


def test_gpus_not_read_never_pass_the_exit_status(bare, make_state, desired):
    """A fleet whose GPUs could not be read does not exit 0. Its driver drift says why and
    what to do (exit 2: converge; reboot); without one (no driver wanted) it is unhealthy (4),
    and the table's summary says so."""
    def build(hosts, fail_on="critical"):
        return audit.build({n: state for n, (state, _) in hosts.items()},
                           {n: want for n, (_, want) in hosts.items()}, generated_at=STAMP,
                           fail_on=fail_on)

    unwanted = build({f"gpu-{n}": (bare(), desired(nvidia_driver_version=None))
                      for n in range(1, 255)})
    assert unwanted["summary"]["ok"] == 254  # nothing set differs ...
    assert (unwanted["summary"]["health"]["not_read"], unwanted["summary"]["health"]["unhealthy"]
            ) == (254, 254)  # ... yet no GPU was read
    assert audit.exit_code(unwanted) == audit.EXIT_UNHEALTHY
    assert report.render_table(unwanted).rstrip().endswith(
        "254 not read -> exit 4 (unhealthy hosts or GPUs not read)")
    never = build({"gpu-1": (bare(), desired(nvidia_driver_version=None))}, "never")
    assert audit.exit_code(never) == audit.EXIT_OK
    # installed but not loaded: the reboot_pending drift says why
    loaded_not = make_state(driver=None, packages="570.172.08", lspci=LSPCI)
    pending = build({"gpu-1": (loaded_not, desired())})
    assert [i["item"] for i in pending["hosts"][0]["drift"]] == ["reboot_pending"]
    assert pending["hosts"][0]["health"]["status"] == "not_read"
    assert audit.exit_code(pending) == audit.EXIT_DRIFT
    # one such host among readable ones decides; a failed host still wins (3)
    mixed = build({"gpu-1": (make_state(), desired()),
                   "gpu-2": (bare(), desired(nvidia_driver_version=None))})
    assert audit.exit_code(mixed) == audit.EXIT_UNHEALTHY
    assert [h["health"]["status"] for h in mixed["hosts"]] == ["warning", "not_read"]
    down = build({"gpu-1": (bare(), desired(nvidia_driver_version=None)),
                  "gpu-2": (audit.HostError("unreachable", "cannot connect"), desired())})
    assert audit.exit_code(down) == audit.EXIT_UNREACHABLE


def test_a_baseline_does_not_call_unread_gpu_findings_resolved(make_state, with_health, desired):
    sick = with_health(make_state(), gpu={"remapped_rows_pending": True})
    before = audit.build({"h": sick}, {"h": desired()}, generated_at=STAMP)
    after = audit.build({"h": hung(make_state, with_health)}, {"h": desired()},
                        generated_at=STAMP)
    change = baseline.compare(before, after)["hosts"][0]
    assert change["health_status"] == {"was": "warning", "now": "not_read"}
    assert [f["id"] for f in change["findings_new"]] == ["gpus-not-read"]
    assert change["findings_resolved"] == []  # not read is not repaired
