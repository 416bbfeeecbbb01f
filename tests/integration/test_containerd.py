"""containerd's nvidia runtime through gpuhost's drop-in (roles/containerd.py) on a Debian
host running Debian's own containerd 1.6 (the sandbox's `distro-containerd` trait).

Debian's package ships a config.toml without `imports`: gpuhost refuses it (says the line
to add, changes nothing); after the user adds the line, gpuhost converges, the running
containerd's effective configuration has the nvidia runtime, the user's config.toml is
byte-identical, a second run changes nothing, a failed restart puts gpuhost's previous
drop-in back, and a host without config.toml gets the two-line one nvidia-ctk writes.
Only gpuhost's containerd step runs (tests/integration/containerd_only.py); the host is put
back as it was at the end.
"""
from __future__ import annotations

import tomllib

import pytest

HOST = "gpu-01"
# one bare Debian host with Debian's containerd 1.6: only gpuhost's containerd step runs
pytestmark = [pytest.mark.integration,
              pytest.mark.fleet(hosts=1, ol=0, docker_hosts=1,
                                overrides={HOST: {"traits": ["distro-containerd"]}})]
DEPLOY = "tests/integration/containerd_only.py"
ON = ("--data", "containerd_nvidia_runtime=true")
CONFIG = "/etc/containerd/config.toml"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]'


@pytest.fixture(scope="module")
def sh(fleet, sandbox_tools):
    return lambda command, **kw: sandbox_tools.ssh(fleet, HOST, command, **kw)


@pytest.fixture(scope="module")
def run(fleet, sandbox_tools):
    def _run(*args, check=True):
        return sandbox_tools.run_pyinfra("-y", DEPLOY, "--limit", HOST, *ON, *args,
                                         timeout=600, check=check)
    return _run




def test_the_nvidia_runtime_reaches_containerd_through_the_drop_in_only(sh, run):
    stock = sh(f"sha256sum {CONFIG}").stdout.split()[0]
    assert "imports" not in sh(f"cat {CONFIG}").stdout  # Debian's file, as packaged
    try:
        # 1. Debian's config.toml does not import conf.d: refused, nothing written
        refused = run(check=False)
        assert refused.returncode != 0
        said = refused.stdout + refused.stderr
        assert "does not import /etc/containerd/conf.d" in said and IMPORTS in said, said[-3000:]
        assert sh(f"sha256sum {CONFIG}").stdout.split()[0] == stock
        assert sh(f"test -e {DROP_IN}", check=False).returncode == 1

        # 2. the user adds the one line; gpuhost writes its drop-in and restarts containerd
        sh(f"sed -i '1i {IMPORTS}' {CONFIG} && systemctl restart containerd")
        users = sh(f"sha256sum {CONFIG}").stdout.split()[0]
        pid = sh("systemctl show -p MainPID --value containerd").stdout.strip()
        first = run()
        assert first.totals["changed"] == 1
        dump = sh("containerd config dump").stdout
        assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in dump, dump
        assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump
        assert '[plugins."io.containerd.grpc.v1.cri".cni]' in dump  # Debian's CRI settings kept
        assert 'bin_dir = "/usr/lib/cni"' in dump
        assert sh("systemctl show -p MainPID --value containerd").stdout.strip() != pid  # restarted
        assert sh("ctr version").returncode == 0
        # the CRI plugin (what kubelet talks to) loaded with the drop-in
        assert sh("ctr plugins ls | awk '$2 == \"cri\" {print $NF}'").stdout.strip() == "ok"
        assert sh(f"sha256sum {CONFIG}").stdout.split()[0] == users  # byte-identical

        # 3. converged: nothing changes, containerd is not restarted
        pid = sh("systemctl show -p MainPID --value containerd").stdout.strip()
        second = run()
        row = second.totals
        assert row["changed"] == 0 and row["no_change"] == 1, row
        assert sh("systemctl show -p MainPID --value containerd").stdout.strip() == pid

        # 4. a CRI value containerd cannot read reaches the new drop-in: containerd does not
        # start with it, gpuhost puts its previous drop-in back and containerd runs again
        kept = sh(f"sha256sum {DROP_IN}").stdout.split()[0]
        sh(f"cp -p {CONFIG} /root/config.toml.users && sed -i "
           "'s|^  \\[plugins.\"io.containerd.grpc.v1.cri\"\\]$|&\\n    "
           "max_container_log_line_size = \"abc\"|' " + CONFIG)
        assert 'max_container_log_line_size = "abc"' in sh(f"cat {CONFIG}").stdout
        broken = run(check=False)
        said = broken.stdout + broken.stderr
        assert broken.returncode != 0
        assert "gpuhost put its previous files back" in said, said[-3000:]
        assert "Can't convert abc(string) to int" in said, said[-3000:]  # containerd's words
        assert sh(f"sha256sum {DROP_IN}").stdout.split()[0] == kept
        assert sh("systemctl is-active containerd").stdout.strip() == "active"
        assert sh("ctr plugins ls | awk '$2 == \"cri\" {print $NF}'").stdout.strip() == "ok"
        sh(f"mv -f /root/config.toml.users {CONFIG}")

        # 5. no config.toml at all: gpuhost writes the two-line one nvidia-ctk writes, here
        # with nvidia as the CRI default runtime
        sh(f"mv {CONFIG} /root/config.toml.users && systemctl restart containerd")
        run("--data", "containerd_nvidia_default_runtime=true")
        top = sh(f"cat {CONFIG}").stdout
        assert top.startswith("# Written by gpuhost"), top
        assert tomllib.loads(top) == {"version": 2, "imports": ["/etc/containerd/conf.d/*.toml"]}
        dump = sh("containerd config dump").stdout
        assert 'default_runtime_name = "nvidia"' in dump, dump
        assert sh("ctr plugins ls | awk '$2 == \"cri\" {print $NF}'").stdout.strip() == "ok"
    finally:  # the host as it was: Debian's file, no drop-in
        sh(f"test ! -e /root/config.toml.users || mv -f /root/config.toml.users {CONFIG}; "
           f"rm -f {DROP_IN} && sed -i '\\|^{IMPORTS}$|d' {CONFIG} && systemctl restart containerd",
           check=False)
