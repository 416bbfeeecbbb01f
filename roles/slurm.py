"""Slurm around the driver upgrade and ``gpuhost recover`` (issue 26 item 4; docs/slurm.md).

On a host that runs ``slurmd`` (or with ``slurm: true``), before any GPU client stops:
``scontrol update nodename=NODE state=drain reason="gpuhost: ..."`` on the host, then wait
(``slurm_drain_timeout``, progress every 5 s) until no job runs on the node. After the health
gate passed: ``state=resume``, only while the node still carries gpuhost's reason. A node
that someone else drained before keeps its drain and reason (gpuhost waits for its jobs all
the same). A failed gate leaves the node drained with a reason that says so. Decisions in
``gpuhost.slurm``; what the host says in ``gpuhost.facts.slurm.SlurmNode``, read when the step runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpuhost.facts.pyinfra_api import joined
from gpuhost.facts.slurm import SlurmNode
from gpuhost import slurm
from gpuhost.roles.common import executing, fail_command

POLL = 5  # seconds between two looks at the node's jobs


def active(config: Any, state: Mapping[str, Any] | None) -> bool:
    """Whether this host's Slurm node is drained and resumed (the ``slurm`` setting, and for
    ``auto`` the host state's ``slurm`` value read when the run was prepared)."""
    return slurm.on(config.slurm, (state or {}).get("slurm"))


def _update(node: str, *args: str) -> StringCommand:
    return StringCommand("timeout 30 scontrol update", QuoteString(f"nodename={node}"), *args)


def _wait(node: str, timeout: int) -> StringCommand:
    """Until slurmctld shows no job on the node (not ALLOCATED, MIXED, COMPLETING)."""
    return joined(
        "n=", QuoteString(node), "; t=", QuoteString(str(int(timeout))), "; i=0; while :; do "
        's=$(timeout 30 scontrol show node -o "$n" 2>&1 | grep -o "State=[^ ]*"); '
        'case "$s" in *ALLOCATED*|*MIXED*|*COMPLETING*) ;; '
        'State=*) echo "Slurm node $n: $s, no job runs"; break;; '
        '*) echo "gpuhost: cannot read Slurm node $n from slurmctld: start slurmctld, then '
        'rerun (the node stays drained)" >&2; exit 1;; esac; '
        'if [ "$i" -ge "$t" ]; then echo "gpuhost: jobs still run on Slurm node $n after ${t}s '
        '($s): let them end or scancel them, then rerun; no GPU client was stopped and the node '
        'stays drained" >&2; exit 1; fi; '
        'echo "waiting for the jobs on Slurm node $n to end ($s, ${i}s of ${t}s)"; '
        f"sleep {POLL}; i=$((i+{POLL})); done")


@operation(is_idempotent=False)
def drain(reason: str, timeout: int):
    """
    Drain this host's Slurm node with gpuhost's reason and wait until no job runs on it; a
    node someone else drained keeps its drain (only its jobs are waited for).

    + reason: the drain reason (``gpuhost.slurm.reason``)
    + timeout: seconds to wait for running jobs (``slurm_drain_timeout``)
    """
    if not executing():
        host.noop(f"Slurm's node is drained when the run gets here ({reason})")
        return
    state = host.get_fact(SlurmNode)
    step, why = slurm.drain_step(state)
    if step == "error":
        yield fail_command(f"cannot drain the Slurm node, nothing was changed: {why}")
        return
    node = slurm.node_name(state)
    if step == "drain":
        yield _update(node, "state=drain", QuoteString(f"reason={reason}"))
    else:
        host.noop(why)
    yield _wait(node, timeout)


@operation(is_idempotent=False)
def resume():
    """
    Return this host's Slurm node to service (``state=resume``) when it carries gpuhost's own
    drain reason; a drain of someone else's is left as it is.
    """
    if not executing():
        host.noop("Slurm's node is resumed when the run gets here")
        return
    state = host.get_fact(SlurmNode)
    step, why = slurm.resume_step(state)
    if step == "error":
        yield fail_command(f"the Slurm node stays drained: {why}")
        return
    if step != "resume":
        host.noop(why)
        return
    yield _update(slurm.node_name(state), "state=resume")


def failed_gate_commands(what: str, why: str) -> list[StringCommand]:
    """Commands (for an operation that is about to fail the host) that leave gpuhost's drain in
    place with a reason saying the gate failed; none when the node is not drained by gpuhost."""
    state = host.get_fact(SlurmNode)
    node = (state or {}).get("node")
    if not slurm.ours(node) or not slurm.is_drained(node):
        return []
    return [_update(slurm.node_name(state), "state=drain",
                    QuoteString(f"reason={slurm.failed_reason(what, why)}"))]
