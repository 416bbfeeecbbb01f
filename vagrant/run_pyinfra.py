#!/usr/bin/env python3
"""Run pyinfra for the Molecule scenarios and the VM test, and read its JSON output.

    python vagrant/run_pyinfra.py converge INVENTORY [DEPLOY] [--expect-no-change]
    python vagrant/run_pyinfra.py facts INVENTORY [--expect-converged]
    python vagrant/run_pyinfra.py molecule-inventory INSTANCE_CONFIG OUT.py [--data DATA.yml]

`converge` runs `pyinfra -y --json INVENTORY DEPLOY` from the repository root and prints one
JSON summary line: {"changed": N, "errors": N, "changed_operations": [...], ...}. N counts
(operation, host) pairs that pyinfra reports as changed, so a converged host gives 0; the
Molecule converge playbooks turn that into Ansible's `changed` and Molecule's idempotence
step fails on a second run that is not 0. Exit status: pyinfra's, or 3 with
--expect-no-change when something changed.

`facts` prints {host: GpuHostState} from `pyinfra INVENTORY fact gpuhost.facts.host.GpuHostState
--json`; with --expect-converged it exits 3 unless every host reports a loaded driver equal
to the installed one and Docker with the nvidia runtime.

`molecule-inventory` writes a pyinfra inventory from Molecule's instance_config.yml (the
file the vagrant driver's create playbook writes: instance, address, user, port,
identity_file), with gpuhost data from a YAML file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FACT = "gpuhost.facts.host.GpuHostState"


class RunError(RuntimeError):
    pass


def _pyinfra() -> str:
    local = Path(sys.executable).parent / "pyinfra"
    return str(local) if local.exists() else "pyinfra"


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("PYINFRA_PROGRESS", "off")
    # The venv's bin first: pyinfra, and Molecule's ansible-* tools, come from there.
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def _json_tail(stdout: str) -> dict:
    """pyinfra --json prints one JSON document on stdout (logs go to stderr)."""
    text = stdout.strip()
    start = text.find("{")
    if start < 0:
        raise RunError("pyinfra printed no JSON on stdout")
    return json.loads(text[start:])


def summarize(payload: dict) -> dict:
    """Count changes and errors in pyinfra's `--json` run output (print_run_json)."""
    results = payload.get("results") or {}
    ops = results.get("operations", [])
    changed = [f"{h}: {op['name']}" for op in ops for h in op.get("success", [])]
    errors = [f"{h}: {op['name']}" for op in ops for h in op.get("error", [])]
    return {"changed": len(changed), "errors": len(errors), "operations": len(ops),
            "unchanged": sum(len(op.get("no_change", [])) for op in ops),
            "changed_operations": changed, "failed_operations": errors}


def converge(inventory: str, deploy: str = "deploys/gpu_host.py", extra: list[str] = (),
             timeout: float = 3600, log: Path | None = None) -> dict:
    """Apply `deploy`; returns summarize() plus rc, seconds, log and stderr_tail. pyinfra's
    whole stderr (its progress log) goes to `log` when given."""
    argv = [_pyinfra(), "-y", "--json", inventory, deploy, *extra]
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True,
                         timeout=timeout)
    if log:
        Path(log).write_text(f"$ {' '.join(argv)}\n{res.stderr}\n--- stdout\n{res.stdout}")
    where = f" (full log: {log})" if log else ""
    try:
        summary = summarize(_json_tail(res.stdout))
    except (RunError, json.JSONDecodeError) as exc:
        raise RunError(f"`pyinfra {' '.join(argv[1:])}` exited {res.returncode} without a JSON "
                       f"result ({exc}){where}:\n{res.stderr.strip()[-3000:]}") from exc
    summary.update(rc=res.returncode, seconds=round(time.monotonic() - t0, 1), log=str(log or ""),
                   stderr_tail=res.stderr.strip()[-3000:] if res.returncode else "")
    return summary


def facts(inventory: str, fact: str = FACT, timeout: float = 600) -> dict:
    """{host name: fact value} for one fact."""
    argv = [_pyinfra(), inventory, "fact", fact, "--json"]
    res = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        raise RunError(f"`pyinfra {inventory} fact {fact}` exited {res.returncode}:\n"
                       f"{res.stderr.strip()[-3000:]}")
    data = _json_tail(res.stdout)
    if len(data) != 1:
        raise RunError(f"expected one fact in the output, got {sorted(data)}")
    return next(iter(data.values()))


def converged_problems(state: dict, driver_version: str | None = None) -> list[str]:
    """Why a GpuHostState (facts/host.py) is not a provisioned GPU host; [] when it is:
    ``gpuhost.converged.judge`` on the driver and container stack (``STACK``), wanting
    ``driver_version`` (default: the installed one, which must then be loaded) and the
    installed toolkit (all four packages alike; the nvidia runtime in daemon.json and in the
    running daemon)."""
    if str(REPO) not in sys.path:  # run as a script (Molecule): the checkout's gpuhost
        sys.path.insert(0, str(REPO))
    from gpuhost import converged

    if not isinstance(state, dict):
        return [f"no GpuHostState (got {state!r})"]
    driver = state.get("driver") or {}
    toolkit = state.get("toolkit") or {}
    wanted = {"nvidia_driver_version": driver_version or driver.get("installed_version")
              or "an installed driver",
              "container_toolkit_version": toolkit.get("version") or "an installed toolkit"}
    return converged.judge(state, wanted).only(converged.STACK).messages()


def molecule_inventory(instance_config: Path, out: Path, data_file: Path | None) -> str:
    import yaml

    instances = yaml.safe_load(instance_config.read_text()) or []
    if not instances:
        raise RunError(f"{instance_config} lists no instance: did `molecule create` run?")
    data = yaml.safe_load(data_file.read_text()) if data_file else {}
    hosts = []
    for inst in instances:
        hosts.append((inst["instance"], {
            "ssh_hostname": inst["address"], "ssh_port": int(inst["port"]),
            "ssh_user": inst["user"], "ssh_key": inst["identity_file"],
            "ssh_strict_host_key_checking": "no", "_sudo": inst["user"] != "root",
        }))
    text = ('"""Written by vagrant/run_pyinfra.py from Molecule\'s instance config."""\n'
            f"molecule = ({hosts!r}, {data!r})\n")
    out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("converge")
    c.add_argument("inventory")
    c.add_argument("deploy", nargs="?", default="deploys/gpu_host.py")
    c.add_argument("--expect-no-change", action="store_true")
    c.add_argument("--log", type=Path, help="write pyinfra's whole stderr here")
    f = sub.add_parser("facts")
    f.add_argument("inventory")
    f.add_argument("--expect-converged", action="store_true")
    m = sub.add_parser("molecule-inventory")
    m.add_argument("instance_config", type=Path)
    m.add_argument("out", type=Path)
    m.add_argument("--data", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "converge":
            summary = converge(args.inventory, args.deploy, log=args.log)
            print(json.dumps(summary))
            if summary["rc"] != 0:
                print(summary["stderr_tail"], file=sys.stderr)
                return summary["rc"]
            if args.expect_no_change and summary["changed"]:
                print(f"not idempotent: {summary['changed']} changes on a converged host: "
                      + "; ".join(summary["changed_operations"]), file=sys.stderr)
                return 3
        elif args.cmd == "facts":
            values = facts(args.inventory)
            print(json.dumps(values, indent=2, sort_keys=True))
            if args.expect_converged:
                bad = {h: p for h, v in values.items() if (p := converged_problems(v))}
                for host_name, problems in bad.items():
                    print(f"{host_name}: " + "; ".join(problems), file=sys.stderr)
                if bad or not values:
                    return 3
        else:
            molecule_inventory(args.instance_config, args.out, args.data)
    except RunError as exc:
        print(f"run_pyinfra: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
