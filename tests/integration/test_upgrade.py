"""Rolling driver upgrades over real SSH against four sandbox hosts (Debian 12, real apt, real
DKMS hooks, the GPU simulator, real reboots), with ``gpuhost upgrade`` (``python -m gpuhost.cli``).

One story, one step per fixture (each builds on the one before):

1. ``at_550``      bare hosts provisioned with deploys/gpu_host.py at 550.163.01
2. ``rollout``     550 -> 570.172.08: canary, then two batches, every host verified
3. ``refused``     570 -> 550 without upgrade_allow_downgrade: refused, no host touched
4. ``back_to_550`` the same downgrade allowed (the path back, and the fleet for step 5)
5. ``failed``      550 -> 570 with gpu-03's DKMS build broken: its batch stops, no later one
6. ``resumed``     the fault cleared, the same command again: done hosts untouched, the
                   rest finished

Four bare Debian hosts (the root conftest.py's private test fleet): provisioning an older
branch from bare is step 1 of the story. Four is the fewest that still give a canary, a batch
of two hosts upgraded side by side and a batch after it (which a failure must keep from
starting). The run's full output goes to
``GPUHOST_UPGRADE_LOG`` (default: a file under pytest's tmp_path).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "inventories/sandbox.py"
SPEC = {"hosts": 4, "ol": 0, "docker_hosts": 1}
FROM, TARGET = "550.163.01", "570.172.08"
NAMES = [f"gpu-{n:02d}" for n in range(1, 5)]
BATCHES = ["--canary", "1", "--batch", "50%"]  # 4 hosts: canary, then 2 and 1

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, state="bare",
                                why="step 1 provisions the older branch from bare")]


@pytest.fixture(scope="module")
def sandbox(fleet, sandbox_tools):
    """The module's fleet (root conftest.py: bare hosts of SPEC)."""
    return SimpleNamespace(cli=sandbox_tools.cli, run_dir=sandbox_tools.run_dir(), env={},
                           inventory=INVENTORY, keep=sandbox_tools.keep_fleet)


class Fleet:
    def __init__(self, sandbox: SimpleNamespace, log: Path):
        self.sandbox = sandbox
        self.inventory = sandbox.inventory
        self.data = json.loads((sandbox.run_dir / "fleet.json").read_text())
        self.log = log

    def ssh(self, name: str, command: str, check: bool = True) -> str:
        h = next(h for h in self.data["hosts"] if h["name"] == name)
        argv = ["ssh", "-i", self.data["ssh_key"], "-p", str(h["port"]),
                "-o", f"UserKnownHostsFile={self.data['known_hosts']}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR", f"root@{h['address']}", command]
        done = subprocess.run(argv, text=True, capture_output=True, timeout=300)
        if check and done.returncode != 0:
            pytest.fail(f"ssh {name} {command!r}: exit {done.returncode}\n{done.stderr[-2000:]}")
        return done.stdout

    def state(self, name: str) -> dict:
        from gpuhost.facts import assemble, parsers
        from gpuhost.facts.script import ALL_SECTIONS, build_script

        return assemble.host_state(parsers.split_sections(self.ssh(name, build_script(ALL_SECTIONS))))

    def marks(self, name: str) -> dict:
        """What must not move on a host that is not touched."""
        return {"boots": json.loads(self.ssh(name, "cat /var/lib/gpusim/state.json"))["boots"],
                "dpkg_log": self.ssh(name, "wc -l < /var/log/dpkg.log").strip(),
                "marker": self.ssh(name, "test -e /var/lib/gpuhost/driver-upgrade.json && echo yes"
                                         " || echo no").strip()}

    def run(self, label: str, argv: list[str], driver: str, timeout: float = 3600):
        env = {**os.environ, **self.sandbox.env, "PYINFRA_PROGRESS": "off",
               "GPUHOST_SANDBOX_DRIVER": driver}
        started = time.monotonic()
        done = subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True,
                              timeout=timeout)
        seconds = time.monotonic() - started
        with self.log.open("a") as log:
            log.write(f"\n===== {label} ({seconds:.0f}s, exit {done.returncode}): "
                      f"{' '.join(argv)}\n{done.stdout}\n{done.stderr}\n")
        done.seconds = seconds  # type: ignore[attr-defined]
        return done

    def wrapper(self, label: str, report: Path, driver: str, *args: str):
        done = self.run(label, [sys.executable, "-m", "gpuhost.cli", "upgrade", self.inventory,
                                *args, "--report", str(report)], driver)
        data = json.loads(report.read_text()) if report.exists() else None
        return done, data


def events(report: dict) -> list[dict]:
    return [json.loads(line) for line in Path(report["events"]).read_text().splitlines() if line]


def by_host(report: dict) -> dict:
    return {h["host"]: h for h in report["hosts"]}


@pytest.fixture(scope="module")
def at_550(sandbox, sandbox_tools, tmp_path_factory):
    log = Path(os.environ.get("GPUHOST_UPGRADE_LOG", tmp_path_factory.mktemp("upgrade") / "run.log"))
    fleet = Fleet(sandbox, log)
    assert [h["name"] for h in fleet.data["hosts"]] == NAMES
    done = fleet.run("provision at 550", [sandbox_tools.pyinfra_bin(), "-y", fleet.inventory,
                                          "deploys/gpu_host.py"], FROM)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for name in NAMES:
        driver = fleet.state(name)["driver"]
        assert (driver["state"], driver["loaded_version"]) == ("loaded", FROM), (name, driver)
    return fleet


@pytest.fixture(scope="module")
def rollout(at_550, tmp_path_factory):
    report = tmp_path_factory.mktemp("rollout") / "report.json"
    before = {name: at_550.marks(name) for name in NAMES}
    # dockerd runs on gpu-01 only: an extra GPU client service that is really stopped and
    # started again, after nvidia-persistenced (the fake driver stack has no DCGM service)
    done, data = at_550.wrapper("rollout 550 -> 570", report, TARGET, *BATCHES,
                                "--data", 'upgrade_stop_services=["docker"]')
    return {"done": done, "report": data, "before": before}


def test_rollout_moves_four_hosts_canary_first_then_two_batches(rollout, at_550):
    done, report = rollout["done"], rollout["report"]
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert [(b["label"], b["hosts"]) for b in report["batches"]] == [
        ("canary", ["gpu-01"]), ("batch 1", ["gpu-02", "gpu-03"]), ("batch 2", ["gpu-04"])]
    hosts = by_host(report)
    for name in NAMES:
        assert (hosts[name]["from"], hosts[name]["to"], hosts[name]["result"]) == (
            FROM, TARGET, "upgraded"), hosts[name]
    # batches ran one after the other: every host of a batch started after the one before ended
    log = [e for e in events(report) if e["event"] in ("start", "done")]
    span = {b["label"]: (min(e["time"] for e in log if e["host"] in b["hosts"]),
                         max(e["time"] for e in log if e["host"] in b["hosts"]))
            for b in report["batches"]}
    assert span["canary"][1] < span["batch 1"][0] and span["batch 1"][1] < span["batch 2"][0]
    assert "host" in done.stdout and "upgraded" in done.stdout  # the summary table
    print(f"rollout of 4 hosts: {done.seconds:.0f}s")


def test_the_gpu_client_service_was_stopped_and_runs_again(rollout, at_550):
    # named after gpu-01's clients: nvidia-persistenced (gpuhost runs it, nvidia_persistenced)
    # first, then the upgrade_stop_services
    stopped = re.findall(r"Stop GPU clients \(([^)]*)\)", rollout["done"].stdout)
    assert "nvidia-persistenced, docker" in stopped, stopped
    assert at_550.ssh("gpu-01", "systemctl is-active docker; docker info --format "
                                "'{{json .Runtimes}}'").count("nvidia") >= 1
    assert at_550.ssh("gpu-01", "systemctl is-active nvidia-persistenced").strip() == "active"


def test_every_host_is_verified_on_the_host_itself(rollout, at_550):
    for name in NAMES:
        state = at_550.state(name)
        driver = state["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", TARGET, [TARGET]), (name, driver)
        assert driver["installed_flavor"] == "open"  # auto: open from R560 on these GPUs
        assert [r["version"] for r in driver["local_repos"]] == [TARGET]  # the 550 repo is gone
        assert "Pin: version 570.172.08-*" in at_550.ssh(
            name, "cat /etc/apt/preferences.d/gpuhost-nvidia-driver")
        marks = at_550.marks(name)
        assert marks["marker"] == "no"
        assert marks["boots"] == rollout["before"][name]["boots"] + 1  # one reboot, not more
        spec = next(h for h in at_550.data["hosts"] if h["name"] == name)
        assert len([g for g in state["gpus"] if g["source"] == "nvidia-smi"]) == spec["gpu_count"]


@pytest.fixture(scope="module")
def refused(rollout, at_550, tmp_path_factory):
    report = tmp_path_factory.mktemp("refused") / "report.json"
    before = {name: at_550.marks(name) for name in NAMES}
    done, data = at_550.wrapper("downgrade without the setting", report, FROM, *BATCHES)
    return {"done": done, "report": data, "before": before}


def test_downgrade_is_refused_before_any_host_is_touched(refused, at_550):
    done = refused["done"]
    assert done.returncode == 2, (done.stdout + done.stderr)[-4000:]
    for name in NAMES:
        assert (f"{name}: refusing to downgrade the driver from {TARGET} to {FROM}: set "
                "upgrade_allow_downgrade: true") in done.stdout
        assert at_550.marks(name) == refused["before"][name], name
        assert at_550.state(name)["driver"]["loaded_version"] == TARGET
    assert {e["event"] for e in events(refused["report"])} == {"refused"}
    assert "pre-flight refused the upgrade, no host was touched" in done.stdout
    assert {(h["from"], h["to"], h["result"]) for h in refused["report"]["hosts"]} == {
        (TARGET, FROM, "refused")}


@pytest.fixture(scope="module")
def back_to_550(refused, at_550, tmp_path_factory):
    report = tmp_path_factory.mktemp("back") / "report.json"
    # GDRCopy's gdrdrv (its .ko as its DKMS package leaves it) and nvidia_peermem hold nvidia
    # on gpu-02 (issue 23 item 6): unloaded first, as NVIDIA's driver manager does, and back
    at_550.ssh("gpu-02", 'd="/lib/modules/$(uname -r)/updates/dkms"; mkdir -p "$d" && '
               'echo gdrdrv > "$d/gdrdrv.ko" && modprobe gdrdrv && modprobe nvidia_peermem')
    before = {name: at_550.marks(name) for name in NAMES}
    # reboot_policy never: the modules are unloaded before the switch and loaded after it
    done, data = at_550.wrapper("downgrade allowed, no reboot", report, FROM, "--canary", "1",
                                "--batch", "100%", "--data", "upgrade_allow_downgrade=true",
                                "--data", "reboot_policy=never")
    return {"done": done, "report": data, "before": before}


def test_an_allowed_downgrade_goes_back_to_550_by_reloading_the_modules(back_to_550, at_550):
    done, report = back_to_550["done"], back_to_550["report"]
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert {h["result"] for h in report["hosts"]} == {"upgraded"}
    assert "Unload the nvidia kernel modules (reboot_policy: never)" in done.stdout
    for name in NAMES:
        driver = at_550.state(name)["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", FROM, [FROM]), name
        assert at_550.marks(name)["boots"] == back_to_550["before"][name]["boots"]  # no reboot
    modules = at_550.ssh("gpu-02", "lsmod")
    assert "gdrdrv" in modules and "nvidia_peermem" in modules, modules


@pytest.fixture(scope="module")
def failed(back_to_550, at_550, tmp_path_factory):
    report = tmp_path_factory.mktemp("failed") / "report.json"
    at_550.ssh("gpu-03", "gpusim fault set dkms_build_fail")
    before = {name: at_550.marks(name) for name in NAMES}
    done, data = at_550.wrapper("rollout with gpu-03 broken", report, TARGET, *BATCHES)
    return {"done": done, "report": data, "before": before, "path": report}


def test_a_failed_host_stops_the_rollout_after_its_batch(failed, at_550):
    done, report = failed["done"], failed["report"]
    assert done.returncode == 1, (done.stdout + done.stderr)[-5000:]
    hosts = by_host(report)
    assert hosts["gpu-01"]["result"] == "upgraded"  # the canary
    assert hosts["gpu-03"]["result"] == "failed"
    assert "Switch to the open driver 570.172.08" in hosts["gpu-03"]["detail"]
    # what failed, from the host: DKMS's build error, then dpkg giving up
    assert "Bad return status for module build" in hosts["gpu-03"]["detail"]
    assert "dpkg returned an error code" in hosts["gpu-03"]["detail"]
    assert "gpu-03" in done.stdout.splitlines()[-1]  # the last line names the host
    assert hosts["gpu-02"]["result"] in ("interrupted", "upgraded"), hosts["gpu-02"]
    # batch 2 never started
    assert hosts["gpu-04"]["result"] == "not started"
    assert at_550.marks("gpu-04") == failed["before"]["gpu-04"]
    assert at_550.state("gpu-04")["driver"]["loaded_version"] == FROM
    assert not [e for e in events(report) if e["host"] == "gpu-04" and "batch 2" in e["run"]]


@pytest.fixture(scope="module")
def resumed(failed, at_550):
    at_550.ssh("gpu-03", "gpusim fault clear")
    done_hosts = [h["host"] for h in failed["report"]["hosts"] if h["result"] == "upgraded"]
    before = {name: at_550.marks(name) for name in NAMES}
    report = failed["path"].with_name("rerun.json")
    done, data = at_550.wrapper("rerun", report, TARGET, *BATCHES)
    return {"done": done, "report": data, "before": before, "done_hosts": done_hosts}


def test_the_rerun_finishes_the_fleet_and_leaves_finished_hosts_alone(resumed, at_550):
    done, report = resumed["done"], resumed["report"]
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert "gpu-01" in resumed["done_hosts"]
    hosts = by_host(report)
    for name in NAMES:
        driver = at_550.state(name)["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", TARGET, [TARGET]), (name, driver)
        assert at_550.marks(name)["marker"] == "no"
        if name in resumed["done_hosts"]:
            assert hosts[name]["result"] == "already at target"
            assert at_550.marks(name) == resumed["before"][name], name  # not touched
        else:
            assert hosts[name]["result"] == "upgraded" and hosts[name]["from"] == FROM, hosts[name]
    started = {e["host"] for e in events(report) if e["event"] == "start"}
    assert not started & set(resumed["done_hosts"])
    first = report["batches"][0]
    assert first["label"] == "canary" and first["hosts"][0] not in resumed["done_hosts"]


def test_the_deploy_changes_nothing_on_a_host_at_the_target(resumed, at_550, sandbox_tools):
    done = at_550.run("direct run on gpu-01", [sandbox_tools.pyinfra_bin(), "-y",
                                               "--fail-percent", "0", at_550.inventory,
                                               "deploys/upgrade_driver.py", "--limit", "gpu-01"],
                      TARGET)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    total = next(line for line in (done.stdout + done.stderr).splitlines() if "Grand total" in line)
    cells = total.split("Grand total", 1)[1].split()
    assert cells[1] == "-" and cells[2] == "-", total  # no change, no error


@pytest.fixture(scope="module")
def gated(resumed, at_550, tmp_path_factory):
    """7. The canary gains a critical finding with the new driver (issue 15's health gate):
    a row remap failure that gpusim arms for the next module load on gpu-01."""
    report = tmp_path_factory.mktemp("gated") / "report.json"
    at_550.ssh("gpu-01", "gpusim fault set row_remap_failure --gpu 0 --next-load")
    before = {name: at_550.marks(name) for name in NAMES}
    try:
        done, data = at_550.wrapper("downgrade, canary gains a row remap failure", report, FROM,
                                    "--canary", "1", "--batch", "100%",
                                    "--data", "upgrade_allow_downgrade=true",
                                    "--data", "reboot_policy=never")
    finally:
        at_550.ssh("gpu-01", "gpusim fault clear", check=False)
    return {"done": done, "report": data, "before": before}


def test_a_canary_with_a_new_critical_finding_stops_the_rollout(gated, at_550):
    done, report = gated["done"], gated["report"]
    assert done.returncode == 1, (done.stdout + done.stderr)[-5000:]
    hosts = by_host(report)
    assert hosts["gpu-01"]["result"] == "failed", hosts["gpu-01"]
    detail = hosts["gpu-01"]["detail"]
    assert "Health gate" in detail and "row-remap-failure on 0000:" in detail, detail
    # the driver itself was verified first: the gate is what stopped it
    assert at_550.state("gpu-01")["driver"]["loaded_version"] == FROM
    for name in NAMES[1:]:  # the batch after the canary never started
        assert hosts[name]["result"] == "not started", hosts[name]
        assert at_550.marks(name) == gated["before"][name], name
