"""Merge the nvidia runtime into Docker's daemon.json without losing anything (pure).

Principles (users of nvidia-ctk and config-management tools have been bitten by each):

- every key the user had stays, with its value, unless gpuhost is asked to set that key;
- an nvidia runtime already present counts as ours whether written ``args`` style
  (``nvidia-ctk``) or ``runtimeArgs`` style (older packages, hand-written), with a relative
  or an absolute path: it is left as written, not rewritten into our style;
- ``default-runtime`` is set to ``nvidia`` only when asked; when not asked, an existing
  ``default-runtime`` is left alone;
- comparison is on the parsed structure, so formatting and key order never cause a change.
"""

from __future__ import annotations

import copy
import json
from typing import Any

RUNTIME_NAME = "nvidia"
RUNTIME_BINARY = "nvidia-container-runtime"


def is_nvidia_runtime(entry: Any) -> bool:
    """An entry of ``runtimes`` that runs nvidia-container-runtime (any path, any args style)."""
    if not isinstance(entry, dict):
        return False
    path = entry.get("path")
    return isinstance(path, str) and path.rstrip().rsplit("/", 1)[-1] == RUNTIME_BINARY


def merge(
    existing: dict[str, Any],
    *,
    default_runtime: bool,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The daemon.json gpuhost wants, starting from ``existing`` (which is not modified).

    + existing: the parsed current file (``{}`` when absent)
    + default_runtime: make ``nvidia`` the default runtime
    + extra: keys from the ``docker_daemon_settings`` inventory setting; dicts are merged
      one level deep, other values replace the user's value for that key
    """
    merged = copy.deepcopy(existing)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **copy.deepcopy(value)}
        else:
            merged[key] = copy.deepcopy(value)
    runtimes = merged.get("runtimes")
    if not isinstance(runtimes, dict):
        runtimes = {}
    if not is_nvidia_runtime(runtimes.get(RUNTIME_NAME)):
        runtimes[RUNTIME_NAME] = {"args": [], "path": RUNTIME_BINARY}
    merged["runtimes"] = runtimes
    if default_runtime:
        merged["default-runtime"] = RUNTIME_NAME
    return merged


def render(config: dict[str, Any]) -> str:
    """The file's text: stable, readable, newline-terminated."""
    return json.dumps(config, indent=4, sort_keys=True) + "\n"


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Top-level keys whose value differs (for messages and diffs)."""
    keys = set(before) | set(after)
    return sorted(key for key in keys if before.get(key) != after.get(key))


def invalid_message(path: str, error: str) -> str:
    """What gpuhost says about a daemon.json that is not valid JSON: the parser's reason
    alone (``Expecting ',' delimiter at line 3 column 2``), that nothing was changed, and
    what to do."""
    reason = str(error)
    if "is not valid JSON: " in reason:
        reason = reason.split("is not valid JSON: ", 1)[1]
    reason = reason.removesuffix("; fix or remove the file")
    return (f"{path} is not valid JSON ({reason}); gpuhost left it untouched. "
            "Fix the file (or move it away) and run again.")
