"""Bare hosts of each supported OS, as gpuhost's fact script would see them (hand-written)."""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

from gpuhost import aptdistros, el_packages, eldistros, packages
from tests import netrepo

DRIVER = "570.172.08"
TOOLKIT = "1.17.8"
A100_LSPCI = (
    '0000:07:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" '
    '"GA100 [A100 SXM4 40GB] [20b0]" -ra1 "NVIDIA Corporation [10de]" "Device [134f]"'
)

_OL = (
    'NAME="Oracle Linux Server"\nVERSION="{v}"\nID="ol"\nID_LIKE="fedora"\n'
    'VERSION_ID="{v}"\nPRETTY_NAME="Oracle Linux Server {v}"\n'
)
_EL = ('NAME="{name}"\nVERSION="{v}"\nID="{id}"\nID_LIKE="{like}"\n'
       'VERSION_ID="{v}"\nPRETTY_NAME="{name} {v}"\n')


def _el(os_id: str, name: str, version: str, like: str = "rhel centos fedora") -> str:
    return _EL.format(id=os_id, name=name, v=version, like=like)


SCENARIOS = {
    "ol8-uek": {"os": _OL.format(v="8.10"), "kernel": "5.15.0-307.178.5.el8uek.x86_64",
                "tag": "rhel8"},
    "ol8-rhck": {"os": _OL.format(v="8.10"), "kernel": "4.18.0-553.el8_10.x86_64", "tag": "rhel8"},
    "ol9-uek8": {"os": _OL.format(v="9.5"), "kernel": "6.12.0-100.28.2.2.el9uek.x86_64",
                 "tag": "rhel9"},
    "ol9-rhck": {"os": _OL.format(v="9.5"), "kernel": "5.14.0-503.11.1.el9_5.x86_64",
                 "tag": "rhel9"},
    # Oracle Linux 10.0: UEK 8 is the default kernel, RHCK beside it (Oracle's OL10 kernel
    # version matrix); both take NVIDIA's rhel10 build
    "ol10-uek8": {"os": _OL.format(v="10.0"), "kernel": "6.12.0-100.28.2.el10uek.x86_64",
                  "tag": "rhel10"},
    "ol10-rhck": {"os": _OL.format(v="10.0"), "kernel": "6.12.0-55.9.1.0.1.el10_0.x86_64",
                  "tag": "rhel10"},
    "rhel8": {"os": _el("rhel", "Red Hat Enterprise Linux", "8.10", "fedora"),
              "kernel": "4.18.0-553.el8_10.x86_64", "tag": "rhel8"},
    "rhel9": {"os": _el("rhel", "Red Hat Enterprise Linux", "9.6", "fedora"),
              "kernel": "5.14.0-570.12.1.el9_6.x86_64", "tag": "rhel9"},
    "rhel10": {"os": _el("rhel", "Red Hat Enterprise Linux", "10.0", "centos fedora"),
               "kernel": "6.12.0-55.9.1.el10_0.x86_64", "tag": "rhel10"},
    "rocky8": {"os": _el("rocky", "Rocky Linux", "8.10"),
               "kernel": "4.18.0-553.el8_10.x86_64", "tag": "rhel8"},
    "rocky9": {"os": _el("rocky", "Rocky Linux", "9.6"),
               "kernel": "5.14.0-570.17.1.el9_6.x86_64", "tag": "rhel9"},
    "rocky10": {"os": _el("rocky", "Rocky Linux", "10.0"),
                "kernel": "6.12.0-55.12.1.el10_0.x86_64", "tag": "rhel10"},
    "alma8": {"os": _el("almalinux", "AlmaLinux", "8.10"),
              "kernel": "4.18.0-553.el8_10.x86_64", "tag": "rhel8"},
    "alma9": {"os": _el("almalinux", "AlmaLinux", "9.6"),
              "kernel": "5.14.0-570.12.1.el9_6.x86_64", "tag": "rhel9"},
    "alma10": {"os": _el("almalinux", "AlmaLinux", "10.0"),
               "kernel": "6.12.0-55.9.1.el10_0.x86_64", "tag": "rhel10"},
    # a release gpuhost does not know: refused before any change
    "rocky11": {"os": _el("rocky", "Rocky Linux", "11.0"),
                "kernel": "6.18.0-10.el11.x86_64", "tag": None},
    "ubuntu2204": {"os": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n'
                         'PRETTY_NAME="Ubuntu 22.04.5 LTS"\nVERSION_CODENAME=jammy\n',
                   "kernel": "5.15.0-130-generic", "tag": "ubuntu2204"},
    "ubuntu2404": {"os": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
                         'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nVERSION_CODENAME=noble\n',
                   "kernel": "6.8.0-51-generic", "tag": "ubuntu2404"},
    "debian12": {"os": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
                       'VERSION_ID="12"\nVERSION_CODENAME=bookworm\n',
                 "kernel": "6.1.0-56-amd64", "tag": "debian12"},
    # Debian 13: trixie's os-release and kernel naming (6.12.<N>+deb13-<flavour>); the driver
    # of the debian13 local repo package seen published (590.48.01)
    "debian13": {"os": 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nNAME="Debian GNU/Linux"\n'
                       'VERSION_ID="13"\nVERSION="13 (trixie)"\nVERSION_CODENAME=trixie\n'
                       'DEBIAN_VERSION_FULL=13.2\nID=debian\n',
                 "kernel": "6.12.57+deb13-amd64", "tag": "debian13", "driver": "590.48.01"},
    # Ubuntu 26.04 at release (kernel 7.0.0-12-generic); no local repo package exists: the
    # driver comes from the network repository (NETWORK_REPOS), at a version that builds on 7.0
    "ubuntu2604": {"os": 'PRETTY_NAME="Ubuntu 26.04 LTS"\nNAME="Ubuntu"\nVERSION_ID="26.04"\n'
                         'VERSION="26.04 LTS (Resolute Raccoon)"\nVERSION_CODENAME=resolute\n'
                         'ID=ubuntu\nID_LIKE=debian\nUBUNTU_CODENAME=resolute\n',
                   "kernel": "7.0.0-12-generic", "tag": "ubuntu2604", "driver": "595.71.05",
                   "network": True},
}

# What the network repository of a scenario holds (tests/netrepo.py builds it, signed).
NETWORK_REPOS = {"ubuntu2604": [
    ("nvidia-open", "580.142-0ubuntu1"), ("nvidia-driver-pinning-580.142", "580.142-1"),
    ("nvidia-open", "595.71.05-0ubuntu1"), ("nvidia-driver-pinning-595.71.05", "595.71.05-1"),
]}


def driver_of(name: str) -> str:
    """The driver a scenario's plans install (DRIVER unless the release needs another)."""
    return SCENARIOS[name].get("driver", DRIVER)

ARTIFACTS = Path(tempfile.gettempdir()) / "gpuhost-plan-artifacts"


def _section(name: str, rc: int, out: str = "") -> str:
    return f"@@gpuhost@@ {name} rc={rc}\n{out.rstrip(chr(10))}\n"


# A healthy host's kernel log: the journal has this boot's kernel messages, no Xid among them.
KERNEL_XID = _section("kernel_xid", 0, "source=journal")


def bare_output(name: str, pci: dict | None = None) -> str:
    """``pci`` (plan data ``plan_pci``): {"lspci": [rc, text], "pci_sysfs": [rc, text]}
    replaces the A100 that lspci shows by default (the sysfs section is absent then)."""
    s = SCENARIOS[name]
    rpm = s["tag"] is None or packages.family(s["tag"]) == "rhel"
    if pci:
        devices = "".join(_section(key, *pci[key]) for key in ("lspci", "pci_sysfs") if key in pci)
    else:
        devices = _section("lspci", 0, A100_LSPCI)
    return "".join([
        _section("os_release", 0, s["os"]),
        _section("kernel", 0, f"{s['kernel']}\nx86_64"),
        _section("proc_version", 3),
        _section("smi_xml", 127), _section("smi_list", 127),
        _section("mig_lgi", 127), _section("mig_lci", 127),
        devices,
        _section("dpkg", 127 if rpm else 0, ""),
        _section("rpm", 0 if rpm else 127, "kernel-headers\t(none):5.14.0-1.el9\n" if rpm else ""),
        _section("headers_build", 3), _section("nouveau", 0), _section("dkms", 127),
        _section("secure_boot", 127), _section("daemon_json", 3),
        _section("docker_version", 127), _section("docker_info", 127),
        _section("nvidia_ctk", 127), _section("nvidia_container_cli", 127),
        KERNEL_XID,
    ])


def cdi_spec_section(path: str) -> str:
    """The cdi_specs section once ``nvidia-ctk cdi generate --output=PATH`` ran on the
    converged host (its A100 and the loaded driver's libraries)."""
    lib = f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{DRIVER}"
    spec = ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
            + "".join(f'  - name: "{n}"\n    containerEdits:\n      deviceNodes:\n'
                      "        - path: /dev/nvidia0\n"
                      for n in ("0", "GPU-00000000-1111-2222-3333-444444444444", "all"))
            + f"containerEdits:\n  mounts:\n    - hostPath: {lib}\n      containerPath: {lib}\n")
    return _section("cdi_specs", 0, f"==> {path} <==\n{spec}")


def converged_output(name: str, toolkit: bool = True, cdi_spec: str | None = None,
                     driver: str | None = None) -> str:
    """The same host after gpu_host converged it (driver loaded, toolkit, runtime); with
    ``toolkit=False`` before the toolkit packages were installed; ``cdi_spec``: the path an
    ``nvidia-ctk cdi generate`` wrote (issue 16); ``driver``: the version running (default:
    the scenario's, ``driver_of``)."""
    s = SCENARIOS[name]
    DRIVER = driver or driver_of(name)  # noqa: N806 (the driver the inventory asked for)
    rpm = packages.family(s["tag"]) == "rhel"
    toolkit_dpkg = "".join(f"{p}\t{TOOLKIT}-1\tii \n" for p in packages.TOOLKIT_PACKAGES
                           if toolkit)
    if rpm:
        pkgs = (f"nvidia-open\t3:{DRIVER}-1.el9\n" +
                "".join(f"{p}\t(none):{TOOLKIT}-1\n" for p in packages.TOOLKIT_PACKAGES
                        if toolkit))
    elif aptdistros.release(s["tag"]).driver_names == "debian":  # Debian's packaging
        pkgs = "".join(f"{p}\t{DRIVER}-1\tii \n" for p in (
            "nvidia-open", "nvidia-kernel-open-dkms", "nvidia-smi")) + toolkit_dpkg
    elif int(packages.branch(DRIVER)) >= packages.APT_UNVERSIONED_FROM:
        pkgs = f"nvidia-open\t{DRIVER}-0ubuntu1\tii \n" + toolkit_dpkg
    else:
        pkgs = f"nvidia-open-570\t{DRIVER}-1\tii \n" + toolkit_dpkg
    xml = (
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>' + DRIVER +
        "</driver_version><cuda_version>12.8</cuda_version><attached_gpus>1</attached_gpus>"
        '<gpu id="00000000:07:00.0"><product_name>NVIDIA A100-SXM4-40GB</product_name>'
        "<uuid>GPU-00000000-1111-2222-3333-444444444444</uuid>"
        "<pci><pci_bus_id>00000000:07:00.0</pci_bus_id></pci>"
        "<fb_memory_usage><total>40960 MiB</total></fb_memory_usage>"
        "<persistence_mode>Enabled</persistence_mode><mig_mode><current_mig>Disabled"
        "</current_mig><pending_mig>Disabled</pending_mig></mig_mode></gpu></nvidia_smi_log>"
    )
    return "".join([
        _section("os_release", 0, s["os"]),
        _section("kernel", 0, f"{s['kernel']}\nx86_64"),
        _section("proc_version", 0, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                 f"{DRIVER}  Release Build  (dvs-builder@U16)  Tue Jul  8 18:44:13 UTC 2025"),
        _section("smi_xml", 0, xml),
        # DKMS built the module for the running kernel (the next boot's, no boot loader read)
        _section("dkms", 0, f"nvidia/{DRIVER}, {s['kernel']}, x86_64: installed\n"),
        _section("dpkg", 127 if rpm else 0, "" if rpm else pkgs),
        _section("rpm", 0 if rpm else 127, pkgs if rpm else ""),
        _section("daemon_json", 0, '{"runtimes": {"nvidia": {"args": [], "path": '
                                   '"nvidia-container-runtime"}}}'),
        _section("docker_version", 0, "Docker version 27.5.1, build 9f9e405"),
        _section("docker_info", 0, '{"nvidia":{},"runc":{}}\trunc\t27.5.1'),
        _section("nvidia_ctk", 0, f"NVIDIA Container Toolkit CLI version {TOOLKIT}"),
        KERNEL_XID,
        cdi_spec_section(cdi_spec) if cdi_spec else "",
    ])


EL_PACKAGING = re.compile(r"for f in /etc/yum.repos.d/")
APT_SOURCES = "@@gpuhost-file@@"  # facts.apt_sources.AptSources
# /etc/apt/sources.list of a Debian 12 netinst install (no contrib)
DEBIAN12_SOURCES = (
    "@@gpuhost-file@@ /etc/apt/sources.list\n"
    "deb http://deb.debian.org/debian/ bookworm main non-free-firmware\n"
    "deb http://security.debian.org/debian-security bookworm-security main non-free-firmware\n"
    "deb http://deb.debian.org/debian/ bookworm-updates main non-free-firmware\n")


# /etc/apt/sources.list.d/debian.sources of a Debian 13 install (deb822, apt 3's default)
DEBIAN13_SOURCES = (
    "@@gpuhost-file@@ /etc/apt/sources.list.d/debian.sources\n"
    "Types: deb\nURIs: http://deb.debian.org/debian/\nSuites: trixie trixie-updates\n"
    "Components: main non-free-firmware\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp\n\n"
    "Types: deb\nURIs: http://security.debian.org/debian-security/\nSuites: trixie-security\n"
    "Components: main non-free-firmware\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp\n")
APT_SOURCES_OF = {"debian12": DEBIAN12_SOURCES, "debian13": DEBIAN13_SOURCES}


def _os_id(name: str) -> str:
    return re.search(r'^ID="?([^"\n]+)', SCENARIOS[name]["os"], re.M).group(1)


def el_stock_repos(name: str) -> list[tuple[str, bool]]:
    """The repositories of a fresh install of this EL scenario and whether each is enabled."""
    major = SCENARIOS[name]["tag"].removeprefix("rhel")
    os_id = _os_id(name)
    if os_id == "ol":
        uek = {"8": "ol8_UEKR7", "9": "ol9_UEKR8", "10": "ol10_UEKR8"}[major]
        return [(f"ol{major}_baseos_latest", True), (f"ol{major}_appstream", True),
                (f"ol{major}_codeready_builder", False), (uek, True)]
    if os_id == "rhel":  # redhat.repo of a registered host
        return [(f"rhel-{major}-for-x86_64-baseos-rpms", True),
                (f"rhel-{major}-for-x86_64-appstream-rpms", True),
                (f"codeready-builder-for-rhel-{major}-x86_64-rpms", False)]
    crb = "powertools" if major == "8" else "crb"
    return [("baseos", True), ("appstream", True), (crb, False), ("extras", True)]


def el_packaging_output(name: str, installed: bool) -> str:
    """gpuhost.facts.el.ElPackaging's answer on an EL scenario: the stock repositories of a
    fresh install; once the driver went in, its packages (and EPEL, enabled by then)."""
    major = SCENARIOS[name]["tag"].removeprefix("rhel")
    lines = []
    for repo, enabled in el_stock_repos(name):
        lines += [f"repo {repo}", f"enabled {1 if enabled else 0}"]
    if installed:
        version_id = re.search(r'^VERSION_ID="?([^"\n]+)', SCENARIOS[name]["os"], re.M).group(1)
        channels = eldistros.channels(_os_id(name), version_id)
        epel = channels.epel
        release = el_packages.release_package_name(channels.epel_release)
        lines += [f"repo {epel}", "enabled 1", f"rpm {release}\t(none):1.0-5.el{major}",
                  f"rpm dkms\t(none):3.2.1-1.el{major}"]
        lines += [f"rpm {p}\t3:{DRIVER}-1.el{major}"
                  for p in ("nvidia-open", "kmod-nvidia-open-dkms", "nvidia-driver")]
        if int(major) >= 10:  # EL10: install_locked took the lock in the same step
            lines += [f"rpm python3-dnf-plugin-versionlock\t(none):4.7.0-8.el{major}"]
            lines += [f"lock {p}-3:{DRIVER}-1.el{major}.*"
                      for p in ("kmod-nvidia-open-dkms", "nvidia-driver", "nvidia-open")]
    return "\n".join(lines) + "\n"


def _artifact(tag: str, version: str = DRIVER) -> dict:
    """A stand-in local repo package file on the 'controller' with NVIDIA's name."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / packages.local_repo_filename(tag, version)
    content = f"stand-in for {path.name}\n".encode()
    if not path.exists() or path.read_bytes() != content:
        path.write_bytes(content)
    return {"path": str(path), "sha256": hashlib.sha256(content).hexdigest()}


def _key(name: str) -> str:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.asc"
    path.write_text(f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{name}\n-----END PGP PUBLIC KEY BLOCK-----\n")
    return f"file://{path}"


def host_data(name: str, extra: dict) -> dict:
    s = SCENARIOS[name]
    extra = dict(extra)
    pci = extra.pop("plan_pci", None)
    version = extra.get("nvidia_driver_version", driver_of(name))
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)+", str(version)):
        version = driver_of(name)  # an invalid version is the test's point: refused by the settings
    data = {
        "plan_scenario": name,
        "fake_delay": 0,
        "fake_delay_jitter": 0,
        "fake_responses": {
            "_gh()": bare_output(name, pci),
            re.compile(r"^command -v systemctl"): "/usr/bin/systemctl",
            APT_SOURCES: APT_SOURCES_OF.get(s["tag"], ""),
            EL_PACKAGING: el_packaging_output(name, False)
            if s["tag"] and packages.family(s["tag"]) == "rhel" else "",
            "docker run --rm --network=none --gpus all": [
                "rc=0", "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-1111-2222-3333-4444)"],
            "docker run --rm --network=none --device nvidia.com/gpu=all": [
                "rc=0", "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-1111-2222-3333-4444)"],
        },
        "nvidia_driver_version": driver_of(name),
        # the package of the driver the plan asks for (settings check the name's version)
        "nvidia_local_repo": {s["tag"] or "rhel10": _artifact(s["tag"] or "rhel10", version)},
        "nvidia_artifact_cache": str(ARTIFACTS / "cache"),
        "docker_source": "docker",
        "docker_repo_gpgkey": _key("docker"),
        "container_toolkit_version": TOOLKIT,
        "container_toolkit_gpgkey": _key("nvidia-container-toolkit"),
    }
    if s.get("network"):  # NVIDIA publishes no local repo package: its network repository
        data["nvidia_local_repo"] = {}
        data["nvidia_driver_repo"] = {s["tag"]: netrepo.cached(
            ARTIFACTS, f"netrepo-{s['tag']}", NETWORK_REPOS[s["tag"]])}
    extra_el = extra.pop("plan_el_packaging", "")  # more ElPackaging lines (a host's own state)
    if extra_el:
        data["fake_responses"][EL_PACKAGING] += extra_el
    # RHEL: subscription-manager identity (facts.el.RhsmRegistered); plan_rhsm "unregistered"
    rhsm = extra.pop("plan_rhsm", "registered")
    if _os_id(name) == "rhel":
        data["fake_responses"]["subscription-manager identity"] = rhsm
    if extra.pop("plan_el_container_tools", False):  # OL8's podman, buildah, runc installed
        data["fake_responses"]["_gh()"] = data["fake_responses"]["_gh()"].replace(
            "@@gpuhost@@ rpm rc=0\n", "@@gpuhost@@ rpm rc=0\n" + "".join(
                f"{n}\t(none):1.0-1.el8\n" for n in el_packages.EL_CONTAINER_TOOLS))
    if extra.pop("plan_docker_pin_present", False):  # gpuhost's Docker pin from an earlier run
        data["fake_responses"] = {
            re.compile(r"sha256sum /etc/apt/preferences.d/gpuhost-docker "): "0" * 64 + "\n644", **data["fake_responses"]}
    if extra.pop("plan_headers_installed", False):  # the running kernel's headers are in
        data["fake_responses"]["_gh()"] = data["fake_responses"]["_gh()"].replace(
            "@@gpuhost@@ dpkg rc=0\n",
            f"@@gpuhost@@ dpkg rc=0\nlinux-headers-{s['kernel']}\t6.1.158-1\tii \n")
    rdma = extra.pop("plan_rdma", None)  # the rdma section's output (docs/rdma.md)
    if rdma:
        data["fake_responses"]["_gh()"] += _section("rdma", 0, rdma)
    kernel = extra.pop("plan_kernel", None)  # another running kernel (its release string)
    if kernel:
        data["fake_responses"]["_gh()"] = data["fake_responses"]["_gh()"].replace(
            f"\n{s['kernel']}\n", f"\n{kernel}\n")
    if extra.pop("plan_secure_boot", False):  # mokutil --sb-state: on; no MOK enrolled
        data["fake_responses"]["_gh()"] = data["fake_responses"]["_gh()"].replace(
            "@@gpuhost@@ secure_boot rc=127\n", "@@gpuhost@@ secure_boot rc=0\nSecureBoot enabled")
    state = extra.pop("plan_stamp", None)  # "valid" | "stale": converged, with a stamp
    data.update(extra)
    if state:
        data["fake_responses"]["_gh()"] = converged_output(name) + _stamp_section(data, state)
    return data


def _stamp_section(data: dict, state: str) -> str:
    """gpuhost's converged stamp (gpuhost/stamp.py) for this host's settings, with the
    witness of now the same ("valid") or with daemon.json edited by hand ("stale")."""
    from gpuhost import settings, stamp

    digest = stamp.run_digest(settings.resolve(data))
    changes = "" if state == "valid" else ("- file /etc/docker/daemon.json\n"
                                             "+ file /etc/docker/daemon.json\n")
    body = (f"{stamp.FORMAT}\ndigest {digest}\nversion 0.1.0\nwritten 1795811723\n"
            f"{stamp.CHANGED}\n{changes}watched 21 17 7")
    return _section("stamp", 0, body)
