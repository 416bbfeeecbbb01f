"""CLI: python -m sandbox up --hosts N [--ol K] [--ubuntu U] [--docker-hosts D] [--spec JSON|@file]
(a host's "os" in --spec: debian12, debian13, ol8, ol9, ubuntu2204, ubuntu2404, ubuntu2604)
                            [--fresh | --snapshot NAME]
         python -m sandbox snapshot save NAME | ls | rm NAME
         python -m sandbox down | status | base [--ol] | mirror [--refresh]"""
from __future__ import annotations

import argparse
import sys

from . import base, debian13, fleet, mirror, snapshot, spec
from .util import SandboxError, eprint, need_root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox",
                                 description="gpuhost sandbox: real SSH hosts on this machine")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="build what is missing, bring the fleet up (idempotent)")
    p_up.add_argument("--hosts", type=int, required=True, help="number of hosts (all OSes)")
    p_up.add_argument("--ol", type=int, default=0,
                      help="how many of them are Oracle Linux (split OL8/OL9), default 0")
    p_up.add_argument("--ubuntu", type=int, default=0,
                      help="how many of them are Ubuntu (split 22.04/24.04, 24.04 gets the "
                           "odd one), default 0")
    p_up.add_argument("--docker-hosts", type=int, default=1,
                      help="how many Debian hosts form the docker_hosts group, default 1")
    p_up.add_argument("--spec", default=None,
                      help='per-host overrides, JSON or @file: {"gpu-01": {"gpu_count": 8}}')
    p_up.add_argument("--refresh", action="store_true",
                      help="re-read the Debian archive's package lists for the mirror")
    start = p_up.add_mutually_exclusive_group()
    start.add_argument("--fresh", action="store_true",
                       help="create every host anew from the base layers (bare root "
                            "filesystems), whatever ran on them before")
    start.add_argument("--snapshot", metavar="NAME", default=None,
                       help="boot every host from snapshot NAME (made with this spec)")
    p_snap = sub.add_parser("snapshot", help="keep the fleet's hosts as a snapshot, list or "
                                             "remove snapshots")
    snap = p_snap.add_subparsers(dest="action", required=True)
    snap.add_parser("save", help="power the hosts off cleanly, keep them as NAME, boot them "
                                 "again from it").add_argument("name")
    snap.add_parser("ls", help="list the snapshots")
    snap.add_parser("rm", help="remove snapshot NAME").add_argument("name")
    sub.add_parser("down", help="stop and remove every host, the HTTP server, runtime files")
    sub.add_parser("status", help="show the fleet (exit 1 when something is down)")
    p_base = sub.add_parser("base", help="build the cached base roots only")
    p_base.add_argument("--ol", action="store_true", help="also the Oracle Linux layers")
    p_base.add_argument("--debian13", action="store_true", help="also the Debian 13 root")
    p_mirror = sub.add_parser("mirror", help="build or update the package mirror only")
    p_mirror.add_argument("--refresh", action="store_true")
    p_mirror.add_argument("--debian13", action="store_true",
                          help="also the Debian 13 (trixie) mirror")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            fleet.up(a.hosts, a.ol, a.docker_hosts, spec.load_overrides(a.spec), a.refresh,
                     ubuntu_hosts=a.ubuntu, fresh=a.fresh, from_snapshot=a.snapshot)
        elif a.cmd == "snapshot":
            need_root()
            if a.action == "save":
                fleet.save_snapshot(a.name)
            elif a.action == "ls":
                return snapshot.listing()
            else:
                snapshot.remove(a.name)
        elif a.cmd == "down":
            fleet.down()
        elif a.cmd == "status":
            return fleet.status()
        elif a.cmd == "base":
            need_root()
            with fleet.cache_lock():
                base.build_all(ol=a.ol, oses={"debian13"} if a.debian13 else set())
        elif a.cmd == "mirror":
            need_root()
            with fleet.cache_lock():
                mirror.build(refresh=a.refresh)
                if a.debian13:
                    debian13.build_mirror(refresh=a.refresh)
    except SandboxError as e:
        eprint(f"sandbox: error: {e}")
        return 1
    except KeyboardInterrupt:
        eprint("sandbox: interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
