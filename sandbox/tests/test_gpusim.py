"""The GPU simulator (sandbox/nvidia/gpusim), run as subprocesses in temporary GPUSIM_ROOTs.

Every run goes through an import guard that only lets python3-minimal's modules load (the
sandbox hosts have nothing more). Layouts are compared with real outputs of the same era
in ../shared/corpus (those tests skip only when that folder is absent).
"""

import json
import locale
import marshal
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sandbox.tests import smi_health

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "sandbox/nvidia/machine"
PKG_DIR = TREE / "usr/local/lib/gpusim"
CORPUS = ROOT.parent / "shared/corpus"
KR = "6.1.0-56-amd64"
SHIMS = {"gpusim-boot": "usr/local/sbin/gpusim-boot", "gpusim": "usr/local/bin/gpusim",
         "lspci": "usr/local/bin/lspci", "modprobe": "usr/local/sbin/modprobe",
         "rmmod": "usr/local/sbin/rmmod", "lsmod": "usr/local/sbin/lsmod",
         "dmesg": "usr/local/bin/dmesg"}

# Debian 12 python3.11-minimal + libpython3.11-minimal (dpkg -L), and the builtins of its
# /usr/bin/python3.11; refreshed from dpkg at test time when this machine has them.
MINIMAL = set("""__future__ _collections_abc _compat_pickle _hashlib _py_abc _sitebuiltins _ssl
_strptime _threading_local _weakrefset abc argparse ast base64 bisect calendar codecs collections
compileall configparser contextlib copy copyreg csv datetime dis email encodings enum filecmp
fnmatch functools genericpath getopt glob hashlib heapq imp importlib inspect io ipaddress keyword
linecache locale logging opcode operator optparse os pathlib pickle pkgutil platform posixpath
py_compile quopri random re reprlib runpy selectors signal site sitecustomize socket sre_compile
sre_constants sre_parse ssl stat string stringprep struct subprocess sysconfig tempfile textwrap
threading token tokenize traceback tracemalloc types typing urllib uu warnings weakref zipfile
zipimport _abc _ast _bisect _blake2 _codecs _collections _csv _datetime _elementtree _functools
_heapq _imp _io _locale _md5 _opcode _operator _pickle _posixsubprocess _random _sha1 _sha256
_sha3 _sha512 _signal _socket _sre _stat _statistics _string _struct _symtable _thread
_tokenize _tracemalloc _warnings _weakref array atexit binascii builtins cmath errno faulthandler
fcntl gc grp itertools marshal math posix pwd pyexpat select spwd sys syslog time unicodedata
xxsubtype zlib""".split())

GUARD = r"""
import sys
allowed = set(sys.argv[1].split(","))
pkg, target, args = sys.argv[2], sys.argv[3], sys.argv[4:]
ok = lambda name: name.split(".")[0] in allowed
for name, mod in list(sys.modules.items()):
    if getattr(mod, "__file__", None) and not ok(name):
        del sys.modules[name]
class Guard:
    def find_spec(self, name, path=None, target=None):
        if not ok(name):
            raise ModuleNotFoundError(f"No module named {name!r} (not in python3-minimal)")
sys.meta_path.insert(0, Guard())
if pkg:
    sys.path.insert(0, pkg)
sys.argv = [target] + args
if "/" in target:  # a shim script, run as its #! line would
    sys.path.insert(0, target.rsplit("/", 1)[0])
    with open(target) as fh:
        code = compile(fh.read(), target, "exec")
    exec(code, {"__name__": "__main__", "__file__": target})
else:  # python3 -m gpusim.smi, as the utils package's launcher runs it
    sys.exit(__import__(target, fromlist=["main"]).main())
"""


def _minimal_modules():
    names = set(MINIMAL)
    try:
        out = subprocess.run(["dpkg", "-L", "libpython3.11-minimal", "python3.11-minimal"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        m = re.match(r"/usr/lib/python3\.11/(?:lib-dynload/)?([A-Za-z_][A-Za-z0-9_]*)", line)
        if m:
            names.add(m.group(1))
    return ",".join(sorted(names | {"gpusim"}))


ALLOWED = _minimal_modules()
# The hosts' interpreter when this machine has it (Debian's python3 also starts 5x faster).
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# One `PYTHON -I -S` process for the module's runs: it imports nothing (builtins only: its
# frames are not the guard's) and forks a child per run that becomes `PYTHON -I -S -c GUARD
# ...`: GUARD_SRC executed as __main__ with that sys.argv, GPUSIM_ROOT set, stdin /dev/null,
# stdout/stderr into files, its exit status the child's. The same interpreter, flags,
# environment and guard as a fresh process, without an interpreter start per run (426 of
# them). GPUHOST_TEST_SUBPROCESS=1: a fresh process per run, as before.
FORK_SERVER = r"""
import atexit, marshal, os, sys, time
rfd, wfd, null = os.dup(0), os.dup(1), os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)

def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(rfd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data

def send(answer):
    data = marshal.dumps(answer)
    os.write(wfd, len(data).to_bytes(4, "big") + data)

def child(root, argv, out, err):
    status = 1
    try:
        os.environ["GPUSIM_ROOT"] = root
        for fd, name in ((1, out), (2, err)):
            target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        for fd in (rfd, wfd, null):
            os.close(fd)
        sys.argv = ["-c", *argv[1:]]
        main = type(sys)("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        try:
            exec(compile(argv[0], "<string>", "exec"), main.__dict__)
            status = 0
        except SystemExit as stop:
            code = stop.code
            if code is None:
                status = 0
            elif isinstance(code, int):
                status = code & 0xFF
            else:
                print(code, file=sys.stderr)
                status = 1
        except BaseException as error:
            tb = error.__traceback__
            if tb is not None and tb.tb_frame.f_code is child.__code__:
                tb = tb.tb_next  # this frame is not the command's
            sys.excepthook(type(error), error.with_traceback(tb), tb)
            status = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)

send(("ready", os.getpid()))
while True:
    size = read(4)
    if size is None:
        break
    root, argv, timeout, out, err = marshal.loads(read(int.from_bytes(size, "big")))
    pid = os.fork()
    if pid == 0:
        child(root, argv, out, err)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            send(("exit", os.waitstatus_to_exitcode(status)))
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            send(("timeout", 0))
            break
        time.sleep(0.001)
"""


def _text(data):
    """As subprocess.run(..., text=True) decodes (locale encoding, universal newlines)."""
    return (data.decode(locale.getpreferredencoding(False))
            .replace("\r\n", "\n").replace("\r", "\n"))


class ForkServer:
    def __init__(self, path):
        self.env = {"GPUSIM_ROOT": "", "PATH": path}
        self.tmp = Path(tempfile.mkdtemp(prefix="gpusim-fork-"))
        self.count = 0
        with open(self.tmp / "server.log", "wb") as log:
            self.proc = subprocess.Popen([PYTHON, "-I", "-S", "-c", FORK_SERVER], env=self.env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log)
        assert self._answer(60)[0] == "ready", (self.tmp / "server.log").read_text()

    def _answer(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        size = self.proc.stdout.read(4) if ready else b""
        if len(size) != 4:
            self.close()
            raise RuntimeError("the gpusim fork server gave no answer")
        return marshal.loads(self.proc.stdout.read(int.from_bytes(size, "big")))

    def accepts(self, env):
        return env.keys() == self.env.keys() and env["PATH"] == self.env["PATH"]

    def run(self, cmd, env, timeout):
        """``subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)``
        for ``cmd`` = [PYTHON, "-I", "-S", "-c", CODE, *args]."""
        assert cmd[:4] == [PYTHON, "-I", "-S", "-c"], cmd
        self.count += 1
        out, err = self.tmp / f"{self.count}.out", self.tmp / f"{self.count}.err"
        request = marshal.dumps((env["GPUSIM_ROOT"], cmd[4:], float(timeout), str(out), str(err)))
        try:
            self.proc.stdin.write(len(request).to_bytes(4, "big") + request)
            self.proc.stdin.flush()
            kind, code = self._answer(timeout + 30)
        except BaseException:  # interrupted or gone: not usable for the next run
            self.close()
            raise
        stdout, stderr = _text(out.read_bytes()), _text(err.read_bytes())
        out.unlink()
        err.unlink()
        if kind == "timeout":
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, code, stdout, stderr)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


FORK: ForkServer | None = None


@pytest.fixture(scope="module", autouse=True)
def _fork_server():
    global FORK
    if os.environ.get("GPUHOST_TEST_SUBPROCESS"):
        yield
        return
    FORK = ForkServer(os.environ.get("PATH", "/usr/bin:/bin"))
    try:
        yield
    finally:
        FORK.close()
        FORK = None


def body(name):
    """A corpus file's verbatim output (after its header)."""
    path = CORPUS / name
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent on this machine")
    return path.read_text().split("# ----- END HEADER (verbatim output starts on next line) "
                                  "-----\n", 1)[1]


class Sim:
    def __init__(self, root, tree=TREE):
        self.root, self.tree = root, tree

    def machine(self, model="A100-SXM4-40GB", count=1, nvswitch=False, os_name="debian12"):
        self.write("etc/gpusim/machine.json", json.dumps({
            "hostname": "gpu-01", "os": os_name, "kernel_release": KR, "gpu_model": model,
            "gpu_count": count, "nvswitch": nvswitch}))
        return self

    def install(self, version="570.172.08", flavor="open", kernel=KR, userspace=True):
        """What the fake driver packages leave: a DKMS-built module and userspace.json."""
        self.write(f"lib/modules/{kernel}/updates/dkms/nvidia.ko",
                   f"gpusim-module version={version} flavor={flavor} kernel={kernel}\n")
        if userspace:
            self.write("usr/lib/gpusim/userspace.json",
                       json.dumps({"version": version, "flavor": flavor}))
        return self

    def write(self, rel, text):
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def read(self, rel):
        return (self.root / rel).read_text()

    def _run(self, pkg, target, args, timeout=30, crash_ok=False):
        env = {"GPUSIM_ROOT": str(self.root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        cmd = [PYTHON, "-I", "-S", "-c", GUARD, ALLOWED, pkg, target, *map(str, args)]
        if FORK is not None and FORK.accepts(env):
            res = FORK.run(cmd, env, timeout)
        else:
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        assert crash_ok or "Traceback" not in res.stderr, res.stderr
        return res

    def smi(self, *args, rc=0):
        res = self._run(str(PKG_DIR), "gpusim.smi", args)
        if rc is not None:
            assert res.returncode == rc, res.stdout + res.stderr
        return res.stdout

    def tool(self, name, *args, rc=0):
        res = self._run("", str(self.tree / SHIMS[name]), args)
        if rc is not None:
            assert res.returncode == rc, res.stdout + res.stderr
        return res

    def boot(self):
        return self.tool("gpusim-boot").stdout

    def state(self):
        return json.loads(self.read("var/lib/gpusim/state.json"))

    def gpusim(self, *args, rc=0):
        return self.tool("gpusim", *args, rc=rc)

    def faults(self):
        return json.loads(self.read("etc/gpusim/faults.json"))


@pytest.fixture
def sim(tmp_path):
    return Sim(tmp_path)


@pytest.fixture
def a100(sim):
    sim.machine("A100-SXM4-40GB", 2).install()
    sim.boot()
    return sim


@pytest.fixture
def parsers():
    return pytest.importorskip("gpuhost.facts.parsers")


def mask(text):
    return re.sub(r"(GPU|MIG)-[0-9a-f-]{36}", r"\1-UUID", text)


def shape(line):
    return re.sub(r"[0-9A-Za-z.%]", "x", line)


# ----- the guard itself --------------------------------------------------------------------
def test_guard_refuses_modules_missing_from_python3_minimal(sim):
    sim.write("probe.py", "import json\n")
    res = sim._run("", str(sim.root / "probe.py"), [], crash_ok=True)
    assert res.returncode == 1 and "not in python3-minimal" in res.stderr


def test_jsonlite_round_trips_and_reports_position():
    sys.path.insert(0, str(PKG_DIR))
    try:
        from gpusim import jsonlite
    finally:
        sys.path.remove(str(PKG_DIR))
    value = {"a": [1, 2.5, True, None, "é\n\"x"], "b": {}, "c": []}
    assert json.loads(jsonlite.dumps(value)) == value
    assert jsonlite.dumps(value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert jsonlite.loads(json.dumps(value)) == value
    with pytest.raises(ValueError, match="line 2 column 7"):
        jsonlite.loads('{"a": 1,\n "b": }')


# ----- driver states -----------------------------------------------------------------------
NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.\n\n")


def test_driver_not_loaded_until_boot_then_loaded(sim, parsers):
    sim.machine().install()
    assert sim.smi("-L", rc=9) == NOT_LOADED
    assert parsers.classify_smi_error(NOT_LOADED) == "driver_not_loaded"
    assert "nvidia 570.172.08 (open) loaded" in sim.boot()
    proc = sim.read("proc/driver/nvidia/version")
    assert re.fullmatch(r"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570\.172\.08  "
                        r"Release Build  \(\S+\)  \w{3} \w{3} [ \d]\d [\d:]{8} UTC \d{4}\n"
                        r"GCC version:  gcc version 12\.2\.0 \(Debian [^)]+\) \n", proc), proc
    assert parsers.parse_driver_version_file(proc) == {
        "version": "570.172.08", "flavor": "open", "arch": "x86_64", "gcc": "12.2.0"}
    assert sim.smi("-L").startswith("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-")


def test_proprietary_module_line_and_rhel_gcc(sim, parsers):
    sim.machine(os_name="rhel9").install("550.163.01", "proprietary")
    sim.boot()
    proc = sim.read("proc/driver/nvidia/version")
    assert proc.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  ")
    assert parsers.parse_driver_version_file(proc)["gcc"] == "11.4.1"
    assert parsers.parse_driver_version_file(proc)["flavor"] == "proprietary"


def test_no_module_for_running_kernel(sim):
    sim.machine().install(kernel="6.1.0-99-amd64")
    assert "not loaded (modprobe: FATAL: Module nvidia not found in directory " \
           f"/lib/modules/{KR})" in sim.boot()
    assert not (sim.root / "proc/driver/nvidia/version").exists()
    sim.smi("-q", "-x", rc=9)
    err = sim.tool("modprobe", "nvidia", rc=1).stderr
    assert err == f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{KR}\n"


def test_open_module_cannot_drive_volta(sim):
    sim.machine("V100-SXM2-16GB").install(flavor="open")
    assert "could not insert 'nvidia': No such device" in sim.boot()
    sim.smi(rc=9)
    sim.install(flavor="proprietary")
    sim.tool("modprobe", "nvidia")
    assert "Tesla V100-SXM2-16GB" in sim.smi("-L")


def test_open_module_cannot_drive_pascal_and_proprietary_cannot_drive_blackwell(sim):
    sim.machine("P100-PCIE-16GB").install(flavor="open")
    assert "could not insert 'nvidia': No such device" in sim.boot()
    sim.machine("B200").install(flavor="proprietary")
    assert "could not insert 'nvidia': No such device" in sim.boot()
    sim.install(flavor="open")
    sim.tool("modprobe", "nvidia")
    assert "NVIDIA B200" in sim.smi("-L")


def test_mismatch_after_upgrade_until_reboot(sim, parsers):
    sim.machine().install("550.163.01", "open")
    sim.boot()
    assert "550.163.01" in sim.smi("--version")
    sim.install("570.172.08", "open")          # the package upgrade, no reboot yet
    out = sim.smi("-q", "-x", rc=18)
    assert out == ("Failed to initialize NVML: Driver/library version mismatch\n"
                   "NVML library version: 570.172\n")
    assert parsers.classify_smi_error(out) == "library_mismatch"
    assert "550.163.01" in sim.read("proc/driver/nvidia/version")
    sim.boot()
    assert parsers.parse_smi_xml(sim.smi("-q", "-x"))["driver_version"] == "570.172.08"


def test_missing_userspace_library(sim):
    sim.machine().install(userspace=False)
    sim.boot()
    assert "couldn't find libnvidia-ml.so" in sim.smi(rc=12)


# ----- formats compared with real outputs --------------------------------------------------
def ssup2_layout(sim):
    """The A100 layout of the 580.126.09 corpus captures: 4g + 2g (two 1c CIs) + 1g."""
    sim.smi("-i", "0", "-mig", "1")
    sim.smi("mig", "-i", "0", "-cgi", "4g.20gb,14,MIG 1g.5gb", "-C")
    sim.smi("mig", "-i", "0", "-dci", "-gi", "3")
    sim.smi("mig", "-i", "0", "-cci", "0,0", "-gi", "3")


def test_mig_tables_match_real_captures_byte_for_byte(sim):
    sim.machine("A100-SXM4-40GB", 1).install()
    sim.boot()
    sim.smi("-mig", "1")
    free = sim.smi("mig", "-lgip")
    assert free == body("mig_lgip__a100-40gb__580.126.09__ssup2__all-free.txt")
    sim.smi("-mig", "0")
    ssup2_layout(sim)
    assert sim.smi("mig", "-i", "0", "-lgi") == body("mig_lgi__a100-40gb__580.126.09__ssup2.txt")
    assert sim.smi("mig", "-i", "0", "-lci") == body(
        "mig_lci__a100-40gb__580.126.09__ssup2__with-placement.txt")
    assert sim.smi("mig", "-i", "0", "-lgip") == body(
        "mig_lgip__a100-40gb__580.126.09__ssup2__all-used.txt")
    assert mask(sim.smi("-L")) == mask(body("smi_L__a100-40gb-mig__580.126.09__ssup2__mixed-ci.txt"))
    assert sim.smi("mig", "-lgipp") == body("mig_lgipp__a100-40gb__migguide.txt")


def test_list_matches_h100_capture(sim, parsers):
    sim.machine("H100-80GB-HBM3", 1).install()
    sim.boot()
    sim.smi("-mig", "1")
    sim.smi("mig", "-cgi", "9,14,19,19", "-C")
    out = sim.smi("-L")
    assert mask(out) == mask(body("smi_L__h100-80gb-mig__590.48.01.txt"))
    gpus = parsers.parse_smi_list(out)
    assert [d["profile"] for d in gpus[0]["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb",
                                                               "1g.10gb"]


def xml_paths(text):
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text[text.index("<?xml"):]))
    paths, order = set(), {}

    def walk(el, prefix):
        here = f"{prefix}/{el.tag}"
        paths.add(here)
        kids = order.setdefault(here, [])
        for child in el:
            if child.tag not in kids:
                kids.append(child.tag)
            walk(child, here)
    walk(root, "")
    return paths, order


# What facts/parsers.py reads from -q -x.
FACT_PATHS = ["/nvidia_smi_log/driver_version", "/nvidia_smi_log/cuda_version",
              "/nvidia_smi_log/attached_gpus"] + [f"/nvidia_smi_log/gpu/{p}" for p in (
               "product_name", "product_architecture", "uuid", "pci/pci_bus_id",
               "fb_memory_usage/total", "persistence_mode", "mig_mode/current_mig",
               "mig_mode/pending_mig", "mig_devices/mig_device/index",
               "mig_devices/mig_device/gpu_instance_id",
               "mig_devices/mig_device/compute_instance_id",
               "mig_devices/mig_device/fb_memory_usage/total", "processes/process_info/pid",
               "processes/process_info/process_name", "processes/process_info/used_memory",
               "processes/process_info/type", "processes/process_info/gpu_instance_id")]


def test_xml_tags_sit_where_real_535_and_590_outputs_put_them(a100, parsers):
    ssup2_layout(a100)
    a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "4242", "--name", "python3",
              "--gi", "3", "--ci", "1")
    text = a100.smi("-q", "-x")
    assert text.startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM '
                           '"nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n\t<timestamp>')
    sim_paths, sim_order = xml_paths(text)
    real = {p.name: xml_paths(body(p.name)) for p in sorted(CORPUS.glob("smi_qx__*535*")) +
            sorted(CORPUS.glob("smi_qx__*590*"))}
    assert len(real) >= 4
    union = set().union(*(paths for paths, _ in real.values()))
    assert sim_paths - union == set()          # no tag where no real output has one
    for path in FACT_PATHS:
        assert path in sim_paths and path in union, path
    for name, (_paths, order) in real.items():  # siblings in the order of the v12 era
        if "535" not in name:  # 590 (DTD v13) moved gsp_firmware_version after virtualization
            continue
        for parent, kids in sim_order.items():
            seen = [k for k in order.get(parent, []) if k in kids]
            assert [k for k in kids if k in seen] == seen, (name, parent)
    parsed = parsers.parse_smi_xml(text)
    gpu0 = parsed["gpus"][0]
    assert (parsed["attached_gpus"], gpu0["mig_current"], len(gpu0["mig_devices"])) == (2, "enabled", 4)
    assert gpu0["processes"][0]["gpu_instance_id"] == 3 and gpu0["memory_total_mib"] == 40960
    assert parsed["gpus"][1]["mig_devices"] == [] and parsed["gpus"][1]["mig_current"] == "disabled"


def test_xml_non_mig_gpu_reports_na(sim, parsers):
    sim.machine("L4", 1).install()
    sim.boot()
    gpu = parsers.parse_smi_xml(sim.smi("-q", "-x"))["gpus"][0]
    assert (gpu["mig_current"], gpu["mig_pending"], gpu["mig_capable"]) == (None, None, False)


def bars(line):
    return [i for i, ch in enumerate(line) if ch in "|+"]


def test_table_layout_matches_550_capture(sim):
    sim.machine("L4", 1).install("550.90.07")
    sim.boot()
    sim.smi("-pm", "1")
    out = sim.smi().splitlines()
    real = body("smi_table__l4__550.90.07__no-procs.txt").splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} {7}", out[0])
    assert out[1:9] == real[:8] and out[10:] == real[9:]   # all but the load row
    assert shape(out[9]) == shape(real[8])                  # same columns, other numbers
    sim.tool("gpusim", "process", "add", "--pid", "2358", "--name", "/usr/lib/xorg/Xorg",
             "--mem", "4", "--type", "G")
    procs = body("smi_table__laptop-nvidia-rtx-2000-ada-gene__550.120.txt").splitlines()
    assert sim.smi().splitlines()[18] == procs[-2]        # a real 550 process row


def test_table_process_and_mig_rows_of_newer_drivers(sim):
    sim.machine("H100-80GB-HBM3", 1).install("590.48.01")
    sim.boot()
    sim.smi("-mig", "1")
    sim.smi("mig", "-cgi", "9,9", "-C")
    sim.tool("gpusim", "process", "add", "--pid", "21180", "--name", "/root/tools/memhog",
             "--mem", "2296", "--gi", "2", "--ci", "0")
    out = sim.smi().splitlines()
    real = body("smi_table__h100-80gb-mig__590.48.01__load-procs.txt").splitlines()
    assert out[1:8] == real[1:8] and out[12:20] == real[12:20] and out[-7:-2] == real[-9:-4]
    assert [bars(x) for x in out[8:12] + out[20:23]] == [bars(x) for x in real[8:12] + real[20:23]]
    assert "|    0    2    0            21180      C   /root/tools/memhog" \
           "                     2296MiB |" in out
    assert out[-1] == real[-1]


def test_query_text_key_column_and_section_order(a100):
    out = a100.smi("-q", "-i", "1").splitlines()
    real = body("smi_q__l4__550.90.07.txt").splitlines()
    assert out[:3] == real[:3] and out[0] == "" and shape(out[3]) == shape(real[3])
    kv = [x for x in out if " : " in x or x.endswith(" :")]
    assert kv and all(x.index(" : ") == 41 for x in kv if " : " in x)
    top = [x.split(":")[0].strip() for x in out if re.match(r"    \S", x)]
    real_top = [x.split(":")[0].strip() for x in real if re.match(r"    \S", x)]
    assert [k for k in top if k in real_top] == [k for k in real_top if k in top]
    assert len([k for k in top if k in real_top]) >= 20


def test_version_matches_590_capture(sim):
    sim.machine("H100-80GB-HBM3", 1).install("590.48.01")
    sim.boot()
    assert sim.smi("--version") == body("smi_version__h100-80gb-mig__590.48.01.txt")


def test_query_csv_headers_units_and_errors(a100, parsers):
    assert a100.smi("-i", "0", "--query-gpu=pci.bus_id,mig.mode.current", "--format=csv") == \
        body("query_csv__a100-40gb__migguide__bus-id-mig-mode.csv").replace("36:00", "07:00"
                                                                           ).replace("Enabled", "Disabled")
    fields = ("index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,"
              "persistence_mode,mig.mode.current,mig.mode.pending,compute_cap,utilization.gpu,"
              "temperature.gpu")
    out = a100.smi(f"--query-gpu={fields}", "--format=csv")
    assert out.splitlines()[0] == ("index, name, uuid, pci.bus_id, driver_version, memory.total "
                                   "[MiB], memory.used [MiB], persistence_mode, mig.mode.current, "
                                   "mig.mode.pending, compute_cap, utilization.gpu [%], "
                                   "temperature.gpu")
    rows = parsers.parse_query_csv(out)
    assert rows[1]["memory.total"] == "40960 MiB" and rows[1]["compute_cap"] == "8.0"
    assert rows[1]["driver_version"] == "570.172.08" and rows[1]["utilization.gpu"] == "0 %"
    bare = a100.smi("--query-gpu=memory.total,utilization.gpu", "--format=noheader,nounits,csv")
    assert bare == "40960, 0\n40960, 0\n"
    assert a100.smi("--query-gpu=index,bogus.field", "--format=csv", rc=2) == \
        'Field "bogus.field" is not a valid field to query.\n\n'
    a100.smi("-i", "0", "-mig", "1")
    assert a100.smi("-i", "0", "--query-gpu=utilization.gpu,mig.mode.current",
                    "--format=csv,noheader") == "[N/A], Enabled\n"
    assert a100.smi("-i", "7", "-L", rc=6) == "No devices were found\n"


def test_query_compute_apps(a100, parsers):
    head = ("timestamp,gpu_name,gpu_bus_id,gpu_serial,gpu_uuid,pid,process_name,"
            "used_gpu_memory")
    assert a100.smi(f"--query-compute-apps={head}", "--format=csv") == \
        body("query_csv__h100-80gb-mig__590.48.01__compute-apps.csv").splitlines(True)[0]
    a100.tool("gpusim", "process", "add", "--gpu", "1", "--pid", "4242", "--name", "python3",
              "--mem", "1500")
    rows = parsers.parse_query_csv(a100.smi(
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv"))
    uuid1 = parsers.parse_smi_list(a100.smi("-L"))[1]["uuid"]
    assert rows == [{"pid": "4242", "process_name": "python3", "used_gpu_memory": "1500 MiB",
                     "gpu_uuid": uuid1}]
    assert a100.smi("-i", uuid1, "--query-gpu=index,memory.used", "--format=csv,noheader") == \
        "1, 1501 MiB\n"


# ----- MIG mode, persistence, reset, reboot ------------------------------------------------
def modes(sim, i=0):
    return sim.smi("-i", str(i), "--query-gpu=mig.mode.current,mig.mode.pending",
                   "--format=csv,noheader")


@pytest.fixture
def persistenced(sim):
    """A live process named like the daemon, with its pid file, as the fake package runs it."""
    proc = subprocess.Popen(["nvidia-persistenced", "60"], executable="/bin/sleep")
    sim.write("var/run/nvidia-persistenced/nvidia-persistenced.pid", f"{proc.pid}\n")
    yield proc
    proc.kill()
    proc.wait()


def test_ampere_mig_pending_while_held_then_reset(a100, persistenced):
    bus = "00000000:07:00.0"
    assert "Persistence-M" in a100.smi() and "On  |" in a100.smi()
    assert a100.smi("-i", "0", "-mig", "1") == (
        f"Warning: MIG mode is in pending enable state for GPU {bus}:In use by another client\n"
        f"{bus} is currently being used by one or more other processes (e.g. CUDA application "
        "or a monitoring application such as another instance of nvidia-smi). Please first kill "
        "all processes using the device and retry the command or reboot the system to make MIG "
        "mode effective.\nAll done.\n")
    assert modes(a100) == "Disabled, Enabled\n"
    a100.smi("mig", "-lgi", rc=6)
    out = a100.smi("-i", "0", "--gpu-reset", rc=255)
    assert out.startswith(f"The following GPUs could not be reset:\n  GPU {bus}: In use by "
                          "another client\n\n1 device is currently being used by one or more")
    assert a100.smi("-i", "0", "-pm", "0") == f"Disabled persistence mode for GPU {bus}.\nAll done.\n"
    assert a100.smi("-i", "0", "--gpu-reset") == f"GPU {bus} was successfully reset.\n"
    assert modes(a100) == "Enabled, Enabled\n" and modes(a100, 1) == "Disabled, Disabled\n"
    assert a100.smi("-i", "1", "-pm", "1") == \
        "Persistence mode is already Enabled for GPU 00000000:0F:00.0.\nAll done.\n"


def test_ampere_pending_applies_at_boot_and_mode_survives_reboot(a100):
    a100.smi("-pm", "1")
    assert a100.smi("-i", "0", "-pm", "1").startswith("Persistence mode is already Enabled")
    assert "pending enable state" in a100.smi("-i", "0", "-mig", "1")
    a100.boot()
    assert modes(a100) == "Enabled, Enabled\n"
    a100.smi("mig", "-cgi", "9,9", "-C")
    a100.boot()
    assert modes(a100) == "Enabled, Enabled\n"         # InfoROM bit: kept
    assert a100.smi("mig", "-lgi", rc=6) == "No GPU instances found: Not Found\n"
    assert "Persistence-M" in a100.smi() and "Off |" in a100.smi()   # legacy -pm is gone


def test_ampere_enable_applies_at_once_when_nothing_holds_the_gpu(a100):
    assert a100.smi("-i", "0", "-mig", "1") == "Enabled MIG Mode for GPU 00000000:07:00.0\nAll done.\n"
    assert modes(a100) == "Enabled, Enabled\n"


def test_gpu_reset_unsupported_fault(a100):
    a100.tool("gpusim", "fault", "set", "gpu_reset_unsupported")
    out = a100.smi("-i", "0", "-mig", "1")
    assert out == body("smi_mig_enable__a100-40gb__migguide__pending-enable-warning.txt"
                       ).replace("00:03.0", "07:00.0")
    assert a100.smi("-i", "0", "-r", rc=3) == "Resetting GPU 00000000:07:00.0 is not supported.\n"


def test_hopper_mig_immediate_and_lost_at_reboot(sim):
    sim.machine("H100-80GB-HBM3", 1).install()
    sim.boot()
    out = sim.smi("-mig", "1")
    assert out.startswith("Enabled MIG Mode for GPU 00000000:18:00.0\n\nWarning: persistence "
                          "mode is disabled on device 00000000:18:00.0. See the Known Issues")
    assert modes(sim) == "Enabled, Enabled\n"
    sim.smi("-pm", "1")
    assert sim.smi("-mig", "0") == "Disabled MIG Mode for GPU 00000000:18:00.0\nAll done.\n"
    sim.smi("-mig", "1")
    sim.boot()
    assert modes(sim) == "Disabled, Disabled\n"


def test_non_mig_gpu(sim):
    sim.machine("L4", 2).install()
    sim.boot()
    assert sim.smi("-i", "1", "-mig", "1") == (
        "Unable to enable MIG Mode for GPU 00000000:21:00.0: Not Supported\n"
        "Treating as warning and moving on.\nAll done.\n")
    assert modes(sim) == "[N/A], [N/A]\n"
    assert sim.smi("mig", "-lgi", rc=6) == "No MIG-supported devices found.\n"


# ----- MIG geometry ------------------------------------------------------------------------
def created(out):
    return [int(x) for x in re.findall(r"Successfully created GPU instance ID +(\d+)", out)]


def test_mig_capacity_rules(a100, parsers):
    a100.smi("-mig", "1")
    a100.smi("mig", "-lgi", rc=6)
    out = a100.smi("mig", "-i", "0", "-cgi", ",".join(["19"] * 8), rc=23)
    assert created(out) == [9, 7, 8, 11, 12, 13, 14]    # the order real drivers use
    assert out.endswith("Unable to create a GPU instance on GPU  0 using profile 19: "
                        "Insufficient Resources\nFailed to create GPU instances: Insufficient "
                        "Resources\n")
    free = {p["profile"]: p["free"] for p in
            parsers.parse_mig_gpu_instance_profiles(a100.smi("mig", "-i", "0", "-lgip"))}
    assert set(free.values()) == {0}
    assert len(parsers.parse_mig_gpu_instances(a100.smi("mig", "-lgi"))) == 7
    # GPU 1: 3g + 3g fill the memory; 4g + 3g fill the compute slices; +me at most once.
    assert created(a100.smi("mig", "-i", "1", "-cgi", "9,3g.20gb,19", rc=23)) == [1, 2]
    a100.smi("mig", "-i", "1", "-dgi")
    a100.smi("mig", "-i", "1", "-cgi", "5,9")
    assert "Insufficient Resources" in a100.smi("mig", "-i", "1", "-cgi", "19", rc=23)
    a100.smi("mig", "-i", "1", "-dgi")
    assert created(a100.smi("mig", "-i", "1", "-cgi", "20,20", rc=23)) == [9]
    a100.smi("mig", "-i", "1", "-dgi")
    assert "profile 7g.80gb: Invalid Argument" in a100.smi("mig", "-i", "1", "-cgi", "7g.80gb",
                                                           rc=2)
    assert created(a100.smi("mig", "-i", "1", "-cgi", "0")) == [0]


def test_h100_documented_layout_fits(sim, parsers):
    sim.machine("H100-80GB-HBM3", 1).install()
    sim.boot()
    sim.smi("-mig", "1")
    sim.smi("mig", "-cgi", "3g.40gb,2g.20gb,1g.10gb,1g.10gb", "-C")
    gis = parsers.parse_mig_gpu_instances(sim.smi("mig", "-lgi"))
    assert sorted(g["profile"] for g in gis) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    placements = sorted(tuple(g["placement"]) for g in gis)
    assert placements == [(0, 2), (2, 1), (3, 1), (4, 4)]


def test_destroy_order_and_busy_instances(a100, parsers):
    a100.smi("-i", "0", "-mig", "1")
    a100.smi("mig", "-i", "0", "-cgi", "9,9", "-C")
    assert a100.smi("mig", "-i", "0", "-dgi", rc=19) == (
        "Unable to destroy GPU instance ID  1 from GPU  0: In use by another client\n"
        "Failed to destroy GPU instances: In use by another client\n")
    a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "77", "--gi", "2")
    assert a100.smi("mig", "-dci", "-gi", "2", rc=19).startswith(
        "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID  2: In use")
    assert a100.smi("mig", "-dci", "-gi", "1") == \
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  1\n"
    assert a100.smi("mig", "-dgi", "-gi", "1") == \
        "Successfully destroyed GPU instance ID  1 from GPU  0\n"
    a100.tool("gpusim", "process", "clear")
    a100.smi("mig", "-dci")
    a100.smi("mig", "-dgi")
    assert a100.smi("mig", "-lci", rc=6) == "No compute instances found: Not Found\n"
    a100.smi("mig", "-cgi", "14")
    assert "using profile MIG 1c.2g.10gb (ID  0)" in a100.smi("mig", "-cci", "0,0", "-gi", "5")
    assert "Insufficient Resources" in a100.smi("mig", "-cci", "0", "-gi", "5", rc=23)
    cis = parsers.parse_mig_compute_instances(a100.smi("mig", "-lci"))
    assert [(c["instance_id"], c["placement"]) for c in cis] == [(0, [0, 1]), (1, [1, 1])]


def test_cuda_process_needs_a_mig_device(a100):
    a100.smi("-i", "0", "-mig", "1")
    err = a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "5", rc=2).stderr
    assert "MIG mode and has no such MIG device" in err
    a100.smi("mig", "-cgi", "19", "-C")
    a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "5", "--mem", "100")
    assert "|    0    9    0                5      C   python3" in a100.smi()


# ----- processes, state, boot --------------------------------------------------------------
def test_state_persists_and_boot_clears_processes(a100, parsers):
    a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "4242", "--name", "python3")
    assert a100.state()["processes"][0]["pid"] == 4242
    xml = parsers.parse_smi_xml(a100.smi("-q", "-x"))
    assert xml["gpus"][0]["processes"][0]["name"] == "python3"
    assert "4242" in a100.smi("-q") and "Used GPU Memory               : 1024 MiB" in a100.smi("-q")
    a100.tool("gpusim", "process", "remove", "--pid", "4242")
    a100.tool("gpusim", "process", "remove", "--pid", "4242", rc=1)
    a100.tool("gpusim", "process", "add", "--gpu", "1", "--pid", "9")
    a100.boot()
    assert a100.state()["processes"] == [] and a100.state()["boots"] == 2
    err = a100.tool("gpusim", "process", "add", "--gpu", "2", "--pid", "1", rc=2).stderr
    assert "this machine has GPUs 0..1" in err


def test_a_cuda_process_that_dies_is_torn_down_with_an_xid_45(a100):
    """Issue 36 (T4-08): the driver tears down a killed application's channels and logs Xid
    45 (NVIDIA's Xid catalog: "Control-C, GPU resets, sigkill are all examples")."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        a100.tool("gpusim", "process", "add", "--gpu", "1", "--pid", str(proc.pid),
                  "--name", "sleep")
        assert "sleep" in a100.smi()  # alive: listed, the GPU busy
    finally:
        proc.kill()
        proc.wait()
    assert str(proc.pid) not in a100.smi()  # reaped at the next look
    assert a100.state()["processes"] == []
    log = a100.tool("dmesg").stdout
    assert f": 45, pid={proc.pid}, name=sleep, Ch 00000008" in log
    assert log.count(": 45, ") == 1  # once, not at every look
    a100.smi()
    assert a100.tool("dmesg").stdout.count(": 45, ") == 1


def test_process_refused_without_a_usable_driver(sim):
    sim.machine().install()
    err = sim.tool("gpusim", "process", "add", "--pid", "1", rc=1).stderr
    assert "the NVIDIA driver is not usable" in err


# ----- kernel modules ----------------------------------------------------------------------
def test_modules_unload_rules(a100):
    assert a100.tool("lsmod").stdout.splitlines()[1].startswith("nvidia              ")
    a100.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "4242")
    assert a100.tool("rmmod", "nvidia", rc=1).stderr == \
        "rmmod: ERROR: Module nvidia is in use by: nvidia_uvm\n"
    assert a100.tool("rmmod", "nvidia_uvm", rc=1).stderr == "rmmod: ERROR: Module nvidia_uvm is in use\n"
    assert a100.tool("modprobe", "-r", "nvidia_uvm", rc=1).stderr == \
        "modprobe: FATAL: Module nvidia_uvm is in use.\n"
    a100.tool("gpusim", "process", "clear")
    a100.tool("rmmod", "nvidia_uvm")
    a100.smi("-i", "1", "-pm", "1")
    assert a100.tool("rmmod", "nvidia", rc=1).stderr == "rmmod: ERROR: Module nvidia is in use\n"
    a100.smi("-pm", "0")
    a100.tool("modprobe", "nvidia_drm")
    assert a100.tool("lsmod").stdout.count("nvidia") >= 4
    assert "In use by another client" in a100.smi("-r", "-i", "0", rc=255)
    a100.tool("modprobe", "-r", "nvidia_drm", "nvidia_modeset")
    a100.tool("rmmod", "nvidia")
    assert not (a100.root / "proc/driver/nvidia").exists()
    a100.smi(rc=9)
    a100.tool("rmmod", "nvidia", rc=1)
    a100.tool("modprobe", "nvidia")
    assert "570.172.08" in a100.read("proc/driver/nvidia/version")
    err = a100.tool("modprobe", "br_netfilter", rc=1).stderr
    assert "simulated kernel" in err and "br_netfilter" in err


def test_gdrcopy_and_peermem_hold_the_nvidia_module(a100):
    # issue 23 item 6: GDRCopy's gdrdrv (its own package) and nvidia_peermem use nvidia
    err = a100.tool("modprobe", "gdrdrv", rc=1).stderr
    assert err == f"modprobe: FATAL: Module gdrdrv not found in directory /lib/modules/{KR}\n"
    a100.write(f"lib/modules/{KR}/updates/dkms/gdrdrv.ko", "gdrdrv 2.4\n")  # gdrdrv-dkms
    a100.tool("modprobe", "gdrdrv")
    a100.tool("modprobe", "nvidia_peermem")
    assert "nvidia              60887040  2 gdrdrv,nvidia_peermem" in a100.tool("lsmod").stdout
    assert a100.tool("modprobe", "-r", "nvidia", rc=1).stderr == \
        "modprobe: FATAL: Module nvidia is in use.\n"
    assert a100.tool("rmmod", "nvidia", rc=1).stderr == \
        "rmmod: ERROR: Module nvidia is in use by: gdrdrv nvidia_peermem\n"
    for name in ("nvidia_peermem", "gdrdrv", "nvidia"):  # NVIDIA's driver manager's order
        a100.tool("modprobe", "-r", name)
    assert a100.tool("lsmod").stdout.count("\n") == 1


def test_unloading_the_driver_forgets_hopper_mig(sim):
    sim.machine("H100-80GB-HBM3", 1).install()
    sim.boot()
    sim.smi("-mig", "1")
    sim.tool("rmmod", "nvidia")
    sim.tool("modprobe", "nvidia")
    assert modes(sim) == "Disabled, Disabled\n"


# ----- lspci, faults, the machine tree -----------------------------------------------------
@pytest.mark.parametrize("model,device,count", [
    ("A100-SXM4-40GB", "20b0", 6), ("H100-80GB-HBM3", "2330", 4), ("L4", "27b8", 0),
    ("T4", "1eb8", 0), ("V100-SXM2-16GB", "1db1", 6), ("V100-PCIE-16GB", "1db4", 0),
    ("P100-PCIE-16GB", "15f8", 0), ("B200", "2901", 0)])
def test_lspci_lists_the_machine(sim, parsers, model, device, count):
    sim.machine(model, 8, nvswitch=True)
    out = sim.tool("lspci", "-mm", "-nn", "-d", "10de:").stdout
    devs = parsers.parse_lspci_nvidia(out)
    gpus = [d for d in devs if d["class"] == "3D controller"]
    assert len(gpus) == 8 and {d["device_id"] for d in gpus} == {device}
    assert len(devs) - len(gpus) == count
    plain = sim.tool("lspci").stdout
    assert plain.count("NVIDIA Corporation") == 8 + count and "Host bridge" in plain
    assert sim.tool("lspci", "-d", f"10de:{device}", "-n").stdout.splitlines()[0].endswith(
        f": 10de:{device} (rev a1)")
    first = next(x for x in plain.splitlines() if "3D controller" in x).split()[0]
    assert sim.tool("lspci", "-D", "-s", first).stdout.startswith(f"0000:{first} 3D controller")


def test_lspci_kernel_driver_follows_the_module(sim):
    sim.machine("L4", 1).install()
    assert "Kernel driver in use" not in sim.tool("lspci", "-k", "-d", "10de:").stdout
    sim.boot()
    assert "\tKernel driver in use: nvidia\n" in sim.tool("lspci", "-k", "-d", "10de:").stdout


def test_faults(a100):
    a100.tool("gpusim", "fault", "set", "dkms_build_fail")
    text = a100.read("etc/gpusim/faults.json")
    assert re.search(r'"dkms_build_fail"[\s]*:[\s]*true', text)   # what the DKMS step greps
    a100.tool("gpusim", "fault", "check", "dkms_build_fail")
    a100.tool("gpusim", "fault", "check", "smi_hang", rc=1)
    a100.tool("gpusim", "fault", "set", "no_such_fault", rc=2)
    a100.tool("gpusim", "fault", "set", "smi_hang", "0.4")
    start = time.monotonic()
    a100.smi("-L")
    assert time.monotonic() - start >= 0.4
    a100.tool("gpusim", "fault", "set", "smi_hang")       # no value: an hour, like a real hang
    with pytest.raises(subprocess.TimeoutExpired):
        a100._run(str(PKG_DIR), "gpusim.smi", ["-L"], timeout=1)
    a100.tool("gpusim", "fault", "clear")
    assert json.loads(a100.read("etc/gpusim/faults.json")) == {}


def test_state_dump(a100):
    dump = json.loads(a100.tool("gpusim", "state").stdout)
    assert dump["driver_status"] == "loaded" and dump["kernel_release"] == KR
    assert dump["built_module"]["version"] == "570.172.08"


def test_machine_tree_works_when_copied_like_the_sandbox_does(tmp_path):
    host_root = tmp_path / "host"
    shutil.copytree(TREE, host_root, symlinks=True)
    for rel in SHIMS.values():
        assert os.access(host_root / rel, os.X_OK), rel
    sim = Sim(tmp_path / "root", tree=host_root)
    sim.machine("L4", 1).install()
    assert "loaded" in sim.boot()
    assert "27b8" in sim.tool("lspci", "-nn").stdout


def test_clear_errors_for_a_broken_machine_file(sim):
    err = sim.tool("lspci", rc=1).stderr
    assert "machine.json is missing" in err
    sim.write("etc/gpusim/machine.json", '{"hostname": "x", "gpu_model": "B200"}')
    assert "lacks os, kernel_release, gpu_count" in sim.tool("gpusim-boot", rc=1).stderr
    sim.machine("A100-SXM4-80GB")
    assert "unknown gpu_model 'A100-SXM4-80GB'" in sim.tool("gpusim-boot", rc=1).stderr


# ----- golden outputs (sandbox/tests/fixtures/gpusim) and the parsers over all of them -----
FIXTURES = ROOT / "sandbox/tests/fixtures/gpusim"
FIXED_TIME = "Mon Jan  5 10:00:00 2026"


def _fixed_time(text):
    text = re.sub(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", FIXED_TIME, text)
    return re.sub(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", "2026/01/05 10:00:00.000", text)


def scenario_outputs(tmp_path):
    """Named outputs of three machines: an A100 pair with MIG and a process, an L4 on the
    550 branch, and a host whose driver is not usable."""
    outs = {}
    a = Sim(tmp_path / "a").machine("A100-SXM4-40GB", 2, nvswitch=True)
    a.install()
    a.boot()
    ssup2_layout(a)
    a.tool("gpusim", "process", "add", "--gpu", "0", "--pid", "4242", "--gi", "2", "--mem", "2000")
    a.tool("gpusim", "process", "add", "--gpu", "1", "--pid", "5151", "--name", "/opt/app/train")
    l4 = Sim(tmp_path / "l").machine("L4", 1)
    l4.install("550.163.01", "proprietary")
    l4.boot()
    for name, sim in (("a100x2_mig", a), ("l4_550", l4)):
        outs[f"{name}/smi_L.txt"] = sim.smi("-L")
        outs[f"{name}/smi_qx.xml"] = sim.smi("-q", "-x")
        outs[f"{name}/smi_q.txt"] = sim.smi("-q")
        outs[f"{name}/smi_table.txt"] = sim.smi()
        outs[f"{name}/query_gpu.csv"] = sim.smi(
            "--query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,"
            "persistence_mode,mig.mode.current,mig.mode.pending,compute_cap,utilization.gpu,"
            "temperature.gpu", "--format=csv")
        outs[f"{name}/query_apps.csv"] = sim.smi(
            "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv")
        outs[f"{name}/proc_version.txt"] = sim.read("proc/driver/nvidia/version")
        outs[f"{name}/lspci_mm.txt"] = sim.tool("lspci", "-mm", "-nn", "-d", "10de:").stdout
    outs["a100x2_mig/mig_lgi.txt"] = a.smi("mig", "-lgi")
    outs["a100x2_mig/mig_lci.txt"] = a.smi("mig", "-lci")
    outs["a100x2_mig/mig_lgip.txt"] = a.smi("mig", "-lgip")
    outs["l4_550/mig_lgi.txt"] = l4.smi("mig", "-lgi", rc=6)
    l4.install("570.172.08", "proprietary")
    outs["errors/smi_mismatch.txt"] = l4.smi("-q", "-x", rc=18)
    l4.tool("rmmod", "nvidia")
    outs["errors/smi_not_loaded.txt"] = l4.smi("-L", rc=9)
    return {k: _fixed_time(v) for k, v in outs.items()}


def test_outputs_match_the_golden_fixtures(tmp_path):
    outs = scenario_outputs(tmp_path)
    if os.environ.get("GPUSIM_REGEN_FIXTURES"):
        for rel, text in outs.items():
            (FIXTURES / rel).parent.mkdir(parents=True, exist_ok=True)
            (FIXTURES / rel).write_text(text)
    changed = [rel for rel, text in outs.items()
               if not (FIXTURES / rel).is_file() or (FIXTURES / rel).read_text() != text]
    assert not changed, (f"simulator outputs differ from sandbox/tests/fixtures/gpusim: {changed}; if "
                         "the change is intended, rerun with GPUSIM_REGEN_FIXTURES=1 and review "
                         "the diff")


PARSER_OF = {"smi_L": "parse_smi_list", "smi_qx": "parse_smi_xml", "query_gpu": "parse_query_csv",
             "query_apps": "parse_query_csv", "proc_version": "parse_driver_version_file",
             "lspci_mm": "parse_lspci_nvidia", "mig_lgi": "parse_mig_gpu_instances",
             "mig_lci": "parse_mig_compute_instances",
             "mig_lgip": "parse_mig_gpu_instance_profiles"}


def test_parsers_read_every_simulator_output(parsers):
    files = sorted(FIXTURES.rglob("*.*"))
    assert len(files) >= 20
    parsed = {}
    for path in files:
        func = "classify_smi_error" if path.parent.name == "errors" else PARSER_OF.get(path.stem)
        if func is None:
            continue
        if path.match("l4_550/mig_lgi.txt"):  # "No MIG-supported devices found." (rc 6)
            with pytest.raises(ValueError):
                getattr(parsers, func)(path.read_text())
            continue
        value = getattr(parsers, func)(path.read_text())
        parsed[f"{path.parent.name}/{path.stem}"] = value
        assert value not in (None, [], {}) or path.match("l4_550/query_apps.csv"), path
    xml, lst = parsed["a100x2_mig/smi_qx"], parsed["a100x2_mig/smi_L"]
    assert [g["uuid"] for g in xml["gpus"]] == [g["uuid"] for g in lst]
    gi_ids = {d["gpu_instance_id"] for d in xml["gpus"][0]["mig_devices"]}
    assert gi_ids == {g["instance_id"] for g in parsed["a100x2_mig/mig_lgi"]} == {2, 3, 9}
    assert [p["pid"] for g in xml["gpus"] for p in g["processes"]] == [4242, 5151]
    assert len([d for d in parsed["a100x2_mig/lspci_mm"] if d["class"] == "Bridge"]) == 6
    assert parsed["errors/smi_mismatch"] == "library_mismatch"
    assert parsed["errors/smi_not_loaded"] == "driver_not_loaded"
    assert parsed["l4_550/proc_version"]["flavor"] == "proprietary"
    assert parsed["l4_550/smi_qx"]["cuda_version"] == "12.4"


# ----- health fields and faults (issue 15 item 7) ---------------------------------------------
HEALTH_TAGS = ("ecc_errors", "retired_pages", "remapped_rows", "pci/pci_gpu_link_info",
               "clocks_event_reasons", "clocks_throttle_reasons", "fabric")


def gpu_subtree_paths(text, tag, gpu=0):
    """Element paths under <gpu>/<tag> of the gpu-th GPU (real files: their verbatim body)."""
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text[text.index("<?xml"):]))
    el = root.findall("gpu")[gpu].find(tag)
    if el is None:
        return None
    out = set()

    def walk(node, prefix):
        for child in node:
            here = f"{prefix}/{child.tag}"
            out.add(here)
            walk(child, here)
    walk(el, tag)
    return out


# (simulated model, driver, flavor, MIG GIs) -> the real file whose health layout it follows,
# and the subtrees compared (sandbox/README.md "gpusim health fields" lists the same).
LAYOUTS = [
    (("A100-SXM4-40GB", "535.54.03", True), "smi_qx__a100-sxm4-80gb-mig__535.54.03__trimmed-4gpu.xml",
     ("ecc_errors", "retired_pages", "remapped_rows", "pci/pci_gpu_link_info",
      "clocks_event_reasons", "fabric")),
    (("L4", "535.86.05", False), "smi_qx__rtx4090__535.86.05.xml",
     ("ecc_errors", "retired_pages", "remapped_rows", "pci/pci_gpu_link_info",
      "clocks_event_reasons", "fabric")),
    (("L4", "590.44.01", False), "smi_qx__dual-rtx-a5000__590.44.01.xml",
     ("ecc_errors", "retired_pages", "remapped_rows", "pci/pci_gpu_link_info",
      "clocks_event_reasons")),
    (("A100-SXM4-40GB", "525.147.05", False), "smi_qx__rtx3090__525.147.05.xml",
     ("retired_pages", "pci/pci_gpu_link_info", "clocks_throttle_reasons", "fabric")),
    (("A100-SXM4-40GB", "515.105.01", False), "smi_qx__a10g__515.105.01.xml",
     ("ecc_errors", "retired_pages", "remapped_rows", "pci/pci_gpu_link_info",
      "clocks_throttle_reasons", "fabric")),
    (("T4", "515.105.01", False), "smi_qx__tesla-t4__515.105.01.xml",
     ("ecc_errors", "remapped_rows", "pci/pci_gpu_link_info", "clocks_throttle_reasons",
      "fabric")),
    (("V100-SXM2-16GB", "430.26", False),
     "smi_qx__4x-tesla-k80__430.26__retired-pages-azure-domains__openpai.xml",
     ("ecc_errors", "pci/pci_gpu_link_info", "clocks_throttle_reasons", "fabric")),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: f"{c[0][0]}-{c[0][1]}")
def test_health_xml_layout_matches_the_real_file_of_its_era(sim, case):
    (model, version, mig), real_name, tags = case
    sim.machine(model, 1).install(version, "proprietary")
    sim.boot()
    if mig:
        sim.smi("-mig", "1")
        sim.smi("mig", "-cgi", "19", "-C")
    ours, real = sim.smi("-q", "-x"), body(real_name)
    for tag in tags:
        assert gpu_subtree_paths(ours, tag) == gpu_subtree_paths(real, tag), (tag, real_name)


def test_health_xml_of_the_simulated_eras(sim):
    """The 550/570 drivers the fake packages ship: split SRAM counters on Ampere and newer
    (L4 550.90.07, A100 555.42.02, H100 NVL 550.54.14 -q captures), SRAM/DRAM on Turing,
    single/double-bit blocks on Volta, fabric with clique and health from 550."""
    sim.machine("T4", 1).install("570.172.08", "proprietary")
    sim.boot()
    t4 = sim.smi("-q", "-x")
    assert gpu_subtree_paths(t4, "ecc_errors") == gpu_subtree_paths(
        body("smi_qx__tesla-t4__515.105.01.xml"), "ecc_errors")
    assert gpu_subtree_paths(t4, "retired_pages") == gpu_subtree_paths(
        body("smi_qx__tesla-t4__515.105.01.xml"), "retired_pages")
    v100 = Sim(sim.root / "v").machine("V100-SXM2-16GB", 1).install("550.163.01", "proprietary")
    v100.boot()
    assert gpu_subtree_paths(v100.smi("-q", "-x"), "ecc_errors") == gpu_subtree_paths(
        body("smi_qx__4x-tesla-k80__430.26__retired-pages-azure-domains__openpai.xml"),
        "ecc_errors")
    l4 = Sim(sim.root / "l").machine("L4", 1).install("550.163.01", "proprietary")
    l4.boot()
    split = gpu_subtree_paths(l4.smi("-q", "-x"), "ecc_errors")
    a5000 = gpu_subtree_paths(body("smi_qx__dual-rtx-a5000__590.44.01.xml"), "ecc_errors")
    assert split == a5000 - {f"ecc_errors/{k}" for k in (
        "channel_repair_pending", "tpc_repair_pending", "unrepairable_memory")}
    fabric = gpu_subtree_paths(l4.smi("-q", "-x"), "fabric")
    assert fabric == {"fabric/state", "fabric/status", "fabric/cliqueId", "fabric/clusterUuid",
                      "fabric/health", "fabric/health/bandwidth"}


def section(lines, title):
    """The lines of a top-level -q section (`    Title` and what is indented under it)."""
    start = next(i for i, x in enumerate(lines) if x.split(":")[0].strip() == title and
                 re.match(r"    \S", x))
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"    \S", lines[i])),
               len(lines))
    return lines[start:end]


def test_query_text_health_sections_match_the_l4_550_capture(sim):
    """nvidia-smi -q of an idle L4 on 550 whose link trained at x8, as in the real capture."""
    sim.machine("L4", 1).install("550.90.07", "proprietary")
    sim.boot()
    sim.gpusim("fault", "set", "pcie_degraded", "8")
    ours = sim.smi("-q").splitlines()
    real = body("smi_q__l4__550.90.07.txt").splitlines()
    for title in ("Clocks Event Reasons", "ECC Errors", "Retired Pages", "Remapped Rows",
                  "Fabric"):
        assert section(ours, title) == section(real, title), title
    link = [x for x in section(ours, "PCI") if x.startswith("        ")]
    real_link = section(real, "PCI")
    start = real_link.index("        GPU Link Info")
    assert link[link.index("        GPU Link Info"):][:10] == real_link[start:start + 10]


def healths(sim):
    return smi_health.healths(sim.smi("-q", "-x"))


HEALTHY_H100 = {"ecc_mode_current": "enabled", "ecc_volatile_uncorrectable": 0,
                "ecc_aggregate_uncorrectable": 0, "retired_pages_double_bit": None,
                "retired_pages_pending": None, "remapped_rows_uncorrectable": 0,
                "remapped_rows_pending": False, "remapped_rows_failure": False,
                "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16,
                "pcie_width_max": 16, "throttle_reasons_active": [], "fabric_state": "Completed",
                "fabric_status": "Success", "sram_threshold_exceeded": False}


def start_fabric_manager(sim, version):
    """A live process named like Fabric Manager, its pid file and the version file the
    sandbox's nv-fabricmanager writes (sandbox/nvidia/README.md, "Fabric Manager")."""
    proc = subprocess.Popen(["bash", "-c", "exec -a nv-fabricmanager sleep 300"])
    sim.write("run/nvidia-fabricmanager/nv-fabricmanager.pid", f"{proc.pid}\n")
    sim.write("run/nvidia-fabricmanager/gpusim-version", f"{version}\n")
    return proc


@pytest.fixture
def hgx(sim):
    sim.machine("H100-80GB-HBM3", 8, nvswitch=True).install()
    sim.boot()
    fm = start_fabric_manager(sim, "570.172.08")
    yield sim
    fm.kill()
    fm.wait()


def test_the_fabric_is_in_progress_until_fabric_manager_of_the_driver_version_runs(sim):
    sim.machine("H100-80GB-HBM3", 8, nvswitch=True).install()
    sim.boot()
    assert {h["fabric_state"] for h in healths(sim).values()} == {"In Progress"}
    other = start_fabric_manager(sim, "580.95.05")  # another version: refused, as FM does
    try:
        assert {h["fabric_state"] for h in healths(sim).values()} == {"In Progress"}
    finally:
        other.kill()
        other.wait()
    fm = start_fabric_manager(sim, "570.172.08")
    try:
        assert {h["fabric_state"] for h in healths(sim).values()} == {"Completed"}
        assert section(sim.smi("-q", "-i", "0").splitlines(), "Fabric")[1:3] == [
            "        State                             : Completed",
            "        Status                            : Success"]
    finally:
        fm.kill()
        fm.wait()
    assert {h["fabric_state"] for h in healths(sim).values()} == {"In Progress"}


def test_a_completed_fabric_can_carry_a_failed_status(hgx):
    """T4-05: state Completed with status "Insufficient Resources" (Azure/azhpc-images PR
    #506) or "Unknown Error" (NVIDIA/NVSentinel#883); NVML checks the status once complete."""
    hgx.gpusim("fault", "set", "fabric_status", "--gpu", "2")
    hgx.gpusim("fault", "set", "fabric_status", "Unknown Error", "--gpu", "3")
    text = hgx.smi("-q", "-i", "2").splitlines()
    assert section(text, "Fabric")[1:3] == [
        "        State                             : Completed",
        "        Status                            : Insufficient Resources"]
    xml = hgx.smi("-q", "-x")
    assert xml.count("<status>Unknown Error</status>") == 1
    assert xml.count("<status>Success</status>") == 6
    assert {h["fabric_state"] for h in healths(hgx).values()} == {"Completed"}


def test_each_gpu_fault_shows_in_the_xml(hgx):
    bus = [f"00000000:{b}.0" for b in models_bus("H100-80GB-HBM3")]
    assert all(h == HEALTHY_H100 for h in healths(hgx).values())
    for args in (("ecc_volatile_uncorrectable", "2", "--gpu", "1"),
                 ("ecc_aggregate_uncorrectable", "5", "--gpu", "2"),
                 ("row_remap_pending", "--gpu", "3"), ("row_remap_failure", "--gpu", "4"),
                 ("pcie_degraded", "8", "--gpu", "5"),
                 ("throttle", "hw_thermal_slowdown,sw_power_cap", "--gpu", "6"),
                 ("fabric_in_progress", "--gpu", "7")):
        hgx.gpusim("fault", "set", *args)
    got = healths(hgx)
    want = {i: dict(HEALTHY_H100) for i in range(8)}
    want[1].update(ecc_volatile_uncorrectable=2, ecc_aggregate_uncorrectable=2)
    want[2].update(ecc_aggregate_uncorrectable=5)
    want[3].update(remapped_rows_pending=True, remapped_rows_uncorrectable=1)
    want[4].update(remapped_rows_failure=True)
    want[5].update(pcie_width_current=8)
    want[6].update(throttle_reasons_active=["hw_slowdown", "hw_thermal_slowdown", "sw_power_cap"])
    want[7].update(fabric_state="In Progress", fabric_status=None)
    assert got == {bus[i]: want[i] for i in range(8)}
    text = hgx.smi("-q", "-i", "7").splitlines()
    assert section(text, "Fabric")[1:3] == ["        State                             : In Progress",
                                            "        Status                            : N/A"]
    assert "|   1  NVIDIA H100 80GB HBM3" in hgx.smi()
    assert [x for x in hgx.smi().splitlines() if "00000000:2A:00.0" in x][0].endswith(
        "|                    2 |")  # the table's Volatile Uncorr. ECC column


def models_bus(model):
    sys.path.insert(0, str(PKG_DIR))
    try:
        from gpusim import models
    finally:
        sys.path.remove(str(PKG_DIR))
    return models.GPU_MODELS[model]["bus_ids"]


def test_pre_ampere_gpus_retire_pages_and_report_no_row_remapper(sim):
    sim.machine("V100-SXM2-16GB", 2).install("570.172.08", "proprietary")
    sim.boot()
    sim.gpusim("fault", "set", "retired_pages", "2", "--gpu", "0")
    sim.gpusim("fault", "set", "retired_pages_pending", "--gpu", "1")
    err = sim.gpusim("fault", "set", "row_remap_pending", "--gpu", "0", rc=2).stderr
    assert "retires pages instead of remapping rows" in err
    h = list(healths(sim).values())
    assert (h[0]["retired_pages_double_bit"], h[0]["retired_pages_pending"]) == (2, False)
    assert (h[1]["retired_pages_double_bit"], h[1]["retired_pages_pending"]) == (1, True)
    assert h[0]["remapped_rows_pending"] is None and h[0]["ecc_volatile_uncorrectable"] == 0
    assert h[0]["pcie_gen_current"] == 1 and h[0]["throttle_reasons_active"] == ["gpu_idle"]
    xml = sim.smi("-q", "-x")
    assert xml.count("<retired_page_address>0x") == 3
    sim.boot()  # the driver load retires the pending page
    h = list(healths(sim).values())
    assert (h[1]["retired_pages_double_bit"], h[1]["retired_pages_pending"]) == (1, False)
    a100 = Sim(sim.root / "a").machine("A100-SXM4-40GB", 1).install()
    a100.boot()
    err = a100.gpusim("fault", "set", "retired_pages_pending", rc=2).stderr
    assert "remaps rows instead of retiring pages" in err
    assert "Hopper and newer GPUs of NVSwitch hosts" in a100.gpusim(
        "fault", "set", "fabric_in_progress", rc=2).stderr


def test_what_a_reset_a_driver_load_and_a_reboot_clear(hgx):
    hgx.gpusim("fault", "set", "ecc_volatile_uncorrectable", "3", "--gpu", "0")
    hgx.gpusim("fault", "set", "row_remap_pending", "2", "--gpu", "1")
    hgx.gpusim("fault", "set", "row_remap_failure", "--gpu", "2")
    hgx.gpusim("fault", "set", "pcie_degraded", "4", "--gpu", "3")
    hgx.gpusim("fault", "set", "throttle", "sw_power_cap", "--gpu", "4")
    hgx.gpusim("fault", "set", "gpu_missing", "--gpu", "5")
    hgx.smi("-i", "1", "-r")  # the reset activates the pending remap
    h = healths(hgx)
    gpu1 = h["00000000:2A:00.0"]
    assert (gpu1["remapped_rows_pending"], gpu1["remapped_rows_uncorrectable"]) == (False, 2)
    hgx.smi("-i", "0", "-r")  # the volatile ECC count restarts with the GPU's state
    gpu0 = healths(hgx)["00000000:18:00.0"]
    assert (gpu0["ecc_volatile_uncorrectable"], gpu0["ecc_aggregate_uncorrectable"]) == (0, 3)
    hgx.boot()
    h = healths(hgx)
    assert h["00000000:18:00.0"]["ecc_volatile_uncorrectable"] == 0   # since the driver load
    assert h["00000000:18:00.0"]["ecc_aggregate_uncorrectable"] == 3  # kept
    assert h["00000000:3A:00.0"]["remapped_rows_failure"] is True      # kept
    assert h["00000000:5D:00.0"]["pcie_width_current"] == 4            # hardware
    assert h["00000000:9A:00.0"]["throttle_reasons_active"] == ["sw_power_cap"]
    assert "00000000:AB:00.0" not in h and len(h) == 7                 # still missing


def test_missing_gpu_is_on_the_bus_but_not_in_nvidia_smi(hgx):
    hgx.gpusim("fault", "set", "gpu_missing", "--gpu", "1")
    listed = hgx.smi("-L").splitlines()
    assert len(listed) == 7 and listed[1].startswith("GPU 1: ")
    xml = hgx.smi("-q", "-x")
    assert "<attached_gpus>7</attached_gpus>" in xml and "00000000:2A:00.0" not in xml
    assert hgx.smi("-i", "1", "--query-gpu=pci.bus_id", "--format=csv,noheader") == \
        "00000000:3A:00.0\n"      # nvidia-smi numbers the GPUs it sees
    assert "2a:00.0" in hgx.tool("lspci", "-d", "10de:").stdout
    assert "NVRM: GPU 0000:2a:00.0: RmInitAdapter failed! (0x22:0x56:667)" in hgx.tool(
        "dmesg").stdout
    hgx.boot()  # a GPU that fails to initialise fails at every load
    assert "NVRM: GPU 0000:2a:00.0: rm_init_adapter failed, device minor number 1" in \
        hgx.tool("dmesg").stdout
    hgx.gpusim("fault", "set", "gpu_missing", "--gpu", "all")
    assert hgx.smi("-L", rc=6) == "No devices were found\n"
    hgx.gpusim("fault", "clear", "gpu_missing")
    assert len(hgx.smi("-L").splitlines()) == 8


def test_lost_gpu_fails_nvidia_smi_until_a_reboot(hgx):
    hgx.gpusim("fault", "set", "gpu_lost", "--gpu", "2")
    out = hgx.smi("-q", "-x", rc=15)
    assert out == ("Unable to determine the device handle for GPU0000:3A:00.0: GPU is lost. "
                   "Reboot the system to recover this GPU\n")
    assert hgx.smi("-i", "0", "-L").startswith("GPU 0: ")
    log = hgx.tool("dmesg").stdout
    assert re.search(r"\] NVRM: Xid \(PCI:0000:3a:00\): 79, pid='<unknown>', name=<unknown>, "
                     r"GPU has fallen off the bus\.\n", log)
    assert "] NVRM: GPU 0000:3a:00.0: GPU has fallen off the bus.\n" in log
    hgx.boot()
    assert len(hgx.smi("-L").splitlines()) == 8 and "Xid" not in hgx.tool("dmesg").stdout


def test_xid_and_sxid_lines(hgx, parsers):
    hgx.gpusim("xid", "79", "--gpu", "1")
    hgx.gpusim("xid", "13", "--gpu", "2", "--pid", "4242", "--name", "python3", "--text",
               "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address")
    hgx.gpusim("sxid", "12028", "--switch", "3")
    hgx.smi("-i", "0", "-mig", "1")
    hgx.smi("mig", "-i", "0", "-cgi", "19", "-C")
    hgx.gpusim("xid", "63", "--gpu", "0", "--gi", "9")
    hgx.gpusim("xid", "43", "--gpu", "0", "--gi", "9", "--ci", "0", "--text", "Ch 00000010")
    log = hgx.tool("dmesg", "-t").stdout.splitlines()
    xids = [x for x in log if "Xid" in x]
    assert xids == [
        "NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:3a:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on "
        "(GPC 0, TPC 0, SM 0): Out Of Range Address",
        "nvidia-nvswitch3: SXid (PCI:0000:c7:00.0): 12028, Non-fatal, Link 32 egress non-posted "
        "PRIV error (First)",
        "NVRM: Xid (PCI:0000:18:00 GPU-I:09): 63, pid='<unknown>', name=<unknown>, Row Remapper: "
        "New row marked for remapping, reset gpu to activate.",
        "NVRM: Xid (PCI:0000:18:00 GPU-I:09 GPU-CI:00): 43, pid='<unknown>', name=<unknown>, "
        "Ch 00000010"]
    assert "no default text for Xid 31" in hgx.gpusim("xid", "31", rc=2).stderr
    assert "has no GPU instance 5" in hgx.gpusim("xid", "63", "--gi", "5", rc=2).stderr
    if hasattr(parsers, "parse_xid_lines"):  # facts/parsers.py of issue 15 (helper H1)
        events = parsers.parse_xid_lines(hgx.tool("dmesg").stdout)
        assert [(e["pci_bus_id"], e.get("xid", e.get("sxid"))) for e in events] == [
            ("0000:2a:00", 79), ("0000:3a:00", 13), ("0000:c7:00.0", 12028),
            ("0000:18:00", 63), ("0000:18:00", 43)]
        assert events[3]["gpu_instance_id"] == 9
    l4 = Sim(hgx.root / "l").machine("L4", 1).install()
    assert "is not loaded" in l4.gpusim("xid", "79", rc=1).stderr
    l4.boot()
    assert "this host has none" in l4.gpusim("sxid", "12028", rc=2).stderr


def test_faults_armed_for_the_next_driver_load(hgx):
    hgx.gpusim("fault", "set", "gpu_missing", "--gpu", "3", "--next-load")
    hgx.gpusim("xid", "79", "--gpu", "1", "--next-load")
    hgx.gpusim("fault", "set", "throttle", "bogus", "--next-load", rc=2)
    assert len(hgx.smi("-L").splitlines()) == 8 and "Xid" not in hgx.tool("dmesg").stdout
    assert hgx.faults()["next_load"] == [["fault", "set", "gpu_missing", "--gpu", "3"],
                                         ["xid", "79", "--gpu", "1"]]
    hgx.tool("rmmod", "nvidia")
    hgx.tool("modprobe", "nvidia")   # a driver reload, as an upgrade without reboot does
    assert len(hgx.smi("-L").splitlines()) == 7
    assert "NVRM: Xid (PCI:0000:2a:00): 79," in hgx.tool("dmesg").stdout
    assert "next_load" not in hgx.faults()


def test_kernel_log_is_per_boot_and_dmesg_prints_it_as_util_linux(hgx):
    log = hgx.tool("dmesg").stdout.splitlines()
    stamp = r"\[ *\d+\.\d{6}\] "
    assert re.fullmatch(stamp + "nvidia: loading out-of-tree module taints kernel.", log[0])
    assert re.fullmatch(stamp + r"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  "
                        r"570\.172\.08  Release Build  \(dvs-builder@U22-I3-AE18-23-3\)  "
                        r"Tue Jul  8 17:48:18 UTC 2025", log[-1])
    assert sum("nvidia-nvswitch: Probing device" in x for x in log) == 4
    hgx.gpusim("xid", "79", "--gpu", "0")
    line = hgx.tool("dmesg", "-T").stdout.splitlines()[-1]
    assert re.fullmatch(r"\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\] NVRM: Xid .*", line)
    assert re.fullmatch(r"kern  :err   : " + stamp + "NVRM: Xid .*",
                        hgx.tool("dmesg", "-x").stdout.splitlines()[-1])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d NVRM: Xid .*",
                        hgx.tool("dmesg", "--time-format=iso").stdout.splitlines()[-1])
    assert re.fullmatch(r"<3>" + stamp + "NVRM: Xid .*",
                        hgx.tool("dmesg", "-r").stdout.splitlines()[-1])
    assert hgx.tool("dmesg", "--level", "warn").stdout.count("\n") == 1
    assert hgx.tool("dmesg", "--follow", rc=1).stderr == (
        "dmesg: unrecognized option '--follow'\nTry 'dmesg --help' for more information.\n")
    hgx.boot()
    assert "Xid" not in hgx.tool("dmesg").stdout                 # a new boot, a new buffer
    hgx.tool("dmesg", "-C")
    assert hgx.tool("dmesg").stdout == ""
    hgx.gpusim("kmsg", "NVRM: The NVIDIA GPU 0000:b3:00.0 has fallen off the bus")
    assert hgx.tool("dmesg", "-t").stdout == \
        "NVRM: The NVIDIA GPU 0000:b3:00.0 has fallen off the bus\n"


def test_the_fact_parser_reads_every_simulated_fault_as_the_contract_says(hgx, parsers):
    """facts/parsers.py's parse_smi_xml (issue 15, helper H1) over the faults above."""
    for args in (("ecc_volatile_uncorrectable", "2", "--gpu", "1"),
                 ("row_remap_pending", "--gpu", "3"), ("row_remap_failure", "--gpu", "4"),
                 ("pcie_degraded", "8", "--gpu", "5"), ("throttle", "sw_power_cap", "--gpu", "6"),
                 ("fabric_in_progress", "--gpu", "7"), ("fabric_status", "--gpu", "2"),
                 ("sram_threshold_exceeded", "--gpu", "0")):
        hgx.gpusim("fault", "set", *args)
    xml = hgx.smi("-q", "-x")
    assert xml.count("<sram_threshold_exceeded>Yes</sram_threshold_exceeded>") == 1
    gpus = parsers.parse_smi_xml(xml)["gpus"]
    want = smi_health.healths(xml)
    assert {g["pci_bus_id"]: g["health"] for g in gpus} == want


def test_nvlink_status_and_error_counters_with_their_faults(hgx, parsers):
    """`nvidia-smi nvlink -s/-e` as the H100 capture prints them (18 links, 26.562 GB/s),
    read back by the product's parsers; inactive links stay over a driver reload, the error
    counters restart with it."""
    status = hgx.smi("nvlink", "-s")
    assert status.splitlines()[:2] == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {parsers.parse_smi_list(hgx.smi('-L'))[0]['uuid']})",
        "\t Link 0: 26.562 GB/s"]
    errors = hgx.smi("nvlink", "-e", "-i", "0").splitlines()
    assert errors[1:5] == ["\t Link 0: Replay Errors: 0", "\t Link 0: Recovery Errors: 0",
                           "\t Link 0: CRC Errors: 0", ""]
    hgx.gpusim("fault", "set", "nvlink_inactive", "3,7", "--gpu", "2")
    hgx.gpusim("fault", "set", "nvlink_recovery_errors", "4", "--gpu", "5")
    hgx.gpusim("fault", "set", "nvlink_crc_errors", "9", "--gpu", "5")
    hgx.gpusim("fault", "set", "nvlink_inactive", "x", "--gpu", "2", rc=2)
    gpus = parsers.parse_nvlink_status(hgx.smi("nvlink", "--status"))
    assert [len(g["links"]) for g in gpus] == [18] * 8
    assert [[lk["link"] for lk in g["links"] if lk["state"] == "inactive"] for g in gpus] == \
        [[], [], [3, 7], [], [], [], [], []]
    counters = parsers.parse_nvlink_errors(hgx.smi("nvlink", "--errorcounters"))
    assert counters[5]["links"][0] == {"Replay Errors": 0, "Recovery Errors": 4, "CRC Errors": 9}
    hgx.smi("nvlink", rc=2)  # neither -s nor -e
    hgx.tool("rmmod", "nvidia")
    hgx.tool("modprobe", "nvidia")
    assert parsers.parse_nvlink_errors(hgx.smi("nvlink", "-e"))[5]["links"][0]["CRC Errors"] == 0
    assert "Link 7: <inactive>" in hgx.smi("nvlink", "-s", "-i", "2")


def test_gpus_without_nvlink_print_their_header_only(sim):
    sim.machine("L4", 2).install()
    sim.boot()
    assert [line.split(" (")[0] for line in sim.smi("nvlink", "-s").splitlines()] == [
        "GPU 0: NVIDIA L4", "GPU 1: NVIDIA L4"]
    assert "has no NVLink" in sim.gpusim("fault", "set", "nvlink_crc_errors", rc=2).stderr


def test_spec_faults_are_set_in_the_host_at_its_creation(tmp_path):
    from sandbox import hosts, spec
    from sandbox.util import SandboxError
    with pytest.raises(SandboxError, match="faults must be a list of gpusim commands"):
        spec.load_overrides('{"gpu-01": {"faults": ["rm -rf /"]}}')
    overrides = spec.load_overrides(json.dumps({"gpu-01": {
        "gpu_model": "H100-80GB-HBM3", "gpu_count": 8,
        "faults": ["fault set row_remap_failure --gpu 6", "xid 79 --gpu 1 --next-load"]}}))
    h = spec.plan(1, 0, 0, overrides, KR)[0]
    upper = tmp_path / "upper"
    shutil.copytree(TREE, upper, symlinks=True)
    (upper / "etc/gpusim").mkdir(parents=True)
    (upper / "etc/gpusim/machine.json").write_text(json.dumps(spec.machine_json(h)))
    hosts._apply_faults(h, upper)
    assert json.loads((upper / "etc/gpusim/faults.json").read_text()) == {
        "gpus": {"6": {"row_remap_failure": True}}, "next_load": [["xid", "79", "--gpu", "1"]]}
    with pytest.raises(SandboxError, match="gpu-01: fault 'xid 79 --gpu 1': .*is not loaded"):
        hosts._apply_faults({**h, "faults": ["xid 79 --gpu 1"]}, upper)
