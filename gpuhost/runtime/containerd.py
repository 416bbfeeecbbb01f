"""containerd's nvidia runtime as a drop-in file: the rules, without touching a host.

What ``nvidia-ctk runtime configure --runtime=containerd`` does in NVIDIA Container Toolkit
1.18.x (read in NVIDIA/nvidia-container-toolkit v1.18.2, ``pkg/config/engine/containerd``
and ``cmd/nvidia-ctk/runtime/configure``, 2026-11-24), and what gpuhost does instead:

- the drop-in is ``/etc/containerd/conf.d/99-nvidia.toml``; it holds ``version`` (the top
  config's) and a copy of the top config's whole CRI plugin table with the runtime added.
  The whole table, because containerd 1.6/1.7 merge an imported file's plugin tables by
  replacing them (``mergeConfig``: "Maps merged by keys, but values are replaced
  entirely"): a drop-in with only the runtime would drop the user's other CRI settings;
- the CRI plugin is ``io.containerd.grpc.v1.cri`` for config version 2 and
  ``io.containerd.cri.v1.runtime`` for version 3 (containerd 2.x); version 1 configs are
  edited in place by nvidia-ctk (no drop-in): gpuhost refuses them;
- the runtime ``nvidia`` copies the table of the default runtime (when it is not an
  ``nvidia*`` one), else ``runc``, else ``crun`` (so ``SystemdCgroup`` and the
  ``runtime_type`` are kept) and sets ``options.BinaryName`` to
  ``/usr/bin/nvidia-container-runtime``; with none of them it starts from
  ``runtime_type = "io.containerd.runc.v2"``, empty ``runtime_root``/``runtime_engine``,
  ``privileged_without_host_devices = false``;
- ``default_runtime_name = "nvidia"`` only when asked (``--set-as-default``); otherwise a
  default of ``nvidia`` is removed;
- nvidia-ctk then adds ``imports = [".../conf.d/*.toml"]`` to the top config.toml (keeping
  the user's imports since 1.18.1). gpuhost never rewrites a config.toml that exists: it
  checks that the file's imports already cover the drop-in and refuses the host with the
  line to add otherwise (see docs/containerd.md). With no config.toml at all gpuhost
  writes the one nvidia-ctk would write: ``version`` and ``imports`` only.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any

import tomli_w

CONFIG = "/etc/containerd/config.toml"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
IMPORT_PATTERN = "/etc/containerd/conf.d/*.toml"
RUNTIME = "nvidia"
BINARY = "/usr/bin/nvidia-container-runtime"
DEFAULT_RUNTIME_OPTIONS = {
    "runtime_type": "io.containerd.runc.v2",
    "runtime_root": "",
    "runtime_engine": "",
    "privileged_without_host_devices": False,
}
# containerd's built-in runc runtime (pkg/cri/config DefaultConfig in 1.6/1.7,
# internal/cri/config in 2.x: Type io.containerd.runc.v2, options at their zero values)
CONTAINERD_RUNC = {"runtime_type": "io.containerd.runc.v2"}
# plugin ids that, when disabled, leave kubelet without the CRI runtime service
CRI_PLUGIN_IDS = ("cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
HEADER = ("# Written by gpuhost (containerd_nvidia_runtime): the nvidia runtime for containerd's\n"
          "# CRI plugin, as `nvidia-ctk runtime configure --runtime=containerd` writes it.\n"
          "# Regenerated from {config} on every run; edit that file, not this one.\n")
TOP_HEADER = ("# Written by gpuhost because the host had no containerd config.toml: containerd's\n"
              "# defaults plus the drop-in directory (what nvidia-ctk writes on such a host).\n")


class ContainerdConfigError(ValueError):
    """A config gpuhost cannot (or must not) build a working drop-in for."""


def parse(text: str, path: str = CONFIG) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ContainerdConfigError(f"{path} is not valid TOML ({error}); gpuhost changed nothing") from None


def major_version(containerd_version: str | None) -> int | None:
    """``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`` or
    ``containerd containerd.io 1.7.27 05044ec...`` or ``... v2.1.4 ...`` -> 1 or 2."""
    for word in (containerd_version or "").split()[2:3]:
        found = re.match(r"v?(\d+)\.\d+", word)
        if found:
            return int(found.group(1))
    return None


def config_version(config: dict[str, Any], containerd_major: int | None) -> int:
    """The config's version as containerd (and nvidia-ctk) read it: no ``version`` key in a
    non-empty file is version 1; an empty file gets the running containerd's own."""
    if not config:
        return 3 if (containerd_major or 1) >= 2 else 2
    version = config.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ContainerdConfigError(f"version = {version!r} in the containerd config is not a number")
    return version


def cri_plugin(version: int) -> str:
    return "io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"


def _covers(pattern: str, base_dir: str, drop_in: str) -> bool:
    if not isinstance(pattern, str):
        return False
    full = pattern if pattern.startswith("/") else posixpath.join(base_dir, pattern)
    full = posixpath.normpath(full)
    # containerd resolves each import with filepath.Glob: '*' never crosses a '/'
    return PurePosixPath(drop_in).match(full) and full.count("/") == drop_in.count("/")


def problems(config: dict[str, Any], config_path: str, version: int,
             containerd_major: int | None, drop_in: str = DROP_IN) -> list[str]:
    """Why a drop-in at ``drop_in`` would not be in effect for kubelet with this top config
    (empty: it would). Each message says what to change in the user's file."""
    found = []
    if version < 2:
        found.append(
            f"{config_path} is a version 1 config (no 'version = 2' line): containerd reads "
            "drop-in files only with version 2 or 3 (nvidia-ctk edits version 1 files in place, "
            "gpuhost does not); migrate it (`containerd config migrate` on containerd 1.7+ or "
            "`containerd config default` as a start) and run again")
    if version > 2 and containerd_major is not None and containerd_major < 2:
        found.append(f"{config_path} says version = {version}, which containerd "
                     f"{containerd_major}.x does not read (version 3 is containerd 2.x)")
    disabled = config.get("disabled_plugins") or []
    off = [p for p in disabled if p in CRI_PLUGIN_IDS] if isinstance(disabled, list) else []
    if off:
        found.append(
            f"{config_path} disables containerd's CRI plugin (disabled_plugins = {off!r}, as "
            "Docker's containerd.io ships it): kubelet cannot use this containerd, so an nvidia "
            "runtime for it would be unused; remove that entry (a Kubernetes node needs CRI)")
    imports = config.get("imports") or []
    if not isinstance(imports, list):
        imports = []
    base = posixpath.dirname(config_path)
    if not any(_covers(p, base, drop_in) for p in imports):
        shown = ", ".join(repr(p) for p in imports) or "none"
        found.append(
            f"{config_path} does not import {posixpath.dirname(drop_in)} (imports: {shown}), so "
            f"containerd would never read {drop_in}; gpuhost does not rewrite your config.toml: "
            f"add the line imports = [\"{IMPORT_PATTERN}\"] above its first [table] (or add "
            "that pattern to your imports) and run again (docs/containerd.md)")
    return found


def _runtimes(cri: dict[str, Any]) -> dict[str, Any]:
    runtimes = (cri.get("containerd") or {}).get("runtimes") or {}
    return runtimes if isinstance(runtimes, dict) else {}


def base_runtime_options(cri: dict[str, Any]) -> dict[str, Any]:
    """The runtime table ``nvidia`` starts from (nvidia-ctk's GetDefaultRuntimeOptions)."""
    default = (cri.get("containerd") or {}).get("default_runtime_name")
    names = [default] if isinstance(default, str) and default and not default.startswith("nvidia") else []
    runtimes = _runtimes(cri)
    for name in [*names, "runc", "crun"]:
        if isinstance(runtimes.get(name), dict):
            return _copy(runtimes[name])
    return dict(DEFAULT_RUNTIME_OPTIONS)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def drop_in_config(config: dict[str, Any], version: int, default_runtime: bool = False,
                   binary: str = BINARY, enable_cdi: bool = False) -> dict[str, Any]:
    """The drop-in's content (as data) for this top config; ``enable_cdi``: the CRI plugin's
    ``enable_cdi = true`` (nvidia-ctk ``--cdi.enabled``: ``plugins.<CRI plugin>.enable_cdi``,
    pkg/config/engine/containerd EnableCDI, v1.18.2), for container_runtime_mode cdi."""
    plugin = cri_plugin(version)
    cri = _copy((config.get("plugins") or {}).get(plugin) or {})
    runtime = base_runtime_options(cri)
    runtime.setdefault("options", {})
    if not isinstance(runtime["options"], dict):
        runtime["options"] = {}
    runtime["options"]["BinaryName"] = binary
    section = cri.setdefault("containerd", {})
    runtimes = section.setdefault("runtimes", {})
    if default_runtime:
        section["default_runtime_name"] = RUNTIME
    elif section.get("default_runtime_name") == RUNTIME:
        del section["default_runtime_name"]
    # containerd decodes a plugin's `runtimes` table into a fresh map: a table holding only
    # nvidia drops the built-in runc, and the CRI plugin then refuses to load ("no
    # corresponding runtime configured in `containerd.runtimes` for `containerd`
    # `default_runtime_name = "runc"`", seen with Debian 12's containerd 1.6 and its stock
    # config.toml): keep runc as containerd's defaults define it when the file has none.
    # Decided on the default the drop-in ends with (issue 23 item 11: a config whose default
    # was nvidia, its only runtime, lost that default above and must get runc back).
    if section.get("default_runtime_name") in (None, "runc") and "runc" not in runtimes:
        runtimes["runc"] = dict(CONTAINERD_RUNC)
    runtimes[RUNTIME] = runtime
    if enable_cdi:
        cri["enable_cdi"] = True
    return {"version": version, "plugins": {plugin: cri}}


def top_config(version: int) -> str:
    """The config.toml gpuhost writes on a host that has none."""
    return TOP_HEADER + render({"version": version, "imports": [IMPORT_PATTERN]})


def render_drop_in(config: dict[str, Any], version: int, default_runtime: bool = False,
                   config_path: str = CONFIG, enable_cdi: bool = False) -> str:
    return HEADER.format(config=config_path) + render(
        drop_in_config(config, version, default_runtime, enable_cdi=enable_cdi))


def parse_section(rc: int, text: str) -> dict[str, Any]:
    """The ``containerd`` section of the host state: ``{"installed": bool, "version": str |
    None, "config": text of config.toml | None, "drop_in": text of the drop-in | None}``."""
    out: dict[str, Any] = {"installed": rc == 0, "version": None, "config": None,
                           "drop_in": None}
    if rc != 0:
        return out
    files: dict[str, list[str]] = {}
    current = None
    for line in (text or "").splitlines():
        if line.startswith("==> ") and line.endswith(" <=="):
            current = line[4:-4]
            files[current] = []
        elif current is not None:
            files[current].append(line)
        elif line.startswith("version: "):
            out["version"] = line[len("version: "):].strip() or None
    for key, path in (("config", CONFIG), ("drop_in", DROP_IN)):
        if path in files:
            out[key] = "\n".join(files[path]) + "\n"
    return out


def is_gpuhosts(text: str | None) -> bool:
    """A drop-in gpuhost wrote (its header), not one of nvidia-ctk or the user at that path."""
    return bool(text) and text.startswith(HEADER.splitlines()[0])


def drift(view: dict[str, Any], default_runtime: bool = False,
          enable_cdi: bool = False) -> list[str]:
    """Why gpuhost's drop-in is not what gpuhost would write now (empty: it is, or there
    is nothing to judge). ``view``: ``{"version": containerd --version, "config": text of
    config.toml or None, "drop_in": text of the drop-in or None}`` (facts.container)."""
    text = view.get("drop_in")
    if text is None:
        return [f"{DROP_IN} is missing: containerd has no nvidia runtime; run the deploy"]
    if not is_gpuhosts(text):
        return [f"{DROP_IN} was not written by gpuhost (nvidia-ctk or by hand): gpuhost would "
                "replace it with its own; run the deploy"]
    major = major_version(view.get("version"))
    try:
        config = parse(view.get("config") or "")
        version = config_version(config, major)
        found = problems(config, CONFIG, version, major) if view.get("config") is not None else []
        want = render_drop_in(config, version, default_runtime, enable_cdi=enable_cdi)
    except ContainerdConfigError as error:
        return [str(error)]
    if found:
        return found
    if not same_drop_in(text, want):
        return [f"{DROP_IN} differs from what gpuhost writes from {CONFIG} (edited by hand, "
                "or config.toml changed since): run the deploy"]
    return []


def render(data: dict[str, Any]) -> str:
    """``data`` as TOML (tomli-w: scalars first, then each table under its dotted header,
    arrays of tables as ``[[...]]``). gpuhost's header comment is prepended by the callers:
    the file is gpuhost's own, so no user comment has to survive (no tomlkit needed)."""
    try:
        return tomli_w.dumps(data)
    except (TypeError, ValueError) as error:
        raise ContainerdConfigError(f"the containerd config holds a value gpuhost cannot "
                                    f"write back as TOML ({error})") from None


def same_drop_in(text: str | None, want: str) -> bool:
    """``text`` is gpuhost's drop-in with the content of ``want`` (the same header and TOML
    data; the layout may differ: a drop-in written by gpuhost's own TOML writer before
    tomli-w, issue 27, has arrays on one line)."""
    if not text or not is_gpuhosts(text):
        return False
    if text == want:
        return True
    header = HEADER.count("\n")
    if text.splitlines()[:header] != want.splitlines()[:header]:
        return False
    try:
        return tomllib.loads(text) == tomllib.loads(want)
    except tomllib.TOMLDecodeError:
        return False
