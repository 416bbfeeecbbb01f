"""Debian 13 and Ubuntu 26.04 converged from bare with deploys/gpu_host.py over real SSH, a
second run that changes nothing, and ``gpuhost upgrade`` moving both to R595.

One bare fleet (the converge from bare is the point): d13-01, Debian 13 on a real trixie root
with the debian13 local repo package; u26-02, Ubuntu 26.04 (kernel 7.0) with NVIDIA's
ubuntu2604 network repository, which inventories/sandbox.py gives as nvidia_driver_repo
(no local repo package exists for 26.04). In order, one step per fixture:

1. ``refused``   u26-02 at the fleet's 580.95.05: refused in one line before any change
                 (580.95.05 does not build on kernel 7.0; the first R580 that does: 580.142)
2. ``converged`` both hosts in one pyinfra run: d13-01 at 580.95.05, u26-02 at 580.142
                 (host data of this module's inventory), then the same run again walking
                 every role (full_check), then ``gpuhost audit``
3. ``upgraded``  ``gpuhost upgrade`` to 595.71.05, both hosts in one batch (one run)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

SPEC = {"hosts": 2, "docker_hosts": 0, "overrides": {
    "1": {"os": "debian13", "traits": []},
    "2": {"os": "ubuntu2604", "traits": []}}}
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(**SPEC, ol=0, state="bare",
                                why="Debian 13 and Ubuntu 26.04 converged from bare is the point")]

D13, U26 = "d13-01", "u26-02"
FIRST, FIRST_U26, TARGET = "580.95.05", "580.142", "595.71.05"
DEPLOY = "deploys/gpu_host.py"
# host data outranks the sandbox's group data: u26-02 takes the first R580 that builds on 7.0,
# and none of the fleet's local repo packages (they are 580.95.05's; gpuhost checks each
# against the host's driver version)
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

_OVERRIDES = {{{u26!r}: {{"nvidia_driver_version": {version!r}, "nvidia_local_repo": {{}}}}}}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""


def state(ssh, name: str) -> dict:
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script

    return assemble.host_state(parsers.split_sections(ssh(name, build_script(ALL_SECTIONS))))


@pytest.fixture(scope="module")
def ssh(fleet, sandbox_tools):
    return lambda name, command, **kw: sandbox_tools.ssh(fleet, name, command, **kw).stdout


@pytest.fixture(scope="module")
def inventory(fleet, sandbox_tools, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("new-apt") / "new_apt_inventory.py"
    path.write_text(INVENTORY.format(root=str(sandbox_tools.root), u26=U26, version=FIRST_U26))
    return str(path)


def marks(ssh, name: str) -> dict:
    """What a refused run must not move: the installed packages, apt's sources and
    preferences, the boot count."""
    return {"packages": ssh(name, "dpkg-query -W -f '${Package} ${Version} ${Status}\\n'"),
            "sources": ssh(name, "ls /etc/apt/sources.list.d /etc/apt/preferences.d 2>&1"),
            "boots": json.loads(ssh(name, "cat /var/lib/gpusim/state.json"))["boots"]}


@pytest.fixture(scope="module")
def refused(fleet, ssh, sandbox_tools):
    before = marks(ssh, U26)
    started = time.monotonic()
    run = sandbox_tools.run_pyinfra("-y", DEPLOY, "--limit", U26, check=False, timeout=600)
    return {"run": run, "before": before, "seconds": time.monotonic() - started}


def test_a_driver_that_does_not_build_on_kernel_7_is_refused_before_any_change(refused, ssh):
    run = refused["run"]
    assert run.returncode != 0, run.output[-3000:]
    line = (f"{U26}: driver {FIRST} does not build on kernel 7.0.0-12-generic (Linux 7.0, "
            f"Ubuntu 26.04): the first that does is {FIRST_U26}; set nvidia_driver_version to "
            "it or a newer one")
    hits = [text for text in run.output.splitlines() if line in text]
    assert len(hits) == 1, run.output[-3000:]
    assert marks(ssh, U26) == refused["before"]
    print(f"refusal: {refused['seconds']:.0f}s")


@pytest.fixture(scope="module")
def converged(refused, inventory, sandbox_tools):
    started = time.monotonic()
    first = sandbox_tools.run_pyinfra("-y", DEPLOY, check=False, timeout=1200,
                                      inventory=inventory)
    middle = time.monotonic()
    # full_check: every role walked, not only the converged record read (docs/converged.md)
    second = sandbox_tools.run_pyinfra("-y", DEPLOY, "--data", "full_check=true", check=False,
                                       timeout=600, inventory=inventory)
    return {"first": first, "second": second, "seconds": (middle - started,
                                                          time.monotonic() - middle)}


def test_both_converge_from_bare_with_driver_toolkit_and_runtime(converged, ssh):
    first = converged["first"]
    assert first.returncode == 0 and first.failed_hosts == [], first.output[-5000:]
    for name, version in ((D13, FIRST), (U26, FIRST_U26)):
        host = state(ssh, name)
        driver = host["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", version, [version]), (name, driver)
        assert driver["installed_flavor"] == "open", (name, driver)
        assert host["toolkit"]["consistent"] and host["toolkit"]["version"], (name, host["toolkit"])
        assert host["docker"]["nvidia_runtime"]["defined"], (name, host["docker"])
        daemon = json.loads(ssh(name, "cat /etc/docker/daemon.json"))
        assert daemon["runtimes"]["nvidia"]["path"].endswith("nvidia-container-runtime"), daemon
        assert ssh(name, "systemctl is-active docker").strip() == "active"
    # Ubuntu 26.04: the driver from the network repository, pinned to its full version;
    # dkms compressed the module with zstd as the kernel's own modules are
    assert ssh(U26, "dpkg-query -W -f '${Version}' nvidia-dkms-open") == f"{FIRST_U26}-0ubuntu1"
    assert f"nvidia-driver-pinning-{FIRST_U26}" in ssh(U26, "dpkg-query -W -f '${Package}\\n'")
    assert "/nvidia/cuda/repos/ubuntu2604/x86_64/" in ssh(U26, "cat /etc/apt/sources.list.d/*")
    assert "nvidia.ko.zst" in ssh(U26, "ls /usr/lib/modules/$(uname -r)/updates/dkms/")
    # Debian 13: the local repo package, Debian's names
    assert ssh(D13, "dpkg-query -W -f '${Version}' nvidia-kernel-open-dkms") == f"{FIRST}-1"
    print(f"converge of 2 hosts from bare: {converged['seconds'][0]:.0f}s")


def test_a_second_run_changes_nothing(converged):
    second = converged["second"]
    assert second.returncode == 0, second.output[-3000:]
    totals = second.totals
    assert totals["changed"] == 0 and totals["error"] == 0, second.changed()
    assert second.hosts_that_ran() == {D13, U26}
    print(f"second run: {converged['seconds'][1]:.0f}s, {totals['no_change']} no change")


def test_the_audit_finds_both_hosts_as_wanted(converged, inventory, sandbox_tools,
                                              tmp_path_factory):
    out = tmp_path_factory.mktemp("audit") / "audit.json"
    done = subprocess.run([sys.executable, "-m", "gpuhost.cli", "audit", inventory,
                           "--json", str(out)], cwd=sandbox_tools.root, text=True,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    hosts = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    assert sorted(hosts) == [D13, U26]


@pytest.fixture(scope="module")
def upgraded(converged, inventory, sandbox_tools, tmp_path_factory):
    report = tmp_path_factory.mktemp("upgrade") / "report.json"
    env = {**os.environ, "PYINFRA_PROGRESS": "off", "GPUHOST_SANDBOX_DRIVER": TARGET}
    started = time.monotonic()
    # --data outranks the inventory's host data: every host to TARGET
    done = subprocess.run([sys.executable, "-m", "gpuhost.cli", "upgrade", inventory,
                           "--canary", "0", "--batch", "2",
                           "--data", f"nvidia_driver_version={TARGET}", "--report", str(report)],
                          cwd=sandbox_tools.root, env=env, text=True, capture_output=True,
                          timeout=1200)
    data = json.loads(report.read_text()) if report.exists() else None
    return {"done": done, "report": data, "seconds": time.monotonic() - started}


def test_upgrade_moves_both_to_r595(upgraded, ssh):
    done, report = upgraded["done"], upgraded["report"]
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert [(b["label"], b["hosts"]) for b in report["batches"]] == [("batch 1", [D13, U26])]
    hosts = {h["host"]: h for h in report["hosts"]}
    assert {name: (h["from"], h["to"], h["result"]) for name, h in hosts.items()} == {
        D13: (FIRST, TARGET, "upgraded"), U26: (FIRST_U26, TARGET, "upgraded")}
    for name in (D13, U26):
        driver = state(ssh, name)["driver"]
        assert (driver["state"], driver["loaded_version"], driver["installed_versions"]) == (
            "loaded", TARGET, [TARGET]), (name, driver)
    assert f"nvidia-driver-pinning-{TARGET}" in ssh(U26, "dpkg-query -W -f '${Package}\\n'")
    assert f"nvidia-driver-pinning-{FIRST_U26}" not in ssh(
        U26, "dpkg-query -W -f '${Package} ${Status}\\n' | grep ' installed$' || true")
    print(f"upgrade of 2 hosts: {upgraded['seconds']:.0f}s")
