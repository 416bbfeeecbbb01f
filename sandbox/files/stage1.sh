#!/bin/sh
# gpuhost sandbox, host stage 1: runs as PID 1 of a fresh pid namespace, in a private mount
# namespace and its own uts/time namespaces, outside the host root. Mounts the host's
# overlay root and its pseudo file systems, then becomes the host's init (stage 2).
# Usage: stage1.sh NAME LOWERDIRS UPPER WORK ROOT DOCKER_DATA
set -eu
name=$1 lower=$2 upper=$3 work=$4 root=$5 docker_data=$6

hostname "$name"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
# /proc/driver is a tmpfs the GPU simulator writes (/proc/driver/nvidia/version, ...).
if [ -d "$root/proc/driver" ]; then
    mount -t tmpfs -o mode=0755,nosuid,nodev,noexec tmpfs "$root/proc/driver"
fi
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mkdir -p "$root/var/lib/docker"
mount --bind "$docker_data" "$root/var/lib/docker"
exec chroot "$root" /usr/local/sbin/gpusim-init
