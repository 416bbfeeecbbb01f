"""Which NVIDIA build a host takes, and which kernel headers it needs (pure, no I/O).

``identify(os_release)`` maps ``/etc/os-release`` data to NVIDIA's distro tag.
``kernel_flavour`` / ``headers_packages`` / ``needs_gcc_toolset`` decide the kernel
development packages for the *running* kernel, as NVIDIA's driver installation guide
names them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuhost import aptdistros
from gpuhost.eldistros import DISTRIBUTIONS

RPM_TAGS = ("rhel8", "rhel9", "rhel10")
DISTRO_TAGS = (*aptdistros.RELEASES, *RPM_TAGS)

# os-release ID -> (family, {major or VERSION_ID: tag}). The apt releases come from
# gpuhost.aptdistros (one module per distribution, Ubuntu keyed by VERSION_ID, Debian by its
# major). NVIDIA ships no Oracle, Rocky or Alma build: its RHEL packages are used there (same
# row in NVIDIA's install tables); the Enterprise Linux entries come from gpuhost.eldistros,
# one module per distribution.
_SUPPORTED: dict[str, tuple[str, dict[str, str]]] = {}
for _release in aptdistros.RELEASES.values():
    _SUPPORTED.setdefault(_release.os_id, ("debian", {}))[1][_release.version_id] = _release.tag
_SUPPORTED.update({os_id: ("rhel", {str(m): f"rhel{m}" for m in d.majors})
                   for os_id, d in DISTRIBUTIONS.items()})
SUPPORTED_TEXT = ", ".join(r.name for r in aptdistros.RELEASES.values()) + ", " + ", ".join(
    f"{d.name} {'/'.join(str(m) for m in d.majors)}" for d in DISTRIBUTIONS.values())

# UEK release -> kernel base version (uname -r prefix).
_UEK_BASES = {"4.14": 5, "5.4": 6, "5.15": 7, "6.12": 8}
_SAFE_RELEASE = re.compile(r"^[A-Za-z0-9._+~-]+$")


def identify(os_release: Mapping[str, str], kernel_release: str | None = None) -> dict:
    """``{"family", "distro_tag", "os_id", "version_id", "major"}`` for a host.

    ``os_release`` is /etc/os-release as a dict (keys ID, VERSION_ID, as pyinfra's
    ``server.OsRelease`` fact or ``parse_os_release`` give them; lower-case keys work
    too). Adds ``kernel_release`` and ``kernel_flavour`` when ``kernel_release`` is given.
    Raises ValueError naming the supported systems for anything else.
    """
    data = {str(k).upper(): str(v).strip().strip('"') for k, v in os_release.items()}
    os_id = data.get("ID", "").lower()
    version_id = data.get("VERSION_ID", "")
    major = version_id.split(".")[0]
    entry = _SUPPORTED.get(os_id)
    tag = None
    if entry:  # an exact VERSION_ID (Ubuntu's 24.04) or the major (Debian's 13, EL's 9)
        tag = entry[1].get(version_id) or entry[1].get(major)
    if tag is None:
        name = data.get("PRETTY_NAME") or f"{os_id or 'unknown'} {version_id}".strip()
        raise ValueError(f"unsupported operating system {name!r}: gpuhost supports {SUPPORTED_TEXT}; "
                         "nothing was changed on this host")
    result = {"family": entry[0], "distro_tag": tag, "os_id": os_id, "version_id": version_id,
              "major": int(major)}
    if kernel_release is not None:
        result["kernel_release"] = kernel_release
        result["kernel_flavour"] = kernel_flavour(kernel_release, entry[0])
    return result


def os_problem(os_info: Mapping) -> str:
    """One line: why gpuhost refuses a host's OS (``os_info``: the os fact, whose ``error`` is
    ``identify``'s message naming the system and the supported ones)."""
    if os_info.get("error"):
        return str(os_info["error"])
    name = os_info.get("pretty_name") or os_info.get("id") or "unknown"
    return (f"unsupported operating system {name}: no /etc/os-release, by which gpuhost "
            "identifies the distribution; nothing was changed on this host")


def release_name(os_id: str, version_id: str, pretty_name: str = "") -> str:
    """The release as a person names it: "Debian 13", "Ubuntu 26.04", "Oracle Linux 10.0",
    "Rocky Linux 10.0" (the distribution's name in gpuhost's tables, then VERSION_ID as
    Debian's and Ubuntu's release tables and the EL vendors' release notes write it).
    A release the tables lack keeps its distribution's name; another system its os-release
    PRETTY_NAME, else ``ID VERSION_ID``."""
    names = {}
    for release in aptdistros.RELEASES.values():
        if (release.os_id, release.version_id) == (os_id, version_id):
            return release.name
        names[release.os_id] = release.name.rsplit(" ", 1)[0]
    names.update({d.os_id: d.name for d in DISTRIBUTIONS.values()})
    if os_id in names:
        return f"{names[os_id]} {version_id}".strip()
    return pretty_name or f"{os_id} {version_id}".strip() or "unknown"


def _check_release(kernel_release: str) -> str:
    rel = str(kernel_release).strip()
    if not rel or not _SAFE_RELEASE.fullmatch(rel):
        raise ValueError(f"{kernel_release!r} is not a kernel release (as `uname -r` prints it)")
    return rel


def kernel_flavour(kernel_release: str, family: str | None = None) -> str:
    """"uek" (``...el8uek...``/``...el9uek...``), "rhck" (``.el8``/``.el9_N`` without uek)
    or "generic" (Debian/Ubuntu). A non-EL kernel on an EL host raises ValueError."""
    rel = _check_release(kernel_release)
    if family == "debian":
        return "generic"
    if "uek" in rel:
        return "uek"
    if re.search(r"\.el\d+(_\d+)?(\.|$)", rel):
        return "rhck"
    if family == "rhel":
        raise ValueError(
            f"kernel {rel!r} is neither an EL kernel (.el8, .el9, .el10) nor UEK: gpuhost cannot name its "
            "development package; install the headers for it yourself before running gpuhost"
        )
    return "generic"


def uek_major(kernel_release: str) -> int | None:
    """UEK release number (5, 6, 7, 8) of a UEK kernel, None for any other kernel.

    UEK 6 is 5.4.17-*, UEK 7 is 5.15.0-*, UEK 8 is 6.12.0-*; an unknown UEK base raises
    ValueError so that a new UEK is noticed instead of being built with the wrong gcc.
    """
    rel = _check_release(kernel_release)
    if kernel_flavour(rel) != "uek":
        return None
    base = ".".join(rel.split("-")[0].split(".")[:2])
    if base not in _UEK_BASES:
        raise ValueError(f"UEK kernel {rel!r} has an unknown base {base} (known: {', '.join(_UEK_BASES)})")
    return _UEK_BASES[base]


def _distro(distro) -> dict:
    if isinstance(distro, Mapping):
        return dict(distro)
    if distro in DISTRO_TAGS:
        family = "debian" if distro in aptdistros.RELEASES else "rhel"
        major = re.sub(r"\D", "", distro) if family == "rhel" else re.sub(r"\D", "", distro)[:2]
        return {"family": family, "distro_tag": distro, "major": int(major or 0)}
    raise ValueError(f"unknown distro {distro!r} (known tags: {', '.join(DISTRO_TAGS)})")


def headers_packages(distro, kernel_release: str, flavour: str | None = None) -> list[str]:
    """Packages with the development files of exactly the running kernel.

    ``distro`` is ``identify()``'s dict or a distro tag. Debian/Ubuntu:
    ``linux-headers-<rel>``; UEK: ``kernel-uek-devel-<rel>``; RHCK on EL8:
    ``kernel-devel-<rel>``; RHCK on EL9: ``kernel-devel-matched-<rel>`` (NVIDIA names
    ``kernel-devel-matched``; its version is pinned to the running kernel so that dnf does
    not pull in a newer kernel). EL hosts also get ``kernel-headers`` (userspace headers).
    """
    d = _distro(distro)
    rel = _check_release(kernel_release)
    flavour = flavour or kernel_flavour(rel, d["family"])
    if d["family"] == "debian":
        return [f"linux-headers-{rel}"]
    if flavour == "uek":
        return [f"kernel-uek-devel-{rel}", "kernel-headers"]
    if flavour == "rhck":
        if int(d["major"]) >= 9:
            return [f"kernel-devel-matched-{rel}", "kernel-headers"]
        return [f"kernel-devel-{rel}", "kernel-headers"]
    raise ValueError(f"kernel flavour {flavour!r} is not valid on {d['distro_tag']} (want uek or rhck)")


# (EL major, UEK release) -> the gcc toolset that UEK line is built with where the EL
# release's own gcc differs: UEK 7 on OL8 with gcc 11 (OL8's gcc is 8.5), UEK 8 on OL9 with
# gcc 14 (OL9's is 11; UEK 7 on OL9 uses the system gcc 11). UEK 8 on OL10 is built with
# OL10's own gcc 14 (CONFIG_CC_VERSION_TEXT "gcc (GCC) 14.3.1 20250617 (Red Hat 14.3.1-2)",
# oracle/kconfigs@06854f8 "Oracle Linux 10 (UEK 8) x86_64/config"): no entry, no toolset;
# NVIDIA's R615 Oracle Linux page writes its gcc-toolset paragraph for OL8/9 UEK only.
# Sources: Oracle's kernel configs (oracle/kconfigs, CONFIG_CC_VERSION_TEXT), dkms's own
# Oracle CI (dkms-project/dkms 3103cb7) and NVIDIA's Oracle Linux page ("DKMS must be
# instructed ..."); docs/real-hosts.md.
UEK_TOOLSETS = {(8, 7): "gcc-toolset-11", (9, 8): "gcc-toolset-14"}


def needs_gcc_toolset(distro, kernel_release: str) -> str | None:
    """The gcc toolset DKMS must use for this kernel, or None for the system gcc
    (``UEK_TOOLSETS``: "gcc-toolset-11" for UEK 7 on OL8, "gcc-toolset-14" for UEK 8 on OL9)."""
    d = _distro(distro)
    if d["family"] != "rhel":
        return None
    return UEK_TOOLSETS.get((int(d["major"]), uek_major(kernel_release)))


def uek_release_glob(el_major: int, uek: int) -> str:
    """A shell pattern matching `uname -r` of UEK ``uek`` on EL ``el_major``:
    '5.15.0-*.el8uek.*' for UEK 7 on OL8."""
    base = next(b for b, n in _UEK_BASES.items() if n == uek)
    return f"{base}.0-*.el{el_major}uek.*"
