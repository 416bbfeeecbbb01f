"""The controller HTTP server of the sandbox (a detached process, stdlib only).

Serves  /debian/  -> /var/cache/gpuhost/mirror/debian   (the package mirror)
        /nvidia/  -> /var/cache/gpuhost/nvidia          (fake NVIDIA artifacts)
on 127.77.0.1:8000 (loopback). Usage: python3 httpd.py --bind ADDR --port N --log FILE
    --map debian=/var/cache/gpuhost/mirror/debian --map nvidia=/var/cache/gpuhost/nvidia
"""
from __future__ import annotations

import argparse
import http.server
import os
import posixpath
import sys
import urllib.parse


def make_handler(mapping: dict[str, str], log):
    class Handler(http.server.SimpleHTTPRequestHandler):
        server_version = "gpuhost-sandbox-httpd"

        def translate_path(self, path: str) -> str:
            path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
            parts = [p for p in posixpath.normpath(path).split("/") if p not in ("", ".", "..")]
            if not parts or parts[0] not in mapping:
                return "/nonexistent-gpuhost-sandbox-path"
            return os.path.join(mapping[parts[0]], *parts[1:])

        def list_directory(self, path):
            if os.path.realpath(path) == "/nonexistent-gpuhost-sandbox-path":
                self.send_error(404)
                return None
            return super().list_directory(path)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 (stdlib signature)
            log.write(f"{self.address_string()} {format % args}\n")
            log.flush()

    return Handler


def main() -> int:
    ap = argparse.ArgumentParser(prog="gpuhost-sandbox-httpd")
    ap.add_argument("--bind", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--pidfile", required=True)
    ap.add_argument("--map", action="append", default=[], help="PREFIX=DIRECTORY")
    a = ap.parse_args()
    mapping = {}
    for m in a.map:
        prefix, _, directory = m.partition("=")
        mapping[prefix.strip("/")] = directory
    log = open(a.log, "a", buffering=1)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    httpd = http.server.ThreadingHTTPServer((a.bind, a.port), make_handler(mapping, log))
    httpd.daemon_threads = True
    with open(a.pidfile + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(a.pidfile + ".tmp", a.pidfile)
    log.write(f"serving {mapping} on http://{a.bind}:{a.port}\n")
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
