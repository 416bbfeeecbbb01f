"""Snapshots of a fleet's hosts: converge once, start from the result many times.

    python -m sandbox snapshot save NAME     # power the hosts off cleanly, keep them as NAME
    python -m sandbox up ... --snapshot NAME # hosts booted from NAME (same spec), in seconds
    python -m sandbox snapshot ls | rm NAME

A host's state is its overlay upper directory (every file it wrote over the base layers),
its docker/ directory (bound on /var/lib/docker) and its pci/ tree. `save` powers every host
off with `systemctl poweroff` (a clean shutdown: journald, dpkg, dockerd and containerd
close their files as on a real machine), then MOVES those directories into
STATE_DIR/snapshots/NAME/hosts/HOST/ (a rename: no copy), and boots the fleet again from
the snapshot. A host booted from a snapshot gets an empty upper directory on top of the
snapshot's layer (overlayfs: `lowerdir=SNAPSHOT/upper:BASE...`), so whatever it writes
never reaches the snapshot; its docker/ directory is a copy. The snapshot's whiteouts and
opaque directories hide base files exactly as they did in the upper directory (overlayfs
honours both in every lower layer).

A snapshot belongs to its fleet (runtime directory, addresses, HTTP port): the hosts'
sshd addresses and the mirror URLs gpuhost wrote are those of that fleet. `up --snapshot`
refuses a spec other than the one the snapshot was made with. It is stale when a base
layer it stands on was rebuilt: `up --snapshot` says so.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from . import hosts, paths
from .util import SandboxError, read_json, run, say, write_file

POWEROFF_TIMEOUT = 60.0


def root() -> Path:
    return paths.STATE_DIR / "snapshots"


def snapshot_dir(name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise SandboxError(f"snapshot name {name!r}: letters, digits, - and _ only")
    return root() / name


def meta(name: str) -> dict | None:
    return read_json(snapshot_dir(name) / "snapshot.json")


def names() -> list[str]:
    return sorted(p.name for p in root().glob("*") if (p / "snapshot.json").is_file())


def poweroff(h: dict) -> None:
    """`systemctl poweroff` in the host and wait for its supervisor to end (nspawn exits 0);
    a host that does not halt in POWEROFF_TIMEOUT is killed (SandboxError)."""
    hosts.ssh_runner(h)("systemctl --no-block poweroff", check=False, timeout=30)
    deadline = time.monotonic() + POWEROFF_TIMEOUT
    while hosts.supervisor_pid(h["name"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if hosts.supervisor_pid(h["name"]):
        hosts.stop(h["name"])
        raise SandboxError(f"{h['name']} did not power off within {POWEROFF_TIMEOUT:.0f}s "
                           f"(console: {hosts.host_run_dir(h['name']) / 'console.log'})")
    hosts.stop(h["name"])  # nothing left in its cgroup


def take(name: str, state: dict) -> dict:
    """Move the (powered off) hosts of ``state`` (the fleet's state.json) into snapshot
    NAME, replacing an older one of that name. Returns the snapshot's metadata."""
    target = snapshot_dir(name)
    if target.exists():
        hosts.remove_tree(target)
    (target / "hosts").mkdir(parents=True)
    for h in state["hosts"]:
        d = hosts.host_dir(h["name"])
        layer = target / "hosts" / h["name"]
        layer.mkdir()
        # the host's own upper dir becomes the top lower layer of hosts booted from it
        (d / "upper").rename(layer / "upper")
        (d / "docker").rename(layer / "docker")
        if (d / "pci").is_dir():
            (d / "pci").rename(layer / "pci")
        lowers = [str(layer / "upper")] + (d / "lower").read_text().split(":")
        write_file(layer / "lower", ":".join(lowers))
        shutil.copyfile(d / "spec.json", layer / "spec.json")
        hosts.remove_tree(d)
    data = {"name": name, "request": state["request"], "hosts": state["hosts"],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_file(target / "snapshot.json", json.dumps(data, indent=1) + "\n")
    return data


def check(name: str, wanted: list[dict]) -> dict:
    """The snapshot's metadata when it can boot ``wanted`` (same host specs, base layers
    still there), else SandboxError saying what differs."""
    data = meta(name)
    if data is None:
        have = ", ".join(names()) or "none"
        raise SandboxError(f"no snapshot {name!r} in {root()} (snapshots: {have}): make one "
                           f"with `python -m sandbox snapshot save {name}`")
    if data["hosts"] != wanted:
        raise SandboxError(f"snapshot {name!r} was made for another fleet "
                           f"({json.dumps(data['request'])}): bring that spec up, or make a "
                           "new snapshot")
    for h in wanted:
        for layer in (snapshot_dir(name) / "hosts" / h["name"] / "lower").read_text().split(":"):
            if not Path(layer).is_dir():
                raise SandboxError(f"snapshot {name!r} is stale: its layer {layer} is gone "
                                   "(a base was rebuilt); make the snapshot again")
    return data


def restore(name: str, h: dict, pubkey: str) -> None:
    """Create host ``h`` from snapshot NAME: the snapshot's layer under an empty upper dir,
    a copy of its docker/ and pci/ directories, the fleet's current SSH key."""
    layer = snapshot_dir(name) / "hosts" / h["name"]
    d = hosts.host_dir(h["name"])
    if d.exists():
        hosts.remove_tree(d)
    for sub in ("upper", "work", "root"):
        (d / sub).mkdir(parents=True)
    write_file(d / "lower", (layer / "lower").read_text())
    shutil.copyfile(layer / "spec.json", d / "spec.json")
    # a plain copy keeps owners, modes, xattrs (overlay2's opaque markers) and links
    run(["cp", "-a", "--reflink=auto", str(layer / "docker"), str(d / "docker")])
    if (layer / "pci").is_dir():
        run(["cp", "-a", str(layer / "pci"), str(d / "pci")])
    # the fleet's key of today (a `down` in between makes a new one)
    (d / "upper/root/.ssh").mkdir(mode=0o700, parents=True)
    write_file(d / "upper/root/.ssh/authorized_keys", pubkey, mode=0o600)


def remove(name: str) -> None:
    target = snapshot_dir(name)
    if not target.exists():
        raise SandboxError(f"no snapshot {name!r}")
    hosts.remove_tree(target)
    say(f"snapshot {name} removed")


def listing() -> int:
    for name in names():
        data = meta(name) or {}
        print(f"{name}  {len(data.get('hosts', []))} hosts  {data.get('created', '?')}  "
              f"{json.dumps(data.get('request'))}")
    return 0
