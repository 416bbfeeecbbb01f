"""Xids of a GPU that `gpuhost recover` reset this boot (issue 26): the audit keeps them as
information, the metrics label them recovered="true" and the reset alert stays quiet, until a
new Xid comes on that GPU; another boot's record counts for nothing."""

from __future__ import annotations

import datetime
import json

from gpuhost.facts.assemble_recover import recovered_state
from gpuhost import health
from gpuhost.reports import alerts, audit, prom

TODAY = datetime.date(2026, 11, 24)
SLOT = "0000:07:00.0"
IDLE = {"pcie_gen_current": 1, "throttle_reasons_active": ["gpu_idle"]}


def xid48(n=1):
    return [{"pci_bus_id": "0000:07:00", "xid": 48, "gpu_instance_id": None, "text": "DBE"}] * n


def host(make_state, with_health, events, recovered):
    state = with_health(make_state(driver="580.95.05"), gpu=IDLE, host={"xid_events": events})
    state["health"]["recovered"] = recovered
    return state


def xid_finding(state):
    found = [f for f in health.findings(state, today=TODAY) if f["id"] == "xid-48"]
    assert len(found) == 1, found
    return found[0]


def test_a_recovered_gpus_xid_is_information_until_a_new_one_comes(make_state, with_health):
    before = xid_finding(host(make_state, with_health, xid48(), {}))
    assert before["severity"] == "critical" and "recovered" not in before
    after = xid_finding(host(make_state, with_health, xid48(), {SLOT: {"xid_count": 1}}))
    assert after["severity"] == "info" and after["recovered"] is True
    assert after["message"].startswith("handled: gpuhost recover reset this GPU")
    assert before["message"] in after["message"]
    # a new Xid on that GPU after the reset: critical again
    again = xid_finding(host(make_state, with_health, xid48(2), {SLOT: {"xid_count": 1}}))
    assert again["severity"] == "critical" and "recovered" not in again


def test_the_metrics_label_the_recovered_xid_and_the_reset_alert_skips_it(
        make_state, with_health, desired):
    def labels(recovered):
        document = audit.build({"h": host(make_state, with_health, xid48(), recovered)},
                               {"h": desired(nvidia_driver_version="580.95.05")},
                               generated_at="2026-11-24T10:00:00Z")
        text = prom.render(document["hosts"], document["generated_at"])
        return next(x for x in text.splitlines() if x.startswith("gpuhost_xid_events{"))
    assert 'recovered="false"' in labels({})
    assert 'recovered="true"' in labels({SLOT: {"xid_count": 1}})
    reset = next(r for r in alerts.rules() if r["alert"] == "GpuHostXidGpuResetRequired")
    assert 'recovered="false"' in reset["expr"]


def sections(text, rc=0):
    return {"recovered": {"rc": rc, "out": text}}


def test_only_this_boots_records_are_read():
    record = {SLOT: {"boot_id": "b1", "xid_count": 2, "ecc_volatile": 0},
              "0000:08:00.0": {"boot_id": "old", "xid_count": 5, "ecc_volatile": 0}}
    got = recovered_state(sections("boot_id: b1\n" + json.dumps(record)))
    assert got == {SLOT: {"xid_count": 2, "xid_time": None, "ecc_volatile": 0}}
    assert recovered_state(sections("", rc=3)) == {}            # no file
    assert recovered_state(sections("cat: Permission denied", rc=1)) == {}
    assert recovered_state(sections("boot_id: b1\nnot json")) == {}


def test_a_new_xid_is_told_by_its_time_when_the_count_stays(make_state, with_health):
    """T4-11: the window read from the host keeps its size; the times tell the new line."""
    def timed(times):
        return [{**xid48()[0], "time": t} for t in times]
    record = {SLOT: {"xid_count": 2, "xid_time": 20.0}}
    same = xid_finding(host(make_state, with_health, timed((10.0, 20.0)), record))
    assert same["severity"] == "info" and same["recovered"] is True
    moved = xid_finding(host(make_state, with_health, timed((20.0, 31.0)), record))
    assert moved["severity"] == "critical" and "recovered" not in moved


def test_a_volatile_ecc_count_a_recovery_handled_asks_for_no_reset_again(make_state,
                                                                          with_health):
    """Build 5: after a successful reset the audit must not say "reset it" again for the
    same count (NVML: volatile counts restart only at a driver load)."""
    def finding(recovered, count=2):
        state = with_health(make_state(driver="580.95.05"),
                            gpu={**IDLE, "ecc_volatile_uncorrectable": count})
        state["health"]["recovered"] = recovered
        return next(f for f in health.findings(state, today=TODAY)
                    if f["id"] == "ecc-volatile-uncorrectable")
    assert finding({})["severity"] == "warning"
    handled = finding({SLOT: {"xid_count": 0, "ecc_volatile": 2}})
    assert handled["severity"] == "info" and handled["message"].startswith("handled:")
    assert finding({SLOT: {"xid_count": 0, "ecc_volatile": 2}}, count=3)["severity"] == "warning"
