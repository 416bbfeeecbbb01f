"""Container engines of today (issue 24) over SSH against the sandbox, from a bare host:
Docker CE 28.5 with containerd.io 2.1 from the sandbox's stand-in of Docker's Debian
repository (sandbox/nvidia/pkg/dockerce.py, "debian-28": Debian testing's docker.io 28.5.2
and containerd 2.1.9 repackaged as Docker's packages), container_runtime_mode auto,
containerd_nvidia_runtime on, and Docker's containerd image store (the default of Docker
29's fresh installs, `"features": {"containerd-snapshotter": true}` on 28.5, with
containerd's native snapshotter: the nspawn host has no overlayfs under /var/lib/containerd).

gpu-01 converges from bare in auto mode (cdi: toolkit 1.18 and Docker 28.5), a second run
changes nothing; `docker run --gpus all` and `docker run --device nvidia.com/gpu=all` both
list its GPU; the verify image was loaded into the containerd image store; containerd 2.1's
own `containerd config dump` shows the nvidia runtime (config version 3, enable_cdi) and
runc, which runs every Docker container here; `--gpus` goes to the prestart hook on 28.5
(the release table's row, seen live); a `--restart=always` CDI-device container comes back
after a Docker restart (moby#49989 fixed from 28.2); the audit finds no drift; turning
containerd_nvidia_runtime off removes gpuhost's drop-in and containerd keeps running.
Docker 29 (which sends `--gpus` through the CDI spec) cannot be had here: its rule is
unit-tested (tests/unit/test_container_engines.py).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HOST = "gpu-01"
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=1, ol=0, docker_hosts=0,
                                overrides={HOST: {"traits": [], "gpu_model": "H100-80GB-HBM3",
                                                  "gpu_count": 1}},
                                state="bare",
                                why="the converge from bare onto Docker CE 28.5 and containerd "
                                    "2.1 is the point (issue 24's Done when)")]
DEPLOY = "deploys/gpu_host.py"
IMAGE = "gpuhost/verify:sandbox"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
# host data outranks the sandbox's group data
INVENTORY = """
import sys
sys.path.insert(0, {root!r})
import inventories.sandbox as _shared

assert _shared.docker_ce_28_debian, "no Docker CE 28 repository in the fake NVIDIA artifacts"
# docker_version pinned: auto is judged before Docker is installed (an unknown Docker is
# legacy); storage-driver native: with the containerd image store dockerd 28 takes it as
# containerd's snapshotter, and the nspawn host's /var/lib/containerd sits on an overlay
# (no overlayfs snapshots on it; /var/lib/docker is a bind for overlay2, sandbox/README.md)
_OVERRIDES = {{{host!r}: {{**_shared.docker_ce_28_debian, "docker_version": "28.5.2",
                          "container_runtime_mode": "auto", "containerd_nvidia_runtime": True,
                          "docker_daemon_settings": {{
                              "features": {{"containerd-snapshotter": True}},
                              "storage-driver": "native"}}}}}}
for _name, _value in list(vars(_shared).items()):
    if not _name.startswith("_") and isinstance(_value, tuple) and len(_value) == 2:
        globals()[_name] = ([(n, {{**d, **_OVERRIDES.get(n, {{}})}}) for n, d in _value[0]],
                            _value[1])
"""


@pytest.fixture(scope="module")
def sh(fleet, sandbox_tools):
    return lambda command, **kw: sandbox_tools.ssh(fleet, HOST, command, **kw).stdout


@pytest.fixture(scope="module")
def inventory(fleet, sandbox_tools, tmp_path_factory):
    path = tmp_path_factory.mktemp("engines") / "engines_inventory.py"
    path.write_text(INVENTORY.format(root=str(sandbox_tools.root), host=HOST))
    return str(path)


@pytest.fixture(scope="module")
def pyinfra(sandbox_tools, inventory):
    return lambda *args, **kw: sandbox_tools.run_pyinfra(*args, inventory=inventory, **kw)


@pytest.fixture(scope="module")
def converged(pyinfra):
    first = pyinfra("-y", DEPLOY, check=False, timeout=1500)
    second = pyinfra("-y", DEPLOY, "--data", "full_check=true", check=False, timeout=600)
    return first, second


def test_docker_28_converges_in_auto_mode_and_a_second_run_changes_nothing(converged, sh):
    first, second = converged
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert second.totals["changed"] == 0, second.stderr[-4000:]
    versions = dict(line.split() for line in sh(
        "dpkg-query -W -f '${Package} ${Version}\\n' docker-ce docker-ce-cli containerd.io"
    ).splitlines())
    assert versions == {"docker-ce": "5:28.5.2-1~debian.12~bookworm",
                        "docker-ce-cli": "5:28.5.2-1~debian.12~bookworm",
                        "containerd.io": "2.1.9-1"}, versions
    # Debian's builds report their upstream versions with Debian's suffix
    assert sh("docker version -f '{{.Server.Version}}'").strip() == "28.5.2+dfsg4"
    assert " 2.1.9" in sh("containerd --version")
    # auto resolved to cdi (toolkit 1.18, Docker 25+): CDI on, the spec written at boot
    config = json.loads(sh("cat /etc/docker/daemon.json"))
    assert config["features"] == {"cdi": True, "containerd-snapshotter": True}, config
    assert config["storage-driver"] == "native"
    assert sh("systemctl is-enabled gpuhost-cdi-spec.service").strip() == "enabled"


@pytest.mark.parametrize("flag", ["--gpus all", "--device nvidia.com/gpu=all"])
def test_both_ways_of_asking_for_gpus_list_the_gpu(converged, sh, flag):
    out = sh(f"docker run --rm --network=none {flag} {IMAGE} nvidia-smi -L")
    assert [line.split(":")[0] for line in out.splitlines()] == ["GPU 0"], out


def test_the_verify_image_is_in_the_containerd_image_store(converged, sh):
    # dockerd 28 with containerd-snapshotter keeps images in containerd's moby namespace
    assert "io.containerd.snapshotter.v1" in sh("docker info -f '{{json .DriverStatus}}'")
    assert IMAGE.split(":")[0] in sh("ctr -n moby images ls -q")


def test_containerd_2_shows_the_nvidia_runtime_and_runc(converged, sh):
    dump = sh("containerd config dump")
    assert "version = 3" in dump
    assert "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]" in dump or \
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]' in dump, dump
    assert "/usr/bin/nvidia-container-runtime" in dump
    assert ".containerd.runtimes.runc]" in dump
    assert "enable_cdi = true" in dump  # cdi mode
    # the CRI runtime plugin loaded with the drop-in (what kubelet talks to)
    plugins = sh("ctr plugins ls")
    assert any(line.split()[:2] == ["io.containerd.cri.v1", "runtime"] and line.split()[-1] == "ok"
               for line in plugins.splitlines()), plugins
    # runc still runs containers: Docker's own, through containerd 2.1's runc shim
    assert sh(f"docker run --rm --network=none {IMAGE} true; echo $?").strip() == "0"


def test_docker_28_hands_gpus_to_the_prestart_hook_as_the_release_table_says(converged, sh):
    """The table's row for 28.x (gpuhost/data/docker_gpus_cdi.json), seen live: the hook's
    request (NVIDIA_VISIBLE_DEVICES=all; CDI injection would set void, moby/moby#52704)."""
    from gpuhost.facts import assemble, parsers
    from gpuhost.facts.script import ALL_SECTIONS, build_script
    from gpuhost.runtime import cdi

    state = assemble.host_state(parsers.split_sections(sh(build_script(ALL_SECTIONS))))
    assert cdi.state_gpus_route(state)["via"] == "runtime-hook"
    out = sh(f"docker run --rm --network=none --gpus all {IMAGE} sh -c 'echo $NVIDIA_VISIBLE_DEVICES'")
    assert out.strip() == "all"


def test_a_restarting_cdi_container_comes_back_after_a_docker_restart(converged, sh):
    """moby/moby#49989 (a container with a restart policy and a CDI device failed when dockerd
    restored it before registering its CDI driver) is fixed by moby/moby#49990, first in
    28.2.0: on 28.5 the container is running again after `systemctl restart docker`."""
    name = "gpuhost-cdi-restart"
    sh(f"docker run -d --name {name} --restart=always --network=none "
       f"--device nvidia.com/gpu=all {IMAGE} sleep 600")
    try:
        sh("systemctl restart docker")
        state = sh(f"timeout 60 sh -c 'until test \"$(docker inspect -f {{{{.State.Running}}}} "
                   f"{name} 2>/dev/null)\" = true; do sleep 1; done'; "
                   f"docker inspect -f '{{{{.State.Status}}}} {{{{.RestartCount}}}}' {name}",
                   check=False)
        assert state.split()[0] == "running", state
    finally:
        sh(f"docker rm -f {name} >/dev/null 2>&1; true", check=False)


def test_the_audit_finds_no_drift_then_turning_containerd_off_removes_the_drop_in(
        converged, sh, sandbox_tools, inventory, pyinfra, tmp_path):
    out = tmp_path / "audit.json"
    proc = subprocess.run([sys.executable, "-m", "gpuhost.cli", "audit", inventory,
                           "--limit", HOST, "--json", str(out)], cwd=sandbox_tools.root,
                          text=True, capture_output=True, timeout=300)
    [host] = json.loads(out.read_text())["hosts"]
    assert proc.returncode == 0 and host["drift"] == [], (host["drift"], proc.stdout[-2000:])
    assert host["desired"]["containerd_nvidia_runtime"] is True

    off = ("--data", "containerd_nvidia_runtime=false")
    first = pyinfra("-y", "tests/integration/containerd_only.py", *off, timeout=600)
    assert first.totals["changed"] == 1, first.stderr[-3000:]
    assert sh(f"test -e {DROP_IN}; echo $?", check=False).strip() == "1"
    assert sh("systemctl is-active containerd").strip() == "active"
    assert "runtimes.nvidia]" not in sh("containerd config dump")
    assert sh("ctr version >/dev/null; echo $?").strip() == "0"
    again = pyinfra("-y", "tests/integration/containerd_only.py", *off, timeout=600)
    assert again.totals["changed"] == 0, again.stderr[-3000:]
