"""pyinfra's non-public names that gpuhost uses (facts/pyinfra_api.py) still exist with the
signatures gpuhost calls. A pyinfra release that moves one fails here first: fix
facts/pyinfra_api.py, then widen the pin in pyproject.toml (issue 27 item 4)."""

from __future__ import annotations

import copy
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_state_stage_and_current_stage():
    from pyinfra.api import Inventory, State
    from pyinfra.api.state import StateStage

    from gpuhost.facts import pyinfra_api

    assert pyinfra_api.StateStage is StateStage
    assert {"Prepare", "Execute"} <= {stage.name for stage in StateStage}
    state = State(inventory=Inventory(([], {})))
    state.set_stage(StateStage.Prepare)
    assert pyinfra_api.executing(state) is False
    state.set_stage(StateStage.Execute)
    assert pyinfra_api.executing(state) is True


def test_failed_hosts_and_callback_handlers_are_state_attributes():
    from pyinfra.api import BaseStateCallback, Inventory, State

    from gpuhost.facts import pyinfra_api

    inventory = Inventory((["one"], {}))
    state = State(inventory=inventory)
    host = inventory.get_host("one")
    assert isinstance(state.failed_hosts, set)
    assert pyinfra_api.host_failed(state, host) is False
    state.failed_hosts.add(host)
    assert pyinfra_api.host_failed(state, host) is True
    handler = BaseStateCallback()
    state.add_callback_handler(handler)
    assert handler in pyinfra_api.callback_handlers(state)


def test_is_host_in_limit_follows_the_state_limit():
    from pyinfra.api import Inventory, State

    from gpuhost.facts import pyinfra_api

    inventory = Inventory((["one", "two"], {}))
    state = State(inventory=inventory)
    one, two = inventory.get_host("one"), inventory.get_host("two")
    state.init(inventory, state.config, initial_limit=[two])
    assert params(state.is_host_in_limit) == ["host"]
    assert (pyinfra_api.in_limit(state, one), pyinfra_api.in_limit(state, two)) == (False, True)
    state.limit_hosts = None  # no --limit: every host
    assert pyinfra_api.in_limit(state, one) is True


def test_ctx_host_use_makes_a_host_current():
    from pyinfra import host
    from pyinfra.api import Inventory
    from pyinfra.context import ctx_host

    from gpuhost.facts import pyinfra_api

    assert params(ctx_host.use) == ["module"]
    target = Inventory((["one"], {})).get_host("one")
    with pyinfra_api.use_host(target):
        assert host.name == "one"


def test_generate_color_diff_and_any_changed_signatures():
    from pyinfra.operations.util import any_changed
    from pyinfra.operations.util.files import generate_color_diff

    from gpuhost.facts import pyinfra_api

    assert params(generate_color_diff) == ["current_lines", "desired_lines"]
    assert list(pyinfra_api.color_diff(["a\n"], ["a\n", "b\n"]))  # shows the added line
    assert params(any_changed) == ["args"]
    assert inspect.signature(any_changed).parameters["args"].kind is inspect.Parameter.VAR_POSITIONAL


def test_separator_keyword_joins_without_space():
    from pyinfra.api import QuoteString, StringCommand

    from gpuhost.facts import pyinfra_api

    assert inspect.signature(StringCommand.__init__).parameters["_separator"].default == " "
    command = pyinfra_api.joined(QuoteString("/var/a dir"), "/x-*.gpg")
    assert command.get_raw_value() == "'/var/a dir'/x-*.gpg"


def test_run_shared_copies_are_the_same_object():
    from gevent.event import Event

    from gpuhost.facts import pyinfra_api

    shared = pyinfra_api.RunShared()
    assert copy.copy(shared) is shared
    assert isinstance(shared.done, Event) and not shared.done.is_set()


def test_cli_parameter_names():
    from gpuhost.facts import pyinfra_api

    # in a process of its own: importing pyinfra_cli monkey-patches the interpreter (gevent)
    done = subprocess.run(
        [sys.executable, "-c", "from pyinfra_cli.main import cli; "
                               "print(' '.join(param.name for param in cli.params))"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    missing = set(pyinfra_api.CLI_PARAMS) - set(done.stdout.split())
    assert not missing, f"pyinfra's CLI lost the parameter(s) {sorted(missing)}"


# How each internal is reached; the product (PRODUCT's folders) reaches it only through
# facts/pyinfra_api.py. The plan harness (tests/plans) drives pyinfra's runtime by hand and
# is not held to this.
INTERNAL = {
    "StateStage": r"pyinfra\.api\.state import", "current_stage": r"\.current_stage\b",
    "ctx_host": r"\bctx_host\b", "__copy__": r"__copy__",
    "generate_color_diff": r"\bgenerate_color_diff\b",
    "any_changed": r"pyinfra\.operations\.util import|util\.any_changed",
    "_separator": r"\b_separator=", "failed_hosts": r"state\.failed_hosts",
    "callback_handlers": r"state\.callback_handlers", "gevent Event": r"gevent\.event",
    "click params": r"params\.get\(", "is_host_in_limit": r"\.is_host_in_limit\b",
}
PRODUCT = ("deploys", "roles", "facts", "gpuhost", "inventories", "vagrant")


@pytest.mark.parametrize("name", sorted(INTERNAL))
def test_each_internal_name_lives_in_one_place(name):
    done = subprocess.run(
        ["git", "grep", "--untracked", "-l", "-E", INTERNAL[name], "--",
         *(f"{folder}/*.py" for folder in PRODUCT)],
        cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        pytest.skip(f"git grep unavailable: {done.stderr.strip()}")
    files = set(done.stdout.split()) - {"facts/pyinfra_api.py", "tests/unit/test_pyinfra_api.py"}
    assert not files, f"{name} used outside facts/pyinfra_api.py: {sorted(files)}"


def test_the_architecture_doc_lists_the_module():
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert re.search(r"facts/pyinfra_api\.py", text)
