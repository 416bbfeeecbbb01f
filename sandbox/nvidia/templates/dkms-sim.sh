#!/bin/bash
# dkms for the gpuhost sandbox's Oracle Linux hosts: a small simulation of DKMS 3.x
# (add, build, install, remove, status, autoinstall) with DKMS's own messages and exit
# codes. It reads /etc/dkms/framework.conf and /etc/dkms/framework.conf.d/*.conf like
# DKMS does, so `export CC=...` or sourcing a gcc-toolset's enable script there applies.
set -u
tree=/var/lib/dkms
arch=x86_64
cmd="${1:-}"; [ $# -gt 0 ] && shift
module=""; version=""; kernels=(); all=""
while [ $# -gt 0 ]; do
    case "$1" in
        -m) module="${2%%/*}"; [ "${2#*/}" != "$2" ] && version="${2#*/}"; shift 2 ;;
        -v) version="$2"; shift 2 ;;
        -k) kernels+=("${2%%/*}"); shift 2 ;;
        --all) all=1; shift ;;
        -q|--quiet|--force|--rpm_safe_upgrade|--no-depmod) shift ;;
        */*) module="${1%%/*}"; version="${1#*/}"; shift ;;
        *) echo "Error! Unknown option: $1" >&2; exit 2 ;;
    esac
done
[ ${#kernels[@]} -eq 0 ] && kernels=("$(uname -r)")

die() { local rc="$1"; shift; printf 'Error! %s\n' "$1" >&2; shift; for l in "$@"; do echo "$l" >&2; done; exit "$rc"; }
need_mv() { [ -n "$module" ] && [ -n "$version" ] || die 1 "Arguments <module> and <module-version> are not specified." "Usage: dkms $cmd <module>/<module-version> or dkms $cmd -m <module>/<module-version>"; }
src() { echo "/usr/src/$module-$version"; }
ko_path() { echo "/lib/modules/$1/updates/dkms/$module.ko"; }

do_add() {
    need_mv
    [ -f "$(src)/dkms.conf" ] || die 2 "Could not find module source directory." "Directory: $(src) does not exist."
    if [ -e "$tree/$module/$version/source" ]; then
        die 3 "DKMS tree already contains: $module-$version" "You cannot add the same module/version combo more than once."
    fi
    mkdir -p "$tree/$module/$version"
    ln -s "$(src)" "$tree/$module/$version/source"
    echo "Creating symlink $tree/$module/$version/source -> $(src)"
}

do_build() {  # $1 = kernel
    local k="$1" b="$tree/$module/$version/build"
    [ -e "$tree/$module/$version/source" ] || do_add >/dev/null
    if [ ! -e "/lib/modules/$k/build/include" ] && [ ! -e "/lib/modules/$k/source/include" ]; then
        die 1 "Your kernel headers for kernel $k cannot be found at /lib/modules/$k/build or /lib/modules/$k/source." \
            "Please install the kernel-devel-$k package or use the --kernelsourcedir option to tell DKMS where it's located."
    fi
    rm -rf "$b"; cp -a "$(src)/." "$b"
    echo ""; echo "Building module:"; echo "Cleaning build area..."
    local make_cmd
    make_cmd=$(kernelver="$k"; . "$(src)/dkms.conf"; eval echo "\"${MAKE[0]}\"")
    echo "$make_cmd..."
    if ! (cd "$b" && for f in /etc/dkms/framework.conf /etc/dkms/framework.conf.d/*.conf; do
              [ -f "$f" ] && . "$f"; done
          kernelver="$k" sh -c "$make_cmd") >"$b/make.log" 2>&1; then
        die 10 "Bad return status for module build on kernel: $k ($arch)" \
            "Consult $b/make.log for more information."
    fi
    sign_module "$k" "$b/$module.ko"
    local out="$tree/$module/$version/$k/$arch"
    mkdir -p "$out/module" "$out/log"
    cp "$b/$module.ko" "$out/module/"; cp "$b/make.log" "$out/log/"
    echo "Cleaning build area..."
}

sign_module() {  # $1 = kernel, $2 = module: DKMS 3.x prepare_signing + the sign step
    local k="$1" sign_file="" mok_signing_key="" mok_certificate="" f
    for f in /etc/dkms/framework.conf /etc/dkms/framework.conf.d/*.conf; do
        [ -f "$f" ] || continue
        eval "$(grep -E '^[[:space:]]*(sign_file|mok_signing_key|mok_certificate)=' "$f")"
    done
    [ -n "$sign_file" ] || sign_file="/lib/modules/$k/build/scripts/sign-file"
    echo "Sign command: $sign_file"
    if [ ! -x "$sign_file" ]; then
        echo "Binary $sign_file not found, modules won't be signed"; return 0
    fi
    [ -n "$mok_signing_key" ] || mok_signing_key=/var/lib/dkms/mok.key
    echo "Signing key: $mok_signing_key"
    [ -n "$mok_certificate" ] || mok_certificate=/var/lib/dkms/mok.pub
    echo "Public certificate (MOK): $mok_certificate"
    if [ ! -f "$mok_signing_key" ] || [ ! -f "$mok_certificate" ]; then
        echo "Certificate or key are missing, generating self signed certificate for MOK..."
        openssl req -new -x509 -nodes -days 36500 -subj "/CN=DKMS module signing key" \
            -newkey rsa:2048 -keyout "$mok_signing_key" -outform DER -out "$mok_certificate" \
            >/dev/null 2>&1
        if [ ! -f "$mok_signing_key" ]; then
            echo "Key file $mok_signing_key not found and can't be generated, modules won't be signed"
            return 0
        fi
    fi
    echo "Signing module $2"
    "$sign_file" sha512 "$mok_signing_key" "$mok_certificate" "$2"
}

do_install() {  # $1 = kernel
    local k="$1" out="$tree/$module/$version/$1/$arch"
    [ -f "$out/module/$module.ko" ] || do_build "$k" || exit $?
    echo ""; echo "$module.ko:"; echo "Running module version sanity check."
    echo " - Original module"; echo "   - No original module exists within this kernel"
    echo " - Installation"; echo "   - Installing to /lib/modules/$k/updates/dkms/"
    mkdir -p "/lib/modules/$k/updates/dkms"
    cp "$out/module/$module.ko" "$(ko_path "$k")"
    ln -sfn "$version/$k/$arch" "$tree/$module/kernel-$k-$arch"
    echo "depmod..."
}

do_remove() {
    need_mv
    [ -e "$tree/$module/$version" ] || die 3 "The module/version combo: $module-$version is not located in the DKMS tree."
    local d k
    for d in "$tree/$module/$version"/*/"$arch"; do
        [ -d "$d" ] || continue
        k=$(basename "$(dirname "$d")")
        if [ "$(readlink "$tree/$module/kernel-$k-$arch" 2>/dev/null)" = "$version/$k/$arch" ]; then
            echo "Module $module-$version for kernel $k ($arch)."
            echo "Before uninstall, this module version was ACTIVE on this kernel."
            rm -f "$(ko_path "$k")" "$tree/$module/kernel-$k-$arch"
            echo "Deleting from: /lib/modules/$k/updates/dkms/"
        fi
    done
    rm -rf "${tree:?}/$module/$version"
    rmdir "$tree/$module" 2>/dev/null || true
    echo "Deleting module $module-$version completely from the DKMS tree."
}

do_status() {
    local m v d k state
    for m in "$tree"/*/; do
        [ -d "$m" ] || continue; m=$(basename "$m")
        [ -n "$module" ] && [ "$m" != "$module" ] && continue
        for v in "$tree/$m"/*/; do
            [ -e "$v/source" ] || continue; v=$(basename "$v")
            [ -n "$version" ] && [ "$v" != "$version" ] && continue
            state=added
            for d in "$tree/$m/$v"/*/"$arch"; do
                [ -d "$d" ] || continue
                k=$(basename "$(dirname "$d")"); state=""
                if [ "$(readlink "$tree/$m/kernel-$k-$arch" 2>/dev/null)" = "$v/$k/$arch" ]; then
                    echo "$m/$v, $k, $arch: installed"
                else
                    echo "$m/$v, $k, $arch: built"
                fi
            done
            [ -n "$state" ] && echo "$m/$v: added"
        done
    done
    return 0
}

case "$cmd" in
    add) do_add ;;
    build) need_mv; for k in "${kernels[@]}"; do do_build "$k"; done ;;
    install) need_mv; for k in "${kernels[@]}"; do do_install "$k"; done ;;
    remove|uninstall) do_remove ;;
    status) do_status ;;
    autoinstall)
        for s in "$tree"/*/*/source; do
            [ -e "$s" ] || continue
            module=$(basename "$(dirname "$(dirname "$s")")"); version=$(basename "$(dirname "$s")")
            for k in "${kernels[@]}"; do do_install "$k" || exit $?; done
        done ;;
    --version|-V) echo "dkms-3.2.1 (gpuhost sandbox simulation)" ;;
    *) echo "Usage: dkms {add|build|install|remove|status|autoinstall} [-m module] [-v version] [-k kernel] [--all]" >&2; exit 2 ;;
esac
