"""Container engines of today (issue 24): which Docker sends `--gpus` through the CDI spec
(gpuhost/data/docker_gpus_cdi.json), what a stale spec means there (critical, in every mode,
audit exit 4), `auto` mode's choice, and containerd's drop-in: enable_cdi in cdi mode, its
drift, and issue 23 item 11 (a config whose only runtime was the default nvidia)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpuhost import health
from gpuhost.reports import audit
from gpuhost.runtime import cdi, containerd as rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
SPEC = (FIXTURES / "nvidia__2x-a100__570.172.08__mig.yaml").read_text()
A100_MIG = [("NVIDIA A100-SXM4-40GB", "Enabled", "Enabled"),
            ("NVIDIA A100-SXM4-40GB", "Disabled", "Disabled")]
SMI_LIST = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-1111-2222-3333-444444444444)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000000)\n"
            "  MIG 3g.20gb     Device  1: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000001)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-00000001-1111-2222-3333-444444444444)\n")


@pytest.mark.parametrize("docker, toolkit, feature, via", [
    ("29.1.5", "1.18.2", None, "runtime-hook"),      # before moby#50228
    ("29.2.0", "1.18.2", None, "cdi"),               # the first release with it
    ("29.7.2", "1.16.0", None, "cdi"),               # nvidia-cdi-hook ships from 1.16.0
    ("29.4.0", "1.15.0", None, "runtime-hook"),      # ... not before: no nvidia.cdi driver
    ("29.4.0", None, None, "runtime-hook"),          # no toolkit at all
    ("29.4.0", "1.18.2", False, "runtime-hook"),     # features.cdi false: no CDI driver
    ("28.5.2+dfsg4", "1.18.2", True, "runtime-hook"),  # Debian's 28.5 (the sandbox's)
    ("30.1.0", "1.18.2", None, "cdi"),               # past the table: its last row
    (None, "1.18.2", None, None),                    # Docker not running: not known
])
def test_which_docker_sends_gpus_through_cdi(docker, toolkit, feature, via):
    assert cdi.gpus_route(docker, toolkit, feature)["via"] == via


def test_the_release_table_names_its_sources_and_is_checked_through_its_last_row():
    table = cdi.GPUS_TABLE
    assert table["_date"] and "moby/moby#50228" in table["_source"]
    assert "moby/moby#52704" in table["_source"]  # the proposal to put the hook first again
    rows = table["releases"]
    assert all(row["source"] and row["gpus"] in ("cdi-first", "runtime-hook") for row in rows)
    assert [cdi.version_tuple(r["from"]) for r in rows] == sorted(
        cdi.version_tuple(r["from"]) for r in rows)
    read = [r for r in rows if not r.get("assumed")]  # an assumed row: code not read
    assert cdi.version_tuple(table["checked_through"]) >= cdi.version_tuple(read[-1]["from"])
    assert all(cdi.version_tuple(r["from"]) > cdi.version_tuple(table["checked_through"])
               for r in rows if r.get("assumed"))
    assert cdi.ESCAPE_HATCH == "--gpus '\"all,driver=nvidia.runtime-hook\"'"


def test_auto_mode_chooses_cdi_where_docker_routes_gpus_through_it():
    # toolkit 1.17 (no refresh unit) on Docker 28.5: legacy, as before
    assert cdi.resolve_mode("auto", "1.17.8", "28.5.2") == "legacy"
    # the same toolkit on Docker 29.2: --gpus reads the spec, so gpuhost keeps one fresh
    assert cdi.resolve_mode("auto", "1.17.8", "29.2.0") == "cdi"
    assert cdi.resolve_mode("auto", "1.17.8", "29.2.0", cdi_feature=False) == "legacy"
    assert cdi.resolve_mode("auto", "1.18.2", "28.5.2") == "cdi"  # the rule of issue 16
    assert cdi.resolve_mode("legacy", "1.17.8", "29.2.0") == "legacy"  # never overridden


@pytest.fixture
def stale_host(make_state, lgi_table):
    """Two A100s, driver 580.95.05 loaded, the spec still 570.172.08's; Docker DOCKER."""
    def make(docker: str, toolkit: str = "1.18.2", daemon_json: str | None = None):
        state = make_state(driver="580.95.05", gpus=A100_MIG, smi_list=SMI_LIST,
                           lgi=lgi_table([(0, "3g.20gb", 9), (0, "3g.20gb", 9)]),
                           cdi_specs=f"==> /var/run/cdi/nvidia.yaml <==\n{SPEC}\n",
                           toolkit=toolkit, running_default="runc",
                           **({"daemon_json": daemon_json} if daemon_json else {}))
        state["docker"]["docker_version"] = docker  # the running daemon's version
        return state
    return make


def test_a_stale_spec_is_critical_where_gpus_goes_through_it(stale_host):
    [finding] = [f for f in health.findings(stale_host("29.4.0"))
                 if f["id"] == "cdi-spec-stale"]
    assert finding["severity"] == "critical"
    text = finding["message"]
    assert "driver 570.172.08, the loaded driver is 580.95.05" in text
    assert "docker run --gpus" in text and "nvidia-ctk cdi generate" in text
    assert "driver=nvidia.runtime-hook" in text  # the escape hatch until it is regenerated
    # Docker 28.5 (prestart hook): only --device nvidia.com/gpu users are hit: a warning
    [older] = [f for f in health.findings(stale_host("28.5.2")) if f["id"] == "cdi-spec-stale"]
    assert older["severity"] == "warning"
    # 29.4 with CDI turned off in daemon.json: --gpus falls back to the hook
    off = stale_host("29.4.0", daemon_json='{"features": {"cdi": false}, "runtimes": {"nvidia":'
                     ' {"path": "nvidia-container-runtime", "args": []}}}')
    assert [f["severity"] for f in health.findings(off) if f["id"] == "cdi-spec-stale"] == [
        "warning"]


@pytest.mark.parametrize("mode", ["legacy", "cdi", "auto"])
def test_the_audit_exits_4_in_every_mode(stale_host, mode):
    state = stale_host("29.4.0")
    want = audit.desired_settings({"nvidia_driver_version": "580.95.05",
                                   "container_toolkit_version": "1.18.2",
                                   "container_runtime_mode": mode})
    document = audit.build({"gpu-01": state, "gpu-02": stale_host("28.5.2")},
                           {"gpu-01": want, "gpu-02": want}, generated_at="2026-11-27T12:00:00Z")
    assert audit.exit_code(document) == audit.EXIT_UNHEALTHY == 4
    critical = [f["id"] for f in health.findings(state) if f["severity"] == "critical"]
    assert critical == ["cdi-spec-stale"]  # the only reason for the 4
    calm = audit.build({"gpu-02": stale_host("28.5.2")}, {"gpu-02": want},
                       generated_at="2026-11-27T12:00:00Z")
    assert audit.exit_code(calm) != 4


def test_the_upgrade_health_gate_counts_it(stale_host):
    from gpuhost import upgrade

    passed, why = upgrade.health_gate([], stale_host("29.4.0"))
    assert not passed and "cdi-spec-stale" in why


# --- containerd -------------------------------------------------------------------------------

def _dropin(text: str, version: int = 2, **kw) -> dict:
    config = rules.parse(text)
    return tomllib.loads(rules.render_drop_in(config, rules.config_version(config, version),
                                              **kw))


NVIDIA_ONLY = """version = 2
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def test_item_11_a_default_nvidia_that_was_the_only_runtime_keeps_runc():
    """Issue 23 item 11: without containerd_nvidia_default_runtime the default nvidia goes,
    so containerd's default is runc again, and runc must be in the drop-in (the CRI plugin
    refuses a default runtime it has no table for: docs/containerd.md)."""
    section = _dropin(NVIDIA_ONLY)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert "default_runtime_name" not in section
    assert section["runtimes"]["runc"] == {"runtime_type": "io.containerd.runc.v2"}
    assert section["runtimes"]["nvidia"]["options"]["BinaryName"] == rules.BINARY
    # asked to stay the default: nvidia is the default and nothing else is needed
    kept = _dropin(NVIDIA_ONLY, default_runtime=True)["plugins"]["io.containerd.grpc.v1.cri"]
    assert kept["containerd"]["default_runtime_name"] == "nvidia"
    assert set(kept["containerd"]["runtimes"]) == {"nvidia"}


@pytest.mark.parametrize("version, plugin", [(2, "io.containerd.grpc.v1.cri"),
                                             (3, "io.containerd.cri.v1.runtime")])
def test_enable_cdi_in_cdi_mode(version, plugin):
    top = f'version = {version}\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    on = _dropin(top, enable_cdi=True)["plugins"][plugin]
    assert on["enable_cdi"] is True
    assert "enable_cdi" not in _dropin(top)["plugins"][plugin]


def test_the_drop_in_drift():
    top = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    config = rules.parse(top)
    good = rules.render_drop_in(config, 3)
    view = {"version": "containerd containerd.io 2.1.9 abc", "config": top, "drop_in": good}
    assert rules.drift(view) == []
    assert "enable_cdi" not in good and rules.drift(view, enable_cdi=True)  # cdi mode wants it
    edited = {**view, "drop_in": good.replace("nvidia-container-runtime", "other-runtime")}
    assert "differs from what gpuhost writes" in rules.drift(edited)[0]
    theirs = {**view, "drop_in": "version = 3\n"}
    assert "not written by gpuhost" in rules.drift(theirs)[0]
    assert "is missing" in rules.drift({**view, "drop_in": None})[0]
    unread = {**view, "config": 'version = 3\n'}  # imports removed since
    assert "does not import" in rules.drift(unread)[0]


def test_the_host_states_containerd_section():
    """facts/script.py section `containerd`: the version line, then each file behind
    "==> PATH <==" (config.toml, gpuhost's drop-in); 127 without containerd."""
    from gpuhost.facts import assemble
    from gpuhost.facts.script import ALL_SECTIONS

    top = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    drop_in = rules.render_drop_in(rules.parse(top), 3)
    out = (f"version: containerd containerd.io 2.1.9 abc\n==> {rules.CONFIG} <==\n{top}"
           f"==> {rules.DROP_IN} <==\n{drop_in}")
    view = rules.parse_section(0, out)
    assert view == {"installed": True, "version": "containerd containerd.io 2.1.9 abc",
                    "config": top, "drop_in": drop_in}
    assert rules.drift(view) == [] and rules.is_gpuhosts(view["drop_in"])
    assert rules.parse_section(127, "")["installed"] is False
    sections = {name: {"rc": 127, "out": ""} for name in ALL_SECTIONS}
    sections["containerd"] = {"rc": 0, "out": out}
    assert assemble.host_state(sections)["containerd"]["drop_in"] == drop_in


def test_the_audit_drift_item_with_the_setting_on_and_off(make_state):
    top = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    drop_in = rules.render_drop_in(rules.parse(top), 3)
    state = make_state()
    state["containerd"] = {"installed": True, "version": "containerd containerd.io 2.1.9 x",
                           "config": top, "drop_in": drop_in}

    def items(**data):
        want = audit.desired_settings({"nvidia_driver_version": "570.172.08", **data})
        return [i for i in audit.host_drift(state, want) if i["item"] == "containerd_drop_in"]

    assert items(containerd_nvidia_runtime=True) == []
    [left] = items()  # off: gpuhost's file must go
    assert left["have"] == "present" and "containerd_nvidia_runtime is off" in left["message"]
    state["containerd"]["drop_in"] = drop_in.replace("nvidia-container-runtime", "x")
    [drifted] = items(containerd_nvidia_runtime=True)
    assert drifted["have"] == "drift" and "differs from what gpuhost writes" in drifted["message"]
    state["containerd"]["drop_in"] = "version = 3\n"  # nvidia-ctk's or the user's: theirs
    assert items() == []


def test_docker_past_the_releases_read_follows_the_newest_row_and_the_audit_says_so(make_state):
    """Issue 37: Docker 29.8 is in the table as a release known to exist whose --gpus code was
    not read; it and any newer Docker follow the newest row read (29.2.0's, CDI first), and the
    audit says so as the info finding docker-gpus-assumed; 29.7.2 and older are read."""
    rows = {row["from"]: row for row in cdi.GPUS_TABLE["releases"]}
    assert rows["29.8.0"]["assumed"] is True and cdi.GPUS_TABLE["checked_through"] == "29.7.2"
    for docker in ("29.8.0", "29.8.2", "31.0.1"):
        assert cdi.gpus_route(docker, "1.20.0")["via"] == "cdi"
        assert "from Docker 29.2" in cdi.gpus_route(docker, "1.20.0")["why"]
        assert "assumes it routes --gpus as 29.7.2 does" in cdi.gpus_route_assumed(docker)
    assert "a release gpuhost knows exists" in cdi.gpus_route_assumed("29.8.2")
    assert "newer than every release" in cdi.gpus_route_assumed("31.0.1")
    assert cdi.gpus_route_assumed("29.7.2") is None and cdi.gpus_route_assumed(None) is None
    state = make_state(toolkit="1.20.0")
    state["docker"]["docker_version"] = "29.8.2"
    [info] = [f for f in health.findings(state) if f["id"] == "docker-gpus-assumed"]
    assert info["severity"] == "info" and "Docker 29.8.2" in info["message"]
    state["docker"]["docker_version"] = "29.7.2"
    assert "docker-gpus-assumed" not in {f["id"] for f in health.findings(state)}
