"""The gpuhost sandbox: real SSH hosts on this machine (overlay roots booted by
systemd-nspawn with systemd as PID 1, ssh.service on 127.77.1.N:2222), a Debian package
mirror and an HTTP server on 127.77.0.1:8000. Run as root: ``python -m sandbox up --hosts 4``.

Layout of the package:
  paths.py       every path, address and constant (one place to read them)
  util.py        subprocess, progress lines, hashing, atomic writes
  base.py        cached Debian bookworm base root and Oracle Linux layers
  mirror.py      cached Debian package mirror (apt-get download + apt-ftparchive, signed)
  httpd.py       the controller HTTP server (/debian, /nvidia)
  spec.py        which hosts a fleet has (names, OS, GPUs) and fleet.json
  hosts.py       per-host files (upper dir), start/stop of a host
  supervisor.py  the per-host supervisor (boots a host again when it reboots; kills its cgroup)
  fleet.py       up / down / status
  files/         boot.sh (overlay root, cgroup, systemd-nspawn) and the uname shim
"""
