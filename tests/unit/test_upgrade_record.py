"""The upgrade's failed event carries what pyinfra reported for the failing host."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from gpuhost.roles.upgrade.record import HostOutput


def test_lines_are_kept_per_host_behind_its_prefix_and_taken_once():
    handler = HostOutput()
    gpu04 = SimpleNamespace(name="gpu-04", print_prefix="\x1b[1m[gpu-04] \x1b[0m")
    gpu05 = SimpleNamespace(name="gpu-05", print_prefix="[gpu-05] ")
    handler.watch(gpu04)
    handler.watch(gpu05)
    log = logging.getLogger("gpuhost-test-record")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.error("\x1b[1m[gpu-04] \x1b[0m\x1b[31mError! Bad return status for module build\x1b[0m")
        log.error("[gpu-05] all good")
        log.error("not a host line")
        log.warning("[gpu-04] a warning is not command output")
    finally:
        log.removeHandler(handler)
    assert handler.take("gpu-04") == ["Error! Bad return status for module build"]
    assert handler.take("gpu-04") == []
    assert handler.take("gpu-05") == ["all good"]


def test_pyinfras_own_error_summary_is_not_command_output():
    handler = HostOutput()
    handler.watch(SimpleNamespace(name="gpu-04", print_prefix="[gpu-04] "))
    for func, text in (("print_host_combined_output", "[gpu-04] E: Sub-process /usr/bin/dpkg "
                        "returned an error code (1)"),
                       ("log_error_or_warning", "[gpu-04] Error: executed 2 commands")):
        record = logging.LogRecord("pyinfra", logging.ERROR, __file__, 1, text, None, None,
                                   func=func)
        handler.handle(record)
    assert handler.take("gpu-04") == ["E: Sub-process /usr/bin/dpkg returned an error code (1)"]
