"""Every non-public pyinfra name gpuhost uses, behind one door (issue 27 item 4).

pyinfra's public API (``pyinfra.host``, ``state``, ``@operation``, ``@deploy``, facts and
operations) covers almost everything; the few names below are pyinfra internals that can
move in any release. gpuhost imports them only from here, and
``tests/unit/test_pyinfra_api.py`` checks that each still exists with the signature gpuhost
calls, so moving past pyinfra 3.10 (pinned in pyproject.toml) is a deliberate step: run that
test against the new version, fix this module, then widen the pin. docs/architecture.md
("pyinfra's non-public names") lists them.

It lives in ``facts/``, the lowest floor that may import pyinfra (``gpuhost/`` imports none).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gevent.event import Event
from pyinfra.api import StringCommand
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_host
from pyinfra.operations.util import any_changed as _any_changed
from pyinfra.operations.util.files import generate_color_diff

# The click parameter names of pyinfra's CLI command (pyinfra_cli.main.cli) that
# inventories/preflight.py reads from click's current context.
CLI_PARAMS = ("operations", "data", "group_data", "limit", "exclude")

__all__ = ["CLI_PARAMS", "cli_values", "RunShared", "StateStage", "any_changed", "callback_handlers",
           "color_diff", "executing", "host_failed", "in_limit", "joined", "use_host"]


def cli_values(params: dict[str, Any]) -> tuple[tuple[Any, ...], ...]:
    """The values of CLI_PARAMS, in that order, from click's ``context.params`` of pyinfra's
    command (``()`` for one not given)."""
    return tuple(tuple(params.get(name) or ()) for name in CLI_PARAMS)


def executing(state: Any) -> bool:
    """True while pyinfra executes operations (False while it prepares the plan):
    ``state.current_stage`` against ``StateStage.Execute``."""
    return state.current_stage == StateStage.Execute


def use_host(target: Any):
    """Context manager: make ``target`` pyinfra's current host (``ctx_host.use``), so that
    facts can be read for another host than the one whose deploy code runs."""
    return ctx_host.use(target)


def host_failed(state: Any, target: Any) -> bool:
    """Has pyinfra marked ``target`` failed in this run (``state.failed_hosts``)?"""
    return target in state.failed_hosts


def in_limit(state: Any, target: Any) -> bool:
    """Is ``target`` one of this run's hosts: within ``--limit``/``--exclude``, whether or not
    pyinfra could connect to it (``State.is_host_in_limit``)?"""
    return state.is_host_in_limit(target)


def callback_handlers(state: Any) -> list[Any]:
    """The callback handlers registered with this state (``state.callback_handlers``)."""
    return list(state.callback_handlers)


def color_diff(current: list[str], desired: list[str]) -> Iterator[str]:
    """pyinfra's own coloured diff lines, as ``files.put`` shows them with ``--diff``
    (``pyinfra.operations.util.files.generate_color_diff``)."""
    return generate_color_diff(current, desired)


def any_changed(*operations: Any) -> Callable[[], bool]:
    """An ``_if=`` callable: did any of these operations change the host
    (``pyinfra.operations.util.any_changed``)."""
    return _any_changed(*operations)


def joined(*parts: Any) -> StringCommand:
    """A StringCommand whose parts are joined with no space (``_separator=""``), for a quoted
    directory followed by a glob: ``'/var/dir'/name-*.gpg``."""
    return StringCommand(*parts, _separator="")


class RunShared:
    """A value shared by every host of one pyinfra run through ``host.data``.

    pyinfra hands out shallow copies of data values (``copy.copy``); the copy of a RunShared
    is itself, so every host sees the same object. ``done`` is a gevent Event: pyinfra
    prepares hosts in parallel greenlets, and the ones that arrive late wait on it.
    """

    def __init__(self) -> None:
        self.done = Event()

    def __copy__(self) -> RunShared:
        return self

