"""`gpuhost audit` (and the deploys/audit.py it runs) end to end through the pyinfra CLI.

* ``@fake`` hosts (no sandbox, runs with the unit tests): exactly one remote command per
  host (the GpuHostState script), no operation, statuses and exit code.
* headless Chromium (needs Debian's ``chromium``, ``make deps``): the HTML report renders
  with its chart and every host.
* the sandbox fleet (marker ``integration``): one host wants another driver, one inventory
  entry points at 127.77.9.9 where nothing listens; exit status 3 and the report names both.
  The sandbox hosts have no fault and no driver yet: their GPUs cannot be read, so their one
  finding is gpus-not-read and their health "not read", never "healthy", and a host that
  wants no driver does not pass the audit (exit 4) (issue 40).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuhost.facts.script import ALL_SECTIONS, MARKER, build_script

ROOT = Path(__file__).resolve().parents[2]
PYTHON = str(ROOT / ".venv/bin/python") if (ROOT / ".venv/bin/python").exists() else sys.executable
DEAD = "127.77.9.9"  # loopback, nothing listens there
# the sandbox test audits the hosts as `sandbox up` makes them (no driver yet: drift)
pytestmark = pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare")

# Runs the pyinfra CLI with the @fake connector recording every command per host.
RECORDER = textwrap.dedent("""\
    import pyinfra_cli  # gevent first
    import atexit, json, sys
    from collections import defaultdict
    from pyinfra.connectors.fake import FakeConnector
    SEEN = defaultdict(list)
    _run, _put = FakeConnector.run_shell_command, FakeConnector.put_file
    def run(self, command, *a, **k):
        SEEN[self.host.name].append(command if isinstance(command, str) else command.get_raw_value())
        return _run(self, command, *a, **k)
    def put(self, *a, **k):
        SEEN[self.host.name].append("UPLOAD")
        return _put(self, *a, **k)
    FakeConnector.run_shell_command, FakeConnector.put_file = run, put
    out = sys.argv.pop(1)
    atexit.register(lambda: open(out, "w").write(json.dumps(SEEN)))
    from pyinfra_cli.main import main
    sys.argv[0] = "pyinfra"
    main()
""")


def sections_output(**sections: tuple[int, str]) -> str:
    """What the GpuHostState script prints; tools absent unless given."""
    values = {name: (127, "") for name in ALL_SECTIONS}
    values.update(os_release=(0, 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"'),
                  kernel=(0, "6.1.0-56-amd64\nx86_64"), dpkg=(0, ""), proc_version=(3, ""))
    values.update(sections)
    return "".join(f"{MARKER}{name} rc={rc}\n{out}\n" for name, (rc, out) in values.items())


def fake_inventory(tmp_path: Path) -> Path:
    module = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release "
              "Build  (b@h)  Tue Jul  8 18:44:13 UTC 2025")
    toolkit = "".join(f"{name}\t1.20.0-1\tii \n" for name in (  # the default toolkit
        "nvidia-container-toolkit", "nvidia-container-toolkit-base",
        "libnvidia-container-tools", "libnvidia-container1"))
    installed = sections_output(dpkg=(0, "nvidia-open\t570.172.08-1\tii \n" + toolkit),
                                proc_version=(0, module))
    broken = sections_output(smi_xml=(0, "<nvidia_smi_log><gpu>"))  # unparsable XML
    inventory = tmp_path / "fake_inventory.py"
    inventory.write_text(textwrap.dedent(f"""\
        _want = {{"nvidia_driver_version": "570.172.08", "fake_delay": 0, "fake_delay_jitter": 0}}
        hosts = [
            ("@fake/ok", {{**_want, "fake_responses": {{"_gh()": {installed!r}}}}}),
            ("@fake/drifts", {{**_want, "nvidia_driver_version": "550.163.01",
                               "fake_responses": {{"_gh()": {installed!r}}}}}),
            ("@fake/broken", {{**_want, "fake_responses": {{"_gh()": {broken!r}}}}}),
        ]
    """))
    return inventory


def run_audit(inventory: Path, *args: str, pyinfra: str | None = None, timeout: float = 300):
    """``gpuhost audit INVENTORY ARGS`` (``--pyinfra`` wraps pyinfra to count commands)."""
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"}
    wrapper = ["--pyinfra", pyinfra] if pyinfra else []
    return subprocess.run([PYTHON, "-m", "gpuhost.cli", "audit", str(inventory), *wrapper, *args],
                          cwd=ROOT, text=True, capture_output=True, timeout=timeout, env=env)


def recorder(tmp_path: Path, record: Path) -> str:
    """A ``--pyinfra`` command that records every @fake command per host in ``record`` (the
    last pyinfra run wins: gpuhost audit runs debug-inventory first, then the deploy)."""
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    return f"{PYTHON} {script} {record}"


def test_fake_hosts_one_command_each_no_operation(tmp_path):
    record, out = tmp_path / "commands.json", tmp_path / "audit.json"
    proc = run_audit(fake_inventory(tmp_path), "--json", str(out), "--cuda", "12.4",
                     pyinfra=recorder(tmp_path, record))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    commands = json.loads(record.read_text())
    assert sorted(commands) == ["@fake/broken", "@fake/drifts", "@fake/ok"]
    for host, sent in commands.items():
        assert sent == [build_script(ALL_SECTIONS)], host  # one command, no upload
    assert "Grand total" in proc.stderr and "Success" in proc.stderr  # pyinfra's empty results
    document = json.loads(out.read_text())
    status = {h["name"]: h for h in document["hosts"]}
    assert status["@fake/ok"]["status"] == "ok"
    assert status["@fake/ok"]["observed"]["driver"]["loaded_version"] == "570.172.08"
    assert [i["item"] for i in status["@fake/drifts"]["drift"]] == ["driver"]
    assert status["@fake/broken"]["status"] == "failed"
    assert "XML is malformed" in status["@fake/broken"]["error"]
    assert document["cuda"] == "12.4"
    assert re.search(r"^  failed +1 host: @fake/broken$", proc.stdout, re.M), proc.stdout
    assert "-> exit 3" in proc.stdout
    assert document["schema"] == "gpuhost.audit/2"
    assert status["@fake/broken"]["health"]["status"] is None  # nothing read, nothing judged
    # R570: its lifecycle finding is the only one (the fake host has no health fields)
    assert [f["id"] for f in status["@fake/ok"]["health"]["findings"]] in (
        ["lifecycle-eol"], ["lifecycle-eol", "xid-log-unreadable"])


def test_invalid_options_stop_before_any_host(tmp_path):
    record = tmp_path / "commands.json"
    proc = run_audit(fake_inventory(tmp_path), "--cuda", "11.9",
                     pyinfra=recorder(tmp_path, record))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cuda=11.9" in proc.stderr and "known versions" in proc.stderr
    assert not record.exists()  # pyinfra did not even start


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is not installed: run `make deps` (mk/bench.mk adds it)")
    return browser


def rendered_dom(page: Path, profile: Path) -> str:
    """The DOM headless Chromium built from the page (no network, no JS needed)."""
    proc = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and '<svg id="driver-chart"' in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.integration
def test_html_report_renders_in_headless_chromium(tmp_path, audit_fleet):
    browser = chromium()
    from gpuhost.reports import text as report

    document = audit_fleet()
    page = tmp_path / "audit.html"
    page.write_text(report.render_html(document))
    dom = rendered_dom(page, tmp_path / "profile")
    assert dom.count('<g class="bar"') == 6
    for host in document["hosts"]:
        assert f'data-host="{host["name"].replace("<", "&lt;").replace(">", "&gt;")}"' in dom
    shot = tmp_path / "audit.png"
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                    "--window-size=1280,900", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.integration
def test_a_50_host_report_shows_the_critical_first_and_one_row_per_warning(
        tmp_path, make_state, with_health, desired):
    """Issue 26 item 5: 50 hosts on R570 (end of life: the same warning everywhere), one of
    them with an Xid 79 (critical); no sandbox: the hosts are built by the fact code."""
    from gpuhost.reports import audit, text as report

    xid79 = {"pci_bus_id": "0000:07:00", "xid": 79, "gpu_instance_id": None,
             "text": "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}
    results = {f"gpu-{n:02}": with_health(make_state()) for n in range(1, 51)}
    results["gpu-37"] = with_health(make_state(), host={"xid_events": [xid79]})
    document = audit.build(results, {name: desired() for name in results},
                           generated_at="2026-11-22T10:00:00Z")
    page = tmp_path / "fleet.html"
    page.write_text(report.render_html(document))
    dom = rendered_dom(page, tmp_path / "profile")
    grouped = re.search(r'<table class="grouped">.*?</table>', dom, re.S).group(0)
    rows = re.findall(r'<tr class="group" data-finding="([^"]+)" data-hosts="(\d+)">'
                      r'<td class="sev-(\w+)">', grouped)
    assert rows == [("xid-79", "1", "critical"), ("lifecycle-eol", "50", "warning")]
    assert "gpu-37 (GPU 0000:07:00.0)" in grouped
    # the per-host detail one click away: every finding of every host, in a <details>
    detail = re.search(r'<details id="findings-by-host">.*?</details>', dom, re.S).group(0)
    assert detail.count('<tr data-finding="lifecycle-eol">') == 50
    # the host table judges settings and health apart: never "ok" beside the critical host
    row = re.search(r'<tr class="ok" data-host="gpu-37">.*?</tr>', dom, re.S).group(0)
    assert 'class="health critical">CRITICAL: xid-79<' in row
    assert '<td class="status">as wanted</td>' in row and ">ok<" not in row
    assert "<th>SETTINGS</th>" in dom


def sandbox_inventory(tmp_path: Path, fleet: dict, drift_host: str) -> Path:
    """The sandbox hosts with only one setting: drift_host wants a driver no host has."""
    inventory = tmp_path / "audit_inventory.py"
    base = {"ssh_port": 2222, "ssh_user": "root", "ssh_key": fleet["ssh_key"],
            "ssh_known_hosts_file": fleet["known_hosts"], "ssh_connect_retries": 0}
    hosts = [(h["name"], {**base, "ssh_hostname": h["address"], "ssh_port": h["port"]})
             for h in fleet["hosts"]]
    for name, data in hosts:
        if name == drift_host:
            data["nvidia_driver_version"] = "525.60.13"
    hosts.append(("gpu-down", {**base, "ssh_hostname": DEAD}))
    inventory.write_text(f"hosts = {hosts!r}\n")
    return inventory


@pytest.mark.integration
def test_sandbox_drift_and_unreachable_host(fleet, tmp_path):
    drift_host = fleet["hosts"][1]["name"]
    inventory = sandbox_inventory(tmp_path, fleet, drift_host)
    out, html, record = tmp_path / "audit.json", tmp_path / "audit.html", tmp_path / "count.json"
    counter = ROOT / "tests/integration/count_commands.py"
    proc = run_audit(inventory, "--json", str(out), "--html", str(html),
                     pyinfra=f"{PYTHON} {counter} {record} --")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == "gpuhost.audit/2"
    status = {h["name"]: h for h in document["hosts"]}
    assert status["gpu-down"]["status"] == "unreachable" and DEAD in status["gpu-down"]["error"]
    assert status["gpu-down"]["health"]["status"] is None
    for h in fleet["hosts"]:  # no fault in the sandbox, and no driver: GPUs not read
        found = status[h["name"]]["health"]["findings"]
        assert [(f["id"], f["severity"]) for f in found] == [("gpus-not-read", "info")], found
        assert "no NVIDIA driver is installed" in found[0]["message"], h["name"]
        assert status[h["name"]]["health"]["status"] == "not_read", h["name"]
    assert document["summary"]["health"]["healthy"] == 0
    assert re.search(rf"^{re.escape(drift_host)} .* not read +drift: \S*driver", proc.stdout, re.M)
    assert re.search(r"^HOST .* HEALTH +SETTINGS$", proc.stdout, re.M)
    assert status[drift_host]["status"] == "drift"
    assert any(i["item"] == "driver" and i["want"] == "525.60.13"
               for i in status[drift_host]["drift"])
    for line in ("gpu-down", drift_host):
        assert any(row.startswith(line) for row in proc.stdout.splitlines())
    assert "unreachable" in proc.stdout and "want 525.60.13" in proc.stdout
    # read-only: one remote command per reachable host, nothing uploaded
    counts = json.loads(record.read_text())
    counts = counts["hosts"] if isinstance(counts.get("hosts"), dict) else counts
    assert counts == {h["name"]: {"commands": 1, "uploads": 0} for h in fleet["hosts"]}
    dom = rendered_dom(html, tmp_path / "profile")  # the real run's page, as a browser sees it
    for name in [h["name"] for h in fleet["hosts"]] + ["gpu-down"]:
        assert f'data-host="{name}"' in dom, name
    assert 'data-version="unreachable"' in dom
    assert '<svg id="health-chart"' in dom and 'data-health="not_read"' in dom
    for h in fleet["hosts"]:  # every sandbox host has real facts in the report
        assert status[h["name"]]["observed"]["os"]["distro_tag"] is not None, h["name"]

    # the toolkit has a default (1.20.0) that the audit judges like a setting: the other bare
    # hosts, whose inventory sets nothing, drift on it and on nothing else
    others = [h["name"] for h in fleet["hosts"] if h["name"] != drift_host]
    for name in others:
        assert [(i["item"], i["want"]) for i in status[name]["drift"]] == [
            ("toolkit", "1.20.0")], (name, status[name]["drift"])
    # without the unreachable host: drift only -> 2 (the driver drift says why no GPU was
    # read); a host whose only drift is the toolkit (no driver wanted) and whose GPUs were
    # not read -> 4, not 2 and not 0: the toolkit drift does not explain unread GPUs
    proc = run_audit(inventory, "--limit", drift_host)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    proc = run_audit(inventory, "--limit", others[0])
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "1 not read -> exit 4" in proc.stdout, proc.stdout


@pytest.mark.integration
def test_a_250_host_report_without_drivers_reads_in_one_screen(tmp_path, make_state, desired):
    """Issue 40: 250 hosts without a driver (an A100 on the PCI bus each), handed over in
    random order, as headless Chromium builds the page: one drift row with the hostlist,
    one CUDA row, hosts in natural order, not one host called healthy."""
    import random

    from gpuhost.reports import audit, text as report

    lspci = ('07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GA100 [A100 SXM4 '
             '40GB] [20b0]" -ra1 "NVIDIA Corporation [10de]" "Device [134f]"\n')
    names = [f"gpu-{n}" for n in range(1, 251)]
    random.Random(40).shuffle(names)
    document = audit.build({n: make_state(driver=None, packages="", lspci=lspci) for n in names},
                           {n: desired() for n in names}, cuda="12.4",
                           generated_at="2026-11-22T10:00:00Z")
    page = tmp_path / "fleet.html"
    page.write_text(report.render_html(document))
    dom = rendered_dom(page, tmp_path / "profile")
    drift = re.search(r'<section id="drift">.*?</section>', dom, re.S).group(0)
    assert re.findall(r'<tr class="group drift" data-item="(\w+)" data-hosts="(\d+)">', drift) \
        == [("driver", "250")]
    assert ">gpu-[1-250]</td>" in drift
    cuda = re.search(r'<section id="cuda">.*?</section>', dom, re.S).group(0)
    assert cuda.count('<tr class="group"') == 1
    assert re.findall(r'<tr class="drift" data-host="([^"]+)"', dom) == sorted(
        names, key=lambda n: int(n.split("-")[1]))
    assert dom.count('<td class="health not_read">not read</td>') == 250
    assert 'class="health healthy"' not in dom and 'data-health="healthy"' not in dom
