"""Which Debian kernel ABI the sandbox serves (per suite: bookworm's 6.1, trixie's 6.12) and
the QEMU VM boots: one that Debian's archive can install today, whatever state the archive
is in.

Debian's archive moves in ordinary steps that leave it half-way for hours or days
(sandbox/README.md, "Which kernel"):
  - a security update publishes ``linux-image-<abi>-amd64-unsigned`` and
    ``linux-headers-<abi>-amd64`` first; the signed image (built from the unsigned one by the
    signing service, source package linux-signed-amd64) follows later, while the meta package
    ``linux-image-amd64`` may already depend on it;
  - an ABI bump (6.1.0-56 -> 6.1.0-57) removes the previous ABI's packages from the suite;
  - a point release moves the meta packages in ``bookworm`` past the ``bookworm-security`` ones.

The rule, applied to what apt knows (the mirror's own lists):
  1. the ABI is the one a headers meta package ``linux-headers-amd64`` depends on: the newest
     version of the meta whose headers (exact version) are installable, and for which some
     image of that ABI is installable: what ``apt-get install linux-headers-amd64`` gives a
     host, so the mirror's meta and the hosts' running kernel agree;
  2. the VM's image is ``linux-image-<abi>`` when the archive has it, else
     ``linux-image-<abi>-unsigned`` (the same kernel; a QEMU VM boots without Secure Boot);
  3. nothing installable: one line naming each meta version and what it lacks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Callable

META = "linux-headers-amd64"
# The kernel series of each suite. The ABI names differ: bookworm's are 6.1.0-<N>-amd64,
# trixie's carry the upstream version, 6.12.<P>+deb13-amd64 (Debian's linux 6.12 packages).
SERIES = {"bookworm": "6.1", "trixie": "6.12"}


def _depends_re(series: str) -> re.Pattern:
    return re.compile(rf"\blinux-headers-({re.escape(series)}\.\d+[-+][\w.+-]*?-amd64) "
                      r"\(= ([^)\s]+)\)")

# apt_cache(["show", "pkg", ...]) -> stdout (the caller's apt configuration; "" when apt
# knows none of the packages)
AptCache = Callable[[list[str]], str]


class NoKernel(RuntimeError):
    """The archive has no kernel that can be installed whole; the message says its state."""


@dataclass(frozen=True)
class KernelChoice:
    release: str         # 6.1.0-56-amd64: the simulated hosts' uname -r and the VM's kernel
    headers: str         # linux-headers-6.1.0-56-amd64=6.1.192-2
    meta: str            # linux-headers-amd64=6.1.192-2 (the mirror serves this version)
    image: str           # linux-image-6.1.0-56-amd64, or ...-unsigned while unsigned only
    note: str = ""       # why not the newest meta, or why the unsigned image

    def as_state(self) -> dict:
        return {"kernel_release": self.release, "kernel_headers": self.headers,
                "kernel_meta": self.meta, "kernel_image": self.image, "kernel_note": self.note}


def stanzas(text: str) -> list[dict[str, str]]:
    """apt-cache show's output as one dict a package version (continuation lines dropped)."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields and "Version" in fields:
            out.append(fields)
    return out


def _versions(apt_cache: AptCache, names: list[str]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {n: [] for n in names}
    for st in stanzas(apt_cache(["show", *names])):
        if st["Package"] in found:
            found[st["Package"]].append(st)
    return found


def _newest_first(apt_cache: AptCache, name: str) -> list[str]:
    """The versions of NAME apt knows, newest first (apt-cache madison keeps apt's order)."""
    out = apt_cache(["madison", name])
    seen: list[str] = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2 and parts[0] == name and parts[1] not in seen:
            seen.append(parts[1])
    return seen


def choose(apt_cache: AptCache, suite: str = "bookworm") -> KernelChoice:
    """The kernel of SUITE to serve and boot (module docstring); NoKernel when there is none."""
    series = SERIES[suite]
    depends_re = _depends_re(series)
    metas = _versions(apt_cache, [META])[META]
    by_version = {st["Version"]: st for st in metas}
    order = [v for v in _newest_first(apt_cache, META) if v in by_version]
    order += [v for v in by_version if v not in order]
    if not order:
        raise NoKernel(f"Debian's archive (as apt lists it) has no {META}: "
                       "run apt-get update, check the sources")
    why_not: list[str] = []
    for version in order:
        m = depends_re.search(by_version[version].get("Depends", ""))
        if not m:
            why_not.append(f"{META} {version} depends on no linux-headers-{series}.x "
                           "-amd64 package")
            continue
        abi, headers_version = m.groups()
        signed, unsigned = f"linux-image-{abi}", f"linux-image-{abi}-unsigned"
        have = _versions(apt_cache, [f"linux-headers-{abi}", signed, unsigned])
        if not any(st["Version"] == headers_version for st in have[f"linux-headers-{abi}"]):
            why_not.append(f"{META} {version} -> linux-headers-{abi} {headers_version}: "
                           "not in the archive")
            continue
        if have[signed]:
            image, note = signed, ""
        elif have[unsigned]:
            image = unsigned
            note = f"{signed} is not published yet: the VM boots {unsigned}"
        else:
            why_not.append(f"{META} {version} -> {abi}: no {signed} nor {unsigned}")
            continue
        if why_not:
            note = "; ".join(filter(None, [note, "newer metas skipped: " + "; ".join(why_not)]))
        return KernelChoice(release=abi, headers=f"linux-headers-{abi}={headers_version}",
                            meta=f"{META}={version}", image=image, note=note)
    raise NoKernel(f"Debian's {suite} archive has no kernel that installs whole today: "
                   + "; ".join(why_not) + " (the archive is mid-update: retry later, "
                   "or set GPUHOST_VM_KERNEL / use a cache built before)")
