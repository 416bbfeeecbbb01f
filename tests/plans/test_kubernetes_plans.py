"""kubernetes_profile in exact plans (docs/kubernetes.md): on an NVL host the dra profile
disables and masks nvidia-imex.service and turns CDI on in containerd's drop-in; back to
none, a masked unit is unmasked, enabled and started; contradictions are refused before any
host is contacted. The @fake host answers containerd's view (2.x, config.toml importing
conf.d) and the IMEX unit's state (tests/plans/harness.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NVL = {"nvidia_fabric": "nvl", "nvidia_imex_peers": ["10.0.0.1", "10.0.0.2"],
       "containerd_nvidia_runtime": True}

# Runs in its own process (the harness needs gevent's monkey-patching).
SCRIPT = r"""
import json, os, re, sys
sys.path.insert(0, os.environ["PLAN_DIR"])
import harness, scenarios
extra = json.loads(os.environ["EXTRA"])
M = "@@gpuhost-containerd@@"
CONTAINERD = [f"{M} version", "containerd containerd.io v2.0.4 1a43cb6a", f"{M} active",
              "active", f"{M} exec", "{ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd ; }",
              f"{M} config", "present", "version = 3",
              'imports = ["/etc/containerd/conf.d/*.toml"]', f"{M} drop_in"]

def host_data(name, extra):
    data = scenarios.host_data(name, extra)
    data["fake_responses"] = {
        re.compile(r"^echo .@@gpuhost-containerd@@ version.;"): CONTAINERD,
        re.compile(r"test -e \"\$d/\"nvidia-imex\.service && echo yes"): "yes",
        re.compile(r"^systemctl is-enabled nvidia-imex\.service"): os.environ["IMEX"],
        **data["fake_responses"]}
    return data

class Connector(harness.PlanConnector):
    def put_file(self, filename_or_io, remote_filename, *args, **kwargs):
        if "99-nvidia.toml" in remote_filename:  # the drop-in's text: in the plan
            data = filename_or_io.getvalue() if hasattr(filename_or_io, "getvalue") else \
                open(filename_or_io, "rb").read()
            text = data.decode() if isinstance(data, bytes) else data
            harness.RECORD.append("drop-in: " + " | ".join(text.splitlines()))
        return super().put_file(filename_or_io, remote_filename, *args, **kwargs)

for line in harness.plan(sys.argv[1], extra_data=extra, host_data=host_data,
                         connector=Connector):
    print(line)
"""


def plan(extra: dict, imex: str = "enabled\nactive"):
    env = dict(os.environ, PLAN_DIR=str(HERE), EXTRA=json.dumps(extra), IMEX=imex,
               PYINFRA_PROGRESS="off")
    return plan_runner.run([sys.executable, "-c", SCRIPT, "debian12"], cwd=ROOT, env=env,
                           timeout=120)


def test_dra_on_an_nvl_host_masks_imex_and_turns_cdi_on_in_containerd():
    result = plan({**NVL, "kubernetes_profile": "dra"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "systemctl disable --now nvidia-imex.service && systemctl mask nvidia-imex.service" \
        in lines, lines
    assert not any(line.startswith(("systemctl enable nvidia-imex", "systemctl start nvidia-imex",
                                    "systemctl restart nvidia-imex")) for line in lines), lines
    drop_in = next(line for line in lines if line.startswith("drop-in: "))
    assert "enable_cdi = true" in drop_in, drop_in
    assert not any(line.startswith("FAILED") for line in lines), lines


def test_dra_on_a_host_already_masked_sends_no_imex_command():
    result = plan({**NVL, "kubernetes_profile": "dra"}, imex="masked\ninactive")
    assert result.returncode == 0, result.stderr[-3000:]
    assert not any("nvidia-imex.service" in line and line.startswith("systemctl")
                   for line in result.stdout.splitlines()), result.stdout


def test_back_to_none_unmasks_enables_and_starts_imex():
    result = plan({**NVL, "kubernetes_profile": "none"}, imex="masked\ninactive")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    unmask = lines.index("systemctl unmask nvidia-imex.service")
    enable = next(i for i, line in enumerate(lines) if line.startswith("systemctl enable nvidia-imex"))
    assert unmask < enable, lines
    assert not any("systemctl mask" in line for line in lines), lines
    # container_runtime_mode legacy and no DRA: containerd's CDI stays as gpuhost had it
    assert "enable_cdi" not in next(line for line in lines if line.startswith("drop-in: "))


def test_host_managed_imex_sets_its_two_keys_in_config_cfg():
    result = plan({**NVL, "kubernetes_profile": "dra-host-managed-imex"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "printf '%s\\n' IMEX_CMD_ENABLED=1 >> /etc/nvidia-imex/config.cfg" in lines, lines
    assert ("printf '%s\\n' IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock >> "
            "/etc/nvidia-imex/config.cfg") in lines, lines
    assert not any("systemctl mask" in line for line in lines), lines
