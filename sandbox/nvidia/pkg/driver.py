"""The simulated NVIDIA driver packages, named and versioned as NVIDIA names them.

Flavour: the kernel-module package (nvidia-dkms-<branch>[-open] on apt,
kmod-nvidia-{latest,open}-dkms on rpm) ships /usr/lib/gpusim/userspace.json, so the
flavour recorded there is the one whose module is installed; nvidia-utils-<branch> /
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


def fabricmanager_files(version: str) -> dict[str, tuple[str, int]]:
    return {
        "/usr/bin/nv-fabricmanager": (template("nv-fabricmanager", VERSION=version), 0o755),
        "/usr/share/nvidia/nvswitch/fabricmanager.cfg":
            ("# Fabric Manager configuration (gpuhost sandbox)\nFM_CMD_BIND_INTERFACE=127.0.0.1\n",
             0o644),
    }


# The driver's user-space libraries under their versioned names (NVIDIA ships
# libnvidia-ml.so.<version> and libcuda.so.<version>: Ubuntu's libnvidia-compute-<branch>,
# the EL nvidia-driver-cuda-libs / nvidia-driver-libs; here in the utils package). Placeholders,
# no library inside: nvidia-ctk cdi generate finds them by the loaded driver's version and
# the CDI spec mounts them (gpuhost.cdi reads the version back from those names).
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
    b = branch_of(version)
    v = deb_version(version, distro)
    eq = f"(= {v})"
    hook = f"/usr/src/nvidia-{version}/gpusim-dkms-hook.sh"
    pkgs = [
        DebPackage(f"nvidia-kernel-common-{b}", v,
                   f"Shared files used with the kernel module (simulated, branch {b})",
                   # Debian 12: NVIDIA's guide enables Debian's contrib because its packages
                   # need contrib packages (in bookworm: nvidia-support,
                   # nvidia-installer-cleanup, glx-alternative-nvidia ...); which package pulls which is
                   # not documented: modelled on one of them (sandbox/README.md)
                   depends=["nvidia-support"] if distro == "debian12" else [],
                   files={NOUVEAU: (template("nvidia-blacklists-nouveau.conf"), 0o644)},
                   conffiles=[NOUVEAU], provides=["nvidia-kernel-common"],
                   conflicts=["nvidia-kernel-common"], replaces=["nvidia-kernel-common"]),
        DebPackage(f"nvidia-utils-{b}", v, f"NVIDIA driver support binaries (simulated nvidia-smi, {b})",
                   depends=["python3-minimal"], files=utils_files(version), section="non-free/utils",
                   provides=["nvidia-utils"], conflicts=["nvidia-utils"], replaces=["nvidia-utils"]),
        DebPackage(f"nvidia-fabricmanager-{b}", v,
                   f"Fabric Manager for NVSwitch based systems (simulated, {version})",
                   depends=[f"nvidia-kernel-common-{b} {eq}"], files=fabricmanager_files(version),
                   provides=["nvidia-fabricmanager"], conflicts=["nvidia-fabricmanager"],
                   replaces=["nvidia-fabricmanager"], section="non-free/utils"),
        # The branch's companions on NVSwitch / multi-node NVLink systems, at exactly the
        # driver's version like Fabric Manager (NVIDIA's driver container pins "FM, NSCQ,
        # libnvsdm and IMEX" to the driver version; their apt names carry the branch before
        # 590). No daemon is simulated: an upgrade must move them, nothing more.
        DebPackage(f"libnvidia-nscq-{b}", v,
                   f"NVSwitch Configuration and Query library (simulated, {version})",
                   depends=[f"nvidia-kernel-common-{b} {eq}"],
                   files={f"/usr/share/doc/libnvidia-nscq-{b}/README.gpuhost":
                          (f"Simulated NSCQ {version} (gpuhost sandbox).\n", 0o644)},
                   provides=["libnvidia-nscq"], conflicts=["libnvidia-nscq"],
                   replaces=["libnvidia-nscq"], section="non-free/libs"),
        DebPackage(f"nvidia-imex-{b}", v, f"NVIDIA IMEX daemon (simulated, {version})",
                   depends=[f"nvidia-kernel-common-{b} {eq}"],
                   files={f"/usr/share/doc/nvidia-imex-{b}/README.gpuhost":
                          (f"Simulated IMEX {version} (gpuhost sandbox).\n", 0o644)},
                   provides=["nvidia-imex"], conflicts=["nvidia-imex"], replaces=["nvidia-imex"],
                   section="non-free/utils"),
        DebPackage("nvidia-persistenced", v, "NVIDIA Persistence Daemon (simulated)",
                   files=persistenced_files(version), section="non-free/utils",
                   # a systemd unit only; the package enables nothing (gpuhost enables it)
                   scripts={"prerm": "#!/bin/sh\nset -e\n[ \"$1\" = remove ] || exit 0\n"
                            f"{SYSTEMD_STOP}\n"}),
    ]
    for flavor in FLAVORS:
        sfx = "-open" if flavor == "open" else ""
        other = "" if flavor == "open" else "-open"
        pkgs += [
            DebPackage(f"nvidia-dkms-{b}{sfx}", v,
                       f"NVIDIA DKMS package, {flavor} kernel module (simulated, {version})",
                       depends=["dkms", f"nvidia-kernel-common-{b} {eq}"],
                       files=module_files(version, flavor), section="non-free/kernel",
                       provides=["nvidia-dkms-kernel"], conflicts=["nvidia-dkms-kernel"],
                       replaces=["nvidia-dkms-kernel"],
                       scripts={"postinst": deb_postinst(hook), "prerm": deb_prerm(hook)}),
            DebPackage(f"nvidia-driver-{b}{sfx}", v,
                       f"NVIDIA driver metapackage, {flavor} kernel module (simulated, {version})",
                       depends=[f"nvidia-utils-{b} {eq}", f"nvidia-dkms-{b}{sfx} {eq}",
                                f"nvidia-kernel-common-{b} {eq}"],
                       conflicts=[f"nvidia-driver-{b}{other}"], provides=["nvidia-driver-binary"]),
        ]
    pkgs += [
        DebPackage(f"cuda-drivers-{b}", v, f"CUDA drivers, proprietary kernel module, branch {b}",
                   depends=[f"nvidia-driver-{b} {eq}", f"nvidia-dkms-{b} {eq}",
                            f"nvidia-utils-{b} {eq}"], section="multiverse/metapackages"),
        DebPackage(f"nvidia-open-{b}", v, f"NVIDIA driver, open kernel module, branch {b}",
                   depends=[f"nvidia-driver-{b}-open {eq}", f"nvidia-dkms-{b}-open {eq}",
                            f"nvidia-utils-{b} {eq}"], section="multiverse/metapackages"),
        DebPackage("cuda-drivers", v, "CUDA drivers, proprietary kernel module (latest in repo)",
                   depends=[f"cuda-drivers-{b} {eq}"], section="multiverse/metapackages"),
        DebPackage("nvidia-open", v, "NVIDIA driver, open kernel module (latest in repo)",
                   depends=[f"nvidia-open-{b} {eq}"], section="multiverse/metapackages"),
    ]
    return pkgs


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
        kmods.append(pkg(name, f"NVIDIA display driver kernel module, {flavor} (simulated DKMS)",
                         requires=["dkms", f"nvidia-kmod-common {eq}"],
                         provides=[f"nvidia-kmod = {evr}"], conflicts=[other],
                         files=module_files(version, flavor),
                         scriptlets={"post": ["/bin/sh", hook, "install"],
                                     "preun": ["/bin/sh", hook, "remove"]}))
    return kmods + [
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
        pkg("nvidia-fabric-manager", "Fabric Manager for NVSwitch based systems (simulated)",
            requires=[f"nvidia-driver {eq}"], files=fabricmanager_files(version)),
        pkg("cuda-drivers", "CUDA drivers, proprietary kernel module (meta package)",
            requires=[f"nvidia-driver {eq}", f"nvidia-driver-cuda {eq}",
                      f"kmod-nvidia-latest-dkms {eq}", f"nvidia-persistenced {eq}"],
            files={"/usr/share/doc/cuda-drivers/README.gpuhost": ("meta package\n", 0o644)}),
        pkg("nvidia-open", "NVIDIA driver, open kernel module (meta package)",
            requires=[f"nvidia-driver {eq}", f"nvidia-driver-cuda {eq}",
                      f"kmod-nvidia-open-dkms {eq}", f"nvidia-persistenced {eq}"],
            files={"/usr/share/doc/nvidia-open/README.gpuhost": ("meta package\n", 0o644)}),
    ]


def modules_yaml(version: str, el: str, pkgs: list[RpmPackage]) -> str:
    """dnf modularity metadata: module nvidia-driver with NVIDIA's stream names."""
    b = branch_of(version)
    rel = el_release(el)
    arch_of = {p.name: p.arch for p in pkgs}
    common = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-kmod-common",
              "nvidia-persistenced", "nvidia-fabric-manager"]
    streams = {
        f"{b}-dkms": ("proprietary", ["cuda-drivers", "kmod-nvidia-latest-dkms"]),
        "latest-dkms": ("proprietary", ["cuda-drivers", "kmod-nvidia-latest-dkms"]),
        f"{b}-open": ("open", ["nvidia-open", "kmod-nvidia-open-dkms"]),
        "open-dkms": ("open", ["nvidia-open", "kmod-nvidia-open-dkms"]),
    }
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
        - nvidia-fabric-manager
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
    docs.append(f"""---
document: modulemd-defaults
version: 1
data:
  module: nvidia-driver
  stream: latest-dkms
  profiles:
    latest-dkms: [default]
    open-dkms: [default]
    {b}-dkms: [default]
    {b}-open: [default]
...
""")
    return "".join(docs)

