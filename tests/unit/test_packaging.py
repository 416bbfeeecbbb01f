"""Issue 27 item 1: one package, ``gpuhost``, whose subpackages facts, roles and deploys live
in the checkout's folders (docs/architecture.md, "Packaging"); the deploy functions'
keyword settings (gpuhost.deploys.api) stay with their host and run; the CLI finds its
deploys wherever gpuhost is installed."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("gpuhost", "facts", "roles", "deploys", "inventories", "tests", "sandbox", "bench",
         "vagrant", "contrib")
# an import statement, or a string that is a dotted name (importlib, pyinfra fact names)
OLD_IMPORT = re.compile(r"^\s*(from|import) (facts|roles|deploys)\b"
                        r"|[\"'](facts|roles|deploys)(\.[A-Za-z_]+)+[\"']", re.M)
MIRROR = "http://127.77.0.1:8000"
SHA = "0" * 64


def test_no_module_imports_facts_roles_or_deploys_by_their_folder_name():
    """Imported as ``facts.host`` and ``gpuhost.facts.host`` in one process, a module is two
    modules: two classes for one pyinfra fact. Nothing in the tree names the old top-level
    packages (the team's corpus-check, outside the tree, still may: see the architecture)."""
    files = [ROOT / "conftest.py"] + [p for tree in TREES for p in (ROOT / tree).rglob("*.py")]
    found = [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}: {m[0].strip()}"
             for path in files if "__pycache__" not in path.parts
             for text in [path.read_text(encoding="utf-8")]
             for m in OLD_IMPORT.finditer(text)]
    assert found == [], "\n".join(found)


def test_facts_are_named_for_the_gpuhost_package_and_load_from_the_checkout_folders():
    code = ("import sys, gpuhost.facts.host as h, gpuhost.deploys.api, gpuhost.roles.upgrade\n"
            "print(h.GpuHostState.name, h.__file__)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('facts', 'roles', 'deploys')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd="/", text=True,
                          capture_output=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    name, path = done.stdout.splitlines()[0].split()
    assert name == "gpuhost.facts.host.GpuHostState"  # pyinfra's name: module + class
    assert path == str(ROOT / "facts" / "host.py")
    assert done.stdout.splitlines()[1] == "[]"


def test_the_wheel_maps_every_subpackage_to_its_folder():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = tool["package-dir"]
    assert mapped["gpuhost.facts"] == "facts" and mapped["gpuhost.roles"] == "roles"
    assert mapped["gpuhost.deploys"] == "deploys"
    folders = {f"gpuhost.{init.parent.relative_to(ROOT).as_posix().replace('/', '.')}"
               for top in ("facts", "roles", "deploys") for init in (ROOT / top).rglob("__init__.py")}
    folders |= {"gpuhost." + init.parent.relative_to(ROOT / "gpuhost").as_posix().replace("/", ".")
                for init in (ROOT / "gpuhost").glob("*/__init__.py")}
    assert folders | {"gpuhost"} == set(tool["packages"])  # a new subfolder is not forgotten


def _inventory(**hosts):
    from pyinfra.api import Config, Inventory, State

    inventory = Inventory(([(name, data) for name, data in hosts.items()], {}))
    return inventory, State(inventory, Config())


def _as(inventory, state, name, job):
    from pyinfra.context import ctx_host, ctx_inventory, ctx_state

    with ctx_state.use(state), ctx_inventory.use(inventory), \
            ctx_host.use(inventory.get_host(name)):
        return job()


def test_keyword_settings_stay_with_their_host_and_validate_only_it():
    from gpuhost.roles import common

    settings = {"nvidia_driver_version": "580.95.05", "container_toolkit_version": "1.17.8",
                "nvidia_local_repo": {"debian12": {"url": f"{MIRROR}/x.deb", "sha256": SHA}}}
    # gpu-01's data is incomplete, web-01 has none and never calls the deploy: no error
    inventory, state = _inventory(**{"gpu-01": {"nvidia_driver_version": "550.163.01"},
                                     "web-01": {"reboot_policy": "always"}})

    def given():
        common.use_settings(settings)
        return common.host_settings()

    assert _as(inventory, state, "gpu-01", given).nvidia_driver_version == "580.95.05"
    assert _as(inventory, state, "gpu-01", common.host_data)["nvidia_driver_version"] == \
        "580.95.05"
    assert _as(inventory, state, "web-01", common.host_data) == {"reboot_policy": "always"}
    # the next run (a new State) starts without them
    inventory, state = _inventory(**{"gpu-01": {"nvidia_driver_version": "550.163.01"}})
    assert _as(inventory, state, "gpu-01", common.host_data) == \
        {"nvidia_driver_version": "550.163.01"}


def test_a_bad_keyword_setting_names_the_host_and_the_key():
    from gpuhost.roles import common

    inventory, state = _inventory(**{"gpu-01": {}})

    def bad():
        common.use_settings({"nvidia_driver_version": "580.95.05", "reboot_policy": "always"})
        return common.host_settings()

    with pytest.raises(common.GpuhostError, match=r"reboot_policy: .*\[gpu-01\]"):
        _as(inventory, state, "gpu-01", bad)


def test_the_cli_runs_its_deploys_by_path_and_says_when_one_is_missing():
    from gpuhost import cli

    assert cli.deploy_file("audit.py") == str(ROOT / "deploys" / "audit.py")
    with pytest.raises(cli.CliError, match=r"deploy nothing\.py is missing .*reinstall"):
        cli.deploy_file("nothing.py")


# the four toolkit packages at gpuhost's default (container_toolkit_version 1.20.0)
TOOLKIT_DEFAULT_PKGS = "".join(f"{name}\t1.20.0-1\tii \n" for name in (
    "nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
    "libnvidia-container1"))


def _host_output(version: str) -> str:
    """What the GpuHostState script prints on a Debian 12 host with ``version`` loaded."""
    from gpuhost.facts.script import ALL_SECTIONS, MARKER

    module = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release "
              "Build  (b@h)  Tue Jul  8 18:44:13 UTC 2025")
    values = {name: (127, "") for name in ALL_SECTIONS}
    values.update(os_release=(0, 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"'),
                  kernel=(0, "6.1.0-56-amd64\nx86_64"),
                  dpkg=(0, f"nvidia-open\t{version}-1\tii \n" + TOOLKIT_DEFAULT_PKGS),
                  proc_version=(0, module))
    return "".join(f"{MARKER}{name} rc={rc}\n{out}\n" for name, (rc, out) in values.items())


@pytest.mark.parametrize("wanted, status", [("570.172.08", 0), ("580.95.05", 1)])
def test_a_users_deploy_file_audits_its_gpu_group_with_keyword_settings(tmp_path, wanted, status):
    """The real pyinfra CLI (@fake hosts) on a mixed inventory: the web server has no gpuhost
    setting and never calls the deploy; the GPU host's wanted driver is the keyword argument
    (it has none in its data): as loaded exit 0, another one is drift (exit 1)."""
    fake = {"fake_delay": 0, "fake_delay_jitter": 0}
    (tmp_path / "inv.py").write_text(
        f"gpu = [('@fake/gpu-1', {{**{fake!r}, 'fake_responses': "
        f"{{'_gh()': {_host_output('570.172.08')!r}}}}})]\n"
        f"web = [('@fake/web-1', {fake!r})]\n")
    (tmp_path / "mine.py").write_text(
        "from pyinfra import host\nfrom gpuhost.deploys.api import audit\n"
        f"if 'gpu' in host.groups:\n    audit(nvidia_driver_version={wanted!r})\n")
    done = subprocess.run([sys.executable, "-m", "pyinfra", "-y", "inv.py", "mine.py"],
                          cwd=tmp_path, text=True, capture_output=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "PYINFRA_PROGRESS": "off", "NO_COLOR": "1"})
    said = done.stdout + done.stderr
    assert done.returncode == status, said[-3000:]
    # no validation of the web server (it has none of gpuhost's required settings)
    assert "missing (required)" not in said and "invalid" not in said, said[-3000:]
    assert "@fake/gpu-1: " in said and ("drift" in said.lower()) == (status == 1), said[-3000:]
