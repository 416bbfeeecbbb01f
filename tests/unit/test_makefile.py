"""The README's commands are valid shell whatever the Makefile's variables hold.

`make -n TARGET` prints every command TARGET would run (and runs nothing but sub-makes,
themselves with -n); bash -n parses them. The recipe `if [ -n "$(CORPUS_CHECK)" ]; then
$(CORPUS_CHECK); fi` was `if [ -n "" ]; then ; fi` with the variable empty (its default):
`make test` failed at once on a fresh clone while CI, which always set it, passed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variables", [[], ["CORPUS_CHECK=../shared/bin/corpus-check"],
                                       ["TEST_WORKERS=0"]], ids=["defaults", "corpus", "serial"])
@pytest.mark.parametrize("target", ["test", "demo", "test-unit", "test-integration"])
def test_the_readme_targets_are_valid_shell(target, variables):
    if shutil.which("make") is None:
        pytest.fail("make is not installed (Debian's make; the README's first step)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    plan = subprocess.run(["make", "-n", "--no-print-directory", target, *variables], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.strip(), f"make -n {target} printed no command"
    syntax = subprocess.run(["bash", "-n"], input=plan.stdout, capture_output=True, text=True,
                            timeout=60)
    assert syntax.returncode == 0, f"{syntax.stderr}\n--- make -n {target}:\n{plan.stdout}"


def test_make_test_runs_pytest_in_parallel_and_ends_with_the_timing_table():
    plan = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60).stdout
    pytest_line = next(line for line in plan.splitlines() if " -m pytest " in line)
    assert "-n 2 --dist loadfile" in pytest_line and "GPUHOST_TIMINGS=" in pytest_line
    # pytest is the last step: its timing plugin prints the table, and the Molecule scenario
    # runs inside it as a test module (not alone after it)
    assert plan.rstrip().splitlines()[-1] == pytest_line
    assert "molecule" not in plan
    assert (ROOT / "tests/integration/test_molecule.py").is_file()
