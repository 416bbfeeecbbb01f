"""The plan worker for the session (tests/plans/plan_runner.py, tests/plans/zygote.py): the
plan tests' ``python harness.py ...`` commands run as children forked from one process that
imported gevent and pyinfra once. ``GPUHOST_TEST_SUBPROCESS=1``: a fresh process each, as
from the command line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.plans import plan_runner

HERE = Path(__file__).resolve().parent


def _wanted() -> bool:
    return not os.environ.get("GPUHOST_TEST_SUBPROCESS")


def pytest_collection_finish(session):
    """Start the worker as soon as plan tests are selected: its imports (about a second)
    go on while the tests before them run."""
    if _wanted() and plan_runner.WORKER is None and any(
            HERE in Path(str(item.path)).parents for item in session.items):
        plan_runner.WORKER = plan_runner.PlanWorker()
        plan_runner.WORKER.start()


@pytest.fixture(scope="session", autouse=True)
def plan_worker():
    if not _wanted():
        yield None
        return
    if plan_runner.WORKER is None:
        plan_runner.WORKER = plan_runner.PlanWorker()
        plan_runner.WORKER.start()
    worker = plan_runner.WORKER
    try:
        yield worker
    finally:
        plan_runner.WORKER = None
        worker.close()


def pytest_sessionfinish(session):
    """A worker started for plan tests that then did not run (all skipped, interrupted)."""
    if plan_runner.WORKER is not None:
        plan_runner.WORKER.close()
        plan_runner.WORKER = None
