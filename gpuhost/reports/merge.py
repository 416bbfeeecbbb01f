"""One report from the audits of several controllers (``gpuhost report merge``).

A fleet of thousands is audited in shards: each controller runs ``gpuhost audit INVENTORY
--limit GROUP --json SHARD.json`` over its part. ``merge()`` joins the shards' hosts into one
``gpuhost.audit/2`` document, recomputes the summary and the exit status, and records where
each shard came from. A host in two shards is an error that names it (a shard plan that
overlaps would count it twice). Pure; the CLI reads and writes the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuhost.reports import audit
from gpuhost.reports.hostlist import natural_key


class MergeError(ValueError):
    """Shards that cannot be merged; the message names the file and what to change."""


def merge(shards: Sequence[tuple[str, Mapping[str, Any]]], fail_on: str = "critical",
          ) -> dict[str, Any]:
    """The merged document of ``shards``: (label, e.g. the file name; document) pairs."""
    if not shards:
        raise MergeError("no shard to merge")
    if fail_on not in audit.FAIL_ON:
        raise MergeError(f"fail_on {fail_on!r}: want one of {', '.join(audit.FAIL_ON)}")
    owner: dict[str, str] = {}
    hosts: list[dict[str, Any]] = []
    cudas: dict[str, str] = {}
    stamps, records = [], []
    for label, doc in shards:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("hosts"), list):
            raise MergeError(f"{label}: not a gpuhost audit document (no hosts list)")
        if doc.get("schema") != audit.SCHEMA:
            raise MergeError(f"{label}: schema {doc.get('schema')!r}; merge reads "
                             f"{audit.SCHEMA} shards (audit that shard again with this gpuhost)")
        for host in doc["hosts"]:
            name = host["name"]
            if name in owner:
                raise MergeError(f"host {name} is in two shards, {owner[name]} and {label}: "
                                 "give every host to exactly one shard (--limit by group)")
            owner[name] = label
            hosts.append(dict(host))
        if doc.get("cuda"):
            cudas[label] = doc["cuda"]
        stamps.append(doc["generated_at"])
        records.append({"source": label, "generated_at": doc["generated_at"],
                        "hosts": len(doc["hosts"]), "exit_code": doc["summary"]["exit_code"]})
    if len(set(cudas.values())) > 1:
        answered = ", ".join(f"{label}: {cuda}" for label, cuda in cudas.items())
        raise MergeError(f"the shards answered different CUDA versions ({answered}): audit "
                         "every shard with the same --cuda")
    cuda = next(iter(cudas.values()), None)
    hosts.sort(key=lambda h: natural_key(h["name"]))
    return audit.document(hosts, cuda, max(stamps), fail_on, shards=records)
