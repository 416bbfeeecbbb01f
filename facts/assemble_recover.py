"""GPUs that ``gpuhost recover`` reset during this boot (the composite fact's ``recovered``
section: this boot's id, then gpuhost.health.recover.HANDLED as JSON)."""

from __future__ import annotations

import json
from typing import Any

from gpuhost.facts.sections import Sections, ok


def recovered_state(sections: Sections) -> dict[str, dict[str, Any]]:
    """``{bus_id: {"xid_count", "xid_time", "ecc_volatile"}}`` of this boot's recoveries; {} when none, when
    the file cannot be read (a non-root audit: the file is 0600) or is not gpuhost's."""
    text = ok(sections, "recovered")
    if not text:
        return {}
    first, _, rest = text.partition("\n")
    boot_id = first.removeprefix("boot_id:").strip() if first.startswith("boot_id:") else None
    try:
        handled = json.loads(rest)
    except ValueError:
        return {}
    if not boot_id or not isinstance(handled, dict):
        return {}
    return {
        bus_id: {"xid_count": entry.get("xid_count", 0), "xid_time": entry.get("xid_time"),
                 "ecc_volatile": entry.get("ecc_volatile", 0)}
        for bus_id, entry in handled.items()
        if isinstance(entry, dict) and entry.get("boot_id") == boot_id
    }
