"""The sandbox fleet itself: real SSH hosts reached by real pyinfra, the package mirror,
reboots, Docker inside a host, and a `down` that leaves nothing behind (the module's last
test takes its fleet down; the next module's fleet is made anew)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare")]

# The fleet under test: the test session's private one (root conftest.py, sandbox/paths.py)
STATE_DIR = Path(os.environ.get("GPUHOST_SANDBOX_STATE", "/var/lib/gpuhost-sandbox"))
HOST_PREFIX = os.environ.get("GPUHOST_SANDBOX_HOST_PREFIX", "127.77.1.")
HTTP_PORT = os.environ.get("GPUHOST_SANDBOX_HTTP_PORT", "8000")
CGROUP = os.environ.get("GPUHOST_SANDBOX_CGROUP", "gpuhost-sandbox")


def _hosts(fleet: dict, os_names: tuple[str, ...]) -> list[dict]:
    return [h for h in fleet["hosts"] if h["os"] in os_names]


def _fact(pyinfra, *facts: str) -> dict:
    out = pyinfra("fact", *facts, "--json").stdout
    return json.loads(out)


def _uptime(ssh, name: str) -> float:
    return float(ssh(name, "cat /proc/uptime").stdout.split()[0])


def _run_dir() -> Path:
    return Path(os.environ.get("GPUHOST_SANDBOX_DIR", "/run/gpuhost-sandbox"))


def _boot_id(ssh, name: str) -> str:
    return ssh(name, "cat /proc/sys/kernel/random/boot_id").stdout.strip()


def _boots(name: str) -> int:
    return int((_run_dir() / "hosts" / name / "boots").read_text())


def test_fleet_matches_spec(fleet, sandbox_spec):
    assert len(fleet["hosts"]) == sandbox_spec["hosts"]
    assert len(_hosts(fleet, ("ol8", "ol9"))) == sandbox_spec["ol"]
    assert sum(h["docker"] for h in fleet["hosts"]) == sandbox_spec["docker_hosts"]
    for i, h in enumerate(fleet["hosts"], start=1):
        assert h["address"] == f"{HOST_PREFIX}{i}" and h["port"] == 2222
        assert h["name"].endswith(f"-{i:02d}")
    assert Path(fleet["ssh_key"]).is_file() and Path(fleet["known_hosts"]).is_file()


def test_pyinfra_sees_debian_and_oracle_linux(fleet, pyinfra):
    facts = _fact(pyinfra, "server.LinuxDistribution", "server.KernelVersion")
    dist, kernel = facts["server.LinuxDistribution"], facts["server.KernelVersion"]
    assert set(dist) == {h["name"] for h in fleet["hosts"]}
    for h in fleet["hosts"]:
        d = dist[h["name"]]
        assert kernel[h["name"]] == h["kernel_release"], h["name"]
        if h["os"] == "debian12":
            assert (d["name"], d["major"]) == ("Debian", 12)
            assert re.fullmatch(r"6\.1\.0-\d+-amd64", kernel[h["name"]])
        else:
            assert d["name"] == "Oracle Linux Server"
            assert d["release_meta"]["ID"] == "ol"
            assert d["release_meta"]["ID_LIKE"] == "fedora"
            assert (d["major"], d["minor"]) == {"ol8": (8, 10), "ol9": (9, 5)}[h["os"]]


def test_host_identity_and_shims(fleet, ssh):
    for h in fleet["hosts"]:
        out = ssh(h["name"], "hostname; uname -r; uname -s; uname -m; uname -a; "
                             "cat /etc/gpusim/machine.json").stdout.splitlines()
        assert out[0] == h["name"]
        assert out[1] == h["kernel_release"]
        assert out[2:4] == ["Linux", "x86_64"]
        assert out[4].startswith(f"Linux {h['name']} {h['kernel_release']} ")
        machine = json.loads("\n".join(out[5:]))
        assert machine == {"hostname": h["name"], "os": h["os"],
                           "kernel_release": h["kernel_release"], "gpu_model": h["gpu_model"],
                           "gpu_count": h["gpu_count"], "nvswitch": h["nvswitch"],
                           "traits": h["traits"]}


def test_hosts_are_isolated_but_share_no_network_namespace(fleet, ssh):
    h = fleet["hosts"][0]
    out = ssh(h["name"], "ps -e --no-headers | wc -l; cat /proc/1/comm; "
                         "ip -o addr show | grep -c 'inet '").stdout
    lines = out.splitlines()
    assert int(lines[0]) < 50                    # only this host's processes are visible
    assert lines[1] == "systemd"                 # PID 1 is the host's systemd
    # Own time namespace: the host's uptime is far below the machine's.
    assert _uptime(ssh, h["name"]) < time.clock_gettime(time.CLOCK_BOOTTIME)


def test_apt_installs_from_the_mirror(fleet, pyinfra, ssh, tmp_path):
    host = next(h for h in _hosts(fleet, ("debian12",)) if not h["docker"])["name"]
    mirror = fleet["mirror"]
    assert mirror == f"http://127.77.0.1:{HTTP_PORT}"
    sources = ssh(host, "cat /etc/apt/sources.list").stdout
    assert sources.strip() == ("deb [signed-by=/etc/apt/keyrings/gpuhost-sandbox-archive.gpg] "
                               f"{mirror}/debian bookworm main")
    # sources a deploy added (earlier tests may have provisioned the host) stay on the mirror
    # or on the host itself (NVIDIA's file:// local repo)
    extra = ssh(host, "cat /etc/apt/sources.list.d/* 2>/dev/null || true").stdout
    uris = re.findall(r"(?:https?|file)://[^\s]+", extra)
    assert all(u.startswith((f"{mirror}/", "file:///var/")) for u in uris), uris
    deploy = tmp_path / "apt_jq.py"
    deploy.write_text(textwrap.dedent("""
        from pyinfra.operations import apt
        apt.packages(name="jq from the sandbox mirror", packages=["jq"], update=True)
    """))
    pyinfra("--limit", host, "-y", str(deploy), timeout=300)
    out = ssh(host, "jq -n '1+1'; apt-cache policy jq").stdout
    assert out.splitlines()[0] == "2"
    assert f"{mirror}/debian bookworm/main amd64 Packages" in out
    # The deploys' heavy packages resolve from the mirror alone (signed Release, no network).
    sim = ssh(host, "apt-get install -s -y --reinstall docker.io dkms "
                    "linux-headers-$(uname -r)").stdout
    kernel = next(h for h in fleet["hosts"] if h["name"] == host)["kernel_release"]
    assert f"Inst linux-headers-{kernel} " in sim
    assert "Inst docker.io " in sim and "Inst dkms " in sim


def test_server_reboot_through_pyinfra(fleet, pyinfra, ssh, tmp_path):
    debian = next(h for h in _hosts(fleet, ("debian12",)) if not h["docker"])["name"]
    ol = [h["name"] for h in _hosts(fleet, ("ol8", "ol9"))][:1]
    names = [debian, *ol]
    for name in names:
        ssh(name, "touch /root/kept-across-reboot /tmp/gone-after-reboot")
    # Make sure the hosts have been up long enough for "uptime dropped" to mean something.
    deadline = time.monotonic() + 30
    while min(_uptime(ssh, n) for n in names) < 5 and time.monotonic() < deadline:
        time.sleep(0.5)
    before = {n: (_uptime(ssh, n), _boots(n), _boot_id(ssh, n)) for n in names}
    deploy = tmp_path / "reboot.py"
    deploy.write_text(textwrap.dedent("""
        from pyinfra.operations import server
        server.reboot(name="Reboot the sandbox host", delay=2, interval=1, reboot_timeout=120)
    """))
    t0 = time.monotonic()
    limits = [arg for n in names for arg in ("--limit", n)]
    proc = pyinfra(*limits, "-y", str(deploy), timeout=300)
    took = time.monotonic() - t0
    assert "Reboot the sandbox host" in proc.stderr + proc.stdout
    for name in names:
        up_after, boots_after = _uptime(ssh, name), _boots(name)
        assert boots_after == before[name][1] + 1, name
        assert up_after < before[name][0], (name, before[name][0], up_after)
        assert up_after < took + 5
        assert _boot_id(ssh, name) != before[name][2], name
        out = ssh(name, "ls /root/kept-across-reboot; ls /tmp").stdout.split()
        assert out[0] == "/root/kept-across-reboot" and "gone-after-reboot" not in out, (name, out)


def test_docker_runs_in_a_host_and_survives_reboot(fleet, ssh):
    host = next(h for h in fleet["hosts"] if h["docker"])["name"]
    # Other sessions may deploy to the same fleet: wait for dpkg's lock instead of failing.
    ssh(host, "apt-get -q -o DPkg::Lock::Timeout=300 update && DEBIAN_FRONTEND=noninteractive "
              "apt-get -q -y -o DPkg::Lock::Timeout=300 install docker.io", timeout=900)
    defaults = ssh(host, "cat /etc/default/docker").stdout
    assert "--iptables=false --ip6tables=false --bridge=none" in defaults
    # a real systemd unit, started by the package's postinst, as on an installed server
    assert ssh(host, "systemctl is-active docker.service containerd.service").stdout.split() == [
        "active", "active"]
    ssh(host, "for i in $(seq 50); do docker info >/dev/null 2>&1 && exit 0; sleep 0.2; done; "
              "exit 1")
    ssh(host, "cd /tmp && tar --dereference -cf tiny.tar -C / bin/true "
              "lib/x86_64-linux-gnu/libc.so.6 lib64/ld-linux-x86-64.so.2 && "
              "docker import tiny.tar sandbox/tiny:1 >/dev/null && "
              "docker run --rm --network=none sandbox/tiny:1 /bin/true")
    assert ssh(host, "systemctl is-enabled docker.service").stdout.strip() == "enabled"
    boots = _boots(host)
    ssh(host, "reboot")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if _boots(host) > boots and ssh(host, "systemctl is-active docker.service && "
                                        "docker info >/dev/null", check=False).returncode == 0:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"dockerd did not come back on {host} after a reboot")
    assert _uptime(ssh, host) < 120
    ssh(host, "docker run --rm --network=none sandbox/tiny:1 /bin/true")
    # dockerd stayed off the machine's network: no bridge appeared here.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "docker0" not in links


def test_a_snapshot_keeps_what_the_hosts_wrote_and_boots_them_again(fleet, sandbox_spec,
                                                                   sandbox_tools, ssh):
    """sandbox/snapshot.py: `snapshot save` keeps each host's files (a deleted base file
    stays deleted: the upper dir's whiteout is honoured as a lower layer), boots the fleet
    from the snapshot; hosts booted from it write above it, never into it."""
    t = sandbox_tools
    name = fleet["hosts"][0]["name"]
    ssh(name, "echo kept > /etc/gpuhost-snapshot-marker && rm /etc/issue.net")
    boots = _boots(name)
    t.cli("snapshot", "save", "sandbox-test")
    assert _boots(name) == 1 and boots >= 1  # a new host, booted from the snapshot
    assert ssh(name, "cat /etc/gpuhost-snapshot-marker").stdout == "kept\n"
    assert ssh(name, "test -e /etc/issue.net", check=False).returncode == 1
    assert ssh(name, "timeout 60 systemctl is-system-running --wait",
               check=False).stdout.strip() == "running"
    ssh(name, "echo changed > /etc/gpuhost-snapshot-marker")
    t.cli(*t.up_args(sandbox_spec), "--snapshot", "sandbox-test")
    assert ssh(name, "cat /etc/gpuhost-snapshot-marker").stdout == "kept\n"
    # another spec is refused, with what to do
    other = subprocess.run([sys.executable, "-m", "sandbox", "up", "--hosts", "1",
                            "--snapshot", "sandbox-test"], cwd=t.root, capture_output=True,
                           text=True, timeout=120)
    assert other.returncode == 1 and "was made for another fleet" in other.stderr, other.stderr
    assert "sandbox-test" in t.cli("snapshot", "ls").stdout
    t.cli("snapshot", "rm", "sandbox-test")
    assert "sandbox-test" not in t.cli("snapshot", "ls").stdout


def test_up_again_with_the_same_spec_is_a_quick_noop(fleet, sandbox_spec, sandbox_tools):
    boots = {h["name"]: _boots(h["name"]) for h in fleet["hosts"]}
    t0 = time.monotonic()
    out = sandbox_tools.cli(*sandbox_tools.up_args(sandbox_spec)).stdout
    assert time.monotonic() - t0 < 10
    assert "already up" in out
    assert {h["name"]: _boots(h["name"]) for h in fleet["hosts"]} == boots


def test_down_leaves_nothing(fleet, sandbox_spec, sandbox_tools):
    t = sandbox_tools
    t.cli("down")
    t.cli("down")                                         # idempotent
    markers = [str(t.root / "sandbox" / "supervisor.py"), str(t.root / "sandbox" / "httpd.py"),
               str(t.root / "sandbox" / "files" / "boot.sh")]
    procs = []
    mounts = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            mi = (p / "mountinfo").read_text()
        except OSError:
            continue
        # this fleet's processes name its runtime or state directory (other fleets, e.g.
        # another test worker's, the benchmark's or a VM test's mirror server, do not
        # count); the hosts' own processes are in their cgroups, checked below
        ours = f"{t.run_dir()}/" in cmd or f"{STATE_DIR}/" in cmd
        if ours and (any(m in cmd for m in markers) or "systemd-nspawn" in cmd):
            procs.append(cmd)
        mounts += [line for line in mi.splitlines() if str(STATE_DIR) in line]
    assert procs == []
    assert mounts == []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert netns.strip() == ""
    listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
    # this fleet's addresses (a private fleet, e.g. the benchmark's, may run beside it)
    assert HOST_PREFIX not in listening and f"127.77.0.1:{HTTP_PORT} " not in listening
    assert not t.run_dir().exists()
    assert not (STATE_DIR / "hosts").exists()
    cgroups = Path("/sys/fs/cgroup")
    assert not [*cgroups.glob(CGROUP), *cgroups.glob(f"*/{CGROUP}")]
    # The inventory now says, in one line, what to do.
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    proc = subprocess.run([t.pyinfra_bin(), "inventories/sandbox.py", "fact", "server.Os"],
                          cwd=t.root, capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "sandbox is not running: run `make sandbox-up`" in proc.stderr + proc.stdout
    if t.keep_fleet():
        t.cli(*t.up_args(sandbox_spec))
