#!/bin/sh
# Package hook of the simulated NVIDIA @FLAVOR@ kernel module @VERSION@ (gpuhost sandbox).
#   install: register with DKMS and build + install for the running kernel, as NVIDIA's
#            packages do; fails (non-zero) when DKMS fails, so the package manager reports it
#            (with the fault scriptlet_ignores_dkms: exits 0, as NVIDIA's own packages do).
#   remove:  remove this version from DKMS, which deletes the installed module file.
set -u
ver="@VERSION@"
kernel=$(uname -r)
module="/lib/modules/$kernel/updates/dkms/nvidia.ko"
case "${1:-}" in
install)
    if ! command -v dkms >/dev/null 2>&1; then
        echo "Error! dkms is not installed: install the dkms package, then reinstall this package." >&2
        exit 1
    fi
    if ! dkms status -m nvidia -v "$ver" 2>/dev/null | grep -q .; then
        dkms add -m nvidia -v "$ver" || exit $?
    fi
    dkms install -m nvidia -v "$ver" -k "$kernel"
    rc=$?
    # NVIDIA's own packages exit 0 when the DKMS build fails (open-gpu-kernel-modules#805):
    # the host trait dkms-build-fails sets this fault to behave like them.
    if [ $rc -ne 0 ] && [ -f /etc/gpusim/faults.json ] && \
        grep -Eq '"scriptlet_ignores_dkms"[[:space:]]*:[[:space:]]*true' /etc/gpusim/faults.json; then
        exit 0
    fi
    exit $rc
    ;;
remove)
    if command -v dkms >/dev/null 2>&1 && dkms status -m nvidia -v "$ver" 2>/dev/null | grep -q .; then
        dkms remove -m nvidia -v "$ver" --all || true
    fi
    if [ -f "$module" ] && grep -q "gpusim-module version=$ver " "$module"; then
        rm -f "$module"
    fi
    exit 0
    ;;
*)
    echo "usage: $0 install|remove" >&2
    exit 2
    ;;
esac
