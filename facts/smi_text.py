"""Parsers of nvidia-smi's text outputs: ``-L``, ``--query-*=... --format=csv``,
``mig -lgi / -lci / -lgip``, its error messages, and ``nvlink -s / -e``.

Text in, plain data out; no pyinfra, no I/O; only ``ValueError`` (``facts.parser_contract``).
``facts.parsers`` names every parser.
"""
import re

from gpuhost.facts.parser_contract import contract, na

# --- nvidia-smi -L ---------------------------------------------------------------------------

_L_GPU = re.compile(r"GPU (\d+): (\S.*?)(?: \(UUID: ([^()\s]+)\))?")
_L_MIG = re.compile(r"MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^()\s]+)\)")


@contract("`nvidia-smi -L` output")
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

@contract("`nvidia-smi --query-gpu/--query-compute-apps --format=csv` output")
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
        rows.append({field: na(cell) for field, cell in zip(fields, cells, strict=True)})
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


@contract("`nvidia-smi mig -lgi` table")
def parse_mig_gpu_instances(text):
    """'No GPU instances found' -> []; 'No MIG-enabled devices found' is a ValueError."""
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)\s+(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "instance_id": int(m[4]),
             "placement": _placement(m[5], m[6])}
            for m in _mig_table(text, "GPU instances:", row, "No GPU instances found")]


@contract("`nvidia-smi mig -lci` table")
def parse_mig_compute_instances(text):
    row = re.compile(r"\|\s*(\d+)\s+(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\*?\s+(\d+)\s+"
                     r"(?:(\d+):(\d+)\s*)?\|")
    return [{"gpu": int(m[1]), "gpu_instance_id": int(m[2]), "profile": m[3],
             "profile_id": int(m[4]), "instance_id": int(m[5]), "placement": _placement(m[6], m[7])}
            for m in _mig_table(text, "Compute instances:", row, "No compute instances found")]


@contract("`nvidia-smi mig -lgip` table")
def parse_mig_gpu_instance_profiles(text):
    row = re.compile(r"\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+(?:\.\d+)?)\s.*\|")
    second_line = re.compile(r"\|[\s\d]*\|")
    return [{"gpu": int(m[1]), "profile": m[2], "profile_id": int(m[3]), "free": int(m[4]),
             "total": int(m[5]), "memory_gib": float(m[6])}
            for m in _mig_table(text, "GPU instance profiles:", row,
                                "No GPU instance profiles found", second_line)]


# --- nvidia-smi error text -------------------------------------------------------------------

@contract("nvidia-smi output")
def classify_smi_error(text):
    lowered = text.lower()
    if "couldn't communicate with the nvidia driver" in lowered:
        return "driver_not_loaded"
    if "driver/library version mismatch" in lowered:
        return "library_mismatch"
    if "no devices were found" in lowered:
        return "no_devices"
    return None


# --- nvidia-smi nvlink -s / -e ---------------------------------------------------------------
#
# One "GPU N: NAME (UUID: GPU-...)" header per GPU (old drivers print no UUID), then one line
# per link behind a tab: "Link 0: 25 GB/s" / "Link 0: <inactive>" for -s, "Link 0: Replay
# Errors: 0" (one line per counter, an empty line between links) for -e. A GPU without NVLink
# prints its header alone, or with "Device does not have or support Nvlink"; NVML's "Unable
# to retrieve NVLink information as all links are inActive" follows the header of a GPU whose
# links are all down (a PCIe card without a bridge, a GPU cut off from its NVSwitches).

_NVLINK_GPU = re.compile(r"GPU (\d+):\s*(.*)")
_NVLINK_UUID = re.compile(r"\(UUID:\s*([^)\s]+)\)")
_NVLINK_LINK = re.compile(r"Link (\d+):\s*(.*)")
_NVLINK_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GB/s")


def _nvlink_blocks(text):
    """[(header dict, [lines after it])] of the GPU blocks."""
    blocks = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _NVLINK_GPU.fullmatch(line)
        if match:
            rest = match[2]
            uuid = _NVLINK_UUID.search(rest)
            name, note = (rest[:uuid.start()], rest[uuid.end():]) if uuid else (rest, "")
            blocks.append(({"index": int(match[1]), "name": name.strip() or None,
                            "uuid": uuid[1] if uuid else None, "note": note.strip()}, []))
        elif blocks:
            blocks[-1][1].append(line)
    return blocks


def _nvlink_note(texts):
    text = " ".join(texts).lower()
    if "all links are inactive" in text:
        return "all_inactive"
    if "not have or support" in text or "not supported" in text:
        return "not_supported"
    return None


@contract("`nvidia-smi nvlink -s` output")
def parse_nvlink_status(text):
    """Per GPU: index, name, uuid, ``links`` ([{link, state: active|inactive|unknown,
    speed_gbps}]) and ``note`` (``all_inactive``, ``not_supported`` or None)."""
    gpus = []
    for head, lines in _nvlink_blocks(text):
        links, other = [], [head["note"]]
        for line in lines:
            match = _NVLINK_LINK.fullmatch(line)
            if not match:
                other.append(line)
                continue
            value = match[2].strip()
            speed = _NVLINK_SPEED.fullmatch(value)
            state = ("active" if speed else "inactive" if value.lower() in ("<inactive>",
                     "inactive") else "unknown")
            links.append({"link": int(match[1]), "state": state,
                          "speed_gbps": float(speed[1]) if speed else None})
        gpus.append({"index": head["index"], "name": head["name"], "uuid": head["uuid"],
                     "links": links, "note": _nvlink_note(other)})
    return gpus


def _counter(value):
    value = na(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


@contract("`nvidia-smi nvlink -e` output")
def parse_nvlink_errors(text):
    """Per GPU: index, name, uuid and ``links``: {link number: {counter name as printed:
    value}} (int, a float for rates such as a BER, None for N/A)."""
    gpus = []
    for head, lines in _nvlink_blocks(text):
        links = {}
        for line in lines:
            match = _NVLINK_LINK.fullmatch(line)
            if not match:
                continue
            name, sep, value = match[2].rpartition(":")
            if sep and name.strip():
                links.setdefault(int(match[1]), {})[name.strip()] = _counter(value)
        gpus.append({"index": head["index"], "name": head["name"], "uuid": head["uuid"],
                     "links": links})
    return gpus
