"""Value checks of gpuhost settings, and the URL rules they share with the artifact fetcher.

Each ``check_*`` returns a list of problems (without the "key: " prefix), an empty list when
the value is good. Values that reach a shell are held to strict patterns here, and are still
quoted by the roles. The settings model (``gpuhost.settings``) names the check of each key.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gpuhost.distro import DISTRO_TAGS

TOOLKIT_RE = re.compile(r"^\d+\.\d+\.\d+(-\d+)?$")
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
SERVICE_RE = re.compile(r"^[A-Za-z0-9@._-]+$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
# NVML's GPU instance profile ids seen so far reach 67 (RTX PRO 6000 Blackwell's 1g.24gb-me:
# gpuhost/data/mig_profiles.json); nvidia-smi takes an id or a name.
MIG_PROFILE_ID_MAX = 255
# Package-manager variables allowed inside repository URLs (apt: $(ARCH); dnf: the others).
URL_VARIABLES = ("$(ARCH)", "$basearch", "$releasever")
URL_SCHEMES = ("http", "https", "file")
_URL_FORBIDDEN = re.compile(r"[\s'\"`\\;|&<>$\x00-\x1f\x7f]")


def mask_url(url: str) -> str:
    """``url`` with credentials and query values hidden: https://***@host/p?***"""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))


def show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(mask_url(value) if "://" in value else value)
    return repr(value)


def masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url(value) if "://" in value else value
    if isinstance(value, Mapping):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(masked(v) for v in value)
    return value


def _not_string(value: Any, example: str, key: str) -> str:
    kind = ("a boolean" if isinstance(value, bool) else
            "a number" if isinstance(value, (int, float)) else type(value).__name__)
    return (f"{show(value)} is {kind}, not a string: quote it (in Python data \"{example}\", "
            f"on the command line --data '{key}=\"{example}\"')")


def on_mirror(url: str, mirrors) -> bool:
    """True when ``url`` is at or below one of the ``mirrors`` base URLs (same scheme,
    host and port; path prefix on a "/" boundary)."""
    u = urlsplit(url)
    for mirror in mirrors:
        m = urlsplit(str(mirror).rstrip("/"))
        if (u.scheme, u.netloc.rsplit("@", 1)[-1]) != (m.scheme, m.netloc.rsplit("@", 1)[-1]):
            continue
        if u.path == m.path or u.path.startswith(m.path + "/"):
            return True
    return False


def is_local_source(value: str) -> bool:
    """A controller path or a file:// URL (always allowed offline)."""
    return not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value) or value.startswith("file://")


def check_version(regex, example, want):
    def check(key, value):
        if not isinstance(value, str):
            return [_not_string(value, example, key)]
        if not regex.fullmatch(value):
            return [f"{show(value)} is not {want} (want digits and dots like \"{example}\")"]
        return []
    return check


def check_choice(*allowed, nullable=False):
    def check(key, value):
        if value is None and nullable:
            return []
        if value not in allowed:
            return [f"{show(value)} is not allowed (want one of {', '.join(map(str, allowed))}"
                    + (" or null)" if nullable else ")")]
        return []
    check.allowed = allowed + ((None,) if nullable else ())
    return check


def check_bool(key, value):
    if not isinstance(value, bool):
        return [f"{show(value)} is not a boolean (want true or false, unquoted)"]
    return []


def check_seconds(low, high):
    """A check for a whole number of seconds from ``low`` to ``high``."""
    def check(key, value):
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{show(value)} is not a whole number of seconds (like {max(low, 300)})"]
        if not low <= value <= high:
            return [f"{value} is out of range (want {low} to {high} seconds)"]
        return []
    return check


def check_path(key, value, nullable=False):
    if value is None and nullable:
        return []
    if not isinstance(value, str) or not value:
        return [f"{show(value)} is not a path (want an absolute path as a string)"]
    if re.search(r"[\x00-\x1f\x7f]", value):
        return [f"{show(value)} contains a newline or control character"]
    if not (value.startswith("/") or value == "~" or value.startswith("~/")):
        return [f"{show(value)} is not an absolute path (want /... or ~/...)"]
    return []


def check_url(key, value, nullable=False, schemes=URL_SCHEMES):
    if value is None and nullable:
        return []
    if not isinstance(value, str) or not value:
        return [f"{show(value)} is not a URL (want a string like \"https://host/path\")"]
    stripped = value
    for var in URL_VARIABLES:
        stripped = stripped.replace(var, "")
    bad = _URL_FORBIDDEN.search(stripped)
    if bad:
        return [f"{show(value)} contains {bad.group()!r}: URLs may not hold whitespace, quotes or "
                f"shell characters (allowed variables: {', '.join(URL_VARIABLES)})"]
    parts = urlsplit(value)
    if parts.scheme not in schemes or (parts.scheme != "file" and not parts.hostname):
        return [f"{show(value)} is not a {'/'.join(schemes)} URL"]
    return []


def check_url_map(keys):
    def check(key, value):
        if isinstance(value, str):
            return check_url(key, value)
        if not isinstance(value, Mapping) or not value:
            return [f"{show(value)} is not a URL or a mapping of {'/'.join(keys)} to URLs"]
        problems = [f"unknown key {k!r} (want {', '.join(keys)})" for k in value if k not in keys]
        for k, v in value.items():
            problems += [f"[{k}] {p}" for p in check_url(key, v)]
        return problems
    return check


def _check_source(tag, value):
    if not isinstance(value, Mapping):
        return [f"[{tag}] {show(value)} is not a mapping "
                "(want {\"url\" or \"path\": ..., \"sha256\": ...})"]
    problems = [f"[{tag}] unknown key {k!r} (want url or path, and sha256)"
                for k in value if k not in ("url", "path", "sha256")]
    if ("url" in value) == ("path" in value):
        problems.append(f"[{tag}] give exactly one of url or path")
    elif "url" in value:
        problems += [f"[{tag}] url: {p}" for p in check_url(tag, value["url"])]
    else:
        problems += [f"[{tag}] path: {p}" for p in check_path(tag, value["path"])]
    sha = value.get("sha256")
    if not isinstance(sha, str) or not SHA256_RE.fullmatch(sha):
        problems.append(f"[{tag}] sha256: {show(sha)} is not a sha256 (want 64 hex digits; "
                        "`sha256sum FILE` prints it)")
    return problems


def check_local_repo(key, value):
    if not isinstance(value, Mapping):
        return [f"{show(value)} is not a mapping of distro tag to {{url or path, sha256}} "
                f"(tags: {', '.join(DISTRO_TAGS)})"]
    problems = [f"unknown distro tag {t!r} (want {', '.join(DISTRO_TAGS)})"
                for t in value if t not in DISTRO_TAGS]
    for tag, src in value.items():
        problems += _check_source(tag, src)
    return problems


def check_list_of(item_check, what):
    def check(key, value):
        if not isinstance(value, (list, tuple)):
            return [f"{show(value)} is not a list of {what}"]
        return [f"[{i}] {p}" for i, item in enumerate(value) for p in item_check(key, item)]
    return check


def check_service(key, value):
    if not isinstance(value, str) or not SERVICE_RE.fullmatch(value):
        return [f"{show(value)} is not a service name (letters, digits, @ . _ -)"]
    return []


def check_daemon_settings(key, value):
    if not isinstance(value, Mapping):
        return [f"{show(value)} is not a mapping of daemon.json keys"]
    problems = []
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        problems.append(f"is not JSON-serialisable: {exc}")
    if "default-runtime" in value:
        problems.append("\"default-runtime\" is managed by gpuhost: use nvidia_default_runtime: true")
    if isinstance(value.get("runtimes"), Mapping) and "nvidia" in value["runtimes"]:
        problems.append("runtimes.nvidia is managed by gpuhost (nvidia-ctk): remove it")
    if not problems:
        # Docker's documented option types; unknown keys are a cross check (opt-in setting)
        from gpuhost.runtime.daemon_json import option_problems

        problems += option_problems(dict(value), allow_unknown=True)
    return problems


def check_image(key, value):
    if value is None:
        return []
    if not isinstance(value, str) or not IMAGE_RE.fullmatch(value):
        return [f"{show(value)} is not an image reference (like \"nvidia/cuda:12.8.1-base-ubuntu24.04\")"]
    return []


def check_mig_layout(key, value):
    """mig_layout: GPU instance profiles in mig-parted's grammar (gpuhost.mig.grammar: "1g.10gb",
    "1g.24gb+me.all", "1g.24gb-me", "2g.48gb+gfx", a "MIG " prefix allowed) or profile ids.
    Whether they fit the host's GPU is judged per model (gpuhost.mig.tables.mig_layout_valid)."""
    from gpuhost.mig.grammar import parse_profile

    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        return [f"{show(value)} is not a list of MIG profiles (like [\"3g.20gb\", \"3g.20gb\"]) or null"]
    problems = []
    for i, item in enumerate(value):
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item <= MIG_PROFILE_ID_MAX:
                problems.append(f"[{i}] {item} is not a MIG profile id (0 to {MIG_PROFILE_ID_MAX})")
            continue
        if not isinstance(item, str):
            problems.append(f"[{i}] {show(item)} is not a MIG profile name like \"1g.10gb\" or a profile id")
            continue
        text = item[4:] if item.startswith("MIG ") else item
        parsed, why = parse_profile(text)
        if why:
            problems.append(f"[{i}] {why}")
        elif parsed.compute_instance_form:
            problems.append(f"[{i}] {show(item)} names compute instances; mig_layout creates GPU "
                            f"instances: write \"{parsed.gpu_instance}\"")
    return problems


def check_command(key, value):
    if value is None:
        return []
    if not isinstance(value, str) or not value.strip():
        return [f"{show(value)} is not a command (want a string or null)"]
    if re.search(r"[\x00\n\r]", value):
        return [f"{show(value)} contains a newline or NUL (want one command line)"]
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
    except ValueError as exc:
        return [f"{show(value)} has a broken {{placeholder}}: {exc} (write {{{{ for a literal brace)"]
    if fields - {"host"}:
        return [f"{show(value)} uses unknown placeholders {sorted(fields - {'host'})} (only {{host}})"]
    return []
