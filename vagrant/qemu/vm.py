#!/usr/bin/env python3
"""A real Debian 12 VM (real kernel, real systemd) under QEMU/TCG, reachable on loopback.

    python vagrant/qemu/vm.py up        # build/reuse the image, boot, wait for SSH, tunnel
    python vagrant/qemu/vm.py ssh [CMD] # a shell (or one command) in the VM
    python vagrant/qemu/vm.py status    # vm.json, or "down"
    python vagrant/qemu/vm.py down      # poweroff (kill after a timeout), drop the overlay

Networking is loopback only: QEMU user networking with `restrict=on` (the guest reaches
nothing) and one forwarded port 127.0.0.1:PORT -> guest :22. The sandbox package mirror
(controller side 127.77.0.1:8000) reaches the guest through an SSH reverse tunnel, so
inside the VM the mirror is http://127.0.0.1:18000/. The tunnel is a small loop that
reconnects after the guest reboots.

State (override with $GPUHOST_VM_DIR, default /run/gpuhost-vm): vm.json (port, pids, key,
known_hosts, timings), overlay.qcow2 (throw-away, on top of the cached base image),
serial.log (the guest console), tunnel.log, httpd.log.

The packages come from the sandbox's caches, built by `python -m sandbox mirror` and
`python -m sandbox.nvidia.build` (`make nvidia-artifacts`), served by an HTTP server of the
VM's own on 127.77.0.3:<free port> ($GPUHOST_VM_MIRROR) for as long as the VM runs.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import image  # noqa: E402  (sibling module; vagrant/ is not a package on purpose)

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = Path(os.environ.get("GPUHOST_VM_DIR", "/run/gpuhost-vm"))
# The VM's own HTTP server for the sandbox's mirror and fake NVIDIA artifacts (the same
# cached directories `python -m sandbox` serves on 127.77.0.1:8000), so a VM does not
# depend on a sandbox fleet that other tests bring up and down.
# Address of that server; the port is a free one picked at `up` unless given
# (GPUHOST_VM_MIRROR=127.77.0.3:8000), so several VMs (test sessions) can run at once.
MIRROR_ADDRESS = os.environ.get("GPUHOST_VM_MIRROR", "127.77.0.3")        # controller side
TUNNEL_PORT = 18000                                                       # guest side
HTTPD = REPO / "sandbox" / "httpd.py"
# the sandbox's caches (GPUHOST_CACHE_DIR, GPUHOST_NVIDIA_OUT: sandbox/paths.py)
MIRROR_DEBIAN = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost")) / "mirror" / "debian"
NVIDIA_CACHE = Path(os.environ.get("GPUHOST_NVIDIA_OUT", os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
MACHINE_DIR = REPO / "sandbox" / "nvidia" / "machine"
MIRROR_KEYRING = MIRROR_DEBIAN / "gpuhost-sandbox-archive.gpg"
# Software emulation is slow at what a kernel does for hardware it cannot trust: skip the
# crypto self-tests, CPU vulnerability mitigations and the lockup watchdogs (a busy host
# starves the vCPU thread and they only add noise). The guest is a throw-away test VM.
KERNEL_CMDLINE = ("root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet cryptomgr.notests "
                  "mitigations=off nowatchdog tsc=reliable")
GPUSIM_UNIT = """\
[Unit]
Description=gpuhost GPU simulator: load the installed driver, apply pending MIG modes
DefaultDependencies=no
After=local-fs.target
Before=docker.service nvidia-persistenced.service multi-user.target
ConditionPathExists=/usr/local/sbin/gpusim-boot

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpusim-boot

[Install]
WantedBy=multi-user.target
"""


class VMError(RuntimeError):
    """The VM cannot be started or reached; the message says what to do."""


def log(msg: str) -> None:
    print(f"[vm] {msg}", file=sys.stderr, flush=True)


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class VM:
    """One VM described by RUN_DIR/vm.json. Settings come from the environment:
    GPUHOST_VM_MEMORY (MiB, 2048), GPUHOST_VM_CPUS (1: a single TCG thread copes best
    with a busy host), GPUHOST_VM_GPU (L4), GPUHOST_VM_GPU_COUNT (1)."""

    def __init__(self, run_dir: Path = RUN_DIR, cache: Path = image.CACHE):
        self.run_dir = Path(run_dir)
        self.cache = Path(cache)
        self.state_file = self.run_dir / "vm.json"
        self.qemu_cpu_seconds = 0.0   # what QEMU had used when down() powered it off

    # -- state -------------------------------------------------------------------------
    @property
    def state(self) -> dict:
        if not self.state_file.is_file():
            raise VMError(f"no VM state in {self.state_file}: run `python vagrant/qemu/vm.py up`")
        return json.loads(self.state_file.read_text())

    def _save(self, state: dict) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_file)

    def running(self) -> bool:
        try:
            return pid_alive(self.state.get("qemu_pid"))
        except VMError:
            return False

    # -- ssh ---------------------------------------------------------------------------
    def ssh_argv(self, *extra: str) -> list[str]:
        s = self.state
        return ["ssh", "-i", s["ssh_key"], "-p", str(s["port"]),
                "-o", f"UserKnownHostsFile={s['known_hosts']}", "-o", "StrictHostKeyChecking=yes",
                "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-o", "LogLevel=ERROR",
                *extra, "root@127.0.0.1"]

    def ssh(self, command: str, check: bool = True, timeout: float = 120,
            input: bytes | str | None = None) -> subprocess.CompletedProcess:
        """Run one shell command in the VM; returns the CompletedProcess (text output)."""
        binary = isinstance(input, bytes)
        res = subprocess.run(self.ssh_argv() + [command], capture_output=True, timeout=timeout,
                             input=input, text=not binary)
        if binary:
            res.stdout, res.stderr = res.stdout.decode(), res.stderr.decode()
        if check and res.returncode != 0:
            raise VMError(f"in the VM, `{command}` exited {res.returncode}: "
                          f"{(res.stderr or res.stdout).strip()[-1500:]}")
        return res

    def wait_ssh(self, timeout: float = 300) -> float:
        """Wait until SSH answers; returns the seconds waited. Fails early if QEMU died."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if not self.running():
                raise VMError(f"QEMU exited while booting; see {self.run_dir / 'serial.log'}")
            try:
                if self.ssh("true", check=False, timeout=45).returncode == 0:
                    return time.monotonic() - t0
            except subprocess.TimeoutExpired:
                pass
            time.sleep(1)
        raise VMError(f"no SSH after {timeout:.0f} s; console: {self.run_dir / 'serial.log'}")

    def boot_id(self) -> str:
        return self.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()

    # -- lifecycle ---------------------------------------------------------------------
    def up(self, boot_timeout: float | None = None) -> dict:
        """Boot and configure; returns vm.json. The boot may take GPUHOST_VM_BOOT_TIMEOUT
        seconds (900: about 45-70 s on an idle 2-core machine, minutes on a busy one)."""
        if boot_timeout is None:
            boot_timeout = float(os.environ.get("GPUHOST_VM_BOOT_TIMEOUT", "900"))
        if self.running():
            log(f"already running (port {self.state['port']}); `down` first to restart")
            return self.state
        if os.geteuid() != 0:
            raise VMError("the VM tooling runs as root (image in /var/cache, state in /run)")
        for tool in ("qemu-system-x86_64", "qemu-img", "ssh"):
            if not any((Path(p) / tool).exists() for p in os.environ["PATH"].split(":")):
                raise VMError(f"{tool} is not installed: run `make deps` (qemu-system-x86, "
                              "qemu-utils, openssh-client)")
        info = image.build(cache=self.cache)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        overlay = self.run_dir / "overlay.qcow2"
        overlay.unlink(missing_ok=True)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
                        "-b", str(self.cache / "base.qcow2"), str(overlay)], check=True)
        port = free_port()
        known_hosts = self.run_dir / "known_hosts"
        hostkey = (self.cache / "host_ed25519.pub").read_text().split()
        known_hosts.write_text(f"[127.0.0.1]:{port} {hostkey[0]} {hostkey[1]}\n")
        memory = os.environ.get("GPUHOST_VM_MEMORY", "2048")
        cpus = os.environ.get("GPUHOST_VM_CPUS", "1")
        pidfile = self.run_dir / "qemu.pid"
        pidfile.unlink(missing_ok=True)
        serial = self.run_dir / "serial.log"
        argv = ["qemu-system-x86_64", "-name", "gpuhost-vm", "-accel", "tcg", "-cpu", "max",
                "-m", memory, "-smp", cpus, "-kernel", str(self.cache / "vmlinuz"),
                "-initrd", str(self.cache / "initrd.img"),
                "-append", KERNEL_CMDLINE,
                "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
                "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
                "-device", "virtio-net-pci,netdev=n0",
                "-device", "virtio-rng-pci",
                "-serial", f"file:{serial}", "-monitor", "none", "-display", "none",
                "-daemonize", "-pidfile", str(pidfile)]
        t0 = time.monotonic()
        subprocess.run(argv, check=True)
        state = {"name": image.HOSTNAME, "port": port, "qemu_pid": int(pidfile.read_text()),
                 "ssh_key": str(self.cache / "id_ed25519"), "known_hosts": str(known_hosts),
                 "kernel_release": info["kernel_release"], "overlay": str(overlay),
                 "serial_log": str(serial), "memory_mib": int(memory), "cpus": int(cpus),
                 "mirror": f"http://127.0.0.1:{TUNNEL_PORT}", "tunnel_pid": None,
                 "controller_mirror": None, "httpd_pid": None,
                 "qemu_argv": argv}
        self._save(state)
        log(f"QEMU/TCG started (pid {state['qemu_pid']}), waiting for SSH on 127.0.0.1:{port}")
        try:
            self.wait_ssh(boot_timeout)
            state["boot_seconds"] = round(time.monotonic() - t0, 1)
            log(f"SSH up after {state['boot_seconds']} s")
            state["controller_mirror"], state["httpd_pid"] = self._start_httpd()
            self._save(state)
            state["tunnel_pid"] = self._start_tunnel()
            self._save(state)
            self._configure()
        except BaseException:
            self.down()
            raise
        state["ready_seconds"] = round(time.monotonic() - t0, 1)
        self._save(state)
        return state

    def _start_httpd(self) -> tuple[str, int]:
        """Serve /debian and /nvidia from the sandbox caches on MIRROR_ADDRESS; returns the
        server's URL and pid."""
        for need, how in ((MIRROR_DEBIAN / "dists", "python -m sandbox mirror"),
                          (NVIDIA_CACHE / "manifest.json", "make nvidia-artifacts")):
            if not need.exists():
                raise VMError(f"{need} is missing: build it with `{how}`")
        address, _, port = MIRROR_ADDRESS.partition(":")
        port = port or str(free_port(address))
        pidfile = self.run_dir / "httpd.pid"
        pidfile.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, str(HTTPD), "--bind", address, "--port", port,
             "--log", str(self.run_dir / "httpd.log"), "--pidfile", str(pidfile),
             "--map", f"debian={MIRROR_DEBIAN}", "--map", f"nvidia={NVIDIA_CACHE}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        t0 = time.monotonic()
        while not pidfile.exists():
            if proc.poll() is not None:
                raise VMError(f"the mirror's HTTP server on {address}:{port} exited: "
                              f"{proc.stderr.read().decode().strip()[-800:]}")
            if time.monotonic() - t0 > 30:
                raise VMError(f"the mirror's HTTP server on {address}:{port} did not start")
            time.sleep(0.2)
        proc.stderr.close()
        return f"http://{address}:{port}", proc.pid

    def _start_tunnel(self) -> int:
        """Reverse tunnel guest 127.0.0.1:18000 -> controller mirror, restarted forever (a
        reboot of the guest drops it). Returns the pid of the loop (a process group)."""
        mirror = self.state["controller_mirror"].removeprefix("http://")
        ssh = self.ssh_argv("-N", "-o", "ExitOnForwardFailure=yes",
                            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3",
                            "-R", f"127.0.0.1:{TUNNEL_PORT}:{mirror}")
        loop = f"while :; do {shlex.join(ssh)}; sleep 1; done"
        logf = open(self.run_dir / "tunnel.log", "ab")
        proc = subprocess.Popen(["sh", "-c", loop], stdin=subprocess.DEVNULL, stdout=logf,
                                stderr=logf, start_new_session=True)
        logf.close()
        return proc.pid

    def mirror_reachable(self, timeout: float = 30) -> bool:
        """True once the mirror answers inside the VM through the tunnel."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            cmd = (f"curl -fsS -o /dev/null --max-time 5 "
                   f"http://127.0.0.1:{TUNNEL_PORT}/debian/dists/bookworm/Release")
            if self.ssh(cmd, check=False).returncode == 0:
                return True
            time.sleep(1)
        return False

    def _configure(self) -> None:
        """Per-run guest setup: apt on the tunnelled mirror, the GPU simulator's machine
        pieces (sandbox/nvidia/machine/, same tree the sandbox hosts get), machine.json and
        a systemd unit running gpusim-boot at every boot."""
        s = self.state
        files: dict[str, tuple[bytes, int]] = {}
        machine = {"hostname": s["name"], "os": "debian12",
                   "kernel_release": s["kernel_release"],
                   "gpu_model": os.environ.get("GPUHOST_VM_GPU", "L4"),
                   "gpu_count": int(os.environ.get("GPUHOST_VM_GPU_COUNT", "1")),
                   "nvswitch": False}
        files["etc/gpusim/machine.json"] = (json.dumps(machine, indent=1).encode() + b"\n",
                                            0o644)
        files["etc/systemd/system/gpusim-boot.service"] = (GPUSIM_UNIT.encode(), 0o644)
        if MIRROR_KEYRING.is_file():
            files["etc/apt/keyrings/gpuhost-sandbox-archive.gpg"] = (MIRROR_KEYRING.read_bytes(),
                                                                     0o644)
            signed = "[signed-by=/etc/apt/keyrings/gpuhost-sandbox-archive.gpg] "
        else:
            log(f"{MIRROR_KEYRING} missing (sandbox mirror not built): apt will not work")
            signed = "[trusted=yes] "
        files["etc/apt/sources.list"] = (
            f"deb {signed}http://127.0.0.1:{TUNNEL_PORT}/debian bookworm main\n".encode(), 0o644)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            if MACHINE_DIR.is_dir():
                tar.add(MACHINE_DIR, arcname=".", filter=_root_owned)
            else:
                log(f"{MACHINE_DIR} missing: the VM has no GPU simulator")
            for name, (data, mode) in files.items():
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = len(data), mode, int(time.time())
                tar.addfile(ti, io.BytesIO(data))
        self.ssh("tar -x --no-same-owner --keep-directory-symlink -C / -f -",
                 input=buf.getvalue())
        self.ssh("systemctl daemon-reload && systemctl enable --now gpusim-boot.service")

    def down(self, timeout: float = 60) -> None:
        """Power off (clean shutdown, then SIGTERM/SIGKILL after `timeout`), stop the tunnel,
        remove the overlay. Safe to call twice."""
        try:
            s = self.state
        except VMError:
            log("not running")
            return
        for group in (s.get("tunnel_pid"), s.get("httpd_pid")):
            if pid_alive(group):
                os.killpg(group, signal.SIGTERM)
        pid = s.get("qemu_pid")
        if pid_alive(pid):
            self.qemu_cpu_seconds = cpu_seconds(pid)
            try:
                self.ssh("systemctl poweroff", check=False, timeout=15)
            except subprocess.TimeoutExpired:
                pass
            t0 = time.monotonic()
            while pid_alive(pid) and time.monotonic() - t0 < timeout:
                time.sleep(0.5)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if pid_alive(pid):
                    log(f"QEMU pid {pid} still alive, sending {sig.name}")
                    os.kill(pid, sig)
                    time.sleep(2)
        Path(s["overlay"]).unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        log("down")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process PID has used so far; 0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _root_owned(ti: tarfile.TarInfo) -> tarfile.TarInfo:
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


def main(argv: list[str]) -> int:
    vm = VM()
    cmd = argv[0] if argv else "status"
    try:
        if cmd == "up":
            print(json.dumps(vm.up(), indent=2))
        elif cmd == "down":
            vm.down()
        elif cmd == "status":
            print(json.dumps(vm.state, indent=2) if vm.running() else "down")
        elif cmd == "ssh":
            rest = argv[1:]
            os.execvp("ssh", vm.ssh_argv("-t") + ([" ".join(rest)] if rest else []))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except VMError as exc:
        print(f"vm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
