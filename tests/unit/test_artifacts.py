"""gpuhost.artifacts against a real HTTP server on 127.0.0.1 (random port, in a thread)."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuhost.artifacts import ArtifactError, cache_path, clean_partial, fetch

PAYLOAD = bytes(range(256)) * 4096 + b"gpuhost"  # ~1 MiB, not a multiple of the chunk size
SHA = hashlib.sha256(PAYLOAD).hexdigest()
NAME = "nvidia-driver-local-repo-debian12-570.172.08_1.0-1_amd64.deb"


class Server:
    """Serves PAYLOAD at /nvidia/NAME; ``fail_next`` answers the next N GETs with 503."""

    def __init__(self):
        self.requests: list[str] = []
        self.fail_next = 0
        self.files = {f"/nvidia/{NAME}": PAYLOAD}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                outer.requests.append(self.path)
                if outer.fail_next > 0:
                    outer.fail_next -= 1
                    self.send_error(503, "busy")
                    return
                path = self.path.split("://", 1)[-1]
                path = path[path.index("/"):] if "://" in self.path else path
                body = outer.files.get(path)
                if body is None:
                    self.send_error(404, "not here")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def url(self, path=f"/nvidia/{NAME}"):
        return self.base + path

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()


def cache_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


def test_good_sha_downloads_into_cache(server, tmp_path, capsys):
    path = fetch({"url": server.url(), "sha256": SHA}, tmp_path, backoff_factor=0)
    assert path == tmp_path / SHA / NAME
    assert path.read_bytes() == PAYLOAD
    assert server.requests == [f"/nvidia/{NAME}"]
    assert cache_files(tmp_path) == [path]  # no temporary file left behind
    err = capsys.readouterr().err  # not a TTY: exactly one line per file, no bar
    assert err == f"gpuhost: {NAME}: downloaded from {server.url()} (1.0 MiB), sha256 ok\n"


def test_bad_sha_leaves_nothing_and_names_both_digests(server, tmp_path):
    wrong = "0" * 64
    with pytest.raises(ArtifactError) as info:
        fetch({"url": server.url(), "sha256": wrong}, tmp_path, progress=False)
    message = str(info.value)
    assert wrong in message and SHA in message and server.url() in message
    assert cache_files(tmp_path) == []


def test_cache_hit_makes_no_second_request(server, tmp_path):
    source = {"url": server.url(), "sha256": SHA.upper()}  # digest case does not matter
    first = fetch(source, tmp_path, progress=False)
    second = fetch(source, tmp_path, progress=False)
    assert first == second
    assert len(server.requests) == 1


def test_corrupted_cache_is_fetched_again(server, tmp_path):
    source = {"url": server.url(), "sha256": SHA}
    path = fetch(source, tmp_path, progress=False)
    path.write_bytes(b"corrupted on disk")
    assert fetch(source, tmp_path, progress=False).read_bytes() == PAYLOAD
    assert len(server.requests) == 2


def test_retries_after_503(server, tmp_path):
    server.fail_next = 2
    path = fetch({"url": server.url(), "sha256": SHA}, tmp_path, progress=False, backoff_factor=0)
    assert path.read_bytes() == PAYLOAD
    assert len(server.requests) == 3


def test_gives_up_after_five_retries(server, tmp_path):
    server.fail_next = 100
    with pytest.raises(ArtifactError, match="after retries"):
        fetch({"url": server.url(), "sha256": SHA}, tmp_path, progress=False, backoff_factor=0)
    assert len(server.requests) == 6  # the first try and 5 retries
    assert cache_files(tmp_path) == []


def test_404_is_not_retried_and_says_so(server, tmp_path):
    with pytest.raises(ArtifactError, match="HTTP 404"):
        fetch({"url": server.url("/nvidia/missing.deb"), "sha256": SHA}, tmp_path, progress=False)
    assert len(server.requests) == 1


def test_connection_refused_is_an_artifact_error(tmp_path):
    srv = Server()
    url = srv.url()
    srv.close()  # nothing listens on the port any more
    with pytest.raises(ArtifactError, match="failed"):
        fetch({"url": url, "sha256": SHA}, tmp_path, progress=False, backoff_factor=0)


def test_offline_refuses_http_but_allows_the_mirror(server, tmp_path):
    source = {"url": server.url(), "sha256": SHA}
    with pytest.raises(ArtifactError, match="offline"):
        fetch(source, tmp_path, offline=True, progress=False)
    assert server.requests == []
    path = fetch(source, tmp_path, offline=True, mirror_urls=[server.base + "/nvidia"], progress=False)
    assert path.read_bytes() == PAYLOAD


def test_credentials_are_never_printed(server, tmp_path, capsys):
    url = server.url().replace("http://", "http://alice:s3cret@")
    fetch({"url": url, "sha256": SHA}, tmp_path)
    with pytest.raises(ArtifactError) as info:
        fetch({"url": url.replace(NAME, "other.deb"), "sha256": SHA}, tmp_path)
    printed = capsys.readouterr().err + str(info.value)
    assert "alice" not in printed and "s3cret" not in printed
    assert "***@127.0.0.1" in printed


def test_download_goes_through_the_proxy(server, tmp_path):
    # The test server answers proxy-style requests (absolute URI in the request line).
    source = {"url": f"http://gpuhost-artifacts.invalid/nvidia/{NAME}", "sha256": SHA}
    path = fetch(source, tmp_path, proxy=server.base, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert server.requests == [f"http://gpuhost-artifacts.invalid/nvidia/{NAME}"]


def test_local_path_and_file_url_are_copied_and_verified(tmp_path):
    src = tmp_path / "in" / NAME
    src.parent.mkdir()
    src.write_bytes(PAYLOAD)
    cache = tmp_path / "cache"
    for source in ({"path": str(src), "sha256": SHA}, {"url": src.as_uri(), "sha256": SHA}):
        path = fetch(source, cache, offline=True, progress=False)
        assert path == cache / SHA / NAME and path.read_bytes() == PAYLOAD
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        fetch({"path": str(src), "sha256": "1" * 64}, tmp_path / "other", progress=False)
    assert cache_files(tmp_path / "other") == []
    with pytest.raises(ArtifactError, match="does not exist"):
        fetch({"path": str(tmp_path / "nope.deb"), "sha256": SHA}, cache, progress=False)


@pytest.mark.parametrize("source", [
    {"url": "http://x/y.deb"},
    {"url": "http://x/y.deb", "path": "/y.deb", "sha256": SHA},
    {"path": "/y.deb", "sha256": "abc"},
    "http://x/y.deb",
])
def test_malformed_sources_are_refused(source, tmp_path):
    with pytest.raises(ArtifactError):
        fetch(source, tmp_path, progress=False)


def test_cache_path_and_partial_cleanup(tmp_path):
    assert cache_path({"url": "https://h/a%20b/x%20y.deb?sig=1", "sha256": SHA}, tmp_path) == \
        tmp_path / SHA / "x_y.deb"
    (tmp_path / SHA).mkdir()
    (tmp_path / SHA / ".part-abc").write_bytes(b"half")
    assert clean_partial(tmp_path) == 1
    assert cache_files(tmp_path) == []


def test_progress_bar_on_a_tty(server, tmp_path):
    """On a terminal, a large download draws click's progress bar on stderr."""
    import os
    import pty
    import subprocess
    import sys

    big = PAYLOAD * 9  # ~9 MiB: above the progress-bar threshold
    server.files["/nvidia/big.deb"] = big
    code = ("import sys; from gpuhost.artifacts import fetch; "
            "fetch({'url': sys.argv[1], 'sha256': sys.argv[2]}, sys.argv[3], backoff_factor=0)")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code, server.url("/nvidia/big.deb"),
                             hashlib.sha256(big).hexdigest(), str(tmp_path)],
                            stderr=slave, stdout=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:  # read while the child writes, so a full pty buffer cannot block it
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        out += data
    os.close(master)
    proc.stdout_data = proc.stdout.read()
    proc.stdout.close()
    proc.wait(timeout=30)
    assert proc.returncode == 0
    text = out.decode(errors="replace")
    assert "gpuhost: big.deb" in text and "100%" in text
    assert proc.stdout_data == b""  # nothing on stdout: pyinfra --json keeps stdout for JSON
