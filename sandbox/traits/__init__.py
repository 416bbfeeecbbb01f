"""Host traits: the situations real hosts bring (Secure Boot on, podman installed, a newer
kernel waiting for the next boot, ...), settable per host.

A host's spec carries `traits: [name, ...]`. Without an override a host gets the traits
whose `default(h)` is true (so the demo and test fleets carry the stock ones); a `--spec`
override `{"ol8-03": {"traits": ["container-tools"]}}` replaces that list. Each trait lives
in a module of this package (one module per area: oracle.py, ubuntu.py, gpus.py, boot.py,
docker.py, ...), registered with `register(Trait(...))`; this file imports them all.

Hooks, both optional:
    create(h, upper)  at host creation, before the first boot: write into the host's
                      overlay upper directory (`upper` is a Path; the lower layers are read-only)
    booted(h, sh)     once, after the host's first boot answered SSH: `sh(command)` runs a
                      shell command as root in the host over SSH and returns the
                      CompletedProcess (text; raises SandboxError on a non-zero exit unless
                      called with check=False)

Every trait names the vendor fact it models (`source`); sandbox/README.md, "Host traits",
lists them. A test in sandbox/tests shows each trait is really in effect.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from ..util import SandboxError


@dataclass(frozen=True)
class Trait:
    name: str
    doc: str                                    # one line: what the host has
    source: str                                 # the vendor fact it models
    oses: tuple[str, ...] = ()                  # OS names it applies to; () = every OS
    default: Callable[[dict], bool] | None = None   # on by default for this host spec?
    create: Callable[[dict, Path], None] | None = None
    booted: Callable[[dict, Callable], None] | None = None


REGISTRY: dict[str, Trait] = {}


def register(trait: Trait) -> Trait:
    if trait.name in REGISTRY:
        raise ValueError(f"trait {trait.name!r} registered twice")
    REGISTRY[trait.name] = trait
    return trait


def _load() -> None:
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{mod}")


_load()


def defaults(h: dict) -> list[str]:
    """The traits a host gets when its spec does not name any."""
    return sorted(t.name for t in REGISTRY.values()
                  if t.default and (not t.oses or h["os"] in t.oses) and t.default(h))


def check(h: dict) -> None:
    for name in h.get("traits", []):
        t = REGISTRY.get(name)
        if t is None:
            raise SandboxError(f"--spec {h['name']}: unknown trait {name!r}; known: "
                               f"{', '.join(sorted(REGISTRY)) or '(none)'}")
        if t.oses and h["os"] not in t.oses:
            raise SandboxError(f"--spec {h['name']}: trait {name!r} is for "
                               f"{', '.join(t.oses)} hosts, not {h['os']}")


def apply_create(h: dict, upper: Path) -> None:
    for name in h.get("traits", []):
        if REGISTRY[name].create:
            REGISTRY[name].create(h, upper)


def apply_booted(h: dict, sh: Callable) -> None:
    for name in h.get("traits", []):
        if REGISTRY[name].booted:
            REGISTRY[name].booted(h, sh)
