"""One sandbox host: its files (upper directory), its supervisor, its state.

Persistent (until `down`): /var/lib/gpuhost-sandbox/hosts/NAME/
    upper/ work/    overlay upper and work directories (survive simulated reboots)
    root/           mount point of the merged root (mounted only inside the host's mount
                    namespace; systemd-nspawn boots it)
    docker/         bound on /var/lib/docker inside (overlay2 needs a real file system)
    spec.json       the host's spec; lower: its overlay lowerdir string
Runtime: RUNDIR/hosts/NAME/ (see supervisor.py).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import base, debian13, mirror, paths, pci, supervisor, traits, ubuntu
from .spec import machine_json
from .util import SandboxError, pid_alive, read_json, read_pid, run, write_file

SUPERVISOR = paths.PACKAGE_DIR / "supervisor.py"
BOOT = paths.FILES_DIR / "boot.sh"
# Where sandbox/nvidia's artifacts say they are served (its manifest and repo files).
DEFAULT_MIRROR_URL = "http://127.77.0.1:8000"


def host_dir(name: str) -> Path:
    return paths.HOSTS_DIR / name


def root_file(name: str, rel: str) -> Path:
    """The file REL of the host's root as the overlay shows it (upper dir, then each lower
    layer), without mounting it: a host booted from a snapshot has most files below."""
    d = host_dir(name)
    layers = [d / "upper"] + [Path(p) for p in (d / "lower").read_text().split(":")]
    for layer in layers:
        if (layer / rel).exists():
            return layer / rel
    raise SandboxError(f"{name}: no /{rel} in its root ({', '.join(map(str, layers))})")


def host_run_dir(name: str) -> Path:
    return paths.run_dir() / "hosts" / name


def cgroup(name: str) -> str:
    """The host's cgroup, relative to each hierarchy's root (see supervisor.cgroup_dirs)."""
    return f"{paths.CGROUP_PARENT_PREFIX}/{name}"


def docker_opts(name: str) -> str:
    """dockerd flags for a sandbox host: no networking of its own (the hosts share this
    machine's network namespace). Containers' cgroups are inside the host's own."""
    return "--iptables=false --ip6tables=false --bridge=none --ip-forward=false --ip-masq=false"


def _sshd_config(h: dict) -> str:
    return (
        "# gpuhost sandbox: this host's sshd listens on its loopback address only.\n"
        f"ListenAddress {h['address']}:{h['port']}\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "UseDNS no\n"
        "X11Forwarding no\n"
        "MaxStartups 200:30:400\n"
        "MaxSessions 100\n"
    )


def create(h: dict, pubkey: str) -> None:
    """Create the host's directories and write the simulator's files into its upper dir."""
    d = host_dir(h["name"])
    if d.exists():
        shutil.rmtree(d)
    upper = d / "upper"
    for sub in ("upper", "work", "root", "docker"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    lowers = base.lower_dirs(h["os"])
    for layer in lowers:
        if not layer.is_dir():
            raise SandboxError(f"base layer {layer} is missing: run `python -m sandbox base`")
    write_file(d / "lower", ":".join(str(p) for p in lowers))
    write_file(d / "spec.json", json.dumps(h, indent=1, sort_keys=True) + "\n")

    name = h["name"]
    write_file(upper / "etc/hostname", name + "\n")
    write_file(upper / "etc/hosts", f"127.0.0.1\tlocalhost\n{h['address']}\t{name}\n"
               "::1\tlocalhost ip6-localhost ip6-loopback\n")
    write_file(upper / "etc/gpusim/machine.json",
               json.dumps(machine_json(h), indent=1) + "\n")
    # sshd: own host key, root key login, loopback address.
    keyfile = upper / "etc/ssh/ssh_host_ed25519_key"
    keyfile.parent.mkdir(parents=True, exist_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", keyfile])
    write_file(upper / "etc/ssh/sshd_config.d/gpuhost-sandbox.conf", _sshd_config(h))
    (upper / "root/.ssh").mkdir(mode=0o700, parents=True, exist_ok=True)
    write_file(upper / "root/.ssh/authorized_keys", pubkey, mode=0o600)
    # apt: the sandbox mirror only (Ubuntu hosts: the sandbox's Ubuntu-layout archive,
    # in the stock image's sources files).
    if ubuntu.is_ubuntu(h["os"]):
        ubuntu.write_apt_sources(upper, h["os"])
    elif h["os"] == debian13.OS_NAME:
        debian13.write_apt_sources(upper)
    else:
        write_file(upper / "etc/apt/sources.list", mirror.sources_list())
        shutil.copyfile(mirror.KEYRING, _mk(upper / "etc/apt/keyrings") / mirror.KEYRING_NAME)
    # A machine id of its own, as an installed system has (systemd, journald, dbus use it).
    write_file(upper / "etc/machine-id", os.urandom(16).hex() + "\n", mode=0o444)
    # Simulator pieces: uname (the simulated kernel release), the boot-time GPU unit.
    _install(paths.FILES_DIR / "uname", _mk(upper / "usr/local/bin") / "uname")
    _systemd_units(upper)
    # apt runs dpkg with its own PATH (DPkg::Path, no /usr/local) and rpm runs scriptlets
    # with %_install_script_path: let both see the simulator's shims (uname, lspci,
    # modprobe), so DKMS in a driver package's postinst builds for the simulated kernel.
    local_first = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    write_file(upper / "etc/apt/apt.conf.d/00gpuhost-sandbox-path",
               f'DPkg::Path "{local_first}";\n')
    write_file(upper / "etc/rpm/macros.gpuhost-sandbox",
               f"%_install_script_path {local_first}\n")
    # dockerd's sandbox flags for every host (Oracle hosts' docker-ce ships Debian's
    # docker.service, which reads /etc/default/docker)
    _docker_defaults(upper, name, lowers)
    if h["os"] in ("ol8", "ol9"):
        with open(upper / "etc/default/docker", "a") as defaults:
            defaults.write("# docker-ce's dockerd (a wrapper) lives in /usr/bin\nDOCKERD=/usr/bin/dockerd\n")
        # The Oracle hosts' stock repositories (sandbox/nvidia/pkg/oracle.py, one repo per
        # Oracle channel): the .repo files a fresh install has (oraclelinux-release-elN's),
        # Oracle's key file they name, and the dnf variable their baseurl uses.
        ol_dir = paths.NVIDIA_CACHE / "ol"
        if (ol_dir / h["os"] / "yum.repos.d").is_dir():
            for repo in sorted((ol_dir / h["os"] / "yum.repos.d").glob("*.repo")):
                shutil.copyfile(repo, _mk(upper / "etc/yum.repos.d") / repo.name)
            shutil.copyfile(ol_dir / "gpgkey", _mk(upper / "etc/pki/rpm-gpg") / "RPM-GPG-KEY-oracle")
            # built for the default server; a private fleet serves it on its own port
            url = (ol_dir / "gpuhost_sandbox_url").read_text().strip()
            write_file(_mk(upper / "etc/dnf/vars") / "gpuhost_sandbox_url",
                       url.replace(DEFAULT_MIRROR_URL + "/", paths.MIRROR_URL + "/") + "\n")
    # The fake-driver helper's machine scripts (lspci, gpusim-boot, ...), when present.
    if paths.NVIDIA_MACHINE_DIR.is_dir():
        shutil.copytree(paths.NVIDIA_MACHINE_DIR, upper, symlinks=True, dirs_exist_ok=True)
    # GPU faults of the spec (`faults`: gpusim commands), set as gpusim sets them at run time.
    if h.get("faults"):
        _apply_faults(h, upper)
    # Host traits (sandbox/traits): last, so a trait can change any file written above.
    traits.apply_create(h, upper)
    # /sys/bus/pci/devices of the host (bound read-only by boot.sh; sandbox/pci.py).
    if paths.NVIDIA_MACHINE_DIR.is_dir():
        pci.write_tree(h, d / "pci")


def _apply_faults(h: dict, upper: Path) -> None:
    """Run each `faults` entry of the spec as `gpusim ARGS` against the host's upper dir
    (GPUSIM_ROOT): faults that need a loaded driver (an Xid, gpu_lost) must carry
    --next-load, and are injected at the host's first driver load."""
    shim = upper / "usr/local/bin/gpusim"
    for entry in h["faults"]:
        res = subprocess.run([sys.executable, str(shim), *shlex.split(entry)],
                             env={"GPUSIM_ROOT": str(upper), "PATH": os.environ.get("PATH", "")},
                             capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise SandboxError(f"--spec {h['name']}: fault {entry!r}: "
                               f"{(res.stderr or res.stdout).strip()}")


def ssh_runner(h: dict):
    """sh(command, check=True, timeout=600) -> CompletedProcess: a shell command as root in
    the host over real SSH (the fleet's key and known_hosts)."""
    rd = paths.run_dir()

    def sh(command: str, check: bool = True, timeout: float = 600):
        proc = subprocess.run(
            ["ssh", "-i", str(rd / "id_ed25519"), "-p", str(h["port"]),
             "-o", f"UserKnownHostsFile={rd / 'known_hosts'}", "-o", "BatchMode=yes",
             "-o", "StrictHostKeyChecking=yes", f"root@{h['address']}", command],
            text=True, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise SandboxError(f"{h['name']}: `{command}` failed (exit {proc.returncode}):\n"
                               f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
        return proc
    return sh


DOCKER_DEFAULTS = """\
# gpuhost sandbox: dockerd flags for a simulated host: no network of its own (all hosts
# share this machine's network namespace). daemon.json is left to gpuhost. Read by
# docker.service (EnvironmentFile=-/etc/default/docker, $DOCKER_OPTS). Kept across
# docker.io installs by a local dpkg diversion of this conffile (the package's copy goes
# to {dist}).
DOCKER_OPTS="{opts}"
"""

GPUSIM_BOOT_UNIT = """\
# gpuhost sandbox simulator piece: what loading the NVIDIA kernel module does at boot.
[Unit]
Description=GPU simulator: load the installed driver, apply pending MIG modes
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target shutdown.target nvidia-persistenced.service docker.service
Conflicts=shutdown.target
ConditionPathExists=/usr/local/sbin/gpusim-boot

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpusim-boot

[Install]
WantedBy=sysinit.target
"""

# Units whose vendor files set LimitNOFILE/LimitNPROC/LimitCORE=infinity (containerd,
# Docker). Raising a hard limit needs CAP_SYS_RESOURCE, which root lacks on some machines
# (this project's CI VMs): there systemd refuses to start them (status=205/LIMITS). The
# drop-in caps them at this machine's hard limits; it is written only on such machines.
LIMITED_UNITS = ["containerd.service", "docker.service"]


def _systemd_units(upper: Path) -> None:
    system = _mk(upper / "etc/systemd/system")
    write_file(system / "gpusim-boot.service", GPUSIM_BOOT_UNIT)
    wants = _mk(system / "sysinit.target.wants")
    os.symlink("/etc/systemd/system/gpusim-boot.service", wants / "gpusim-boot.service")
    if _can_raise_limits():
        return
    limits = "".join(f"Limit{k}={v}\n" for k, v in _hard_limits().items())
    for unit in LIMITED_UNITS:
        write_file(system / f"{unit}.d" / "gpuhost-sandbox-limits.conf",
                   "# gpuhost sandbox: this machine's root cannot raise hard limits "
                   "(no CAP_SYS_RESOURCE)\n[Service]\n" + limits)


def _hard_limits() -> dict[str, str]:
    out = {}
    for key, res in (("NOFILE", resource.RLIMIT_NOFILE), ("NPROC", resource.RLIMIT_NPROC),
                     ("CORE", resource.RLIMIT_CORE)):
        hard = resource.getrlimit(res)[1]
        out[key] = "infinity" if hard == resource.RLIM_INFINITY else str(hard)
    return out


def _can_raise_limits() -> bool:
    """True when this process holds CAP_SYS_RESOURCE (bit 24 of CapEff)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)
    except OSError:
        pass
    return False


DOCKER_DEFAULTS_DIST = "/etc/default/docker.docker-io-dist"


def _docker_defaults(upper: Path, name: str, lowers: list[Path]) -> None:
    write_file(upper / "etc/default/docker",
               DOCKER_DEFAULTS.format(opts=docker_opts(name), dist=DOCKER_DEFAULTS_DIST))
    # dpkg-divert --local --no-rename --divert DIST --add /etc/default/docker, written
    # directly into this host's dpkg database (triplets: file, diverted-to, package).
    diversions = ""
    for layer in lowers:
        f = layer / "var/lib/dpkg/diversions"
        if f.is_file():
            diversions = f.read_text()
            break
    if "/etc/default/docker\n" not in diversions:
        diversions += f"/etc/default/docker\n{DOCKER_DEFAULTS_DIST}\n:\n"
    write_file(upper / "var/lib/dpkg/diversions", diversions)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _install(src: Path, dest: Path) -> None:
    shutil.copyfile(src, dest)
    os.chmod(dest, 0o755)


def start(name: str) -> None:
    """Start the host's supervisor (detached) unless it is running."""
    rd = host_run_dir(name)
    rd.mkdir(parents=True, exist_ok=True)
    if supervisor_pid(name):
        return
    d = host_dir(name)
    log = open(rd / "console.log", "ab")
    subprocess.Popen(
        [sys.executable, str(SUPERVISOR), "--name", name, "--rundir", str(rd),
         "--boot", str(BOOT), "--lower", (d / "lower").read_text(),
         "--upper", str(d / "upper"), "--work", str(d / "work"), "--root", str(d / "root"),
         "--docker-data", str(d / "docker"), "--cgroup", cgroup(name)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True, cwd="/",
    )
    log.close()


def supervisor_pid(name: str) -> int | None:
    pid = read_pid(host_run_dir(name) / "supervisor.pid")
    if pid and pid_alive(pid) and "supervisor.py" in _cmdline(pid):
        return pid
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def stop(name: str) -> None:
    """SIGKILL the host's supervisor and its unshare, then every process of the host's
    cgroup (systemd-nspawn, the host's systemd and all it runs) and remove the cgroup."""
    rd = host_run_dir(name)
    pids = []
    for pidfile, marker in (("supervisor.pid", str(rd)), ("unshare.pid", str(BOOT))):
        pid = read_pid(rd / pidfile)
        if pid and pid_alive(pid) and marker in _cmdline(pid):
            pids.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    supervisor.kill_cgroup(cgroup(name))


def destroy(name: str) -> None:
    stop(name)
    shutil.rmtree(host_run_dir(name), ignore_errors=True)
    remove_tree(host_dir(name))


def remove_tree(path: Path) -> None:
    """rm -rf that never crosses into another file system (a leftover mount)."""
    if path.exists():
        run(["rm", "-rf", "--one-file-system", str(path)])


def state(name: str) -> str:
    rd = host_run_dir(name)
    if not supervisor_pid(name):
        st = (rd / "state").read_text().strip() if (rd / "state").is_file() else ""
        return "halted" if st == "halted" else "down"
    return (rd / "state").read_text().strip() if (rd / "state").is_file() else "booting"


def ssh_ready(address: str, port: int, timeout: float = 0.5) -> bool:
    """True when something on address:port speaks SSH (reads the banner)."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def host_spec(name: str) -> dict | None:
    return read_json(host_dir(name) / "spec.json")
