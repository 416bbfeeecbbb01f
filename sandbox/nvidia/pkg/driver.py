"""The simulated NVIDIA driver packages, named and versioned as NVIDIA names them.

Flavour: the kernel-module package (nvidia-dkms-<branch>[-open] on apt, nvidia-dkms[-open]
from 590, kmod-nvidia-{latest,open}-dkms on rpm) ships /usr/lib/gpusim/userspace.json, so
the flavour recorded there is the one whose module is installed; nvidia-utils[-<branch>] /
nvidia-driver-cuda carry the simulator and the nvidia-smi launcher.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .common import GPUSIM_SRC, BuildError, template
from .deb import DebPackage
from .rpm import RpmPackage

FLAVORS = ("proprietary", "open")


def branch_of(version: str) -> str:
    return version.split(".")[0]


# What each branch's packaging looks like (sources in sandbox/nvidia/pkg/README.md,
# "Branches"):
# - from 580 the HGX companions lose the branch on apt and rpm (NVIDIA/gpu-driver-container
#   @8cbaa51 ubuntu22.04/install.sh, @038c8b5 rhel9/install.sh): nvidia-fabricmanager,
#   libnvidia-nscq, nvidia-imex, libnvsdm;
# - from 590 every apt driver package loses it and nvidia-driver-pinning-<branch> holds the
#   branch (Driver Installation Guide, "Recent Updates": "Ubuntu 590 and later packages");
# - from 620 only the open kernel modules are shipped (the R620 guide: "Proprietary Kernel
#   Modules Removed"): no cuda-drivers, no proprietary DKMS package or dnf stream.
def companions_unbranched(version: str) -> bool:
    return int(branch_of(version)) >= 580


def apt_unbranched(version: str, distro: str = "") -> bool:
    # ubuntu2604: unbranched names on every branch (NVIDIA's 26.04 container installs them
    # for any DRIVER_VERSION, gpu-driver-container@06a208c ubuntu26.04/install.sh)
    return int(branch_of(version)) >= 590 or distro == "ubuntu2604"


def open_only(version: str) -> bool:
    return int(branch_of(version)) >= 620


def flavors(version: str) -> tuple[str, ...]:
    return ("open",) if open_only(version) else FLAVORS


# The apt preferences file NVIDIA's pinning packages ship (a field copy of
# nvidia-driver-pinning-595.71.05: /etc/apt/preferences.d/nvidia-driver-pin, stanzas
# "Pin: version <ver>-*" at Pin-Priority 1000); the branch package pins "<branch>.*".
PIN_FILE = "/etc/apt/preferences.d/nvidia-driver-pin"


def deb_version(version: str, distro: str) -> str:
    return f"{version}-0ubuntu1" if distro.startswith("ubuntu") else f"{version}-1"


def gpusim_files(src: Path = GPUSIM_SRC) -> dict[str, tuple[bytes, int]]:
    """The simulator package, copied to /usr/lib/gpusim/gpusim/."""
    src = Path(os.environ.get("GPUHOST_GPUSIM_SRC", src))
    if not (src / "smi.py").exists() and not (src / "smi").is_dir():
        raise BuildError(f"the GPU simulator is missing: expected {src}/smi.py (written by the "
                         "gpusim part, sandbox/nvidia/README.md). Commit it first, or point "
                         "GPUHOST_GPUSIM_SRC at a checkout that has it.")
    files = {}
    for p in sorted(src.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            mode = 0o755 if os.access(p, os.X_OK) else 0o644
            files[f"/usr/lib/gpusim/gpusim/{p.relative_to(src)}"] = (p.read_bytes(), mode)
    return files


def module_files(version: str, flavor: str) -> dict[str, tuple[str, int]]:
    """Fake DKMS module source plus the user-space flavour record."""
    title = "open" if flavor == "open" else "proprietary"
    sub = {"VERSION": version, "FLAVOR": flavor, "FLAVOR_TITLE": title}
    src = f"/usr/src/nvidia-{version}"
    userspace = json.dumps({"version": version, "flavor": flavor}, indent=2) + "\n"
    return {
        f"{src}/dkms.conf": (template("dkms.conf", **sub), 0o644),
        f"{src}/gpusim-build.sh": (template("gpusim-build.sh", **sub), 0o755),
        f"{src}/gpusim-dkms-hook.sh": (template("dkms-hook.sh", **sub), 0o755),
        "/usr/lib/gpusim/userspace.json": (userspace, 0o644),
    }


def persistenced_files(version: str) -> dict[str, tuple[str, int]]:
    sub = {"VERSION": version}
    return {
        "/usr/bin/nvidia-persistenced": (template("nvidia-persistenced", **sub), 0o755),
        "/lib/systemd/system/nvidia-persistenced.service":
            (template("nvidia-persistenced.service"), 0o644),
    }


FM_UNIT = "/lib/systemd/system/nvidia-fabricmanager.service"


def fabricmanager_files(version: str) -> dict[str, tuple[str, int]]:
    """nv-fabricmanager (a daemon that refuses another driver version and a host without
    NVSwitches), its configuration and NVIDIA's unit (sandbox/nvidia/README.md, "Fabric
    Manager")."""
    return {
        "/usr/bin/nv-fabricmanager": (template("nv-fabricmanager", VERSION=version), 0o755),
        "/usr/share/nvidia/nvswitch/fabricmanager.cfg":
            ("# Fabric Manager configuration (gpuhost sandbox)\nFM_CMD_BIND_INTERFACE=127.0.0.1\n",
             0o644),
        FM_UNIT: (template("nvidia-fabricmanager.service"), 0o644),
    }


FM_STOP = ("if [ -d /run/systemd/system ]; then "
           "systemctl stop nvidia-fabricmanager.service >/dev/null 2>&1 || true; fi")
# a Fabric Manager of the old version must not keep running once its package goes
FM_DEB_SCRIPTS = {"prerm": f"#!/bin/sh\nset -e\n{FM_STOP}\n"}


# The driver's user-space libraries under their versioned names (NVIDIA ships
# libnvidia-ml.so.<version> and libcuda.so.<version>: Ubuntu's libnvidia-compute-<branch>,
# the EL nvidia-driver-cuda-libs / nvidia-driver-libs; here in the utils package). Placeholders,
# no library inside: nvidia-ctk cdi generate finds them by the loaded driver's version and
# the CDI spec mounts them (gpuhost.runtime.cdi reads the version back from those names).
DRIVER_LIBS = ("libnvidia-ml.so", "libcuda.so")


def library_files(version: str, libdir: str) -> dict[str, tuple[str | bytes, int]]:
    text = f"Simulated {{}} of NVIDIA driver {version} (gpuhost sandbox): no library inside.\n"
    return {f"{libdir}/{lib}.{version}": (text.format(lib), 0o644) for lib in DRIVER_LIBS}


def utils_files(version: str, libdir: str = "/usr/lib/x86_64-linux-gnu",
                ) -> dict[str, tuple[str | bytes, int]]:
    files: dict[str, tuple[str | bytes, int]] = {
        "/usr/bin/nvidia-smi": (template("nvidia-smi"), 0o755)}
    files.update(gpusim_files())
    files.update(library_files(version, libdir))
    return files


NOUVEAU = "/etc/modprobe.d/nvidia-blacklists-nouveau.conf"
# NVIDIA's nvidia-driver-cuda RPM ships this preset (yum-packaging-nvidia-driver,
# 70-nvidia-driver-cuda.preset): `systemctl preset` enables these units.
PRESET = "/usr/lib/systemd/system-preset/70-nvidia-driver-cuda.preset"
PRESET_TEXT = "enable nvidia-persistenced.service\nenable nvidia-fabricmanager.service\n"
SYSTEMD_STOP = ("if [ -d /run/systemd/system ]; then "
                "systemctl stop nvidia-persistenced.service >/dev/null 2>&1 || true; fi")


def apt_packages(version: str, distro: str) -> list[DebPackage]:
    if distro in ("debian12", "debian13"):  # Debian's packaging, as NVIDIA's Debian repos
        from . import driver_debian
        return driver_debian.packages(version, distro)
    b = branch_of(version)
    v = deb_version(version, distro)
    eq = f"(= {v})"
    hook = f"/usr/src/nvidia-{version}/gpusim-dkms-hook.sh"
    # before 590 the branch is part of each name ("nvidia-utils-570"); from 590 it is not
    sfx = "" if apt_unbranched(version, distro) else f"-{b}"
    common, utils = f"nvidia-kernel-common{sfx}", f"nvidia-utils{sfx}"
    # the unbranched names were the virtual names the branched packages provide and
    # conflict with: one branch installed at a time, apt swaps them on a branch change
    virtual = {} if apt_unbranched(version, distro) else {
        "common": dict(provides=["nvidia-kernel-common"], conflicts=["nvidia-kernel-common"],
                       replaces=["nvidia-kernel-common"]),
        "utils": dict(provides=["nvidia-utils"], conflicts=["nvidia-utils"],
                      replaces=["nvidia-utils"])}
    pkgs = [
        DebPackage(common, v,
                   f"Shared files used with the kernel module (simulated, branch {b})",
                   # Debian 12: NVIDIA's guide enables Debian's contrib because its packages
                   # need contrib packages (in bookworm: nvidia-support,
                   # nvidia-installer-cleanup, glx-alternative-nvidia ...); which package pulls which is
                   # not documented: modelled on one of them (sandbox/README.md)
                   depends=["nvidia-support"] if distro == "debian12" else [],
                   files={NOUVEAU: (template("nvidia-blacklists-nouveau.conf"), 0o644)},
                   conffiles=[NOUVEAU], **virtual.get("common", {})),
        DebPackage(utils, v, f"NVIDIA driver support binaries (simulated nvidia-smi, {b})",
                   depends=["python3-minimal"], files=utils_files(version), section="non-free/utils",
                   **virtual.get("utils", {})),
        *apt_companions(version, v, common),
        nvlsm_deb(),
        DebPackage("nvidia-persistenced", v, "NVIDIA Persistence Daemon (simulated)",
                   files=persistenced_files(version), section="non-free/utils",
                   # a systemd unit only; the package enables nothing (gpuhost enables it)
                   scripts={"prerm": "#!/bin/sh\nset -e\n[ \"$1\" = remove ] || exit 0\n"
                            f"{SYSTEMD_STOP}\n"}),
    ]
    metas = {}  # flavour -> the packages its meta package pulls in
    for flavor in flavors(version):
        fsfx = "-open" if flavor == "open" else ""
        dkms, drv = f"nvidia-dkms{sfx}{fsfx}", f"nvidia-driver{sfx}{fsfx}"
        other = f"nvidia-driver{sfx}{'' if flavor == 'open' else '-open'}"
        pkgs += [
            DebPackage(dkms, v,
                       f"NVIDIA DKMS package, {flavor} kernel module (simulated, {version})",
                       depends=["dkms", f"{common} {eq}"],
                       files=module_files(version, flavor), section="non-free/kernel",
                       provides=["nvidia-dkms-kernel"], conflicts=["nvidia-dkms-kernel"],
                       replaces=["nvidia-dkms-kernel"],
                       scripts={"postinst": deb_postinst(hook), "prerm": deb_prerm(hook)}),
            DebPackage(drv, v,
                       f"NVIDIA driver metapackage, {flavor} kernel module (simulated, {version})",
                       depends=[f"{utils} {eq}", f"{dkms} {eq}", f"{common} {eq}"],
                       conflicts=[] if open_only(version) else [other],
                       provides=["nvidia-driver-binary"]),
        ]
        metas[flavor] = [f"{drv} {eq}", f"{dkms} {eq}", f"{utils} {eq}"]
    names = {"proprietary": "cuda-drivers", "open": "nvidia-open"}
    text = {"proprietary": "CUDA drivers, proprietary kernel module",
            "open": "NVIDIA driver, open kernel module"}
    for flavor, deps in metas.items():
        if apt_unbranched(version, distro):  # one meta package per flavour, no branch
            pkgs.append(DebPackage(names[flavor], v, f"{text[flavor]} (branch {b})",
                                   depends=deps, section="multiverse/metapackages"))
            continue
        branched = f"{names[flavor]}-{b}"
        pkgs += [DebPackage(branched, v, f"{text[flavor]}, branch {b}", depends=deps,
                            section="multiverse/metapackages"),
                 DebPackage(names[flavor], v, f"{text[flavor]} (latest in repo)",
                            depends=[f"{branched} {eq}"], section="multiverse/metapackages")]
    if apt_unbranched(version, distro):
        pkgs.append(pinning_package(version, distro, [p.name for p in pkgs]))
    return pkgs


def apt_companions(version: str, v: str, common: str) -> list[DebPackage]:
    """Fabric Manager and the branch's companions on NVSwitch / multi-node NVLink systems,
    at exactly the driver's version (NVIDIA's driver container pins "FM, NSCQ, libnvsdm and
    IMEX" to the driver version). No daemon but nv-fabricmanager is simulated: an upgrade
    must move them, nothing more."""
    b = branch_of(version)
    dep = [f"{common} (= {v})"]
    if companions_unbranched(version):
        # from 580 without the branch (gpu-driver-container@8cbaa51 ubuntu22.04/install.sh)
        return [
            DebPackage("nvidia-fabricmanager", v,
                       f"Fabric Manager for NVSwitch based systems (simulated, {version})",
                       depends=dep, files=fabricmanager_files(version), section="non-free/utils",
                       scripts=FM_DEB_SCRIPTS),
            *(DebPackage(name, v, f"{what} (simulated, {version})", depends=dep,
                         files=readme(name, what, version), section=section)
              for name, what, section in COMPANIONS)]
    sfx = f"-{b}"
    return [
        DebPackage(f"nvidia-fabricmanager{sfx}", v,
                   f"Fabric Manager for NVSwitch based systems (simulated, {version})",
                   depends=dep, files=fabricmanager_files(version),
                   provides=["nvidia-fabricmanager"], conflicts=["nvidia-fabricmanager"],
                   replaces=["nvidia-fabricmanager"], section="non-free/utils",
                   scripts=FM_DEB_SCRIPTS),
        # before 580 the sandbox models NSCQ and IMEX (no libnvsdm: its repos had it from 570
        # as libnvsdm-570, not modelled), each with the branch in its name
        *(DebPackage(f"{name}{sfx}", v, f"{what} (simulated, {version})", depends=dep,
                     files=readme(f"{name}{sfx}", what, version), provides=[name],
                     conflicts=[name], replaces=[name], section=section)
          for name, what, section in COMPANIONS[:2])]


COMPANIONS = (("libnvidia-nscq", "NVSwitch Configuration and Query library", "non-free/libs"),
              ("nvidia-imex", "NVIDIA IMEX daemon", "non-free/utils"),
              ("libnvsdm", "NVSwitch Device Monitoring library", "non-free/libs"))


IMEX_CONFIG = "/etc/nvidia-imex/config.cfg"


def readme(package: str, what: str, version: str) -> dict[str, tuple[str, int]]:
    files = {f"/usr/share/doc/{package}/README.gpuhost":
             (f"Simulated {what} {version} (gpuhost sandbox).\n", 0o644)}
    if package.startswith("nvidia-imex"):  # the daemon, its config and NVIDIA's unit name
        files.update({
            "/usr/bin/nvidia-imex": (template("nvidia-imex", VERSION=version), 0o755),
            IMEX_CONFIG: ("# NVIDIA IMEX configuration (gpuhost sandbox)\n"
                          "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n", 0o644),
            "/lib/systemd/system/nvidia-imex.service": (template("nvidia-imex.service"), 0o644)})
    return files


# NVLink Subnet Manager (NVLink 5 HGX): versioned on its own, not with the driver (NVIDIA's
# CUDA repo: nvlsm-2025.06.6-1.x86_64.rpm, the version Bottlerocket's nvlsm.spec packages;
# gpu-driver-container@06a208c ubuntu26.04/install.sh: "nvlsm and infiniband-diags are
# versioned independently of the driver"). Its files as NVIDIA's package lays them out
# (bottlerocket-os nvlsm.spec unpacks opt/nvidia/nvlsm/sbin/nvlsm,
# usr/share/nvidia/nvlsm/nvlsm.conf ...); no systemd unit: Fabric Manager's start script
# runs it (sandbox/nvidia/README.md, "NVLink 5").
NVLSM_VERSION = "2025.06.6"


def nvlsm_files() -> dict[str, tuple[str, int]]:
    return {"/opt/nvidia/nvlsm/sbin/nvlsm": (template("nvlsm", VERSION=NVLSM_VERSION), 0o755),
            "/usr/share/nvidia/nvlsm/nvlsm.conf":
                ("# NVLink Subnet Manager configuration (gpuhost sandbox)\n", 0o644)}


def nvlsm_deb() -> DebPackage:
    return DebPackage("nvlsm", f"{NVLSM_VERSION}-1", "NVIDIA NVLink Subnet Manager (simulated)",
                      files=nvlsm_files(), section="non-free/utils")


def nvlsm_rpm(el: str) -> RpmPackage:
    return RpmPackage(name="nvlsm", version=NVLSM_VERSION, release="1",
                      summary="NVIDIA NVLink Subnet Manager (simulated)", files=nvlsm_files())


def pin_text(version: str, names: list[str]) -> str:
    """The branch pinning package's apt preferences: every driver package of the repo at
    priority 1000 on this branch's versions, so a newer branch is never the candidate."""
    b = branch_of(version)
    return (f"# NVIDIA driver branch {b} (gpuhost sandbox simulation of nvidia-driver-pinning-{b})\n"
            f"Package: {' '.join(sorted(names))}\n"
            f"Pin: version {b}.*\n"
            "Pin-Priority: 1000\n")


def pinning_package(version: str, distro: str, names: list[str]) -> DebPackage:
    """nvidia-driver-pinning-<branch>: its own version is the branch, not the driver's
    (field: 580-5 in NVIDIA's debian12 repo, 610-2ubuntu1 in its ubuntu2404 repo).
    Not a conffile: a branch change (this package replaced by another branch's) must leave
    the new branch's pin, never the old file."""
    b = branch_of(version)
    v = f"{b}-1ubuntu1" if distro.startswith("ubuntu") else f"{b}-1"
    return DebPackage(f"nvidia-driver-pinning-{b}", v,
                      f"APT driver pinning file for driver branch {b}",
                      files={PIN_FILE: (pin_text(version, names), 0o644)},
                      provides=["nvidia-driver-pinning"], conflicts=["nvidia-driver-pinning"],
                      replaces=["nvidia-driver-pinning"], section="multiverse/metapackages")


def deb_postinst(hook: str) -> str:
    return ("#!/bin/sh\nset -e\n"
            "if [ \"$1\" = configure ]; then\n"
            f"    sh {hook} install\nfi\n")


def deb_prerm(hook: str) -> str:
    return f"#!/bin/sh\nset -e\nsh {hook} remove\n"


def el_release(el: str) -> str:
    return f"1.{el.replace('rhel', 'el')}"


def rpm_packages(version: str, el: str) -> list[RpmPackage]:
    rel = el_release(el)
    evr = f"3:{version}-{rel}"
    eq = f"= {evr}"
    hook = f"/usr/src/nvidia-{version}/gpusim-dkms-hook.sh"

    def pkg(name, summary, **kw) -> RpmPackage:
        return RpmPackage(name=name, version=version, release=rel, epoch=3, summary=summary, **kw)

    kmods = []
    for flavor, name, other in (("proprietary", "kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms"),
                                ("open", "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms")):
        if flavor not in flavors(version):
            continue
        kmods.append(pkg(name, f"NVIDIA display driver kernel module, {flavor} (simulated DKMS)",
                         requires=["dkms", f"nvidia-kmod-common {eq}"],
                         provides=[f"nvidia-kmod = {evr}"], conflicts=[other],
                         files=module_files(version, flavor),
                         scriptlets={"post": ["/bin/sh", hook, "install"],
                                     "preun": ["/bin/sh", hook, "remove"]}))
    return kmods + [nvlsm_rpm(el)] + [
        pkg("nvidia-kmod-common", "Common file for the NVIDIA kernel module (simulated)",
            files={NOUVEAU: (template("nvidia-blacklists-nouveau.conf"), 0o644)},
            config_files=[NOUVEAU], arch="noarch"),
        pkg("nvidia-driver", "NVIDIA's proprietary display driver user space (simulated)",
            requires=[f"nvidia-kmod-common {eq}", f"nvidia-kmod {eq}", f"nvidia-driver-cuda {eq}"],
            files={"/usr/share/doc/nvidia-driver/README.gpuhost":
                   ("Simulated NVIDIA driver (gpuhost sandbox).\n", 0o644)}),
        pkg("nvidia-driver-cuda", "CUDA integration for the NVIDIA driver (simulated nvidia-smi)",
            files={**utils_files(version, "/usr/lib64"), PRESET: (PRESET_TEXT, 0o644)}),
        # NVIDIA's spec: %systemd_post (systemctl preset: enabled by the preset above, not
        # started), %systemd_preun (stopped before removal)
        pkg("nvidia-persistenced", "NVIDIA Persistence Daemon (simulated)",
            requires=[f"nvidia-driver-cuda {eq}"], files=persistenced_files(version),
            scriptlets={"post": ["/bin/sh", "-c", "command -v systemctl >/dev/null || exit 0; "
                                 "systemctl --no-reload preset nvidia-persistenced.service "
                                 ">/dev/null 2>&1; exit 0"],
                        "preun": ["/bin/sh", "-c", f"{SYSTEMD_STOP}; exit 0"]}),
        pkg(fabricmanager_rpm(version), "Fabric Manager for NVSwitch based systems (simulated)",
            requires=[f"nvidia-driver {eq}"], files=fabricmanager_files(version),
            scriptlets={"preun": ["/bin/sh", "-c", f"{FM_STOP}; exit 0"]}),
        # from 580: NSCQ, IMEX and NVSDM without the branch, at the driver's version
        # (gpu-driver-container@038c8b5 rhel9/install.sh); before 580 NSCQ only, with the
        # branch in its name (rhel9/precompiled/Dockerfile: libnvidia-nscq-${DRIVER_BRANCH})
        *(pkg(name, f"{what} (simulated)", requires=[f"nvidia-kmod-common {eq}"],
              files=readme(name, what, version))
          for name, what, _ in (COMPANIONS if companions_unbranched(version) else
                                [(f"{COMPANIONS[0][0]}-{branch_of(version)}",
                                  COMPANIONS[0][1], "")])),
        *([] if open_only(version) else [
            pkg("cuda-drivers", "CUDA drivers, proprietary kernel module (meta package)",
                requires=[f"nvidia-driver {eq}", f"nvidia-driver-cuda {eq}",
                          f"kmod-nvidia-latest-dkms {eq}", f"nvidia-persistenced {eq}"],
                files={"/usr/share/doc/cuda-drivers/README.gpuhost": ("meta package\n", 0o644)})]),
        pkg("nvidia-open", "NVIDIA driver, open kernel module (meta package)",
            requires=[f"nvidia-driver {eq}", f"nvidia-driver-cuda {eq}",
                      f"kmod-nvidia-open-dkms {eq}", f"nvidia-persistenced {eq}"],
            files={"/usr/share/doc/nvidia-open/README.gpuhost": ("meta package\n", 0o644)}),
    ]


def fabricmanager_rpm(version: str) -> str:
    """nvidia-fabric-manager before 580, nvidia-fabricmanager from 580 (rhel9/install.sh)."""
    return "nvidia-fabricmanager" if companions_unbranched(version) else "nvidia-fabric-manager"


def module_streams(version: str) -> dict[str, tuple[str, list[str]]]:
    """stream -> (flavour, its packages); R620 has the open streams only."""
    b = branch_of(version)
    streams = {
        f"{b}-dkms": ("proprietary", ["cuda-drivers", "kmod-nvidia-latest-dkms"]),
        "latest-dkms": ("proprietary", ["cuda-drivers", "kmod-nvidia-latest-dkms"]),
        f"{b}-open": ("open", ["nvidia-open", "kmod-nvidia-open-dkms"]),
        "open-dkms": ("open", ["nvidia-open", "kmod-nvidia-open-dkms"]),
    }
    return {s: v for s, v in streams.items() if v[0] in flavors(version)}


def modules_yaml(version: str, el: str, pkgs: list[RpmPackage]) -> str:
    """dnf modularity metadata: module nvidia-driver with NVIDIA's stream names."""
    b = branch_of(version)
    rel = el_release(el)
    arch_of = {p.name: p.arch for p in pkgs}
    fm = fabricmanager_rpm(version)
    common = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-kmod-common",
              "nvidia-persistenced", fm]
    streams = module_streams(version)
    default = "open-dkms" if open_only(version) else "latest-dkms"
    docs = []
    for i, (stream, (flavor, extra)) in enumerate(streams.items()):
        meta = extra[0]
        names = sorted(common + extra)
        rpms = "\n".join(f"      - {n}-3:{version}-{rel}.{arch_of[n]}" for n in names)
        components = "\n".join(f"      {n}:\n        rationale: {flavor} driver stack"
                               for n in names)
        docs.append(f"""---
document: modulemd
version: 2
data:
  name: nvidia-driver
  stream: "{stream}"
  version: {int(version.replace('.', '')[:10]) * 10 + i}
  context: "{el}gpus"
  arch: x86_64
  summary: Nvidia driver for {stream} branch
  description: >-
    Simulated NVIDIA driver module stream {stream} ({flavor} kernel module), gpuhost sandbox.
  license:
    module:
      - MIT
  profiles:
    default:
      description: Default installation
      rpms:
        - {meta}
    fm:
      description: FabricManager installation
      rpms:
        - {meta}
        - {fm}
    ks:
      description: Installation via kickstart
      rpms:
        - {meta}
  api:
    rpms:
      - {meta}
  components:
    rpms:
{components}
  artifacts:
    rpms:
{rpms}
...
""")
    order = ("latest-dkms", "open-dkms", f"{b}-dkms", f"{b}-open")
    profiles = "\n".join(f"    {st}: [default]" for st in order if st in streams)
    docs.append(f"""---
document: modulemd-defaults
version: 1
data:
  module: nvidia-driver
  stream: {default}
  profiles:
{profiles}
...
""")
    return "".join(docs)

