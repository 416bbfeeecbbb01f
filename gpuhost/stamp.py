"""The converged stamp: a converged rerun of ``gpu_host`` costs one read (issue 27 item 7).

The last operation of a successful ``gpu_host`` run writes ``/var/lib/gpuhost/converged``
(root only, mode 600): the run's *digest* (every gpuhost setting of the host, the content of
the controller files those settings name, and gpuhost's own code) and the host's *witness*
as it was right then: one line per thing gpuhost put there or relies on

- ``kernel RELEASE``: the running kernel (a new kernel wants its headers);
- ``file PATH SHA256``: every file in ``WITNESS_FILES`` (repositories, keys, pins, daemon.json,
  containerd's and the toolkit's configuration, CDI specs in /etc/cdi, modprobe and
  modules-load files, gpuhost's units and scripts): hand edits, new and removed files;
- ``cache PATH SIZE MTIME``: the local repo packages in /var/cache/gpuhost (hundreds of MB:
  not hashed on every run);
- ``pkg NAME VERSION [STATUS]``: the NVIDIA, CUDA, kernel header, Docker, containerd, runc
  and dkms packages (the composite fact's own ``dpkg``/``rpm`` sections; a hold is a status);
- ``unit NAME ENABLED ACTIVE``: the daemons gpuhost installs, enables or configures.

The composite fact's section ``stamp`` (``SECTION``) computes the witness again on the host,
compares it there with the stamp's, and prints only the stamp's header and what differs
(nothing when there is no stamp). ``gpu_host`` then walks no role at all when ``stale(...)``
finds no difference and ``converged.judge`` finds the host as wanted with the driver loaded: the
host is exactly as a successful run left it, and that run wanted what this one wants. Any
difference (a setting, gpuhost's code, a hand-edited file, a package moved, a unit stopped,
a new kernel) or ``full_check: true`` walks every role as before, and the run's last
operation records the new stamp. Pure: no pyinfra, no I/O but gpuhost's own files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

PATH = "/var/lib/gpuhost/converged"
FORMAT = "gpuhost-converged 1"
CHANGED = "== changed =="  # between the stamp's header and what changed, in the section

# Every file gpuhost writes on a host, and the package manager files beside them (a
# repository someone adds next to gpuhost's can change what an install resolves to).
# Directories and missing files are skipped.
WITNESS_FILES = (
    "/etc/apt/sources.list", "/etc/apt/sources.list.d/*", "/etc/apt/preferences.d/*",
    "/etc/apt/apt.conf.d/*gpuhost*", "/etc/apt/keyrings/*", "/usr/share/keyrings/nvidia-*",
    "/usr/share/keyrings/gpuhost-nvidia-*", "/etc/pki/rpm-gpg/gpuhost-nvidia-*",
    "/etc/yum.repos.d/*", "/etc/pki/rpm-gpg/docker-ce.asc", "/etc/pki/rpm-gpg/nvidia-*",
    "/etc/dnf/dnf.conf", "/etc/dnf/modules.d/*", "/etc/dnf/plugins/versionlock.list",
    "/etc/dkms/*.conf", "/etc/dkms/gpuhost-*", "/etc/dkms/framework.conf.d/*",
    "/etc/modprobe.d/gpuhost-*", "/etc/modprobe.d/nvidia*", "/etc/modules-load.d/nvidia*",
    "/etc/docker/daemon.json", "/etc/containerd/config.toml", "/etc/containerd/conf.d/*",
    "/etc/nvidia-container-runtime/config.toml", "/etc/cdi/*", "/etc/nvidia-imex/*",
    "/etc/systemd/system/gpuhost-*", "/etc/systemd/system/*.service.d/*",
    "/etc/gpuhost/*", "/etc/gpuhost/*/*", "/usr/local/sbin/gpuhost-*",
    "/var/lib/gpuhost/docker-daemon-json-keys.json", "/var/lib/gpuhost/driver-upgrade.json",
)
CACHE_FILES = "/var/cache/gpuhost/*"
UNITS = ("docker", "containerd", "nvidia-persistenced", "nvidia-fabricmanager", "nvidia-imex",
         "nvlsm", "gpuhost-cdi-spec")
# Oneshot units that only a boot runs: the deploy enables them ("inactive" after it), the next
# boot runs them ("active"), so their active state is no witness of a change and is written
# as "-" (issue 37: one change on the first run after every reboot in cdi mode).
BOOT_ONESHOTS = ("gpuhost-cdi-spec",)

# The witness, as POSIX shell: it reads the package lists the composite fact's ``dpkg`` and
# ``rpm`` sections left in $_gh_dpkg and $_gh_rpm, and the release its ``kernel`` section left
# in $_gh_kernel (roles/stamp.py sets the package lists itself before it writes a stamp, and
# uname answers there). A subshell: ``set --`` must not touch the caller's arguments.
WITNESS = (
    '( r=${_gh_kernel%% *}; [ -n "$r" ] || r=$(uname -r); echo "kernel $r"; set --; '
    f"for f in {' '.join(WITNESS_FILES)}; do "
    'test -f "$f" && set -- "$@" "$f"; done; '
    'if [ $# -gt 0 ]; then sha256sum -- "$@" 2>/dev/null | '
    "sed -n 's/^\\([0-9a-f]\\{64\\}\\)  \\(.*\\)$/file \\2 \\1/p'; fi; set --; "
    f'for f in {CACHE_FILES}; do test -f "$f" && set -- "$@" "$f"; done; '
    "if [ $# -gt 0 ]; then stat -c 'cache %n %s %Y' -- \"$@\"; fi; "
    'printf "%s\\n" "$_gh_dpkg" "$_gh_rpm" | sed -n "/./s/^/pkg /p"; '
    "if command -v systemctl >/dev/null 2>&1; then systemctl show -p Id -p UnitFileState "
    f"-p ActiveState {' '.join(unit + '.service' for unit in UNITS)} 2>/dev/null | "
    "awk -F= '/^Id=/ {i=$2} /^UnitFileState=/ {e=$2} /^ActiveState=/ {a=$2} "
    "function out() {if (i in boot) a = \"-\"; print \"unit\", i, e, a} "
    "BEGIN {" + " ".join(f'boot[\"{u}.service\"] = 1;' for u in BOOT_ONESHOTS) + "} "
    "/^$/ {if (i != \"\") out(); i=e=a=\"\"} "
    "END {if (i != \"\") out()}'; fi; true )"
)

# The composite fact's section (exit 3: no stamp): the stamp's header, then only what differs
# between the stamp's witness and the witness of now, compared on the host by one awk (so no
# digest of a file, some of which hold credentials such as a proxy URL, leaves it): "- LINE"
# as the stamp has it, "+ LINE" as it is now, a file line without its sha256; last, how many
# things the witness watches. Each side is a set: a line twice counts once.
_COMPARE = (
    "awk -v s=" + PATH + " -v c='" + CHANGED + "' "
    "'function bare(l) {if (l ~ /^file / && l ~ / [0-9a-f]+$/) {t = l; sub(/ [0-9a-f]+$/, \"\", t); "
    "if (length(l) - length(t) == 65) return t} return l} "
    "FILENAME == s {if (h) old[$0] = 1; else if ($0 == \"--\") h = 1; else print; next} "
    "!($0 in now) {now[$0] = 1; n[$1]++; if (!($0 in old)) add[++a] = $0} "
    "END {print c; for (l in old) if (!(l in now)) print \"- \" bare(l); "
    "for (i = 1; i <= a; i++) print \"+ \" bare(add[i]); "
    "printf \"watched %d %d %d\\n\", n[\"file\"], n[\"pkg\"], n[\"unit\"]}' "
    + PATH + " -"
)
SECTION = f"test -f {PATH} || exit 3; {WITNESS} | {_COMPARE}"


def parse(rc: int | None, out: str) -> dict[str, Any] | None:
    """The ``stamp`` section: ``{"format", "digest", "version", "written", "changes",
    "watched"}`` (``changes``: ``[("-" | "+", witness line)]``, a file line without its
    digest; ``watched``: ``{"file", "pkg", "unit"}`` counts of now), or None when the host
    has no stamp. A stamp gpuhost cannot read (another format, cut short) is stale."""
    if rc != 0 or not out.strip():
        return None
    head, _, rest = out.partition(f"\n{CHANGED}\n")
    fields: dict[str, Any] = {"format": None, "digest": None, "version": None, "written": None,
                              "changes": [], "watched": {}}
    lines = head.splitlines()
    fields["format"] = lines[0].strip() if lines else None
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        if key in ("digest", "version", "written"):
            fields[key] = value.strip()
    for line in rest.splitlines():
        if line[:2] in ("- ", "+ ") and line[2:].strip():
            fields["changes"].append((line[0], " ".join(line[2:].split())))
        elif line.startswith("watched "):
            counts = line.split()[1:]
            if len(counts) == 3 and all(c.isdigit() for c in counts):
                fields["watched"] = dict(zip(("file", "pkg", "unit"), map(int, counts), strict=True))
    return fields


def _split(line: str) -> tuple[str, str]:
    """(what a witness line is about, its value): ``("file /etc/docker/daemon.json", "")``,
    ``("pkg docker-ce", "VERSION STATUS")``, ``("kernel", RELEASE)``."""
    parts = line.split()
    width = 1 if parts[0] == "kernel" else 2
    return " ".join(parts[:width]), " ".join(parts[width:])


def differences(changes: list[tuple[str, str]]) -> list[str]:
    """What changed, one phrase per thing, from the section's ``- OLD`` / ``+ NEW`` lines."""
    before = dict(_split(line) for sign, line in changes if sign == "-")
    after = dict(_split(line) for sign, line in changes if sign == "+")
    found = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        kind, _, name = key.partition(" ")
        if kind == "file":
            found.append(f"new file {name}" if old is None else
                         f"{name} is gone" if new is None else f"{name} changed")
        elif old is None:
            found.append(f"{key} appeared")
        elif new is None:
            found.append(f"{key} is gone")
        else:
            found.append(f"{key}: {old or '-'} -> {new or '-'}")
    return found


def stale(stamp: Mapping[str, Any] | None, digest: str) -> list[str]:
    """Why the host is not as gpuhost's last successful run left it (empty: it is)."""
    if stamp is None:
        return ["no stamp of a successful gpuhost run"]
    if stamp.get("format") != FORMAT:
        return [f"a stamp gpuhost cannot read ({stamp.get('format')!r})"]
    if stamp.get("digest") != digest:
        return ["settings or gpuhost's code changed since the last run"]
    if not stamp.get("watched"):
        return ["the stamp's witness was not read (the section was cut short)"]
    return differences(stamp.get("changes") or [])


@cache
def code_digest() -> str:
    """sha256 over gpuhost's own code and data: every ``.py`` file of the packages
    ``gpuhost``, ``gpuhost.facts``, ``gpuhost.roles``, ``gpuhost.deploys`` and the tables in
    ``gpuhost/data``, each named by its path inside the package (so the same code gives the
    same digest in a checkout and in an installed wheel, whose folders are laid out apart)."""
    import gpuhost.deploys
    import gpuhost.facts
    import gpuhost.roles

    core = Path(__file__).resolve().parent
    roots = {"gpuhost": core}
    roots.update({module.__name__: Path(module.__file__).resolve().parent
                  for module in (gpuhost.facts, gpuhost.roles, gpuhost.deploys)})
    nested = {path for name, path in roots.items() if name != "gpuhost"}
    files: dict[str, bytes] = {}
    for name, root in roots.items():
        for path in root.rglob("*"):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if name == "gpuhost" and any(parent in nested for parent in path.parents):
                continue  # a wheel nests the other packages inside gpuhost/
            relative = path.relative_to(root).as_posix()
            if path.suffix == ".py" or (name == "gpuhost" and relative.startswith("data/")):
                files[f"{name}/{relative}"] = hashlib.sha256(path.read_bytes()).digest()
    digest = hashlib.sha256()
    for key in sorted(files):
        digest.update(key.encode() + b"\0" + files[key])
    return digest.hexdigest()


def _controller_file(path: str | None) -> str | None:
    """What the run reads from a controller file a setting names: its sha256 (small files),
    size and mtime (an image archive)."""
    if not path:
        return None
    try:
        file = Path(path)
        if file.stat().st_size > 16 * 1024 * 1024:
            stat = file.stat()
            return f"{stat.st_size} {int(stat.st_mtime)}"
        return hashlib.sha256(file.read_bytes()).hexdigest()
    except OSError:
        return None


IGNORED = ("full_check", "lock_wait", "lock_lease", "lock_break")  # settings that do not change what a run wants


def run_digest(settings: Any) -> str:
    """The digest of what this run wants of a host: its resolved ``Settings``, the controller
    files they name (``mig_config_file``, ``verify_image_archive``) and gpuhost's code."""
    values = {key: value for key, value in dataclasses.asdict(settings).items()
              if key not in IGNORED}
    values["_files"] = {key: _controller_file(values.get(key))
                        for key in ("mig_config_file", "verify_image_archive")}
    values["_code"] = code_digest()
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def summary(stamp: Mapping[str, Any]) -> str:
    """One line for a host found as wanted: what the witness covers and when it was made."""
    counts = {"file": 0, "pkg": 0, "unit": 0, **(stamp.get("watched") or {})}
    written = stamp.get("written")
    when = ""
    if written and str(written).isdigit():
        when = " of " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(written)))
    return (f"as wanted, unchanged since gpuhost's run{when}: {counts['file']} files, "
            f"{counts['pkg']} packages, {counts['unit']} units")
