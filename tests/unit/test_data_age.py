"""`gpuhost data-age`: every vendor data file's _date, the ones older than six months."""
from __future__ import annotations

import datetime as dt
import io

from gpuhost import cli
from gpuhost.reports import data_age


def test_every_vendor_data_file_has_a_source_and_a_date():
    rows = data_age.ages(dt.date(2026, 11, 27))
    names = {r["file"] for r in rows}
    assert {"nvidia_supported_gpus.json", "cuda_drivers.json", "nvidia_driver_branches.json",
            "gpu_models.json", "nvidia_xid_catalog.json"} <= names
    assert all(r["date"] and r["source"] for r in rows), rows


def test_files_older_than_six_months_are_named_and_exit_1():
    newest = max(dt.date.fromisoformat(r["date"]) for r in data_age.ages(dt.date.today()))
    out = io.StringIO()
    assert data_age.run(newest + dt.timedelta(days=184), out=out) == 1
    assert "STALE" in out.getvalue() and "older than 183 days" in out.getvalue()
    oldest = min(dt.date.fromisoformat(r["date"]) for r in data_age.ages(dt.date.today()))
    out = io.StringIO()
    assert data_age.run(oldest + dt.timedelta(days=10), out=out) == 0
    assert "STALE" not in out.getvalue()


def test_the_cli_command(capsys):
    assert cli.main(["data-age", "--today", "2000-01-01"]) == 0
    assert "nvidia_supported_gpus.json" in capsys.readouterr().out
    assert cli.main(["data-age", "--today", "2099-01-01"]) == 1
