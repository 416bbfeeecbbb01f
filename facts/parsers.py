"""Pure parsers for what NVIDIA tools and the host print (../shared/docs/parser-contract.md).

Text in, plain data out. No pyinfra, no I/O. Every public function raises only
``ValueError`` (its message names the format it expected), whatever the input.
"""
import functools
import json
import re
import shlex
import xml.etree.ElementTree as ET

_NA = {"n/a", "not supported", "unknown error", "insufficient permissions",
       "requested functionality has been deprecated", "not available"}


def _contract(fmt):
    """Turn any non-ValueError escaping a parser into a ValueError naming ``fmt``."""
    def wrap(function):
        @functools.wraps(function)
        def inner(text, *args, **kwargs):
            if isinstance(text, (bytes, bytearray)):
                text = bytes(text).decode("utf-8", "replace")
            if not isinstance(text, str):
                raise ValueError(f"expected {fmt} as text (str), got {type(text).__name__}")
            try:
                return function(text.replace("\r\n", "\n").replace("\r", "\n"), *args, **kwargs)
            except ValueError:
                raise
            except Exception as error:  # noqa: BLE001 - the contract allows only ValueError
                raise ValueError(f"could not parse {fmt} (internal error "
                                 f"{type(error).__name__}: {error}); report this output "
                                 "to gpuhost's maintainers") from error
        return inner
    return wrap


def _na(value):
    """Value with N/A-like cells turned into None (stripped)."""
    if value is None:
        return None
    value = value.strip()
    inner = value[1:-1].strip() if value.startswith("[") and value.endswith("]") else value
    return None if inner.lower() in _NA else value


def _mode(value):
    value = _na(value)
    return value.lower() if value and value.lower() in ("enabled", "disabled") else None


def _int(value):
    value = _na(value)
    return int(value) if value and re.fullmatch(r"-?\d+", value) else None


def _mib(value):
    match = re.fullmatch(r"(\d+)(?:\s*MiB)?", _na(value) or "")
    return int(match.group(1)) if match else None


def _clean_version(value):
    """'610.57.04 [Deprecated; ...]' -> '610.57.04'; 'Deprecated, see ...' / N/A -> None."""
    value = _na(value)
    if not value:
        return None
    match = re.match(r"\d+(?:\.\d+)*", value)
    return match.group(0) if match else None


# --- /proc/driver/nvidia/version -------------------------------------------------------------

@_contract("/proc/driver/nvidia/version text")
def parse_driver_version_file(text):
    lines = [ln.strip() for ln in text.split("\n")]
    line = next((ln for ln in lines if ln.startswith("NVRM version:")), None)
    if line is None:
        return None  # module not loaded
    open_form = re.search(r"NVIDIA UNIX Open Kernel Module for (\S+)\s+(\d+(?:\.\d+)+)\b", line)
    closed_form = re.search(r"NVIDIA UNIX (\S+) Kernel Module\s+(\d+(?:\.\d+)+)\b", line)
    if open_form:
        flavor, (arch, version) = "open", open_form.groups()
    elif closed_form and closed_form.group(1) != "Open":
        flavor, (arch, version) = "proprietary", closed_form.groups()
    else:
        raise ValueError("expected /proc/driver/nvidia/version: an 'NVRM version: NVIDIA UNIX "
                         f"[Open ]Kernel Module ... <version>' line, got {line[:120]!r}")
    gcc = None
    gcc_line = next((ln for ln in lines if ln.startswith("GCC version:")), "")
    match = (re.search(r"gcc version (\d+(?:\.\d+)+)", gcc_line)
             or re.search(r"(?<![\w-])(\d+\.\d+(?:\.\d+)?)", gcc_line.split(":", 1)[-1]))
    if match:
        gcc = match.group(1)
    return {"version": version, "flavor": flavor, "arch": arch, "gcc": gcc}


# --- nvidia-smi -q -x ------------------------------------------------------------------------

def _xtext(element, path):
    node = element.find(path) if element is not None else None
    return None if node is None or node.text is None else (_na(node.text) or None)


def _xml_root(text):
    fmt = "`nvidia-smi -q -x` XML"
    if "<!ENTITY" in text:
        raise ValueError(f"expected {fmt}: entity declarations are not accepted (unsafe XML)")
    start = text.find("<?xml")
    start = text.find("<nvidia_smi_log") if start < 0 else start
    if start < 0:
        raise ValueError(f"expected {fmt}: no <nvidia_smi_log> document found")
    body = re.sub(r"<!DOCTYPE\s+nvidia_smi_log(?:\s+SYSTEM\s+(?:\"[^\"<>]*\"|'[^'<>]*'))?\s*>",
                  "", text[start:], count=1)
    if "<!DOCTYPE" in body:
        raise ValueError(f"expected {fmt}: only '<!DOCTYPE nvidia_smi_log SYSTEM \"...dtd\">' is "
                         "accepted, this DOCTYPE has another form")
    body = body.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
    try:
        root = ET.fromstring(body)
    except ET.ParseError as error:
        raise ValueError(f"expected {fmt}, the XML is malformed or truncated: {error}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"expected {fmt}: the root element is <{root.tag}>, not <nvidia_smi_log>")
    return root


def _xml_process(node):
    pid = _int(_xtext(node, "pid"))
    if pid is None:
        return None
    return {"pid": pid, "name": _xtext(node, "process_name") or "", "type": _xtext(node, "type"),
            "used_memory_mib": _mib(_xtext(node, "used_memory")),
            "gpu_instance_id": _int(_xtext(node, "gpu_instance_id")),
            "compute_instance_id": _int(_xtext(node, "compute_instance_id"))}


def _xml_gpu(index, gpu):
    mig_mode = gpu.find("mig_mode")
    current = _xtext(gpu, "mig_mode/current_mig")
    mig_devices = [{"index": _int(_xtext(dev, "index")),
                    "gpu_instance_id": _int(_xtext(dev, "gpu_instance_id")),
                    "compute_instance_id": _int(_xtext(dev, "compute_instance_id")),
                    "memory_total_mib": _mib(_xtext(dev, "fb_memory_usage/total"))}
                   for dev in gpu.findall("mig_devices/mig_device")]
    processes = [_xml_process(node) for node in gpu.findall("processes/process_info")]
    return {"index": index,
            "name": _xtext(gpu, "product_name"),
            "uuid": _xtext(gpu, "uuid"),
            "pci_bus_id": _na(gpu.get("id")) or _xtext(gpu, "pci/pci_bus_id"),
            "memory_total_mib": _mib(_xtext(gpu, "fb_memory_usage/total")),
            "persistence_mode": _mode(_xtext(gpu, "persistence_mode")),
            "mig_current": _mode(current),
            "mig_pending": _mode(_xtext(gpu, "mig_mode/pending_mig")),
            "mig_capable": None if mig_mode is None else _mode(current) is not None,
            "compute_capability": _xtext(gpu, "compute_cap"),
            "architecture": _xtext(gpu, "product_architecture"),
            "mig_devices": mig_devices,
            "processes": [p for p in processes if p is not None]}


@_contract("`nvidia-smi -q -x` XML")
def parse_smi_xml(text):
    """The contract's keys, plus ``attached_gpus`` (int|None) and per GPU:
    ``mig_capable`` (True when <mig_mode> has values, False when N/A, None when the driver
    prints no <mig_mode>), ``compute_capability`` (<compute_cap>; no driver up to 590 prints
    it in the XML, use ``--query-gpu=compute_cap``), ``architecture``,
    ``mig_devices`` [{index, gpu_instance_id, compute_instance_id, memory_total_mib}]
    (a list; [] when MIG is off) and ``processes`` [{pid, name, type, used_memory_mib,
    gpu_instance_id, compute_instance_id}].
    """
    root = _xml_root(text)
    # 610+ add <kmd_version>/<cuda_umd_version> and mark the old fields deprecated
    driver = _clean_version(_xtext(root, "kmd_version")) or _clean_version(
        _xtext(root, "driver_version"))
    cuda = _clean_version(_xtext(root, "cuda_umd_version")) or _clean_version(
        _xtext(root, "cuda_version"))
    return {"driver_version": driver, "cuda_version": cuda,
            "attached_gpus": _int(_xtext(root, "attached_gpus")),
            "gpus": [_xml_gpu(i, gpu) for i, gpu in enumerate(root.findall("gpu"))]}


# --- nvidia-smi -L ---------------------------------------------------------------------------

_L_GPU = re.compile(r"GPU (\d+): (\S.*?)(?: \(UUID: ([^()\s]+)\))?")
_L_MIG = re.compile(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^()\s]+)\)")


@_contract("`nvidia-smi -L` output")
def parse_smi_list(text):
    gpus = []
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("GPU "):
            match = _L_GPU.fullmatch(line)
            if not match or ("(UUID:" in line and not match.group(3)):
                raise ValueError("expected `nvidia-smi -L` 'GPU N: NAME (UUID: ...)' line, "
                                 f"got {line[:120]!r}")
            gpus.append({"index": int(match.group(1)), "name": match.group(2),
                         "uuid": match.group(3), "mig_devices": []})
        elif line.startswith("MIG "):
            match = _L_MIG.fullmatch(line)
            if not match or not gpus:
                raise ValueError("expected `nvidia-smi -L` 'MIG PROFILE Device N: (UUID: ...)' "
                                 f"line after a GPU line, got {line[:120]!r}")
            gpus[-1]["mig_devices"].append(
                {"profile": match.group(1), "device": int(match.group(2)), "uuid": match.group(3)})
    if not gpus:
        raise ValueError("expected `nvidia-smi -L` output with 'GPU N: ...' lines; found none")
    return gpus


# --- nvidia-smi --query-*=... --format=csv ---------------------------------------------------

@_contract("`nvidia-smi --query-gpu/--query-compute-apps --format=csv` output")
def parse_query_csv(text, fields=None):
    fmt = "`nvidia-smi --query-... --format=csv` output"
    if "is not a valid field to query" in text or classify_smi_error(text):
        raise ValueError(f"expected {fmt}, nvidia-smi printed an error: {text.strip()[:200]!r}")
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    header = [re.sub(r"\s*\[[^\]]*\]$", "", c.strip()) for c in (lines or [""])[0].split(",")]
    if fields is None:
        if not lines or not all(re.fullmatch(r"[A-Za-z_][\w.]*", f) for f in header):
            raise ValueError(f"expected {fmt}: the first line is not a header of field names "
                             "(pass fields=[...] for --format=csv,noheader)")
        fields = header
        lines.pop(0)
    elif isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"fields for {fmt} must be a list of field names")
    elif lines and header == list(fields):
        lines.pop(0)  # a header although fields were given
    rows = []
    for number, line in enumerate(lines, 1):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):  # also a comma inside a value: refuse rather than guess
            raise ValueError(f"expected {fmt}: row {number} has {len(cells)} cells for "
                             f"{len(fields)} fields: {line[:120]!r}")
        rows.append({field: _na(cell) for field, cell in zip(fields, cells, strict=True)})
    return rows


# --- nvidia-smi mig -lgi / -lci / -lgip ------------------------------------------------------

def _mig_table(text, title, row_re, empty_phrase, continuation=None):
    fmt = f"`nvidia-smi mig` table '{title}'"
    seen = in_body = False
    rows = []
    for raw in text.split("\n"):
        line = raw.strip()
        if title in line:
            seen, in_body = True, False
        elif line.startswith("|=") and seen:
            in_body = True
        elif line.startswith("|") and in_body:
            match = row_re.fullmatch(line)
            if match:
                rows.append(match)
            elif not (continuation and continuation.fullmatch(line)):
                raise ValueError(f"expected {fmt}: malformed or truncated row {line[:120]!r}")
    if not seen:
        if empty_phrase in text:
            return []
        raise ValueError(f"expected {fmt} (or '{empty_phrase}'); not found in the text")
    return rows


def _placement(start, size):
    return None if start is None else [int(start), int(size)]


@_contract("`nvidia-smi mig -lgi` table")
def parse_mig_gpu_instances(text):
    """'No GPU instances found' -> []; 'No MIG-enabled devices found' is a ValueError."""
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)\s+(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "instance_id": int(m[4]),
             "placement": _placement(m[5], m[6])}
            for m in _mig_table(text, "GPU instances:", row, "No GPU instances found")]


@_contract("`nvidia-smi mig -lci` table")
def parse_mig_compute_instances(text):
    row = re.compile(r"\|\s*(\d+)\s+(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\*?\s+(\d+)\s+"
                     r"(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "gpu_instance_id": int(m[2]), "profile": m[3],
             "profile_id": int(m[4]), "instance_id": int(m[5]), "placement": _placement(m[6], m[7])}
            for m in _mig_table(text, "Compute instances:", row, "No compute instances found")]


@_contract("`nvidia-smi mig -lgip` table")
def parse_mig_gpu_instance_profiles(text):
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+(?:\.\d+)?)\s.*\|")
    second_line = re.compile(r"\|[\s\d]*\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "free": int(m[4]),
             "total": int(m[5]), "memory_gib": float(m[6])}
            for m in _mig_table(text, "GPU instance profiles:", row,
                                "No GPU instance profiles found", second_line)]


# --- dkms status -----------------------------------------------------------------------------

# new 'nvidia/1.2, KERNEL, ARCH: status' and old 'nvidia, 1.2, KERNEL, ARCH: status'
_DKMS = re.compile(r"(?P<module>[^\s,/:]+)(?:/|,\s*)(?P<version>[^\s,:]+)"
                   r"(?:,\s*(?P<kernel>[^\s,:]+))?(?:,\s*(?P<arch>[^\s,:]+))?"
                   r":\s*(?P<status>[A-Za-z-]+)\s*(?:\((?P<note>[^)]*)\))?.*")


@_contract("`dkms status` output")
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


# --- nvidia-smi error text -------------------------------------------------------------------

@_contract("nvidia-smi output")
def classify_smi_error(text):
    lowered = text.lower()
    if "couldn't communicate with the nvidia driver" in lowered:
        return "driver_not_loaded"
    if "driver/library version mismatch" in lowered:
        return "library_mismatch"
    if "no devices were found" in lowered:
        return "no_devices"
    return None


# --- /etc/docker/daemon.json -----------------------------------------------------------------

@_contract("/etc/docker/daemon.json (a JSON object)")
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


# --- NVIDIA Container Toolkit versions -------------------------------------------------------

@_contract("nvidia-ctk / nvidia-container-cli / nvidia-container-runtime --version output")
def parse_tool_version(text):
    version = r"(\d+\.\d+(?:\.\d+)?(?:[-~+][0-9A-Za-z.~+-]*)?)"
    for pattern in (rf"NVIDIA Container (?:Toolkit CLI|Runtime(?: Hook)?) version {version}",
                    rf"^\s*cli-version:\s*{version}", rf"^\s*version:\s*{version}"):
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            return match.group(1)
    return None


# --- host facts: os-release, lspci, package databases ----------------------------------------

@_contract("/etc/os-release text")
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


@_contract("`lspci -mm -nn -d 10de:` output")
def parse_lspci_nvidia(text):
    """NVIDIA (10de) functions; also ``revision`` and ``subsystem_{vendor,device}_id``."""
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
            devices.append({"slot": slot, "class": fields[0][0], "vendor_id": fields[1][1],
                            "device_id": fields[2][1], "device_name": fields[2][0],
                            "revision": next((o[2:] for o in options if o.startswith("-r")), None),
                            "subsystem_vendor_id": fields[3][1],
                            "subsystem_device_id": fields[4][1]})
    return devices


_RPM = "`rpm -qa --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n'` output"
_DPKG = "`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'` output"


@_contract(_RPM)
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


@_contract(_DPKG)
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

@_contract("gpuhost composite fact output ('@@gpuhost@@ NAME rc=N' sections)")
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
