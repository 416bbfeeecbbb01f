"""What a user who installed gpuhost from its wheel meets first, without installing anything:
the help names what the installed package has (not the checkout's deploys/gpu_host.py), a
new inventory without a driver source gets one line that says what to set, and the README's
"In a pyinfra repository of your own" example is valid settings as written."""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import gpuhost.settings as S
from gpuhost.cli import PROVISION, parser
from gpuhost.distro import DISTRO_TAGS

ROOT = Path(__file__).resolve().parents[2]


def test_the_help_names_the_packaged_deploy_not_a_checkout_path():
    # from another directory, with this tree's gpuhost first (as an installed one would be)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "gpuhost.cli", "--help"], cwd="/", env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout
    flat = " ".join(shown.split())
    assert "pyinfra INVENTORY gpuhost.deploys.api.gpu_host" in flat, shown
    assert "deploys/gpu_host.py" not in flat, shown
    assert PROVISION in parser().description


def test_the_dotted_name_the_help_gives_is_a_pyinfra_deploy():
    name = re.search(r"pyinfra INVENTORY (\S+)", PROVISION).group(1)
    module, _, function = name.rpartition(".")
    deploy = getattr(importlib.import_module(module), function)
    assert callable(deploy) and deploy.__name__ == "gpu_host"
    # pyinfra's @deploy wraps it; the user's keyword settings reach gpuhost's settings
    assert "settings" in str(deploy.__wrapped__.__code__.co_varnames)


def test_a_first_run_without_a_driver_source_says_what_to_set():
    problems = S.validate({"nvidia_driver_version": "580.95.05",
                           "container_toolkit_version": "1.18.2"}, host_name="gpu-01")
    assert len(problems) == 1, problems
    line = problems[0]
    assert "\n" not in line and "missing (required)" not in line
    assert line.startswith("gpu-01: nvidia_local_repo: not set (nor nvidia_driver_repo)")
    for said in ('"sha256": its sha256sum', "nvidia_driver_repo to NVIDIA's network repository",
                 *DISTRO_TAGS):
        assert said in line, said


def _readme_example() -> tuple[dict, dict]:
    """The README's inventory.py (its group's data) and the keyword settings my_deploy.py
    passes, each block run as written (gpu_host recorded instead of run)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### In a pyinfra repository of your own", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    inventory = next(b for b in blocks if b.startswith("# inventory.py"))
    deploy = next(b for b in blocks if "from gpuhost.deploys.api import gpu_host" in b)
    names: dict = {}
    exec(compile(inventory, "README.md inventory.py", "exec"), names)
    groups = [v for k, v in names.items() if not k.startswith("__")]
    assert len(groups) == 1 and isinstance(groups[0], tuple), groups
    hosts, data = groups[0]
    assert hosts and all(isinstance(h, str) for h in hosts)
    called: list[dict] = []
    code = deploy.replace("from gpuhost.deploys.api import gpu_host", "")
    exec(compile(code, "README.md my_deploy.py", "exec"),
         {"gpu_host": lambda **kw: called.append(kw)})
    assert len(called) == 1, called  # the deploy file calls gpuhost's deploy once
    return dict(data), called[0]


def test_the_readme_example_is_valid_settings_as_written():
    data, keywords = _readme_example()
    settings = {**data, **keywords}  # the deploy's keywords over the host's data
    assert settings["nvidia_driver_version"] and settings["nvidia_local_repo"], settings
    # the README's sha256 is a placeholder the user replaces: give one of the right form
    for source in settings["nvidia_local_repo"].values():
        assert not re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
        assert set(source) == {"url", "sha256"}
        source["sha256"] = "0" * 64
    problems = S.validate(settings)
    # container_toolkit_version gets its default (1.20.0) with issue 37; until then it is the
    # one key the README leaves out on purpose
    if S.BY_NAME["container_toolkit_version"].required:
        problems = [p for p in problems if not p.startswith("container_toolkit_version: missing")]
    assert problems == []
