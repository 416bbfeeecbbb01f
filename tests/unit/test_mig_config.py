"""Named MIG configurations (gpuhost.mig.config): parse, validate, per-GPU wants and diff;
the settings that pick one; the boot script run against a stand-in nvidia-smi; and
`gpuhost mig plan`'s per-host view on facts assembled from nvidia-smi outputs."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from gpuhost.facts.host import GpuHostState
from gpuhost.facts.script import ALL_SECTIONS, MARKER
from gpuhost import cli, settings
from gpuhost.cli import mig as cli_mig
from gpuhost.mig import config as mig_config, plan as mig_plan
from gpuhost.roles import mig as mig_role

# The shape of NVIDIA mig-parted's examples/config.yaml (custom-config and all-balanced),
# with device-filter entries as in its deployments/systemd/config-default.yaml.
FILE = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  balanced:
    - device-filter: ["0x233010DE", "0x20B210DE"]   # H100 80GB HBM3, A100-SXM4-80GB
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - device-filter: "0x20B010DE"                   # A100-SXM4-40GB
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 2
        "2g.10gb": 1
        "3g.20gb": 1
  custom:
    - devices: all
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  too-many-on-a100:
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"3g.20gb": 3}
  fits-nothing:
    - devices: all
      mig-enabled: true
      mig-devices: {"4g.20gb": 2}
  h100-sizes:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "mig.yaml"
    path.write_text(FILE)
    return str(path)


def _parse(text: str):
    return mig_config.parse(yaml.safe_load(textwrap.dedent(text)), "f")


# --- parse --------------------------------------------------------------------------------

def test_the_mig_parted_shape_parses(config_file):
    configs = mig_config.load(config_file)
    assert sorted(configs) == ["all-disabled", "all-enabled", "balanced", "custom",
                               "fits-nothing", "h100-sizes", "too-many-on-a100"]
    first, second = configs["balanced"]
    assert first.device_filter == ("0x233010DE", "0x20B210DE") and first.devices == "all"
    assert first.profiles == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert second.device_filter == ("0x20B010DE",)  # one string is a list of one
    assert configs["custom"][1].devices == (1,)
    assert configs["all-enabled"][0].enabled and configs["all-enabled"][0].profiles == []
    assert not configs["all-disabled"][0].enabled


@pytest.mark.parametrize("text, message", [
    ("mig-configs: {a: [{devices: all, mig-enabled: false}]}", "version None is not v1"),
    ("version: v1\nmig-configs: {}", "at least one named configuration"),
    ("version: v1\nmig-configs: {a: []}", "mig-configs.a: at least one entry"),
    ("version: v1\nmig-configs: {a: [{mig-enabled: false}]}", "missing required field devices"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}",
     "missing required field mig-devices when mig-enabled is true"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, "
     "mig-devices: {1g.5gb: 1}}]}", "MIG devices listed while mig-enabled is false"),
    ("version: v1\nmig-configs: {a: [{devices: some, mig-enabled: false}]}",
     "is not \"all\" or a list of GPU indexes"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, "
     "device-filter: 0x20B010DE}]}", "quote it"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, "
     "device-filter: '0x20B010DE:0x134F10DE'}]}", "subsystem ids"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
     "mig-devices: {3g: 1}}]}", "'3g' is not a MIG profile name"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
     "mig-devices: {1g.5gb: -1}}]}", "is not a whole number"),
    ("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, gpus: 2}]}",
     "unexpected field gpus"),
])
def test_a_broken_file_is_refused_with_the_field_named(text, message):
    with pytest.raises(mig_config.MigConfigError) as refused:
        _parse(text)
    assert message in str(refused.value)


def test_load_reports_a_missing_or_non_yaml_file(tmp_path):
    with pytest.raises(mig_config.MigConfigError, match="cannot read it"):
        mig_config.load(str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\nmig-configs: [\n")
    with pytest.raises(mig_config.MigConfigError, match="not YAML"):
        mig_config.load(str(bad))


# --- the controller's check (no host facts) -------------------------------------------------

def test_fitting_configurations_pass_the_controller_check(config_file):
    for name in ("all-disabled", "all-enabled", "balanced", "custom", "h100-sizes"):
        assert mig_config.check(config_file, name) == [], name


def test_a_filtered_entry_that_does_not_fit_its_model_is_refused_with_gpu_profiles_and_why(
        config_file):
    (problem,) = mig_config.check(config_file, "too-many-on-a100")
    assert "3x 3g.20gb does not fit A100-SXM4-40GB (0x20B010DE)" in problem
    assert "allows at most 2" in problem and "9 compute slices" in problem


def test_an_entry_that_fits_no_gpu_model_is_refused(config_file):
    (problem,) = mig_config.check(config_file, "fits-nothing")
    assert "2x 4g.20gb fits no MIG GPU model" in problem
    assert "A100-SXM4-40GB" in problem and "unknown MIG profile '4g.20gb' for A100-SXM4-80GB" in problem


def test_an_unknown_name_lists_the_names_the_file_has(config_file):
    (problem,) = mig_config.check(config_file, "balancd")
    assert "'balancd' is not in" in problem and "balanced" in problem


def test_a_placement_that_fails_is_refused_even_when_counts_and_slices_fit(tmp_path):
    # two 3g.20gb take memory slices 0-3 and 4-7 (placements {0,4}:4); a 1g.5gb more is 7
    # compute slices and within its count, but no memory slice is left (A100 -lgipp)
    path = tmp_path / "m.yaml"
    path.write_text('version: v1\nmig-configs:\n  x:\n    - device-filter: "0x20B010DE"\n'
                    '      devices: all\n      mig-enabled: true\n'
                    '      mig-devices: {"3g.20gb": 2, "1g.5gb": 1}\n')
    (problem,) = mig_config.check(str(path), "x")
    assert "no placement of the memory slices works" in problem


# --- settings: one form per host, the file checked with the inventory -------------------------

BASE = {"nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
        "nvidia_local_repo": {"debian12": {"url": "https://example.com/r.deb",
                                           "sha256": "a" * 64}}}


def test_settings_refuse_both_forms_and_a_name_without_a_file(config_file):
    both = settings.validate({**BASE, "mig_config_file": config_file, "mig_config": "balanced",
                              "mig_mode": "enabled"})
    assert any("mig_config: set together with mig_mode/mig_layout; choose one form" in p
               for p in both), both
    alone = settings.validate({**BASE, "mig_config": "balanced"})
    assert any("mig_config: set, but mig_config_file is not" in p for p in alone), alone
    assert settings.validate({**BASE, "mig_config_file": "mig.yaml"})[0].startswith(
        "mig_config_file: \"mig.yaml\" is not an absolute path")


def test_settings_carry_the_file_check_into_the_inventory_check(config_file):
    ok = {**BASE, "mig_config_file": config_file, "mig_config": "balanced"}
    assert settings.validate(ok) == []
    resolved = settings.resolve(ok)
    assert (resolved.mig_config_file, resolved.mig_config) == (config_file, "balanced")
    problems = settings.validate_inventory({"gpu-03": {**ok, "mig_config": "too-many-on-a100"}})
    assert len(problems) == 1 and problems[0].startswith("mig_config: too-many-on-a100 entry 1")
    assert problems[0].endswith("[gpu-03]")
    assert "does not fit A100-SXM4-40GB" in problems[0]


# --- one host: which entry each GPU gets, and whether it fits ---------------------------------

A100 = {"model": "A100-SXM4-40GB", "pci_device_id": "20b0", "mig_capable": True,
        "name": "NVIDIA A100-SXM4-40GB"}
H100 = {"model": "H100-80GB-HBM3", "pci_device_id": "2330", "mig_capable": True,
        "name": "NVIDIA H100 80GB HBM3"}
T4 = {"model": "T4", "pci_device_id": "1eb8", "mig_capable": False, "name": "Tesla T4"}


def test_each_gpu_gets_the_last_entry_that_matches_it(config_file):
    configs = mig_config.load(config_file)
    gpus = [{**H100, "index": 0}, {**H100, "index": 1}, {**T4, "index": 2}]
    wants = mig_plan.wanted(configs["custom"], gpus)
    assert sorted(wants) == [0, 1]  # the T4 is not MIG-capable: left alone
    assert wants[0].profiles == ("7g.80gb",) and wants[1].profiles == ("1g.10gb",) * 7
    # device-filter: the A100 gets the second entry, the H100 the first
    mixed = mig_plan.wanted(configs["balanced"], [{**A100, "index": 0}, {**H100, "index": 1}])
    assert mixed[0].profiles == ("1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb")
    assert mixed[1].profiles == ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
    # no entry matches an A30 (0x20B710DE): not in the result
    assert mig_plan.wanted(configs["balanced"], [{"index": 0, "model": "A30",
                                                     "pci_device_id": "20b7",
                                                     "mig_capable": True}]) == {}


def test_an_unfiltered_entry_is_checked_against_each_gpu_the_host_reports(config_file):
    entries = mig_config.select(config_file, "h100-sizes")
    gpus = [{**H100, "index": 0}, {**A100, "index": 1}]
    wants = mig_plan.wanted(entries, gpus)
    (problem,) = mig_plan.host_problems("h100-sizes", wants, gpus)
    assert problem.startswith("mig_config h100-sizes entry 1 (devices: all): GPU 1 "
                              "(A100-SXM4-40GB): 7x 1g.10gb does not fit")
    assert "1g.10gb x7: A100-SXM4-40GB allows at most 4" in problem


def test_diff_compares_mode_and_profile_names():
    entries = _parse("""
        version: v1
        mig-configs:
          a:
            - devices: all
              mig-enabled: true
              mig-devices: {"3g.40gb": 1, "1g.10gb": 2}
    """)["a"]
    wants = mig_plan.wanted(entries, [{**H100, "index": 0}, {**H100, "index": 1},
                                        {**H100, "index": 2}])
    instances = [{"profile": p} for p in ("1g.10gb", "3g.40gb", "1g.10gb")]
    plans = mig_plan.diff(wants, [
        {"index": 0, "mode_current": "enabled", "mode_pending": "enabled",
         "gpu_instances": instances},
        {"index": 1, "mode_current": "disabled", "mode_pending": "disabled", "gpu_instances": []},
        {"index": 2, "mode_current": "enabled", "mode_pending": "enabled",
         "gpu_instances": [{"profile": "7g.80gb"}]},
    ])
    assert [(p.index, p.mode_change, p.layout_change) for p in plans] == [
        (0, False, False), (1, True, True), (2, False, True)]
    assert plans[1].now == "MIG disabled"
    assert plans[1].wanted == "MIG enabled, 2x 1g.10gb + 3g.40gb"
    assert plans[2].now == "MIG enabled, 7g.80gb"
    # a host without a driver yet: lspci shows the GPU, nvidia-smi does not answer
    (plan,) = mig_plan.diff({0: wants[0]}, [])
    assert plan.changes and plan.now == "unknown (nvidia-smi does not answer)"


# --- the boot script, run against a stand-in nvidia-smi ----------------------------------------

FAKE_SMI = """#!/bin/sh
echo "nvidia-smi $*" >> "$LOG"
case "$*" in
  "--query-gpu=index,mig.mode.current --format=csv,noheader") cat "$MODES" ;;
  "mig -i 2 -lgi") echo "|   2  MIG 7g.80gb       0        0          0:8     |" ;;
  "mig -i "*" -lgi") echo "No GPU instances found: Not Found"; exit 6 ;;
esac
exit 0
"""


def _run_boot(tmp_path: Path, layouts: dict, modes: str, cdi: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-smi", FAKE_SMI),
                       ("systemctl", f'#!/bin/sh\necho "systemctl $*" >> "$LOG"\n{cdi}\n'),
                       ("nvidia-ctk", '#!/bin/sh\necho "nvidia-ctk $*" >> "$LOG"\n')):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    (tmp_path / "modes").write_text(modes)
    script = tmp_path / "boot"
    script.write_text(mig_role.boot_script(layouts))
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(tmp_path / "log"),
           "MODES": str(tmp_path / "modes")}
    done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "log").read_text().splitlines()


def test_the_boot_script_enables_and_fills_only_the_configured_gpus(tmp_path):
    calls = _run_boot(tmp_path, {0: ["1g.10gb", "3g.40gb"], 2: ["3g.40gb"], 3: []},
                      "0, Disabled\n1, Disabled\n2, Enabled\n3, Disabled\n", "exit 0")
    assert "nvidia-smi -i 0 -mig 1" in calls and "nvidia-smi -i 3 -mig 1" in calls
    assert not any(c.startswith("nvidia-smi -i 1 ") for c in calls)  # not in the config
    # (the stand-in keeps its modes: GPU 2 is the one listed Enabled, and it already has an
    # instance, so it is left alone; GPU 0 stays "Disabled" in the stand-in's answer)
    assert not any("-cgi" in c for c in calls)
    assert not any(c.startswith("nvidia-ctk") for c in calls)  # no instance made


def test_the_boot_script_creates_the_layout_and_refreshes_cdi_after(tmp_path):
    calls = _run_boot(tmp_path, {0: ["1g.10gb", "3g.40gb"], 1: ["7g.80gb"]},
                      "0, Enabled\n1, Enabled\n", "exit 0")
    assert "nvidia-smi mig -i 0 -cgi 3g.40gb,1g.10gb -C" in calls  # larger ones first
    assert "nvidia-smi mig -i 1 -cgi 7g.80gb -C" in calls
    # at boot the generator runs itself: nvidia-cdi-refresh.service is ordered after
    # multi-user.target, which waits for this unit (a blocking restart would hang the boot)
    refresh = calls.index("nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml")
    assert refresh > calls.index("nvidia-smi mig -i 1 -cgi 7g.80gb -C")
    assert not any(c.startswith("systemctl restart") for c in calls)


def test_the_legacy_layout_applies_to_every_mig_gpu_and_skips_cdi_on_a_host_without_it(tmp_path):
    calls = _run_boot(tmp_path, {"*": ["3g.40gb", "3g.40gb"]}, "0, Enabled\n1, Disabled\n",
                      'case "$*" in list-unit-files*) exit 1 ;; esac; exit 0')
    assert "nvidia-smi -i 1 -mig 1" in calls
    assert "nvidia-smi mig -i 0 -cgi 3g.40gb,3g.40gb -C" in calls
    assert not any(c.startswith("nvidia-ctk") for c in calls)  # no unit, no spec: no CDI


def test_instances_are_created_larger_first_so_small_ones_do_not_take_their_slices():
    assert mig_role.creation_order(["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]) == [
        "3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]
    assert mig_role.creation_order(["1g.10gb", "1g.20gb", "4g.40gb", "3g.40gb", "1g.10gb+me"]) == [
        "4g.40gb", "3g.40gb", "1g.20gb", "1g.10gb", "1g.10gb+me"]
    assert mig_role.creation_order(["1g.5gb", "77", "3g.20gb"]) == ["3g.20gb", "1g.5gb", "77"]


# --- gpuhost mig plan: one host's view, from facts assembled like the audit's ------------------

def _xml(modes: list[str]) -> str:
    gpus = "".join(
        f'<gpu id="00000000:{bus}:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name>'
        f"<uuid>GPU-0000000{i}-1111-2222-3333-444444444444</uuid>"
        f"<pci><pci_bus_id>00000000:{bus}:00.0</pci_bus_id></pci>"
        "<fb_memory_usage><total>81559 MiB</total></fb_memory_usage>"
        f"<mig_mode><current_mig>{mode}</current_mig><pending_mig>{mode}</pending_mig>"
        "</mig_mode></gpu>" for i, (bus, mode) in enumerate(zip(("18", "2A"), modes, strict=True)))
    return ('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>570.172.08'
            "</driver_version><attached_gpus>2</attached_gpus>" + gpus + "</nvidia_smi_log>")


LSPCI = ('0000:18:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [H100 SXM5 '
         '80GB] [2330]" -ra1 "NVIDIA Corporation [10de]" "Device [16c1]"\n'
         '0000:2a:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [H100 SXM5 '
         '80GB] [2330]" -ra1 "NVIDIA Corporation [10de]" "Device [16c1]"\n')
# nvidia-smi mig -lgi, 54 columns: GPU 0 carries 3g.40gb + 2x 1g.10gb, GPU 1 one 7g.80gb
LGI = """\
+----------------------------------------------------+
| GPU instances:                                     |
| GPU   Name          Profile  Instance   Placement  |
|                       ID       ID       Start:Size |
|====================================================|
|   0  MIG 1g.10gb      19        9          0:1     |
+----------------------------------------------------+
|   0  MIG 1g.10gb      19       10          1:1     |
+----------------------------------------------------+
|   0  MIG 3g.40gb       9        1          4:4     |
+----------------------------------------------------+
|   1  MIG 7g.80gb       0        0          0:8     |
+----------------------------------------------------+
"""


def _state(modes: list[str], lgi: str = LGI) -> dict:
    values = {name: (127, "") for name in ALL_SECTIONS}
    values.update(os_release=(0, 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"'),
                  kernel=(0, "6.1.0-56-amd64\nx86_64"), dpkg=(0, ""), proc_version=(3, ""),
                  smi_xml=(0, _xml(modes)), lspci=(0, LSPCI), mig_lgi=(0, lgi),
                  mig_lci=(0, "No compute instances found"))
    text = "".join(f"{MARKER}{name} rc={rc}\n{out}\n" for name, (rc, out) in values.items())
    return GpuHostState().process(text.splitlines())


def test_plan_host_shows_a_gpu_without_a_driver_as_pending():
    values = {name: (127, "") for name in ALL_SECTIONS}
    values.update(os_release=(0, 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"'),
                  kernel=(0, "6.1.0-56-amd64\nx86_64"), dpkg=(0, ""), proc_version=(3, ""),
                  lspci=(0, LSPCI))
    text = "".join(f"{MARKER}{name} rc={rc}\n{out}\n" for name, (rc, out) in values.items())
    state = GpuHostState().process(text.splitlines())
    entries = _parse("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
                     "mig-devices: {3g.40gb: 2}}]}")["a"]
    out = io.StringIO()
    assert cli_mig.plan_host("gpu-02", "mig_config a", entries, state, out) == cli_mig.EXIT_PENDING
    assert out.getvalue().splitlines()[1] == (
        "    GPU 0 H100-80GB-HBM3: unknown (nvidia-smi does not answer) -> MIG enabled, "
        "2x 3g.40gb")


def test_the_facts_carry_what_the_plan_needs():
    state = _state(["Enabled", "Enabled"])
    assert [g["pci_device_id"] for g in state["gpus"]] == ["2330", "2330"]
    assert state["mig"]["layout"] == {"0": ["1g.10gb", "1g.10gb", "3g.40gb"], "1": ["7g.80gb"]}


def test_plan_host_shows_now_and_wanted_per_gpu_and_its_exit_status(tmp_path):
    entries = _parse("""
        version: v1
        mig-configs:
          a:
            - devices: [0]
              mig-enabled: true
              mig-devices: {"3g.40gb": 1, "1g.10gb": 2}
            - devices: [1]
              mig-enabled: true
              mig-devices: {"3g.40gb": 2}
    """)["a"]
    out = io.StringIO()
    status = cli_mig.plan_host("gpu-02", "mig_config a", entries,
                               _state(["Enabled", "Enabled"]), out)
    assert status == cli_mig.EXIT_PENDING
    assert out.getvalue().splitlines() == [
        "gpu-02 (mig_config a): CHANGES",
        "    GPU 0 H100-80GB-HBM3: as wanted (MIG enabled, 2x 1g.10gb + 3g.40gb)",
        "    GPU 1 H100-80GB-HBM3: MIG enabled, 7g.80gb -> MIG enabled, 2x 3g.40gb",
    ]
    out = io.StringIO()
    assert cli_mig.plan_host("gpu-02", "mig_config a", entries[:1],
                             _state(["Enabled", "Enabled"]), out) == cli_mig.EXIT_OK
    assert out.getvalue().splitlines()[0] == "gpu-02 (mig_config a): as wanted"
    # Hopper after a reboot: MIG off, no instances
    out = io.StringIO()
    assert cli_mig.plan_host("gpu-02", "mig_config a", entries,
                             _state(["Disabled", "Disabled"], "No GPU instances found"),
                             out) == cli_mig.EXIT_PENDING
    assert "    GPU 0 H100-80GB-HBM3: MIG disabled -> MIG enabled, 2x 1g.10gb + 3g.40gb" in \
        out.getvalue().splitlines()


def test_plan_host_refuses_a_layout_that_does_not_fit_the_hosts_gpu():
    entries = _parse("""
        version: v1
        mig-configs:
          a100-sizes:
            - devices: all
              mig-enabled: true
              mig-devices: {"1g.5gb": 7}
    """)["a100-sizes"]
    out = io.StringIO()
    assert cli_mig.plan_host("gpu-02", "mig_config a100-sizes", entries,
                             _state(["Enabled", "Enabled"]), out) == cli_mig.EXIT_INVALID
    lines = out.getvalue().splitlines()
    assert lines[0] == "gpu-02 (mig_config a100-sizes): INVALID"
    assert "GPU 0 (H100-80GB-HBM3): 7x 1g.5gb does not fit: unknown MIG profile '1g.5gb'" in lines[1]


def test_the_legacy_settings_are_planned_too():
    asked, entries = cli_mig.host_entries({**BASE, "mig_mode": "enabled",
                                           "mig_layout": ["3g.40gb", "3g.40gb"]})
    assert asked == "mig_mode enabled, mig_layout 3g.40gb, 3g.40gb"
    out = io.StringIO()
    assert cli_mig.plan_host("h", asked, entries, _state(["Enabled", "Enabled"]),
                             out) == cli_mig.EXIT_PENDING
    asked, entries = cli_mig.host_entries({**BASE, "mig_mode": "enabled"})
    out = io.StringIO()
    assert cli_mig.plan_host("h", asked, entries, _state(["Enabled", "Enabled"]),
                             out) == cli_mig.EXIT_OK
    assert cli_mig.host_entries(BASE) is None


def test_mig_plan_arguments():
    args = cli.parser().parse_args(["mig", "plan", "inv.py", "--limit", "gpu-0*",
                                    "--data", "mig_config=x"])
    assert (args.command, args.mig_command, args.inventory, args.limit, args.data) == (
        "mig", "plan", "inv.py", ["gpu-0*"], ["mig_config=x"])


def test_mig_plan_stops_on_invalid_settings_before_reading_any_host(monkeypatch, capsys,
                                                                      config_file, tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text("")
    data = {**BASE, "mig_config_file": config_file, "mig_config": "too-many-on-a100"}
    monkeypatch.setattr(cli_mig, "read_inventory",
                        lambda *a, **k: [{"name": "gpu-03", "groups": [], "data": data}])
    ran = []
    monkeypatch.setattr(cli_mig, "run_pyinfra", lambda *a, **k: ran.append(a) or (0, None))
    status = cli.main(["mig", "plan", str(inventory)])
    err = capsys.readouterr().err
    assert status == 1 and ran == []
    assert "no host was contacted" in err and "does not fit A100-SXM4-40GB" in err


def test_the_audit_reports_named_config_drift_per_gpu(tmp_path):
    """gpuhost audit: a host on mig_config drifts where `gpuhost mig plan` shows a change."""
    from gpuhost.reports import audit

    path = tmp_path / "mig.yaml"
    path.write_text("version: v1\nmig-configs:\n  a:\n    - devices: [0]\n      mig-enabled: true\n"
                    "      mig-devices: {\"3g.40gb\": 1, \"1g.10gb\": 2}\n    - devices: [1]\n"
                    "      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 2}\n")
    desired = audit.desired_settings({"mig_config_file": str(path), "mig_config": "a"})
    items = [i for i in audit.host_drift(_state(["Enabled", "Enabled"]), desired)
             if i["item"].startswith("mig")]  # the bare state has no packages: reboot_pending
    assert [(i["item"], i["have"], i["want"]) for i in items] == [
        ("mig_config", "MIG enabled, 7g.80gb", "MIG enabled, 2x 3g.40gb")]
    assert items[0]["message"].startswith("GPU 1: MIG enabled, 7g.80gb, mig_config a wants")
    converged = audit.desired_settings({"mig_config_file": str(path), "mig_config": "a"})
    lgi = LGI.replace("|   1  MIG 7g.80gb       0        0          0:8     |",
                      "|   1  MIG 3g.40gb       9        1          4:4     |\n"
                      "+----------------------------------------------------+\n"
                      "|   1  MIG 3g.40gb       9        2          0:4     |")
    assert [i for i in audit.host_drift(_state(["Enabled", "Enabled"], lgi), converged)
            if i["item"].startswith("mig")] == []
    with pytest.raises(audit.AuditError, match="'b' is not in"):
        audit.desired_settings({"mig_config_file": str(path), "mig_config": "b"})
    with pytest.raises(audit.AuditError, match="choose one form"):
        audit.desired_settings({"mig_config_file": str(path), "mig_config": "a",
                                "mig_mode": "enabled"})
