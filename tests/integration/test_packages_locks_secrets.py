"""Issue 13 items 7, 8 and 10 against real apt/dnf on sandbox hosts (from bare hosts).

- Debian's contrib (item 8): without it the driver install fails as on a stock Debian 12
  host; with it (the default) gpuhost's own sources file adds contrib, the host's
  sources.list is untouched;
- local package files (``container_toolkit_source: local``) converge: the second run changes
  nothing (before: ``apt-get install /path.deb`` / ``dnf install /path.rpm`` ran every time);
- the dnf proxy with credentials lands in /etc/dnf/dnf.conf mode 600, the file's other lines
  kept, the secret in no output even at -vvv (fact output included).

Bare hosts of the default spec (two Debian, OL8, OL9): the first install of each package
source is the point. The hosts of one package kind (deb, rpm) run together in one pyinfra run.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare",
                                why="the first install from local files and apt/dnf sources")]

OUT = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                                os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
SECRET = "s3cr3t-Pa55"


# the fake repos serve 1.17.8 and 1.18.2 (issue 16): local files of the older one, a host
# kept on 1.17 converging
LOCAL_TOOLKIT = "1.17.8"


def toolkit_files(kind: str) -> list[str]:
    files = sorted(str(p) for p in (OUT / "toolkit" / kind).glob(f"*{LOCAL_TOOLKIT}-1*.{kind}"))
    assert len(files) == 4, f"the fake toolkit's four .{kind} files under {OUT}/toolkit/{kind}"
    return files


def by_kind(fleet) -> dict[str, list[str]]:
    """The fleet's hosts by package kind: {"deb": [...], "rpm": [...]}."""
    kinds: dict[str, list[str]] = {}
    for host in fleet["hosts"]:
        kinds.setdefault("deb" if host["os"] == "debian12" else "rpm", []).append(host["name"])
    return kinds


def limits(names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("--limit", name)]


@pytest.fixture(scope="module")
def local_runs(fleet, pyinfra, sandbox_tools):
    runs = {}
    for kind, names in by_kind(fleet).items():
        data = ["--data", "container_toolkit_source=local",
                "--data", f"container_toolkit_version={LOCAL_TOOLKIT}",
                "--data", "container_toolkit_local_packages=" + json.dumps(toolkit_files(kind))]
        args = ["-y", "deploys/gpu_host.py", *data]
        if kind == "deb":
            first_deb = names[0]
            sources = sandbox_tools.ssh(fleet, first_deb, "cat /etc/apt/sources.list").stdout
            runs["no_contrib"] = (first_deb, sources, pyinfra(
                *args, "--limit", first_deb, "--data", "debian_enable_contrib=false",
                check=False, timeout=1800))
        both = (pyinfra(*args, *limits(names), check=False, timeout=1800),
                pyinfra(*args, *limits(names), "--data", "full_check=true", check=False, timeout=900))
        runs.update({name: both for name in names})
    return runs


def test_debian_needs_contrib_and_gets_it_in_gpuhost_own_file(local_runs, ssh):
    if "no_contrib" not in local_runs:
        pytest.fail("no Debian host in this fleet (the fleet marker changed?)")
    name, sources, without = local_runs["no_contrib"]
    # a stock Debian 12 host without contrib: apt cannot install NVIDIA's packages
    assert without.returncode != 0
    assert "nvidia-support" in without.stdout + without.stderr, without.stdout[-3000:]
    first, _ = local_runs[name]
    assert first.returncode == 0, first.stdout[-3000:]
    ours = ssh(name, "cat /etc/apt/sources.list.d/gpuhost-debian-contrib.sources").stdout
    assert "Components: contrib" in ours and "Suites: bookworm" in ours
    assert "Signed-By: /etc/apt/keyrings/gpuhost-sandbox-archive.gpg" in ours  # copied
    assert ssh(name, "cat /etc/apt/sources.list").stdout == sources  # the user's, untouched
    assert ssh(name, "dpkg-query -W -f '${Status}' nvidia-support").stdout == \
        "install ok installed"


def test_local_toolkit_files_converge_and_the_second_run_changes_nothing(local_runs, ssh):
    for name, runs in local_runs.items():
        if name == "no_contrib":  # the contrib test's own run
            continue
        first, second = runs
        assert first.returncode == 0, f"{name}:\n{first.stdout[-4000:]}\n{first.stderr[-3000:]}"
        assert second.returncode == 0, second.stdout[-3000:]
        assert second.totals["changed"] == 0, (
            f"{name}: the second run changed something: {second.changed()}\n"
            f"{second.output[-5000:]}")
        out = ssh(name, "command -v dpkg-query >/dev/null && dpkg-query -W "
                        "-f '${Version}' nvidia-container-toolkit || "
                        "rpm -q --qf '%{VERSION}-%{RELEASE}' nvidia-container-toolkit").stdout
        assert out.strip() == f"{LOCAL_TOOLKIT}-1"


@pytest.fixture(scope="module")
def ol_host(fleet):
    names = [h["name"] for h in fleet["hosts"] if h["os"] in ("ol8", "ol9")]
    if not names:
        pytest.fail("no Oracle Linux host in this fleet (the fleet marker changed?)")
    return names[0]


def test_the_dnf_proxy_is_a_mode_600_file_and_no_output_shows_the_password(local_runs, ol_host,
                                                                          pyinfra, ssh):
    before = ssh(ol_host, "cat /etc/dnf/dnf.conf").stdout
    proxy = f"http://ops:{SECRET}@127.0.0.1:3128"
    args = ["-y", "-vvv", "tests/integration/proxy_only.py", "--limit", ol_host,
            "--data", f"http_proxy={proxy}"]
    first = pyinfra(*args, check=False)
    second = pyinfra(*args, check=False)
    try:
        for run in (first, second):
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
            assert SECRET not in run.stdout + run.stderr
        assert second.totals["changed"] == 0
        stat = ssh(ol_host, "stat -c '%a %U' /etc/dnf/dnf.conf").stdout.strip()
        assert stat == "600 root"
        after = ssh(ol_host, "cat /etc/dnf/dnf.conf").stdout
        assert f"proxy={proxy}" in after.splitlines()
        kept = [line for line in before.splitlines() if not line.startswith("proxy=")]
        assert [line for line in after.splitlines() if line != f"proxy={proxy}"] == kept
    finally:  # leave the host's dnf usable for the other tests
        encoded = base64.b64encode(before.encode()).decode()
        ssh(ol_host, f"echo {encoded} | base64 -d > /etc/dnf/dnf.conf; "
                     "chmod 644 /etc/dnf/dnf.conf", check=False)


def test_docker_version_is_pinned_and_a_second_run_changes_nothing(local_runs, fleet, pyinfra,
                                                                   ssh):
    # issue 13 item 6; the sandbox's Docker is 20.10.24 (Debian's docker.io, the fake
    # docker-ce of the Oracle hosts' stand-in for Docker's RHEL repository)
    for kind, names in by_kind(fleet).items():
        args = ["-y", "deploys/gpu_host.py", *limits(names),
                "--data", "docker_version=20.10.24",
                "--data", f"container_toolkit_version={LOCAL_TOOLKIT}",
                "--data", "container_toolkit_source=local",
                "--data", "container_toolkit_local_packages=" + json.dumps(toolkit_files(kind))]
        first = pyinfra(*args, check=False, timeout=900)
        second = pyinfra(*args, "--data", "full_check=true", check=False, timeout=900)
        assert first.returncode == 0, first.output[-6000:]
        assert second.totals["changed"] == 0, (names, second.changed(), second.output[-4000:])
        assert second.hosts_that_ran() == set(names), second.hosts_that_ran()
        for name in names:
            if kind == "deb":
                policy = ssh(name, "apt-cache policy docker.io").stdout
                assert " 1000\n" in policy, policy  # the pin holds the installed version
            else:
                out = ssh(name, "rpm -q --qf '%{VERSION}\\n' docker-ce docker-ce-cli").stdout
                assert out.split() == ["20.10.24", "20.10.24"]
