"""The gpuhost sandbox: real SSH hosts on this machine (overlay roots in their own
mount/pid/uts/time namespaces, sshd on 127.77.1.N:2222), a Debian package mirror and
an HTTP server on 127.77.0.1:8000. Run as root: ``python -m sandbox up --hosts 4``.

Layout of the package:
  paths.py       every path, address and constant (one place to read them)
  util.py        subprocess, progress lines, hashing, atomic writes
  base.py        cached Debian bookworm base root and Oracle Linux layers
  mirror.py      cached Debian package mirror (apt-get download + apt-ftparchive, signed)
  httpd.py       the controller HTTP server (/debian, /nvidia)
  spec.py        which hosts a fleet has (names, OS, GPUs) and fleet.json
  hosts.py       per-host files (upper dir), start/stop of a host
  supervisor.py  the per-host supervisor (restarts a host when it reboots)
  fleet.py       up / down / status
  files/         scripts installed into hosts (init, reboot, uname shims)
"""
