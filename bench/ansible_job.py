"""The Ansible side of the benchmark: the same job as the audit, written the Ansible way.

A play with ``gather_facts: true`` and one ``ansible.builtin.shell`` task per section of
``facts/script.py`` (the exact commands the audit runs in its single remote command),
each registered, never failing, never "changed". Inventory from the sandbox's fleet.json,
``forks`` = host count, pipelining on, the interpreter given (no discovery round trip).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import yaml

from gpuhost.facts.script import SECTIONS

ROOT = Path(__file__).resolve().parents[1]


def playbook() -> list[dict]:
    # {% raw %}: docker's --format '{{json .Runtimes}}' is not a Jinja template
    tasks = [{"name": f"section {name}", "ansible.builtin.shell":
              f"{{% raw %}}{command}{{% endraw %}}" if "{{" in command else command,
              "register": f"section_{name}", "changed_when": False, "failed_when": False}
             for name, command in SECTIONS.items()]
    return [{"name": "GPU host audit (the sections of facts/script.py)", "hosts": "all",
             "gather_facts": True, "tasks": tasks}]


def write(fleet: dict, directory: Path, forks: int) -> Path:
    """inventory.ini, ansible.cfg and audit.yml for this fleet in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    hosts = "\n".join(f"{h['name']} ansible_host={h['address']} ansible_port={h['port']}"
                      for h in fleet["hosts"])
    (directory / "inventory.ini").write_text(
        f"[sandbox]\n{hosts}\n\n[sandbox:vars]\nansible_user=root\n"
        f"ansible_ssh_private_key_file={fleet['ssh_key']}\n"
        "ansible_python_interpreter=/usr/bin/python3\n")
    (directory / "ansible.cfg").write_text(
        "[defaults]\n"
        f"forks = {forks}\n"
        "host_key_checking = True\n"
        "retry_files_enabled = False\n"
        "deprecation_warnings = False\n"
        "timeout = 30\n"
        "[ssh_connection]\n"
        "pipelining = True\n"
        "ssh_args = -o ControlMaster=auto -o ControlPersist=30s -o IdentitiesOnly=yes "
        f"-o UserKnownHostsFile={fleet['known_hosts']} -o StrictHostKeyChecking=yes\n")
    (directory / "audit.yml").write_text(yaml.safe_dump(playbook(), sort_keys=False, width=1000))
    return directory


def env(directory: Path) -> dict:
    """Environment of one run: this config, a fresh ControlPath directory (a cold start)."""
    control = directory / f"cp-{time.monotonic_ns()}"
    control.mkdir()
    return {**os.environ, "ANSIBLE_CONFIG": str(directory / "ansible.cfg"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(directory / "tmp"), "ANSIBLE_HOME": str(directory / "home")}


def count_exec(directory: Path, fleet: dict, work: Path) -> str:
    """Remote commands per host: the ``SSH: EXEC`` lines of one ``-vvv`` run (min-max)."""
    proc = subprocess.run([str(ROOT / ".venv/bin/ansible-playbook"), "-vvv", "-i",
                           str(directory / "inventory.ini"), str(directory / "audit.yml")],
                          cwd=ROOT, env=env(directory), capture_output=True, text=True,
                          timeout=3600)
    (work / "ansible-vvv.log").write_text(proc.stdout + proc.stderr)
    by_address = Counter(re.findall(r"^<([\d.]+)> SSH: EXEC ", proc.stdout, re.M))
    counts = sorted(by_address.get(h["address"], 0) for h in fleet["hosts"])
    if proc.returncode != 0 or counts[0] == 0:
        raise RuntimeError(f"ansible -vvv run: exit {proc.returncode}, EXEC counts {counts}:\n"
                           f"{proc.stdout[-2000:]}")
    return str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"
