#!/bin/sh
# MAKE step of the simulated NVIDIA @FLAVOR@ kernel module @VERSION@ (gpuhost sandbox).
# Writes nvidia.ko as a text file that the GPU simulator reads; nothing is compiled.
set -u
kernel="$1"
faults=/etc/gpusim/faults.json
if [ -f "$faults" ] && grep -Eq '"dkms_build_fail"[[:space:]]*:[[:space:]]*true' "$faults"; then
    echo "gpusim: simulated compile error (fault dkms_build_fail is set in $faults)" >&2
    echo "make[1]: *** [Makefile:1943: nvidia] Error 2" >&2
    exit 2
fi
# A kernel whose .config records the gcc it was built with (UEK 8: gcc 14 from
# gcc-toolset-14) needs that compiler; DKMS must be told to use it (CC in its
# framework configuration, or the toolset's enable script putting it first on PATH).
config="/lib/modules/$kernel/build/.config"
want=""
if [ -f "$config" ]; then
    want=$(sed -n 's/^CONFIG_GCC_VERSION=\([0-9]*\)$/\1/p' "$config" | head -n 1)
fi
if [ -n "$want" ]; then
    want_major=$((want / 10000))
    cc="${CC:-gcc}"
    have=$($cc -dumpversion 2>/dev/null | cut -d. -f1)
    if [ "$have" != "$want_major" ]; then
        echo "gpusim: kernel $kernel was built with gcc $want_major but the compiler is '$cc' (version ${have:-not found})" >&2
        echo "gcc: error: unrecognized command-line option '-fmin-function-alignment=16'" >&2
        exit 1
    fi
fi
printf 'gpusim-module version=%s flavor=%s kernel=%s\n' "@VERSION@" "@FLAVOR@" "$kernel" > nvidia.ko
