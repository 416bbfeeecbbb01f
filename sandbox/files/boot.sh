#!/bin/sh
# gpuhost sandbox: boot one host. Runs in a private mount namespace and its own time
# namespace (CLOCK_BOOTTIME starts near 0: /proc/uptime inside restarts at every boot),
# started by the host's supervisor. Mounts the host's overlay root, moves itself into the
# host's own cgroup (so that the host's systemd manages a subtree of its own and nothing
# else), then becomes systemd-nspawn, which boots the root's systemd as PID 1.
# nspawn's exit status: 133 = the host asked for a reboot, 0 = poweroff.
# Usage: boot.sh NAME LOWERDIRS UPPER WORK ROOT DOCKER_DATA CGROUP
set -eu
name=$1 lower=$2 upper=$3 work=$4 root=$5 docker_data=$6 cgroup=$7

mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
# Every hierarchy nspawn and the host's systemd use: cgroup2 (unified) and the named
# systemd v1 hierarchy on hybrid machines.
awk '$3 == "cgroup2" || ($3 == "cgroup" && $4 ~ /(^|,)name=systemd(,|$)/) { print $2 }' \
    /proc/self/mounts | while read -r hier; do
    mkdir -p "$hier/$cgroup"
    echo $$ > "$hier/$cgroup/cgroup.procs"
done
# /proc/driver: a tmpfs the GPU simulator writes (/proc/driver/nvidia/version, ...).
# Host network shared (no --private-network): sshd listens on the host's own 127.77.x.N.
# The host's own /sys/bus/pci/devices (sandbox/pci.py writes HOSTDIR/pci), read-only.
pci="${docker_data%/*}/pci"
set --
if [ -d "$pci" ]; then set -- "--bind-ro=$pci:/sys/bus/pci/devices"; fi
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn --quiet --directory="$root" --boot --register=no --keep-unit \
    --machine="$name" --hostname="$name" --console=read-only \
    --bind="$docker_data:/var/lib/docker" --tmpfs=/proc/driver:mode=0755 \
    --capability=CAP_NET_ADMIN --system-call-filter='@keyring bpf' "$@"
