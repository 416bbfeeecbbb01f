"""The Vagrant and Molecule files: they parse, they say what the README says, and the
pyinfra runner the Molecule playbooks use reads pyinfra's JSON correctly.

No Vagrant here: the Vagrantfile is checked with `ruby -c` and then evaluated with a
stand-in `Vagrant` module that records every setting (ruby comes from `make deps`; without
it a structural check of the text runs instead). Molecule files are validated against
Molecule's own JSON schema in a subprocess (Molecule imports Ansible; keep it out of this
process).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VAGRANT = REPO / "vagrant"
VAGRANTFILE = VAGRANT / "Vagrantfile"
README = (VAGRANT / "README.md").read_text()
MOLECULE = VAGRANT / "molecule"
SCENARIOS = sorted(p.parent.name for p in MOLECULE.glob("*/molecule.yml"))
BOX_SCENARIOS = ["ol8", "ol9", "ubuntu2204", "ubuntu2404"]
RUBY = shutil.which("ruby")

# A stand-in for Vagrant: Vagrant.configure yields a recorder; assignments are stored,
# block calls (define, provider) record their arguments and what the block set, other
# calls (pci, synced_folder) are listed. The result is printed as JSON.
RECORDER = r"""
require "json"
class Rec
  def initialize; @data = {}; end
  def to_h; @data.transform_values { |v| v.is_a?(Rec) ? v.to_h : v }; end
  def respond_to_missing?(*_args); true; end
  def method_missing(name, *args, **kw, &blk)
    n = name.to_s
    return @data[n.chomp("=")] = args.first if n.end_with?("=")
    return (@data[n] ||= Rec.new) if args.empty? && kw.empty? && blk.nil?
    if blk
      conf, override = Rec.new, Rec.new
      blk.call(conf, override)
      @data["#{n}:#{args.first}"] = { "opts" => kw, "conf" => conf.to_h, "override" => override.to_h }
    else
      (@data["#{n}()"] ||= []) << { "args" => args, "opts" => kw }
    end
    nil
  end
end
module Vagrant
  def self.configure(version)
    raise "Vagrant.configure(#{version.inspect}): want \"2\"" unless version == "2"
    config = Rec.new
    yield config
    puts JSON.generate(config.to_h)
  end
end
load ARGV.fetch(0)
"""


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_pyinfra = load_module("gpuhost_run_pyinfra_unit", VAGRANT / "run_pyinfra.py")


def evaluate_vagrantfile(env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RUBY, "-e", RECORDER, str(VAGRANTFILE)], capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin", **(env or {})})


def machines(env: dict | None = None) -> dict:
    """The machines the Vagrantfile defines, {name: recorded settings} (one ruby run per env)."""
    return json.loads(_machines(tuple(sorted((env or {}).items()))))


@functools.cache
def _machines(env: tuple) -> str:
    res = evaluate_vagrantfile(dict(env))
    assert res.returncode == 0, res.stderr
    vm = json.loads(res.stdout)["vm"]
    return json.dumps({k.split(":", 1)[1]: v for k, v in vm.items() if k.startswith("define:")})


def interpolated(scenario: str) -> dict:
    """molecule.yml with ${VAR:-default} resolved to the defaults (Molecule's syntax)."""
    text = (MOLECULE / scenario / "molecule.yml").read_text()
    text = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", text)
    assert "${" not in text, f"{scenario}: unresolved variable without a default"
    return yaml.safe_load(text)


# -- Vagrantfile ------------------------------------------------------------------------


@pytest.mark.skipif(RUBY is None, reason="no ruby: the structural check below runs instead")
def test_vagrantfile_ruby_syntax():
    res = subprocess.run([RUBY, "-c", str(VAGRANTFILE)], capture_output=True, text=True)
    assert res.returncode == 0 and "Syntax OK" in res.stdout, res.stderr


def test_vagrantfile_structure():
    """Runs with or without ruby (the only check of the file when ruby is missing)."""
    text = VAGRANTFILE.read_text()
    assert text.count("Vagrant.configure(\"2\")") == 1
    assert len(re.findall(r"^\s*(do|if|unless|def|module|class)\b|\bdo\b\s*(\|[^|]*\|)?\s*$",
                          text, re.M)) == len(re.findall(r"^\s*end\b", text, re.M))
    for name in BOX_SCENARIOS:
        assert f'"{name}" =>' in text


@pytest.mark.skipif(RUBY is None, reason="no ruby: the structural check runs instead")
def test_vagrantfile_defines_the_four_boxes_for_both_providers():
    defined = machines()
    assert sorted(defined) == sorted(BOX_SCENARIOS)
    for name, m in defined.items():
        assert m["opts"] == {"autostart": False}, name
        vm = m["conf"]["vm"]
        assert vm["hostname"] == f"gpuhost-{name}"
        providers = {k.split(":", 1)[1]: v for k, v in vm.items() if k.startswith("provider:")}
        assert sorted(providers) == ["libvirt", "virtualbox"], name
        for provider, p in providers.items():
            assert p["override"]["vm"]["box"], (name, provider)
            assert p["conf"]["memory"] == 4096 and p["conf"]["cpus"] == 2
            assert "pci()" not in p["conf"], "no passthrough unless GPUHOST_PCI is set"
    assert defined["ol9"]["conf"]["vm"]["box_url"] == \
        "https://oracle.github.io/vagrant-projects/boxes/oraclelinux/9.json"
    assert defined["ubuntu2404"]["conf"]["vm"]["provider:virtualbox"]["override"]["vm"]["box"] \
        == "bento/ubuntu-24.04"


@pytest.mark.skipif(RUBY is None, reason="no ruby")
def test_vagrantfile_gpu_passthrough_from_env():
    env = {"GPUHOST_PCI": "0000:07:00.0,0000:81:00.1", "GPUHOST_MEMORY": "8192"}
    libvirt = machines(env)["ubuntu2204"]["conf"]["vm"]["provider:libvirt"]["conf"]
    assert libvirt["machine_type"] == "q35" and libvirt["memory"] == 8192
    assert [c["opts"] for c in libvirt["pci()"]] == [
        {"domain": "0x0000", "bus": "0x07", "slot": "0x00", "function": "0x0"},
        {"domain": "0x0000", "bus": "0x81", "slot": "0x00", "function": "0x1"},
    ]
    vbox = machines(env)["ubuntu2204"]["conf"]["vm"]["provider:virtualbox"]["conf"]
    assert "pci()" not in vbox


@pytest.mark.skipif(RUBY is None, reason="no ruby")
def test_vagrantfile_rejects_a_bad_pci_address():
    res = evaluate_vagrantfile({"GPUHOST_PCI": "07:00.0"})
    assert res.returncode != 0
    assert "GPUHOST_PCI" in res.stderr and "0000:07:00.0" in res.stderr


# -- Molecule ---------------------------------------------------------------------------


def test_scenarios_are_the_sandbox_and_one_per_box():
    assert SCENARIOS == sorted(BOX_SCENARIOS + ["sandbox"])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_yml_keys_and_playbooks(scenario):
    conf = interpolated(scenario)
    assert conf["driver"]["name"] in ("default", "vagrant")
    assert conf["platforms"] and all(p.get("name") for p in conf["platforms"])
    playbooks = conf["ansible"]["playbooks"]
    for step in ("converge", "verify"):
        path = (MOLECULE / scenario / playbooks[step]).resolve()
        assert path.is_file(), f"{scenario}: {step} playbook {path} missing"
    sequence = conf["scenario"]["test_sequence"]
    for step in ("create", "converge", "idempotence", "verify", "destroy"):
        assert step in sequence, f"{scenario}: {step} not in test_sequence"
    assert sequence.index("converge") < sequence.index("idempotence") < sequence.index("verify")


def test_sandbox_scenario_is_unmanaged_and_wraps_the_sandbox_cli():
    conf = interpolated("sandbox")
    assert conf["driver"] == {"name": "default", "options": {"managed": False}}
    assert conf["ansible"]["env"]["GPUHOST_INVENTORY"] == "inventories/sandbox.py"
    create = yaml.safe_load((MOLECULE / "sandbox/create.yml").read_text())
    destroy = yaml.safe_load((MOLECULE / "sandbox/destroy.yml").read_text())
    commands = {tuple(t["ansible.builtin.command"]["argv"][1:4]): t
                for play in create + destroy for t in play["tasks"]
                if "ansible.builtin.command" in t}
    # A shared fleet is used as it is: `up` only when none runs, `down` only for ours.
    assert commands[("-m", "sandbox", "up")]["when"] == "not fleet_json.stat.exists"
    assert "started.stat.exists" in commands[("-m", "sandbox", "down")]["when"]


@pytest.mark.skipif(RUBY is None, reason="no ruby")
@pytest.mark.parametrize("scenario", BOX_SCENARIOS)
def test_box_scenarios_match_the_vagrantfile(scenario):
    conf = interpolated(scenario)
    assert conf["driver"]["name"] == "vagrant"
    assert conf["driver"]["provider"]["name"] == "virtualbox"
    vm = machines()[scenario]["conf"]["vm"]
    platform = conf["platforms"][0]
    assert platform["box"] == vm["provider:virtualbox"]["override"]["vm"]["box"]
    assert platform.get("box_url") == vm.get("box_url")


def test_playbooks_run_on_the_controller_only():
    for path in sorted(MOLECULE.glob("*/*.yml")):
        if path.name == "molecule.yml":
            continue
        plays = yaml.safe_load(path.read_text())
        assert isinstance(plays, list) and plays, path
        for play in plays:
            assert play["hosts"] == "localhost" and play["connection"] == "local", path


def test_converge_turns_pyinfra_changes_into_ansible_changed():
    plays = yaml.safe_load((MOLECULE / "playbooks/converge.yml").read_text())
    run = [t for t in plays[0]["tasks"] if t.get("register") == "pyinfra_run"][0]
    assert run["ansible.builtin.command"]["argv"][2] == "converge"
    assert run["changed_when"] == "(pyinfra_run.stdout | from_json).changed > 0"


def test_molecule_schema_accepts_ours_and_rejects_a_typo(tmp_path):
    pytest.importorskip("molecule", reason="molecule is in the test extra (make setup)")
    script = """
import json, sys, yaml
from molecule.model.schema_v3 import validate
out = {}
for path in sys.argv[1:]:
    out[path] = validate(yaml.safe_load(open(path)))
print(json.dumps(out))
"""
    files = []
    for scenario in SCENARIOS:
        f = tmp_path / f"{scenario}.yml"
        f.write_text(yaml.safe_dump(interpolated(scenario)))
        files.append(f)
    typo = tmp_path / "typo.yml"
    typo.write_text(yaml.safe_dump({**interpolated("sandbox"), "provisoner": {"name": "x"}}))
    res = subprocess.run([sys.executable, "-c", script, *map(str, files), str(typo)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    errors = json.loads(res.stdout.strip().splitlines()[-1])  # Molecule logs to stdout
    assert errors.pop(str(typo)), "the schema check accepts anything"
    assert all(v == [] for v in errors.values()), errors


# -- README -----------------------------------------------------------------------------


def test_readme_documents_every_box_and_scenario():
    for scenario in SCENARIOS:
        assert f"`{scenario}`" in README or f"-s {scenario}" in README, scenario
    if RUBY:
        for name, m in machines().items():
            vm = m["conf"]["vm"]
            for provider in ("virtualbox", "libvirt"):
                box = vm[f"provider:{provider}"]["override"]["vm"]["box"]
                assert f"`{box}`" in README, f"{name}/{provider}: {box} not in README"
            if vm.get("box_url"):
                assert vm["box_url"] in README
    for target in ("make test-vm", "make molecule-sandbox", "GPUHOST_PCI"):
        assert target in README


def test_makefile_fragment_has_the_targets():
    text = (REPO / "mk/vagrant.mk").read_text()
    for target in ("vm-image:", "test-vm:", "molecule-sandbox:"):
        assert re.search(rf"^{re.escape(target)}", text, re.M), target
    packages = re.search(r"^APT_PACKAGES \+=(.*)$", text, re.M).group(1).split()
    for pkg in ("qemu-system-x86", "qemu-utils", "e2fsprogs", "mmdebstrap"):
        assert pkg in packages


# -- vagrant/run_pyinfra.py -------------------------------------------------------------


def pyinfra_json(ops: list[tuple[str, list, list, list]]) -> dict:
    return {"plan": [], "results": {"operations": [
        {"name": name, "success": changed, "no_change": unchanged, "error": failed}
        for name, changed, unchanged, failed in ops]}}


def test_summarize_counts_changed_and_failed_host_operations():
    s = run_pyinfra.summarize(pyinfra_json([
        ("Install docker.io", ["vm"], [], []),
        ("Write daemon.json", ["vm", "gpu-02"], [], []),
        ("Pin the toolkit", [], ["vm"], ["gpu-02"]),
    ]))
    assert s["changed"] == 3 and s["errors"] == 1 and s["unchanged"] == 1
    assert "gpu-02: Write daemon.json" in s["changed_operations"]
    assert s["failed_operations"] == ["gpu-02: Pin the toolkit"]


def test_summarize_converged_run_is_zero():
    s = run_pyinfra.summarize(pyinfra_json([("a", [], ["vm"], []), ("b", [], ["vm"], [])]))
    assert (s["changed"], s["errors"], s["unchanged"]) == (0, 0, 2)


def test_json_tail_ignores_text_before_the_document():
    assert run_pyinfra._json_tail('warning: x\n{"results": null}\n') == {"results": None}
    with pytest.raises(run_pyinfra.RunError):
        run_pyinfra._json_tail("no json at all")


GOOD_STATE = {  # the fields of a GpuHostState that gpuhost.converged.STACK reads
    "driver": {"state": "loaded", "loaded_version": "570.172.08",
               "installed_version": "570.172.08", "reboot_required": False},
    "toolkit": {"installed": True, "consistent": True, "version": "1.17.8",
                "versions_seen": ["1.17.8"], "packages": {}},
    "docker": {"exists": True, "valid": True, "error": None, "path": "/etc/docker/daemon.json",
               "docker_installed": True, "nvidia_runtime": {"defined": True},
               "default_runtime": None, "nvidia_is_default": False,
               "daemon": {"running": True, "runtimes": ["nvidia", "runc"],
                          "default_runtime": "runc"}},
}


def test_converged_problems():
    assert run_pyinfra.converged_problems(GOOD_STATE, "570.172.08") == []
    assert run_pyinfra.converged_problems(GOOD_STATE) == []
    assert run_pyinfra.converged_problems(GOOD_STATE, "550.163.01") == [
        "driver 570.172.08, want 550.163.01"]
    mismatch = json.loads(json.dumps(GOOD_STATE))
    mismatch["driver"].update(state="library_mismatch", loaded_version="550.163.01",
                              reboot_required=True)
    mismatch["docker"]["daemon"]["runtimes"] = ["runc"]
    mismatch["toolkit"].update(consistent=False, versions_seen=["1.17.8", "1.17.7"])
    problems = run_pyinfra.converged_problems(mismatch)
    assert len(problems) == 3 and "runtimes: runc" in problems[-1], problems
    assert "reboot pending" in problems[0] and "disagree" in problems[1]
    bare = json.loads(json.dumps(GOOD_STATE))
    bare["driver"].update(state="not_installed", loaded_version=None, installed_version=None)
    assert run_pyinfra.converged_problems(bare) == [
        "driver not installed, want an installed driver"]
    assert run_pyinfra.converged_problems(None) == ["no GpuHostState (got None)"]


def test_molecule_inventory_from_instance_config(tmp_path):
    config = tmp_path / "instance_config.yml"
    config.write_text(yaml.safe_dump([{
        "instance": "gpuhost-ol9", "address": "127.0.0.1", "user": "vagrant",
        "port": "2200", "identity_file": "/home/u/.vagrant.d/insecure_private_key"}]))
    data = tmp_path / "data.yml"
    data.write_text("nvidia_driver_version: '570.172.08'\n")
    out = tmp_path / "inv.py"
    run_pyinfra.molecule_inventory(config, out, data)
    namespace: dict = {}
    exec(out.read_text(), namespace)  # noqa: S102 (our own generated file)
    hosts, group = namespace["molecule"]
    assert group == {"nvidia_driver_version": "570.172.08"}
    name, host_data = hosts[0]
    assert name == "gpuhost-ol9"
    assert host_data["ssh_port"] == 2200 and host_data["ssh_user"] == "vagrant"
    assert host_data["_sudo"] is True


def test_molecule_inventory_refuses_an_empty_config(tmp_path):
    config = tmp_path / "instance_config.yml"
    config.write_text("")
    with pytest.raises(run_pyinfra.RunError, match="did `molecule create` run"):
        run_pyinfra.molecule_inventory(config, tmp_path / "inv.py", None)
