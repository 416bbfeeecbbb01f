"""The shell side of gpuhost's facts: named read-only sections, run in one remote command.

Every fact is a set of *sections*. A section is a constant piece of POSIX shell (no user
value ever reaches it) whose output and exit status are printed behind a marker line
``@@gpuhost@@ NAME rc=N``; ``facts.parsers.split_sections`` reads them back. The composite
fact (``gpuhost.facts.host.GpuHostState``) runs every section in one command, so a full audit of a
host costs one round trip; the single facts run only the sections they need.

Exit status conventions inside a section: 127 = the tool is not installed, 3 = the file is
absent, 4 = skipped (not relevant on this host, e.g. MIG tables without MIG), 124 = timed
out (``timeout``), anything else is the tool's own status.
"""

from __future__ import annotations

from gpuhost import runlock as _runlock, stamp as _stamp

MARKER = "@@gpuhost@@ "

# nvidia-smi can hang on a GPU that fell off the bus; never let a fact hang a fleet run.
_SMI = "timeout 20 nvidia-smi"


def _tool(name: str, command: str) -> str:
    """Run ``command`` when ``name`` is installed, else exit 127."""
    return f"if command -v {name} >/dev/null 2>&1; then {command}; else exit 127; fi"


def _file(path: str) -> str:
    """Print a file, or exit 3 when it does not exist."""
    return f"if test -e {path}; then cat {path}; else exit 3; fi"


# Sections that only matter when a GPU has MIG enabled run only then: they read the XML
# that smi_xml left in $_gh_smi_xml (same chain, same shell) and exit 4 ("skipped")
# otherwise, so a host without MIG costs one nvidia-smi call.
_IF_MIG = 'case "$_gh_smi_xml" in *"<current_mig>Enabled"*) ;; *) exit 4;; esac; '

DKMS_TREE = "/var/lib/dkms"


def dkms_status(tree: str = DKMS_TREE, etc: str = "/etc/dkms", modules: str = "/lib/modules") -> str:
    """What ``dkms status`` says, read from DKMS's tree without running dkms' 2,500 lines of
    bash (a third of the composite script's cost), in dkms' own line format: "M/V: added",
    "M/V, KERNEL, ARCH: built" or ": installed".

    The rules are dkms' own (dkms 2.8-3.2 ``module_status``/``module_status_built``, checked
    against each by tests/integration/test_dkms_tree.py): a module version is added when its
    ``source`` links to a directory; built for KERNEL/ARCH when ``KERNEL/ARCH/module`` is a
    directory (KERNEL: digits, a dot, anything); installed when ``M/kernel-KERNEL-ARCH``
    resolves to that directory. Where dkms' versions disagree or the tree is not plain, the
    section runs ``dkms status`` itself: a ``dkms_tree=`` in framework.conf, a weak-updates
    link (EL's installed-weak), ``original_module``, a source that is missing, not a link or
    without dkms.conf, an empty ``module`` directory. Only dkms' notes in parentheses ("Diff
    between built and installed module") come from dkms alone; gpuhost reads none of them."""
    return (
        # exit 1 inside $( ): ask dkms itself
        "_r=$(grep -qsE '^[[:space:]]*(export[[:space:]]+)?dkms_tree=' "
        f"{etc}/framework.conf {etc}/framework.conf.d/*.conf && exit 1; "
        f'for w in {modules}/*/weak-updates/*; do test -L "$w" && exit 1; done; '
        f'echo "# read from {tree}"; '
        f'for v in {tree}/*/*; do test -d "$v" || continue; '
        'n=${v##*/}; m=${v%/*}; m=${m##*/}; '
        'case $n in kernel-*-*) test -L "$v" && continue;; original_module) exit 1;; esac; '
        'test -L "$v/source" && test -f "$v/source/dkms.conf" || exit 1; b=; '
        'for kd in "$v"/[0-9]*; do k=${kd##*/}; '
        "case $k in *.*) ;; *) continue;; esac; "
        "case ${k%%.*} in *[!0-9]*) continue;; esac; "
        'for d in "$kd"/*; do test -d "$d/module" || continue; a=${d##*/}; '
        'set -- "$d"/module/*; test -e "$1" || exit 1; '
        f's=built; l="{tree}/$m/kernel-$k-$a"; '
        'test -L "$l" && test "$(readlink -f "$l")" = "$d" && s=installed; '
        'echo "$m/$n, $k, $a: $s"; b=1; done; done; '
        'test -n "$b" || echo "$m/$n: added"; done); '
        '[ $? = 0 ] || exec dkms status 2>&1; printf "%s\\n" "$_r"'
    )


# Kernel log lines gpuhost reads (facts.parsers.parse_xid_lines), newest last: the driver's
# Xid and NVSwitch SXid lines, the last _XID_LINES of them (a long-running host's kernel log
# can be large), behind "source=SRC". One awk (_xid_awk) reads the whole log: with src=journal it
# fails when the journal holds no kernel message at all (a container, journald without the
# kernel transport; with -q journalctl prints no "-- " line of its own).
_XID_LINES = 200


def _xid_awk(source: str) -> str:
    return (f"awk -v src={source} -v max={_XID_LINES} '!/^-- / {{n++}} "
            "/NVRM: Xid|SXid/ {b[c++ % max] = $0} "
            "END {if (!n && src == \"journal\") exit 1; print \"source=\" src; "
            "for (i = (c > max ? c - max : 0); i < c; i++) print b[i % max]}'")


SECTIONS: dict[str, str] = {
    "os_release": _file("/etc/os-release"),
    "kernel": "uname -r -m",
    "proc_version": _file("/proc/driver/nvidia/version"),
    "smi_xml": _tool("nvidia-smi", f"{_SMI} -q -x"),
    "smi_list": _IF_MIG + _tool("nvidia-smi", f"{_SMI} -L"),
    "mig_lgi": _IF_MIG + _tool("nvidia-smi", f"{_SMI} mig -lgi"),
    "mig_lci": _IF_MIG + _tool("nvidia-smi", f"{_SMI} mig -lci"),
    # NVLink: link state of every GPU nvidia-smi listed, and the error counters only when a
    # link is up (a host without NVLink pays one short nvidia-smi call)
    "nvlink_status": 'case "$_gh_smi_xml" in *"<gpu id="*) ;; *) exit 4;; esac; '
    + _tool("nvidia-smi", f"{_SMI} nvlink -s"),
    "nvlink_errors": 'case "$_gh_nvlink_status" in *" GB/s"*) ;; *) exit 4;; esac; '
    + _tool("nvidia-smi", f"{_SMI} nvlink -e"),
    "lspci": _tool("lspci", "lspci -mm -nn -d 10de:"),
    # The kernel's own PCI ids (no pciutils needed, no pci.ids): one line per NVIDIA
    # function, "SLOT DEVICE CLASS SUBSYSTEM_VENDOR SUBSYSTEM_DEVICE REVISION" as sysfs
    # prints them (0x...), "-" for a file that cannot be read. One grep finds NVIDIA's
    # functions (a big server has hundreds of PCI functions: no process per function).
    "pci_sysfs": "test -d /sys/bus/pci/devices || exit 3; "
    "grep -lx 0x10de /sys/bus/pci/devices/*/vendor 2>/dev/null | while read -r v; do "
    'd=${v%/vendor}; printf %s "${d##*/}"; '
    "for f in device class subsystem_vendor subsystem_device revision; do "
    'x=$(cat "$d/$f" 2>/dev/null) || x=-; printf " %s" "${x:--}"; done; echo; done; true',
    # The driver's Xid (and NVSwitch SXid) lines of this boot (_xid_awk), each with the
    # kernel's monotonic time ("[ 1234.567890]", dmesg's default; the journal's
    # short-monotonic), which tells a new line from an old one: systemd's journal first;
    # when it has no kernel message this boot, the kernel ring buffer through dmesg.
    # Neither readable (dmesg_restrict as non-root): exit 3, no source line.
    "kernel_xid": "if command -v journalctl >/dev/null 2>&1 && _x=$(timeout 20 journalctl -k -b -q"
    f" -o short-monotonic --no-pager 2>/dev/null | {_xid_awk('journal')}); then printf '%s\\n' \"$_x\"; "
    "elif command -v dmesg >/dev/null 2>&1 && _k=$(timeout 10 dmesg 2>/dev/null); then "
    f"printf '%s\\n' \"$_k\" | {_xid_awk('dmesg')}; else exit 3; fi",
    # GPUs `gpuhost recover` reset this boot (gpuhost.health.recover.HANDLED), behind this boot's
    # id: the kernel keeps the Xid lines that asked for the reset until the next boot
    "recovered": "test -e /var/lib/gpuhost/gpu-recover-done.json || exit 3; "
    "echo \"boot_id: $(cat /proc/sys/kernel/random/boot_id)\"; "
    "cat /var/lib/gpuhost/gpu-recover-done.json",
    "dpkg": _tool(
        "dpkg-query",
        "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' 2>/dev/null"
        " | grep -E '^(nvidia|libnvidia|libcuda1|firmware-nvidia|cuda-drivers|linux-headers|docker|containerd|runc"
        "|dkms|unattended-upgrades|podman)'; true",
    ),
    "rpm": _tool(
        "rpm",
        "rpm -qa --qf '%{NAME}\\t%{EPOCH}:%{VERSION}-%{RELEASE}\\n' 2>/dev/null"
        " | grep -E '^(nvidia|kmod-nvidia|libnvidia|cuda-drivers|kernel|docker|containerd"
        "|runc|dkms|gcc-toolset|podman|buildah|containers-common)'; true",
    ),
    # the release the kernel section printed (same shell), else uname again
    "headers_build": 'r=${_gh_kernel%% *}; [ -n "$r" ] || r=$(uname -r); '
    'd="/lib/modules/$r/build"; if test -e "$d/Makefile"; then readlink -f "$d"; else exit 3; fi',
    "nouveau": "if test -d /sys/module/nouveau; then echo loaded; fi; "
    "grep -rhsE '^[[:space:]]*blacklist[[:space:]]+nouveau' /etc/modprobe.d /usr/lib/modprobe.d"
    " /lib/modprobe.d 2>/dev/null | head -n 1 | sed 's/^/modprobe: /'; "
    "grep -oE '(rd\\.driver\\.blacklist|modprobe\\.blacklist)=[^ ]*nouveau' /proc/cmdline"
    " 2>/dev/null | sed 's/^/cmdline: /'; true",
    "dkms": _tool("dkms", dkms_status()),
    "secure_boot": _tool("mokutil", "mokutil --sb-state 2>&1"),
    # the enrolled MOKs' fingerprints (a module signing key must be among them)
    "mok": _tool("mokutil", 'mokutil --list-enrolled 2>&1 | grep -iE "fingerprint|is empty"; true'),
    # who signed the running kernel's NVIDIA module (kmod's modinfo; empty: unsigned or none)
    "module_signer": "modinfo -F signer nvidia 2>/dev/null | head -n 1; true",
    # the kernel the next boot starts (grubby on EL, GRUB's default on Debian/Ubuntu), the
    # installed kernel images and which kernels have headers (facts.boot_parsers)
    "boot_loader": 'if command -v grubby >/dev/null 2>&1; then echo "grubby: $(grubby --default-kernel 2>&1)"; fi; '
    'if test -r /etc/default/grub; then sed -n "s/^GRUB_DEFAULT=/grub_default: /p" /etc/default/grub; fi; '
    'if test -r /boot/grub/grubenv; then sed -n "s/^saved_entry=/saved_entry: /p" /boot/grub/grubenv; fi; '
    'if test -r /boot/grub/grub.cfg; then grep -E "^[[:space:]]*(menuentry|submenu|linux|linuxefi)[[:space:]]|^[[:space:]]*[}]" '
    '/boot/grub/grub.cfg | sed "s/^/cfg: /"; fi; '
    'for k in /boot/vmlinuz-*; do test -e "$k" && echo "vmlinuz: ${k#/boot/vmlinuz-}"; done; '
    'for m in /lib/modules/*/; do test -d "$m" || continue; r=${m%/}; r=${r##*/}; '
    'if test -e "$m/build/Makefile"; then echo "modules: $r headers"; else echo "modules: $r"; fi; done; true',
    # DKMS's build logs of the NVIDIA module (a failed build leaves build/make.log)
    "dkms_log": f'for f in {DKMS_TREE}/nvidia/*/build/make.log; do test -e "$f" || continue; '
    'echo "== $f"; tail -n 25 "$f"; done; true',
    # a kernel gpuhost kernel-update installed and DKMS could not build the module for
    # (roles/kernel_update_ops.py HELD_BACK)
    "kernel_held": "test -e /var/lib/gpuhost/kernel-held-back || exit 3; "
    "head -c 4096 /var/lib/gpuhost/kernel-held-back",
    # the newest kernel of the running kernel's shape that the package manager already knows
    # (apt's lists, dnf's metadata cache: no download), facts.offered_parsers; the package
    # manager by os-release (an EL host may carry apt-cache, a Debian one dnf)
    "kernel_offered": 'r=$(uname -r); f=$(. /etc/os-release 2>/dev/null; echo " $ID $ID_LIKE "); '
    'case "$f" in *" debian "*|*" ubuntu "*) f=apt;; *" rhel "*|*" fedora "*|*" centos "*) f=dnf;; '
    "*) f=;; esac; "
    'if [ "$f" = apt ] && command -v apt-cache >/dev/null 2>&1; then '
    's=$(printf %s "$r" | tr -d 0-9); n=$(LC_ALL=C apt-cache pkgnames linux-image- 2>/dev/null | '
    "awk -v s=\"$s\" '{x = substr($0, 13); y = x; gsub(/[0-9]/, \"\", y); if (y == s) print x}' | "
    'sort -V | tail -n 1); echo "source apt"; test -n "$n" || exit 0; '
    'LC_ALL=C apt-cache policy "linux-image-$n" "linux-headers-$n" 2>&1; '
    'elif [ "$f" = dnf ] && command -v dnf >/dev/null 2>&1; then '
    'case $r in *uek*) p=kernel-uek;; *) p=kernel;; esac; echo "source dnf"; LC_ALL=C timeout 30 dnf -C -q list --showduplicates "$p" 2>&1; '
    "else exit 127; fi",
    "daemon_json": _file("/etc/docker/daemon.json"),
    "docker_version": _tool("dockerd", "command -v dockerd"),
    "docker_info": _tool(
        "docker",
        "timeout 10 docker info --format "
        "'{{json .Runtimes}}\t{{.DefaultRuntime}}\t{{.ServerVersion}}'",
    ),
    "nvidia_ctk": _tool("nvidia-ctk", "nvidia-ctk --version"),
    "nvidia_container_cli": _tool("nvidia-container-cli", "nvidia-container-cli --version"),
    # CDI specs (issue 16): every spec file of the two directories Docker and the toolkit
    # read, each behind "==> PATH <==" (gpuhost.runtime.cdi.split_files); none: exit 3
    "cdi_specs": "_n=0; for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml "
    '/var/run/cdi/*.json; do test -f "$f" || continue; _n=1; echo "==> $f <=="; cat "$f"; '
    'echo; done; test "$_n" = 1 || exit 3',
    # gpuhost's boot unit for the spec (gpuhost.runtime.cdi.BOOT_UNIT_PATH): its sha256 and whether
    # it is enabled; exit 3 when there is none
    "cdi_boot_unit": "test -f /etc/systemd/system/gpuhost-cdi-spec.service || exit 3; "
    "sha256sum /etc/systemd/system/gpuhost-cdi-spec.service; "
    "systemctl is-enabled gpuhost-cdi-spec.service 2>&1; true",
    # NVIDIA's nvidia-cdi-refresh.service (toolkit 1.18+; gpuhost.runtime.cdi.parse_refresh_unit):
    # its load, active and sub state and last result; exit 3 without systemctl
    "cdi_refresh_unit": "command -v systemctl >/dev/null 2>&1 || exit 3; systemctl show -p "
    "LoadState -p ActiveState -p SubState -p Result nvidia-cdi-refresh.service 2>/dev/null; true",
    # the fabric daemons (issue 25): "UNIT ENABLED ACTIVE" for each unit the host has
    "fabric_services": "for u in nvidia-fabricmanager nvidia-imex nvlsm; do "
    'for d in /etc/systemd/system /lib/systemd/system /usr/lib/systemd/system; do '
    'if test -e "$d/$u.service"; then e=$(systemctl is-enabled "$u" 2>/dev/null); '
    'a=$(systemctl is-active "$u" 2>/dev/null); '
    'printf "%s %s %s\\n" "$u" "${e:-unknown}" "${a:-unknown}"; break; fi; done; done; true',
    # NVLink Subnet Manager (NVLink 5 HGX; facts/assemble_fabric.py): its package's version
    # ("-" without it) and whether it runs (the pid file NVIDIA's driver container gives
    # it, else its binary's path in a command line; [/] keeps pgrep off this shell)
    "nvlsm": "s=$(dpkg-query -W -f '${db:Status-Abbrev}|${Version}' nvlsm 2>/dev/null); "
    'case "$s" in ii*) v=${s#*|};; *) v=$(rpm -q --qf "%{VERSION}-%{RELEASE}" nvlsm '
    '2>/dev/null) || v=-;; esac; echo "version ${v:--}"; '
    "p=$(cat /run/nvidia-fabricmanager/nvlsm.pid 2>/dev/null); "
    'if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then echo running; '
    "elif pgrep -f '[/]opt/nvidia/nvlsm/sbin/nvlsm' >/dev/null 2>&1; then echo running; "
    "else echo stopped; fi",
    # GPUDirect RDMA (issue 25 item 5, gpuhost.rdma.parse_section): NVIDIA GPUs and
    # Mellanox NICs on the PCI bus (read builtins, no process per function; a VPD with
    # SW_MNG is an NVLink 5 switch tray's port, SR-IOV VFs left out), /sys/class/infiniband,
    # and only where a NIC is seen: each GPU's/NIC's sysfs path (the bridges above it),
    # lspci's ACSCtl lines, whether nvidia_peermem is loaded and which modules-load.d file
    # names it
    "rdma": "test -d /sys/bus/pci/devices || exit 3; _n=; "
    "for d in $(grep -lx -e 0x10de -e 0x15b3 /sys/bus/pci/devices/*/vendor 2>/dev/null); do "
    'd=${d%/vendor}; s=${d##*/}; read -r v < "$d/vendor"; read -r c < "$d/class" || c=-; '
    'case "$v$c" in 0x10de0x03*) echo "gpu $s";; 0x15b30x0200*|0x15b30x0207*) '
    'test -e "$d/physfn" && continue; if grep -qa SW_MNG "$d/vpd" 2>/dev/null; then '
    'echo "switch $s"; else echo "nic $s"; _n=1; fi;; esac; done; '
    'for i in /sys/class/infiniband/*; do test -e "$i/device" || continue; '
    'p=$(readlink -f "$i/device"); k=nic; grep -qa SW_MNG "$i/device/vpd" 2>/dev/null && k=switch; '
    'echo "ib ${i##*/} ${p##*/} $k"; test "$k" = nic && _n=1; done; test -n "$_n" || exit 0; '
    'for d in $(grep -lx -e 0x10de -e 0x15b3 /sys/bus/pci/devices/*/vendor 2>/dev/null); do '
    'd=${d%/vendor}; echo "path ${d##*/} $(readlink -f "$d")"; done; '
    "if command -v lspci >/dev/null 2>&1; then timeout 20 lspci -D -vvv 2>/dev/null | "
    "awk '/^[0-9a-f]/ {dev=$1} /ACSCtl:/ {$1=$1; print \"acs\", dev, $0}'; "
    'else echo "lspci missing"; fi; '
    '_m=$(lsmod 2>/dev/null); case "$_m" in *"nvidia_peermem "*) echo "peermem loaded";; '
    '*) echo "peermem not_loaded";; esac; '
    # the peer-memory API nvidia_peermem needs: only MLNX_OFED/DOCA-OFED's ib_core exports
    # it (NVIDIA open-gpu-kernel-modules conftest.sh NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT); an
    # ib_core loaded (its symbols tagged [ib_core]) without it is "absent" (inbox), ib_core
    # not loaded is not told
    "awk '/ ib_register_peer_memory_client/ {p=1} /\\[ib_core\\]/ {c=1} END {if (p) print "
    "\"peer_api exported\"; else if (c) print \"peer_api absent\"}' /proc/kallsyms 2>/dev/null; "
    "grep -lsxE '[[:space:]]*nvidia[-_]peermem[[:space:]]*' /etc/modules-load.d/*.conf "
    "/run/modules-load.d/*.conf /usr/lib/modules-load.d/*.conf /lib/modules-load.d/*.conf "
    "/etc/modules 2>/dev/null | sed 's/^/persist /'; true",
    # nvidia-smi topo -m, only where the rdma section (same shell, just before) saw a NIC
    "rdma_topo": 'case "$_gh_rdma" in *"nic "*) ;; *) exit 4;; esac; '
    + _tool("nvidia-smi", f"{_SMI} topo -m"),
    # containerd (issue 24): its version, config.toml and gpuhost's drop-in, each file behind
    # "==> PATH <==" (gpuhost.runtime.containerd.parse_section); 127 without containerd
    "containerd": _tool("containerd", 'echo "version: $(containerd --version 2>&1)"; '
                        "for f in /etc/containerd/config.toml /etc/containerd/conf.d/99-nvidia.toml; "
                        'do test -f "$f" || continue; echo "==> $f <=="; cat "$f"; done; true'),
    # Slurm (issue 26): the node daemon's unit, the GPUs its gres.conf gives (slurmd -G) and
    # the controller's view of this node (facts.assemble_slurm); bounded: a dead slurmctld
    # costs at most 10 s, in a chain of its own; 127 without slurmd
    "slurm": _tool("slurmd", 'n=$(hostname -s); echo "node=$n"; '
                   'echo "enabled=$(systemctl is-enabled slurmd 2>/dev/null)"; '
                   'echo "active=$(systemctl is-active slurmd 2>/dev/null)"; '
                   '_g=$(timeout 10 slurmd -G 2>&1); echo "slurmd_G_rc=$?"; printf "%s\\n" "$_g"; '
                   '_s=$(timeout 10 scontrol show node -o "$n" 2>&1); echo "scontrol_rc=$?"; '
                   'printf "%s\\n" "$_s"; true'),
    # the run lock (gpuhost.runlock): the host's clock and the owner file; exit 3 without one
    "run_lock": _runlock.SECTION,
    # gpuhost's converged stamp and the witness of now (gpuhost.stamp), last: it reads the
    # package lists the dpkg and rpm sections left in this shell; exit 3 without a stamp
    "stamp": _stamp.SECTION,
}

# Slow tools run side by side: each chain is one background job; sections within a chain
# run in order (the MIG sections need the XML of smi_xml). Everything else runs in the
# foreground meanwhile. Output is printed in SECTIONS order whatever finishes first.
CHAINS: tuple[tuple[str, ...], ...] = (
    ("smi_xml", "smi_list", "mig_lgi", "mig_lci", "nvlink_status", "nvlink_errors"),
    ("dkms",),
    ("docker_info", "nvidia_ctk", "nvidia_container_cli"),
    ("slurm",),
    ("kernel_offered",),
)

# _gh NN NAME CODE: run CODE, keep its output in $_gh_NAME (for later sections of the
# same chain), write the marker line and the output to $_d/NN for the final, ordered cat.
_RUNNER = (
    "_d=$(mktemp -d 2>/dev/null) || exit 0; "
    '_gh() { _o=$(eval "$3" 2>&1); _r=$?; eval "_gh_$2=\\$_o"; '
    f"printf '{MARKER}%s rc=%d\\n%s\\n' \"$2\" \"$_r\" \"$_o\" > \"$_d/$1\"; }}; "
)


def _shell_single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def build_script(names: list[str] | tuple[str, ...]) -> str:
    """One POSIX shell command running the named sections; always exits 0.

    Sections print in ``SECTIONS`` order; the slow ones run in parallel chains.
    """
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise KeyError(f"unknown fact sections: {', '.join(unknown)}")
    order = {name: index for index, name in enumerate(SECTIONS)}
    wanted = sorted(set(names), key=order.__getitem__)

    def call(name: str) -> str:
        return f"_gh {order[name]:02d} {name} {_shell_single_quote(SECTIONS[name])}; "

    parts = [_RUNNER]
    chained: set[str] = set()
    for chain in CHAINS:
        members = [name for name in chain if name in wanted]
        if members and len(wanted) > len(members):
            parts.append("( " + "".join(call(name) for name in members) + ") & ")
            chained.update(members)
    parts.extend(call(name) for name in wanted if name not in chained)
    parts.append('wait; cat "$_d"/* 2>/dev/null; rm -rf "$_d"; true')
    return "".join(parts)


ALL_SECTIONS: tuple[str, ...] = tuple(SECTIONS)
# Sections only the audit reads: what the package manager offers is no part of a host's
# converged state, and the deploys, upgrades and kernel updates re-read the host after each
# change (a converged host's one read stays what it was).
AUDIT_ONLY_SECTIONS: tuple[str, ...] = ("kernel_offered",)
READ_SECTIONS: tuple[str, ...] = tuple(s for s in SECTIONS if s not in AUDIT_ONLY_SECTIONS)
