"""Pure parsers for what the host prints: /etc/os-release, lspci, the dpkg and rpm package
databases, ``dkms status``, /etc/docker/daemon.json and the sections of gpuhost's composite
fact (``facts.script``).

Text in, plain data out. No pyinfra, no I/O. Every public function raises only
``ValueError`` (its message names the format it expected), whatever the input
(``facts.parser_contract``). ``facts.parsers`` re-exports every one of them.
"""
import json
import re
import shlex

from gpuhost.facts.parser_contract import contract


# --- dkms status -----------------------------------------------------------------------------

# new 'nvidia/1.2, KERNEL, ARCH: status' and old 'nvidia, 1.2, KERNEL, ARCH: status'
_DKMS = re.compile(r"(?P<module>[^\s,/:]+)(?:/|,\s*)(?P<version>[^\s,:]+)"
                   r"(?:,\s*(?P<kernel>[^\s,:]+))?(?:,\s*(?P<arch>[^\s,:]+))?"
                   r":\s*(?P<status>[A-Za-z-]+)\s*(?:\((?P<note>[^)]*)\))?.*")


@contract("`dkms status` output")
def parse_dkms_status(text):
    entries = []
    for raw in text.split("\n"):
        match = _DKMS.fullmatch(raw.strip())
        if match:  # anything else is an error or warning line: skipped
            entries.append({"module": match["module"], "version": match["version"],
                            "kernel": match["kernel"], "arch": match["arch"],
                            "status": match["status"].lower(),
                            "note": match["note"].strip() if match["note"] else None})
    return entries


# --- /etc/docker/daemon.json -----------------------------------------------------------------

@contract("/etc/docker/daemon.json (a JSON object)")
def parse_daemon_json(text):
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"/etc/docker/daemon.json is not valid JSON: {error.msg} at line "
                         f"{error.lineno} column {error.colno}; fix or remove the file") from None
    except RecursionError:
        raise ValueError("/etc/docker/daemon.json is not valid JSON: nested too deeply at line 1 "
                         "column 1") from None
    if not isinstance(data, dict):
        offset = len(text) - len(text.lstrip())
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        raise ValueError(f"/etc/docker/daemon.json must hold a JSON object, found a "
                         f"{type(data).__name__} at line {line} column {column}")
    return data


# --- host facts: os-release, lspci, package databases ----------------------------------------

@contract("/etc/os-release text")
def parse_os_release(text):
    result = {}
    for raw in text.split("\n"):
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", raw.strip())
        if not match:
            continue  # blank lines, comments and junk are ignored, as os-release(5) says
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = re.sub(r'\\([\\"$`])', r"\1", value[1:-1])
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        result[key] = value
    if not result:
        raise ValueError("expected /etc/os-release text: KEY=value lines such as ID=debian")
    return result


def _name_and_id(field):
    match = re.fullmatch(r"(.*?)\s*\[([0-9a-fA-F]{4})\]", field)
    return (match.group(1), match.group(2).lower()) if match else (field, None)


@contract("`lspci -mm -nn -d 10de:` output")
def parse_lspci_nvidia(text):
    """NVIDIA (10de) functions; also ``class_id`` ("0302", "0680"; None when lspci printed
    no id), ``revision`` and ``subsystem_{vendor,device}_id``."""
    devices = []
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        error = ValueError("expected `lspci -mm -nn` line 'SLOT \"CLASS [cccc]\" \"VENDOR [vvvv]\" "
                           f"\"DEVICE [dddd]\" ...', got {raw[:120]!r}")
        try:
            slot, *tokens = shlex.split(raw)
        except ValueError:
            raise error from None
        options = [t for t in tokens if re.fullmatch(r"-[a-z]\S*", t)]
        fields = [_name_and_id(t) for t in tokens if t not in options] + [(None, None)] * 2
        slot_re = r"([0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
        if len(fields) < 5 or not re.fullmatch(slot_re, slot) or None in (
                fields[1][1], fields[2][1]):
            raise error
        if fields[1][1] == "10de":
            devices.append({"slot": slot, "class": fields[0][0], "class_id": fields[0][1],
                            "vendor_id": fields[1][1],
                            "device_id": fields[2][1], "device_name": fields[2][0],
                            "revision": next((o[2:] for o in options if o.startswith("-r")), None),
                            "subsystem_vendor_id": fields[3][1],
                            "subsystem_device_id": fields[4][1]})
    return devices


_SYSFS = "/sys/bus/pci/devices lines 'SLOT 0xDEVICE 0xCLASS 0xSUBVENDOR 0xSUBDEVICE 0xREV'"


@contract(_SYSFS)
def parse_pci_sysfs(text):
    """NVIDIA functions from gpuhost's pci_sysfs section (facts/script.py): ``slot``,
    ``device_id`` ("1db4"), ``class`` ("030200"), ``subsystem_vendor_id``,
    ``subsystem_device_id``, ``revision`` (None for a file sysfs did not give)."""
    devices = []
    hexa = r"(0x[0-9a-fA-F]+|-)"
    slot_re = r"[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        match = re.fullmatch(rf"({slot_re})((?: {hexa}){{5}})", raw.strip())
        if not match:
            raise ValueError(f"expected {_SYSFS}, got {raw[:120]!r}")
        values = [None if v == "-" else v[2:].lower() for v in match.group(2).split()]
        device, klass, subvendor, subdevice, revision = values
        if device is None or len(device) != 4:
            raise ValueError(f"expected {_SYSFS} (a 4-digit device id), got {raw[:120]!r}")
        devices.append({"slot": match.group(1).lower(), "device_id": device,
                        "class": klass.zfill(6) if klass else None,
                        "subsystem_vendor_id": subvendor.zfill(4) if subvendor else None,
                        "subsystem_device_id": subdevice.zfill(4) if subdevice else None,
                        "revision": revision.zfill(2) if revision else None})
    return devices


_RPM = "`rpm -qa --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n'` output"
_DPKG = "`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'` output"


@contract(_RPM)
def parse_rpm_query(text):
    """{name: {version, held: False, versions}}; ``version`` keeps a real epoch ('3:570...')
    and drops '(none):'; ``versions`` lists every installed version (kernels), in order."""
    packages = {}
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        match = re.fullmatch(r"([^\s\t]+)\t(\(none\)|\d+):(\S+-\S+)", raw.strip())
        if not match:
            raise ValueError(f"expected {_RPM}: 'NAME<TAB>EPOCH:VERSION-RELEASE' lines, "
                             f"got {raw[:120]!r}")
        name, epoch, version = match.groups()
        version = version if epoch == "(none)" else f"{epoch}:{version}"
        entry = packages.setdefault(name, {"version": version, "held": False, "versions": []})
        entry["versions"].append(version)
    return packages


_LOCK = "gpuhost's run lock section ('now=EPOCH', then the owner file's KEY=VALUE lines)"


@contract(_LOCK)
def parse_run_lock(text):
    """{now, token, controller, user, pid, started, command, taken, expires}: the section
    ``run_lock`` (gpuhost.runlock.SECTION). ``now`` is the host's clock; a missing or
    unreadable owner value is None (a lock without an owner file has only ``now``)."""
    found = {}
    for raw in text.split("\n"):
        key, sep, value = raw.strip().partition("=")
        if sep and key in ("now", "token", "controller", "user", "pid", "started", "command",
                           "taken", "expires") and key not in found:
            found[key] = value.strip()
    if not re.fullmatch(r"[0-9]+", found.get("now", "")):
        raise ValueError(f"expected {_LOCK}, got {text[:120]!r}")
    lock = {key: found.get(key) or None for key in ("token", "controller", "user", "started",
                                                    "command")}
    for key in ("now", "pid", "taken", "expires"):
        value = found.get(key) or ""
        lock[key] = int(value) if re.fullmatch(r"[0-9]{1,18}", value) else None
    return lock


@contract(_DPKG)
def parse_dpkg_query(text):
    """{name: {version, held}} for installed rows only ('ii', 'hi'); held is the 'h' flag."""
    packages = {}
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        parts = raw.split("\t")
        status = parts[2].strip() if len(parts) == 3 else ""
        if (len(parts) != 3 or not re.fullmatch(r"[^\s]+", parts[0])
                or not re.fullmatch(r"[uihrp][ncHUFWti]R?", status)):
            raise ValueError(f"expected {_DPKG}: 'PACKAGE<TAB>VERSION<TAB>ii' lines, "
                             f"got {raw[:120]!r}")
        if status[1] == "i" and status[0] in "ih" and parts[1].strip():
            packages[parts[0]] = {"version": parts[1].strip(), "held": status[0] == "h"}
    return packages


# --- composite fact output -------------------------------------------------------------------

@contract("gpuhost composite fact output ('@@gpuhost@@ NAME rc=N' sections)")
def split_sections(text, marker="@@gpuhost@@ "):
    """{NAME: {rc, out}}; ``out`` is the text between the marker line and the next marker
    line. A marker counts only at the start of a line (output may mention it mid-line)."""
    if not isinstance(marker, str) or not marker.strip():
        raise ValueError("split_sections: marker must be a non-empty string")
    matches = list(re.finditer(r"(?m)^" + re.escape(marker) + r"([^\n]*)(?:\n|$)", text))
    if not matches:
        raise ValueError(f"expected composite fact output with '{marker}NAME rc=N' lines")
    sections = {}
    for number, match in enumerate(matches):
        header = re.fullmatch(r"(\S+) rc=(-?\d+)\s*", match.group(1))
        if not header:
            raise ValueError(f"expected a section line '{marker}NAME rc=N', "
                             f"got {match.group(0).strip()[:120]!r}")
        name, rc = header.groups()
        if name in sections:
            raise ValueError(f"composite fact output has '{marker}{name}' twice; "
                             "section names must be unique")
        end = matches[number + 1].start() if number + 1 < len(matches) else len(text)
        sections[name] = {"rc": int(rc), "out": text[match.end():end]}
    return sections
