"""The hosts' `uname` wrapper (sandbox/files/uname), run with /bin/sh against a temporary
machine.json: every option combination prints what the wrapper has always printed (the
simulated kernel_release for -r, and kernel_version for -v and -a when it is set; every other
field, option and error from /bin/uname), and the common paths start no process: gpuhost's
audit runs `uname -r -m` on every host. No fleet needed."""

import functools
import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "files" / "uname"
UNAME = "/bin/uname"
LONG = {"--all": "a", "--kernel-name": "s", "--nodename": "n", "--kernel-release": "r",
        "--kernel-version": "v", "--machine": "m", "--processor": "p",
        "--hardware-platform": "i", "--operating-system": "o"}

MACHINES = {
    "debian": '{\n "hostname": "gpu-01",\n "os": "debian12",\n "kernel_release": "6.1.0-56-amd64",'
              '\n "gpu_model": "A100-SXM4-40GB",\n "gpu_count": 1\n}\n',
    "ubuntu": '{\n "kernel_release": "5.15.0-131-generic",\n'
              ' "kernel_version": "#141-Ubuntu SMP Fri Jan 10 21:18:28 UTC 2025"\n}\n',
    "one_line": '{"kernel_version":"#1 SMP x","hostname":"h","kernel_release":"6.8.0-51-generic"}',
    "spaces": '{ "kernel_release" :\t"4.18.0-553.el8.x86_64" , "kernel_version": "" }',
    "first_wins": '{"kernel_release": "first", "kernel_release": "second"}\n'
                  '{"kernel_release": "third"}\n',
    "first_empty": '{"kernel_release": "", "kernel_release": "later"}\n',
    "no_release": '{"hostname": "h", "kernel_version": "#9"}\n',
    "not_a_string": '{"kernel_release": 5, "x": {"kernel_release": "nested"}}\n',
    "crlf": '{\r\n "kernel_release": "6.1-crlf"\r\n}\r\n',
    "glob": '{"kernel_release": "*?[x]", "kernel_version": "a\\\\b"}\n',
    "empty": "",
    "missing": None,
}
ARGS = [[], ["-r"], ["-r", "-m"], ["-rm"], ["-mr"], ["-m", "-r"], ["-a"], ["-v"], ["-s"],
        ["-n"], ["-m"], ["-p"], ["-i"], ["-o"], ["-s", "-n", "-r", "-v", "-m", "-p", "-i", "-o"],
        ["-snrvmpio"], ["-ar"], ["-a", "-p"], ["-ai"], ["-rv"], ["-vr"], ["-r", "-o"],
        ["-r", "-p", "-i"], ["-nr"], ["-sr"], ["-sv"], ["-vm"], ["-r", "-r"], ["--all"],
        ["--kernel-release"], ["--kernel-release", "--machine"], list(LONG),
        ["--kernel-version"], ["--kernel-rel"], ["--help"], ["--version"], ["-x"], ["-rx"],
        ["-"], ["--"], ["--", "-r"], ["-r", "extra"], [""], ["-r", "--machine", "-v"]]
ARGS += [[a, b] for a, b in itertools.permutations(["-r", "-a", "-v", "-m", "-s", "-n"], 2)]


def _field(text, key):
    """What the wrapper takes from machine.json: the first `"key" : "value"` on a line."""
    pattern = re.compile('"' + re.escape(key) + r'"[ \t\r\v\f]*:[ \t\r\v\f]*"([^"\n]*)"')
    for line in text.split("\n"):
        m = pattern.search(line)
        if m:
            return m.group(1)
    return ""


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return proc.stdout, proc.stderr, proc.returncode


@functools.cache
def _real(args):
    return _run([UNAME, *args])


def expected(args, machine):
    """The wrapper's contract, field by field, from /bin/uname's own answers."""
    def real(*a):
        return _real(a)

    def value(flag):
        return real(flag)[0].rstrip("\n")

    rel = _field(machine or "", "kernel_release")
    if not rel:
        return real(*args)
    want = ""
    for a in args:
        if a in LONG:
            want += LONG[a]
        elif a.startswith("-") and not a.startswith("--") and a[1:] and \
                not set(a[1:]) - set("asnrvmpio"):
            want += a[1:]
        else:
            return real(*args)
    want = want or "s"
    if not set(want) & set("rav"):
        return real(*args)
    every = "a" in want
    out = []
    for flag in "snrvmpio":
        if flag == "r" and (every or "r" in want):
            out.append(rel)
        elif flag == "v" and (every or "v" in want):
            out.append(_field(machine, "kernel_version") or value("-v"))
        elif flag in "pi":
            v = value("-" + flag)
            if flag in want or (every and v != "unknown"):
                out.append(v)
        elif flag not in "rv" and (every or flag in want):
            out.append(value("-" + flag))
    return " ".join(out) + "\n", "", 0


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory):
    """The wrapper reading a temporary machine.json, and calling a /bin/uname stand-in that
    logs each start (then runs the real one)."""
    d = tmp_path_factory.mktemp("uname")
    log, stub = d / "calls", d / "real-uname"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {UNAME} "$@"\n')
    stub.chmod(0o755)
    script = d / "uname"
    src = SCRIPT.read_text()
    assert src.count("\nmachine=/etc/gpusim/machine.json\n") == 1
    script.write_text(src.replace("\nmachine=/etc/gpusim/machine.json\n",
                                  f"\nmachine={d / 'machine.json'}\n")
                      .replace("/bin/uname", str(stub)))
    return script, d / "machine.json", log


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_uname_wrapper_outputs(wrapper, name):
    script, machine_json, log = wrapper
    content = MACHINES[name]
    if content is None:
        machine_json.unlink(missing_ok=True)
    else:
        machine_json.write_text(content)
    for args in ARGS:
        got = _run(["/bin/sh", str(script), *args])
        # stand-in and real uname name themselves differently in error messages
        got = (got[0], got[1].replace(str(script.parent / "real-uname"), UNAME), got[2])
        assert got == expected(args, content), (name, args)


def test_uname_wrapper_common_path_starts_nothing(wrapper):
    script, machine_json, log = wrapper
    machine_json.write_text(MACHINES["debian"])

    def calls(*args):
        log.unlink(missing_ok=True)
        out = _run(["/bin/sh", str(script), *args])
        return out[0], log.read_text().splitlines() if log.exists() else []

    assert calls("-r") == ("6.1.0-56-amd64\n", [])
    machine = _run([UNAME, "-m"])[0].strip()
    assert calls("-r", "-m") == (f"6.1.0-56-amd64 {machine}\n", ["-m"])  # exec'd, not forked
    assert calls("--kernel-release") == ("6.1.0-56-amd64\n", [])
    machine_json.write_text(MACHINES["ubuntu"])
    assert calls("-rv")[1] == []


def test_uname_wrapper_is_posix_sh():
    assert SCRIPT.read_text().startswith("#!/bin/sh\n") and os.access(SCRIPT, os.X_OK)
