"""One health finding's shape and order (``gpuhost.health``): ``{"id", "severity", "gpu",
"message"}``, critical first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEVERITIES = ("critical", "warning", "info")
HEALTH_STATUSES = ("healthy", "warning", "critical", "not_read")  # not_read: docs/health.md
_ORDER = {name: index for index, name in enumerate(SEVERITIES)}


def finding(ident: str, severity: str, gpu: str | None, message: str) -> dict[str, Any]:
    return {"id": ident, "severity": severity, "gpu": gpu, "message": " ".join(message.split())}


def sort_key(finding: Mapping[str, Any]) -> tuple:
    return (_ORDER[finding["severity"]], finding["id"], finding["gpu"] or "")
