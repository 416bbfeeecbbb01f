#!/bin/sh
# MAKE step of the simulated NVIDIA @FLAVOR@ kernel module @VERSION@ (gpuhost sandbox).
# Writes nvidia.ko as a text file that the GPU simulator reads; nothing is compiled. DKMS
# (real dkms, from Debian's archive) signs it afterwards with whatever key it is given.
set -u
kernel="$1"
faults=/etc/gpusim/faults.json
if [ -f "$faults" ] && grep -Eq '"dkms_build_fail"[[:space:]]*:[[:space:]]*true' "$faults"; then
    echo "gpusim: simulated compile error (fault dkms_build_fail is set in $faults)" >&2
    echo "make[1]: *** [Makefile:1943: nvidia] Error 2" >&2
    exit 2
fi
# A kernel API change (simulated): a kernel's headers name, in the sandbox's file
# include/generated/gpusim-api-removed, the functions that kernel no longer has, each with
# the first driver version that stopped calling it and the source file that calls it; an
# older driver fails to compile as real ones do ("implicit declaration of function
# 'sys_close'" in nv-caps.c, 465.19.01 on kernel 5.12: Frogging-Family/nvidia-all#34;
# 580.119.02 on kernel 7.0: Frogging-Family/nvidia-all#379).
removed="/lib/modules/$kernel/build/include/generated/gpusim-api-removed"
if [ -f "$removed" ]; then
    while read -r fn first file; do
        [ -n "$fn" ] && [ -n "$first" ] || continue
        if [ "$(printf '%s\n%s\n' "@VERSION@" "$first" | sort -V | head -n 1)" != "$first" ]; then
            echo "$PWD/$file: error: implicit declaration of function '$fn' [-Werror=implicit-function-declaration]" >&2
            echo "cc1: some warnings being treated as errors" >&2
            echo "make[2]: *** [scripts/Makefile.build:243: $PWD/${file%.c}.o] Error 1" >&2
            echo "make[1]: *** [Makefile:1943: $PWD] Error 2" >&2
            exit 2
        fi
    done < "$removed"
fi
# Kbuild compares the compiler with the one the kernel's .config records
# (CONFIG_CC_VERSION_TEXT) and warns when they differ; a gcc older than the kernel's then
# fails on the flags the kernel's build uses (openzfs/zfs#13625: UEK 7, built with gcc 11,
# and OL8's gcc 8.5: "unrecognized command line option '-ftrivial-auto-var-init=zero'").
# The sandbox fails on any other major (a newer one too: a strict rule of the simulation).
# DKMS exports CC (the first word of CONFIG_CC_VERSION_TEXT, when that command exists).
config="/lib/modules/$kernel/build/.config"
want=""
[ -f "$config" ] && want=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$config" | head -n 1)
if [ -n "$want" ]; then
    cc="${CC:-gcc}"
    have=$("$cc" --version 2>/dev/null | head -n 1)
    major() { printf '%s\n' "$1" | grep -o '[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*' | head -n 1 | cut -d. -f1; }
    if [ -z "$have" ]; then
        echo "make[1]: $cc: No such file or directory" >&2
        echo "make: *** [Makefile:1943: nvidia] Error 2" >&2
        exit 2
    fi
    if [ "$(major "$want")" != "$(major "$have")" ]; then
        echo "warning: the compiler differs from the one used to build the kernel" >&2
        echo "  The kernel was built by: $want" >&2
        echo "  You are using:           $have" >&2
        if [ "$(major "$have")" -lt "$(major "$want")" ]; then
            opt="-ftrivial-auto-var-init=zero"
            [ "$(major "$want")" -ge 14 ] && opt="-fmin-function-alignment=16"
            echo "$cc: error: unrecognized command-line option '$opt'" >&2
        else
            echo "gpusim: module built by another gcc than kernel $kernel's (sandbox rule)" >&2
        fi
        echo "make[2]: *** [scripts/Makefile.build:299: nvidia.o] Error 1" >&2
        exit 2
    fi
fi
printf 'gpusim-module version=%s flavor=%s kernel=%s cc=%s\n' "@VERSION@" "@FLAVOR@" "$kernel" \
    "$(${CC:-gcc} -dumpfullversion 2>/dev/null || echo unknown)" > nvidia.ko
