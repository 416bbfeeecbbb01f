"""`sandbox up`, `down`, `status`.

`up` with the fleet already running the same spec is a no-op. With a different spec it
ADJUSTS: hosts whose spec is unchanged keep running (their state too), hosts that are no
longer wanted or whose spec changed are destroyed, new hosts are created. A host's name
encodes its index and OS, so changing --ol renames (recreates) the hosts it moves.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import base, debian13, hosts, mirror, paths, snapshot, spec, supervisor, traits, ubuntu
from .util import (SandboxError, flocked, need_commands, need_root, pid_alive, read_json,
                   read_pid, run, say, step, write_file)

HTTPD = paths.PACKAGE_DIR / "httpd.py"
READY_TIMEOUT = 60.0


def _lock():
    """Serialise `up` and `down` (several sessions share this machine's one fleet)."""
    rd = paths.run_dir()
    return flocked(rd.parent / f".{rd.name}.lock", "waiting for another `sandbox up/down` to finish")


def cache_lock():
    """Serialise building the shared caches (base roots, mirror, Ubuntu archive): fleets side
    by side (the test suite's workers) share them."""
    return flocked(paths.CACHE_DIR / ".build.lock",
                   "waiting for another fleet to finish building the shared caches")


def _state_file() -> Path:
    return paths.run_dir() / "state.json"


def _ensure_ssh_key() -> str:
    rd = paths.run_dir()
    key = rd / "id_ed25519"
    if not key.is_file():
        rd.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuhost-sandbox", "-f", key])
    return (rd / "id_ed25519.pub").read_text()


# ---------------------------------------------------------------- HTTP server

def _httpd_pid() -> int | None:
    pid = read_pid(paths.run_dir() / "httpd.pid")
    if pid and pid_alive(pid) and _ours(_cmdline(pid)):
        return pid
    return None


def _ours(cmd: str) -> bool:
    """A process this fleet started, from whichever checkout: one of the sandbox's scripts,
    and this fleet's runtime directory on its command line."""
    return (any(name in cmd for name in (HTTPD.name, hosts.SUPERVISOR.name, hosts.BOOT.name))
            and (f"{paths.run_dir()}/" in cmd or f"{paths.STATE_DIR}/" in cmd))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def start_httpd() -> None:
    if _httpd_pid():
        return
    rd = paths.run_dir()
    rd.mkdir(parents=True, exist_ok=True)
    (rd / "httpd.pid").unlink(missing_ok=True)
    log = open(rd / "httpd.log", "ab")
    import subprocess

    subprocess.Popen(
        [sys.executable, str(HTTPD), "--bind", paths.HTTP_ADDRESS, "--port", str(paths.HTTP_PORT),
         "--log", str(rd / "httpd.log"), "--pidfile", str(rd / "httpd.pid"),
         "--map", f"debian={paths.MIRROR_DEBIAN}", "--map", f"nvidia={paths.NVIDIA_CACHE}",
         "--map", f"ubuntu={ubuntu.REPO}",
         "--map", f"{debian13.archive().served}={debian13.archive().root}"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True, cwd="/")
    log.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _httpd_pid() and _http_ok():
            return
        time.sleep(0.05)
    tail = (rd / "httpd.log").read_text()[-800:]
    raise SandboxError(f"the HTTP server did not start on {paths.MIRROR_URL} "
                       f"(is the port taken? `ss -ltnp | grep {paths.HTTP_PORT}`):\n{tail}")


def _http_ok() -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{paths.MIRROR_URL}/debian/dists/{paths.DEBIAN_SUITE}/Release",
                                    timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


# ---------------------------------------------------------------- up

def up(n_hosts: int, ol: int = 0, docker_hosts: int = 1, overrides: dict | None = None,
       refresh: bool = False, ubuntu_hosts: int = 0, fresh: bool = False,
       from_snapshot: str | None = None) -> dict:
    """Bring the fleet to the spec. ``fresh``: every host created anew from the base layers
    (bare root filesystems), whatever ran on them; ``from_snapshot``: every host booted from
    that snapshot (sandbox/snapshot.py), which must have been made with this spec."""
    need_root()
    with _lock():
        return _up(n_hosts, ol, docker_hosts, overrides, refresh, ubuntu_hosts, fresh,
                   from_snapshot)


def _up(n_hosts: int, ol: int, docker_hosts: int, overrides: dict | None,
        refresh: bool, ubuntu_hosts: int = 0, fresh: bool = False,
        from_snapshot: str | None = None) -> dict:
    t0 = time.monotonic()
    rd = paths.run_dir()
    request = {"hosts": n_hosts, "ol": ol, "docker_hosts": docker_hosts,
               "overrides": overrides or {}}
    if ubuntu_hosts:
        request["ubuntu"] = ubuntu_hosts
    current = read_json(_state_file())
    if (current and current.get("request") == request and not fresh and not from_snapshot
            and _all_up(current["hosts"])):
        say(f"fleet of {n_hosts} hosts is already up (no change): {rd / 'fleet.json'}")
        return json.loads((rd / "fleet.json").read_text())

    need_commands("mmdebstrap", "unshare", "ssh-keygen", "apt-ftparchive", "gpg", "chroot",
                  "systemd-nspawn")
    if not current and paths.HOSTS_DIR.exists() and any(paths.HOSTS_DIR.iterdir()):
        # Hosts without runtime state (e.g. this machine rebooted): stale, start afresh.
        with step("remove stale hosts from an earlier session"):
            _kill_strays()
            hosts.remove_tree(paths.HOSTS_DIR)
    oses = spec.oses(n_hosts, ol, ubuntu_hosts, overrides or {})
    kernels = {}
    with cache_lock():
        base.build_all(ol=ol > 0, ubuntu_layers=ubuntu_hosts > 0, oses=oses)
        mstate = mirror.build(refresh=refresh)
        with_ubuntu = bool(ubuntu_hosts or oses & set(ubuntu.RELEASES))
        # the Ubuntu archive always carries resolute (trixie's pool): built once, never
        # rebuilt under another fleet's Ubuntu hosts when a 26.04 host first appears
        if with_ubuntu or debian13.OS_NAME in oses:
            kernels[debian13.OS_NAME] = debian13.build_mirror(refresh=refresh)["kernel_release"]
        if with_ubuntu:
            ubuntu.build_repo(mstate)
    wanted = spec.plan(n_hosts, ol, docker_hosts, overrides or {}, mstate["kernel_release"],
                       ubuntu=ubuntu_hosts, kernels=kernels)
    if from_snapshot:
        snapshot.check(from_snapshot, wanted)
    pubkey = _ensure_ssh_key()
    with step(f"HTTP server on {paths.MIRROR_URL} (/debian, /debian-trixie, /nvidia, /ubuntu)"):
        start_httpd()

    old = {h["name"]: h for h in (current or {}).get("hosts", [])}
    keep = set() if fresh or from_snapshot else {
        h["name"] for h in wanted if old.get(h["name"]) == h and hosts.host_dir(h["name"]).is_dir()}
    drop = [name for name in old if name not in keep]
    if drop:
        with step(f"remove {len(drop)} hosts no longer in the spec"):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(hosts.destroy, drop))
    new = [h for h in wanted if h["name"] not in keep]
    if new and from_snapshot:
        with step(f"create {len(new)} hosts from snapshot {from_snapshot}"):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda h: snapshot.restore(from_snapshot, h, pubkey), new))
    elif new:
        with step(f"create {len(new)} hosts (upper dirs, keys, simulator files)"):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda h: hosts.create(h, pubkey), new))
    state = {"request": request, "hosts": wanted}
    write_file(_state_file(), json.dumps(state, indent=1) + "\n")
    _raise_inotify_limits()
    with step(f"boot {len(wanted)} hosts and wait for sshd"):
        for h in wanted:
            hosts.start(h["name"])
        _wait_ready(wanted)
    _write_known_hosts(wanted)
    # (hosts of a snapshot had their traits applied before it was taken)
    staged = [] if from_snapshot else [h for h in new if h.get("traits")]
    if staged:
        with step(f"host traits after the first boot ({len(staged)} hosts)"):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda h: traits.apply_booted(h, hosts.ssh_runner(h)), staged))
    fleet = spec.fleet_json(wanted, rd)
    write_file(rd / "fleet.json", json.dumps(fleet, indent=1) + "\n")
    say(f"fleet up: {len(wanted)} hosts in {time.monotonic() - t0:.1f}s; "
        f"inventory: inventories/sandbox.py (reads {rd / 'fleet.json'})")
    return fleet


# Every host's systemd, journald, dbus and logind take inotify instances, all of root (the
# hosts have no user namespace), and the kernel's default of 128 instances per user stops
# the ~30th host's systemd ("Failed to allocate manager object: Too many open files").
# The values kind (Kubernetes in Docker, whose nodes are systemd containers too) gives
# for the same error; raised machine-wide, never lowered.
INOTIFY_LIMITS = {"max_user_instances": 8192, "max_user_watches": 524288}


def _raise_inotify_limits() -> None:
    for key, want in INOTIFY_LIMITS.items():
        f = Path("/proc/sys/fs/inotify") / key
        try:
            have = int(f.read_text())
            if have < want:
                f.write_text(f"{want}\n")
                say(f"fs.inotify.{key}: {have} -> {want} (systemd in every host needs them)")
        except (OSError, ValueError) as e:
            say(f"warning: cannot raise fs.inotify.{key} to {want}: {e}")


def _all_up(wanted: list[dict]) -> bool:
    return _httpd_pid() is not None and all(
        hosts.supervisor_pid(h["name"]) and hosts.ssh_ready(h["address"], h["port"])
        for h in wanted)


def _wait_ready(wanted: list[dict]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    pending = {h["name"]: h for h in wanted}
    while pending and time.monotonic() < deadline:
        for name, h in list(pending.items()):
            if hosts.ssh_ready(h["address"], h["port"], timeout=0.2):
                del pending[name]
        if pending:
            time.sleep(0.1)
    if pending:
        name = sorted(pending)[0]
        log = hosts.host_run_dir(name) / "console.log"
        tail = log.read_text()[-1500:] if log.is_file() else "(no console log)"
        raise SandboxError(
            f"{len(pending)} hosts did not answer SSH within {READY_TIMEOUT:.0f}s: "
            f"{', '.join(sorted(pending))}. Console of {name} ({log}):\n{tail}")


def _write_known_hosts(wanted: list[dict]) -> None:
    lines = []
    for h in wanted:
        pub = hosts.root_file(h["name"], "etc/ssh/ssh_host_ed25519_key.pub").read_text()
        keytype, key = pub.split()[:2]
        lines.append(f"[{h['address']}]:{h['port']} {keytype} {key}\n")
    write_file(paths.run_dir() / "known_hosts", "".join(lines))


# ---------------------------------------------------------------- snapshots

def save_snapshot(name: str) -> dict:
    """Power every host off cleanly, keep them as snapshot NAME (sandbox/snapshot.py), boot
    the fleet again from it. Returns fleet.json's data."""
    need_root()
    with _lock():
        current = read_json(_state_file())
        if not current:
            raise SandboxError("no fleet is up: nothing to snapshot")
        t0 = time.monotonic()
        with step(f"power off {len(current['hosts'])} hosts"):
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(snapshot.poweroff, current["hosts"]))
        with step(f"keep them as snapshot {name}"):
            snapshot.take(name, current)
        req = current["request"]
        fleet = _up(req["hosts"], req["ol"], req["docker_hosts"], req["overrides"], False,
                    req.get("ubuntu", 0), from_snapshot=name)
        say(f"snapshot {name}: {len(current['hosts'])} hosts in {time.monotonic() - t0:.1f}s; "
            f"`python -m sandbox up ... --snapshot {name}` boots them again")
        return fleet


# ---------------------------------------------------------------- down

def down() -> None:
    need_root()
    with _lock():
        _down()


def _down() -> None:
    t0 = time.monotonic()
    current = read_json(_state_file()) or {}
    names = {h["name"] for h in current.get("hosts", [])}
    hr = paths.run_dir() / "hosts"
    if hr.is_dir():
        names |= {p.name for p in hr.iterdir()}
    with step(f"stop {len(names)} hosts (SIGKILL supervisors and namespaces)"):
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(hosts.stop, sorted(names)))
        _kill_strays()
    with step("stop the HTTP server"):
        pid = _httpd_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)
            _wait_dead([pid])
        _kill_strays(httpd=True)  # also a server whose pid file is gone
    with step("remove hosts, cgroups and runtime files"):
        hosts.remove_tree(paths.HOSTS_DIR)
        _remove_cgroups()
        hosts.remove_tree(paths.run_dir())
    say(f"fleet down in {time.monotonic() - t0:.1f}s")


def _sandbox_pids() -> list[int]:
    """Every process started by the sandbox (supervisors, unshare, httpd), found by the
    paths in their command lines: also those whose pid files are gone."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid() and _ours(_cmdline(int(p.name))):
            out.append(int(p.name))
    return out


def _kill_strays(httpd: bool = False) -> None:
    if not httpd:  # every host's nspawn and systemd, also of hosts no state names
        supervisor.kill_cgroup(paths.CGROUP_PARENT_PREFIX)
    pids = [p for p in _sandbox_pids() if httpd or HTTPD.name not in _cmdline(p)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _wait_dead(pids)


def _wait_dead(pids: list[int], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise SandboxError(f"processes {pids} survived SIGKILL for {timeout:.0f}s")
        time.sleep(0.05)


def _remove_cgroups() -> None:
    """Remove the per-host cgroup parents dockerd created (/sys/fs/cgroup[/ctrl]/gpuhost-sandbox)."""
    roots = [Path("/sys/fs/cgroup")] + [p for p in Path("/sys/fs/cgroup").glob("*") if p.is_dir()]
    for r in roots:
        top = r / paths.CGROUP_PARENT_PREFIX
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()),
                        key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            top.rmdir()
        except OSError as e:
            say(f"warning: cannot remove cgroup {top}: {e.strerror}")


# ---------------------------------------------------------------- status

def status() -> int:
    current = read_json(_state_file())
    if not current:
        print("sandbox: not running (no fleet): run `make sandbox-up`")
        return 1
    httpd = _httpd_pid()
    print(f"http server  {paths.MIRROR_URL}  {f'up (pid {httpd})' if httpd else 'DOWN'}")
    bad = 0 if httpd else 1
    # columns as wide as their longest value (ubuntu2404, ol9-uek8 ...)
    wname = max([8] + [len(h["name"]) for h in current["hosts"]])
    wos = max([8] + [len(h["os"]) for h in current["hosts"]])
    for h in current["hosts"]:
        st = hosts.state(h["name"])
        ssh = hosts.ssh_ready(h["address"], h["port"])
        boots = (hosts.host_run_dir(h["name"]) / "boots")
        nboot = boots.read_text().strip() if boots.is_file() else "-"
        shown = "up" if ssh else st
        bad += 0 if ssh else 1
        print(f"{h['name']:<{wname}} {h['address']}:{h['port']}  {h['os']:<{wos}} {shown:<8} "
              f"boots={nboot:<3} {h['gpu_count']}x {h['gpu_model']}"
              f"{'  docker' if h['docker'] else ''}")
    return 0 if bad == 0 else 1
