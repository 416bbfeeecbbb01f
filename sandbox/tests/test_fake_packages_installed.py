"""The fake NVIDIA packages installed for real, in throwaway chroots made here.

- debian12: dpkg -i the local repo package, NO_PUBKEY until the keyring is copied,
  `apt-get install --no-install-recommends cuda-drivers` failing with DKMS's headers error and succeeding
  once headers exist (real Debian dkms), the dkms_build_fail fault, removal.
- ol9 (a Debian root with rpm + dnf, like the sandbox's Oracle Linux hosts): rpm -i the
  rhel9 local repo, `dnf module enable nvidia-driver:570-open` + `dnf install nvidia-open`,
  real dkms (Debian's, as EPEL's RPM) failing on UEK 8 until the toolset is in MAKE, removal, docker-ce from Docker's (fake) RHEL repo.
- runc: the nvidia-container-runtime shim mounts the simulator into the verify image and
  `nvidia-smi -L` works inside the container.

Base root filesystems are cached in /var/cache/gpuhost/nvidia-itest (mmdebstrap, about a
minute each the first time); every test runs in an overlay on top of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sandbox.nvidia.pkg import image

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chroot, mounts, runc)")]

REPO = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("GPUHOST_NVIDIA_OUT",
                                os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost") + "/nvidia"))
ITEST = Path(os.environ.get("GPUHOST_CACHE_DIR", "/var/cache/gpuhost")) / "nvidia-itest"
VER = "570.172.08"
DEB_KERNEL = "6.1.0-56-amd64"
UEK8 = "6.12.0-100.28.2.2.el9uek.x86_64"
# debian12: NVIDIA's Debian packages need Debian's contrib (the fake ones depend on
# nvidia-support from it, sandbox/README.md): the root has it preinstalled
BASES = {"debian12": ["python3-minimal", "dkms", "kmod", "nvidia-support"],
         "ol9": ["python3-minimal", "rpm", "dnf", "python3-dnf"]}


def sh(*cmd, check=True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed rc={proc.returncode}\n{proc.stdout[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def artifacts() -> Path:
    proc = subprocess.run([sys.executable, "-m", "sandbox.nvidia.build"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return OUT


def base_root(name: str) -> Path:
    root = ITEST / f"{name}-base"
    stamp = root / ".gpuhost-complete"
    recipe = ",".join(BASES[name]) + "\n"
    if not stamp.exists() or stamp.read_text() != recipe:
        shutil.rmtree(root, ignore_errors=True)
        ITEST.mkdir(parents=True, exist_ok=True)
        sh("mmdebstrap", "--quiet", "--variant=minbase", "--components=main,contrib",
           f"--include={','.join(BASES[name])}", "bookworm", str(root))
        stamp.write_text(recipe)
    return root


class Chroot:
    def __init__(self, path: Path):
        self.path = path

    def run(self, cmd: str, check=True) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive",
               "LC_ALL": "C"}
        return sh("chroot", str(self.path), "/bin/sh", "-c", cmd, check=check, env=env)

    def file(self, rel: str) -> Path:
        return self.path / rel.lstrip("/")


@contextlib.contextmanager
def overlay_chroot(name: str, tmp: Path, kernel: str, artifacts: Path):
    lower = base_root(name)
    upper, work, merged = tmp / "upper", tmp / "work", tmp / "merged"
    for d in (upper, work, merged):
        d.mkdir()
    mounts = []
    try:
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged))
        mounts.append(merged)
        sh("mount", "-t", "proc", "proc", str(merged / "proc"))
        mounts.append(merged / "proc")
        sh("mount", "--rbind", "/dev", str(merged / "dev"))
        mounts.append(merged / "dev")
        inside = merged / str(artifacts).lstrip("/")
        inside.mkdir(parents=True, exist_ok=True)
        sh("mount", "--bind", "-o", "ro", str(artifacts), str(inside))
        mounts.append(inside)
        # uname reports the simulated kernel (apt runs maintainer scripts with
        # PATH=/usr/sbin:/usr/bin:/sbin:/bin, so the shim replaces /usr/bin/uname)
        uname = merged / "usr/bin/uname"
        uname.rename(merged / "usr/bin/uname.distrib")
        uname.write_text(f'#!/bin/sh\nif [ "$1" = -r ]; then echo {kernel}; '
                         'else exec /usr/bin/uname.distrib "$@"; fi\n')
        uname.chmod(0o755)
        yield Chroot(merged)
    finally:
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)


def test_debian12_local_repo_install_no_pubkey_dkms(artifacts, tmp_path):
    deb = artifacts / "local-repos" / VER / f"nvidia-driver-local-repo-debian12-{VER}_1.0-1_amd64.deb"
    repo = f"/var/nvidia-driver-local-repo-debian12-{VER}"
    only_nvidia = "-o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d"
    with overlay_chroot("debian12", tmp_path, DEB_KERNEL, artifacts) as c:
        c.run(f"dpkg -i {deb}")
        assert c.file(f"/etc/apt/sources.list.d/nvidia-driver-local-debian12-{VER}.list").exists()
        before = c.run(f"apt-get update {only_nvidia}", check=False)
        assert before.returncode != 0
        assert "NO_PUBKEY" in before.stdout and "is not signed" in before.stdout
        c.run(f"cp {repo}/nvidia-driver-*-keyring.gpg /usr/share/keyrings/")
        after = c.run(f"apt-get update {only_nvidia}")
        assert "NO_PUBKEY" not in after.stdout

        # as gpuhost installs: --no-install-recommends (Debian's packaging only recommends
        # nvidia-smi and the daemon: sandbox/nvidia/pkg/README.md, "debian12")
        no_headers = c.run(f"apt-get install -y --no-install-recommends {only_nvidia} cuda-drivers",
                           check=False)
        assert no_headers.returncode != 0
        assert (f"Error! Your kernel headers for kernel {DEB_KERNEL} cannot be found at "
                f"/lib/modules/{DEB_KERNEL}/build or /lib/modules/{DEB_KERNEL}/source."
                ) in no_headers.stdout
        assert "installed nvidia-kernel-dkms package post-installation script subprocess " \
               "returned error exit status" in no_headers.stdout
        assert not c.file("/usr/bin/nvidia-smi").exists()  # recommended only
        module = c.file(f"/lib/modules/{DEB_KERNEL}/updates/dkms/nvidia.ko")
        assert not module.exists()

        # what linux-headers-$(uname -r) provides for DKMS
        c.run(f"mkdir -p /usr/src/linux-headers-{DEB_KERNEL}/include && "
              f"mkdir -p /lib/modules/{DEB_KERNEL} && "
              f"ln -s /usr/src/linux-headers-{DEB_KERNEL} /lib/modules/{DEB_KERNEL}/build")
        c.run(f"apt-get install -y -f --no-install-recommends {only_nvidia}")
        assert c.run("dpkg-query -W -f='${Status}' cuda-drivers").stdout == "install ok installed"
        c.run(f"apt-get install -y --no-install-recommends {only_nvidia} nvidia-smi")  # as gpuhost
        assert f"nvidia/{VER}, {DEB_KERNEL}, x86_64: installed" in c.run("dkms status").stdout
        assert module.read_text().startswith(f"gpusim-module version={VER} flavor=proprietary")
        assert json.loads(c.file("/usr/lib/gpusim/userspace.json").read_text()) == {
            "version": VER, "flavor": "proprietary"}
        assert c.file("/usr/bin/nvidia-smi").exists()
        assert c.file("/etc/modprobe.d/nvidia-blacklists-nouveau.conf").exists()

        # the simulator's fault makes the DKMS build fail like a real compile error
        c.run("mkdir -p /etc/gpusim && echo '{\"dkms_build_fail\": true}' > /etc/gpusim/faults.json")
        broken = c.run(f"apt-get install -y --reinstall {only_nvidia} nvidia-kernel-dkms",
                       check=False)
        assert broken.returncode != 0
        assert f"Error! Bad return status for module build on kernel: {DEB_KERNEL} (x86_64)" \
            in broken.stdout
        assert not module.exists()  # prerm removed the old one, the rebuild failed
        c.run("rm /etc/gpusim/faults.json && dpkg --configure -a")
        assert module.exists()

        # switching flavour swaps the module (nvidia-kernel-open-dkms Conflicts with it)
        c.run(f"apt-get install -y --no-install-recommends {only_nvidia} nvidia-open")
        assert "flavor=open" in module.read_text()
        assert c.run("dpkg-query -W -f='${Status}' nvidia-kernel-dkms", check=False).stdout \
            != "install ok installed"

        # a systemd unit, as NVIDIA ships it (no init.d script); the daemon forks and writes
        # the unit's PIDFile (the chroot has no systemd to start it)
        c.run(f"apt-get install -y {only_nvidia} nvidia-persistenced")
        assert not c.file("/etc/init.d/nvidia-persistenced").exists()
        unit = c.file("/lib/systemd/system/nvidia-persistenced.service").read_text()
        assert "Type=forking" in unit and "ExecStart=/usr/bin/nvidia-persistenced" in unit
        c.run("/usr/bin/nvidia-persistenced && sleep 0.5 && "
              "kill -0 $(cat /var/run/nvidia-persistenced/nvidia-persistenced.pid)")
        c.run("kill $(cat /var/run/nvidia-persistenced/nvidia-persistenced.pid)")

        c.run(f"apt-get remove -y {only_nvidia} nvidia-kernel-open-dkms")
        assert not module.exists()
        assert f"nvidia/{VER}" not in c.run("dkms status").stdout


def test_ol9_dnf_module_stream_install(artifacts, tmp_path):
    rpm = artifacts / "local-repos" / VER / f"nvidia-driver-local-repo-rhel9-{VER}-1.0-1.x86_64.rpm"
    with overlay_chroot("ol9", tmp_path, UEK8, artifacts) as c:
        c.file("/etc/yum.repos.d").mkdir(parents=True, exist_ok=True)
        # Oracle's channels as the fake OL repos lay them out (dkms only in developer EPEL,
        # kernel-uek-devel only in the UEK channel, gcc-toolset-14 in AppStream)
        c.file("/etc/yum.repos.d/gpuhost-ol9.repo").write_text("".join(
            f"[{ch}]\nname={ch}\nbaseurl=file://{artifacts}/ol/ol9/{ch}\ngpgcheck=1\n"
            f"gpgkey=file://{artifacts}/ol/gpgkey\n" for ch in (
                "ol9_baseos_latest", "ol9_appstream", "ol9_UEKR8", "ol9_developer_EPEL",
                "docker-ce-stable")))  # Docker's RHEL repository, not Oracle's
        c.run(f"rpm -i {rpm}")
        dnf = "dnf -y --releasever=9"
        c.run(f"{dnf} install kernel-uek-devel-$(uname -r) dkms")
        c.run(f"test -d /lib/modules/{UEK8}/build/include")  # absolute link: test inside
        assert c.file("/opt/rh/gcc-toolset-14/enable").exists()
        streams = c.run(f"{dnf} module list nvidia-driver").stdout
        for s in ("570-dkms", "570-open", "latest-dkms", "open-dkms"):
            assert f"nvidia-driver {s}" in streams
        c.run(f"{dnf} module enable nvidia-driver:570-open")
        out = c.run(f"{dnf} install nvidia-open").stdout
        for pkg in ("kmod-nvidia-open-dkms", "nvidia-driver-cuda", "nvidia-kmod-common"):
            assert f"{pkg}-3:{VER}-1.el9" in out
        # UEK 8 is built with gcc 14: without the toolset configured for DKMS the build fails
        # (real dkms 3.2.2 from Debian, as EPEL's dkms RPM: Kbuild's compiler lines)
        assert "Error in POSTIN scriptlet in rpm package kmod-nvidia-open-dkms" in out
        assert f"Error! Bad return status for module build on kernel: {UEK8} (x86_64)" in out
        make_log = c.file(f"/var/lib/dkms/nvidia/{VER}/build/make.log")
        assert "the compiler differs from the one used to build the kernel" in make_log.read_text()
        # dkms installs to /extra on an EL host (ID_LIKE=fedora), /updates/dkms on this
        # chroot's Debian os-release
        modules = [c.file(f"/lib/modules/{UEK8}/{d}/nvidia.ko") for d in ("extra", "updates/dkms")]
        assert not any(m.exists() for m in modules)
        # sourcing the toolset in framework.conf.d does nothing in real dkms (a subshell)
        c.file("/etc/dkms/framework.conf.d/gcc-toolset-14.conf").write_text(
            ". /opt/rh/gcc-toolset-14/enable\n")
        assert c.run(f"dkms install -m nvidia -v {VER}", check=False).returncode != 0
        # the per-module override (read after the module's dkms.conf) does
        c.file("/etc/dkms/nvidia.conf").write_text(
            'case "$kernelver" in 6.12.0-*.el9uek.*) '
            'MAKE[0]=". /opt/rh/gcc-toolset-14/enable && ${MAKE[0]}" ;; esac\n')
        c.run(f"dkms install -m nvidia -v {VER}")
        module = next(m for m in modules if m.exists())
        assert module.read_text().startswith(f"gpusim-module version={VER} flavor=open")
        assert "cc=14." in module.read_text()
        assert f"nvidia/{VER}, {UEK8}, x86_64: installed" in c.run("dkms status").stdout
        # the stream lock: the proprietary kmod is filtered out while 570-open is enabled
        other = c.run(f"{dnf} install kmod-nvidia-latest-dkms", check=False)
        assert other.returncode != 0
        c.run(f"{dnf} remove kmod-nvidia-open-dkms")
        assert not module.exists()

        c.run(f"{dnf} install docker-ce docker-ce-cli containerd.io")
        assert c.run("dockerd --version").stdout.startswith("Docker version 20.10")
        assert c.run("docker --version").stdout.startswith("Docker version 20.10")


def test_runtime_shim_runs_nvidia_smi_in_the_verify_image(artifacts, tmp_path):
    if shutil.which("runc") is None:
        pytest.fail("runc is missing: run `make deps` (mk/nvidia.mk installs it)")
    local = artifacts / "local-repos" / VER / f"nvidia-driver-local-repo-debian12-{VER}_1.0-1_amd64.deb"
    x = tmp_path / "x"
    sh("dpkg-deb", "-x", str(local), str(x))
    repo = x / f"var/nvidia-driver-local-repo-debian12-{VER}"
    drv, tk = tmp_path / "drv", tmp_path / "tk"
    for deb in (f"nvidia-smi_{VER}-1_amd64.deb", f"libnvidia-ml1_{VER}-1_amd64.deb",
                f"nvidia-kernel-open-dkms_{VER}-1_amd64.deb"):
        sh("dpkg-deb", "-x", str(repo / deb), str(drv))
    for deb in (artifacts / "toolkit" / "deb").glob("*.deb"):
        sh("dpkg-deb", "-x", str(deb), str(tk))
    # the host as the sandbox makes it: machine.json, the DKMS-built module, gpusim-boot
    (drv / "etc/gpusim").mkdir(parents=True)
    (drv / "etc/gpusim/machine.json").write_text(json.dumps(
        {"hostname": "gpu-01", "os": "debian12", "kernel_release": DEB_KERNEL,
         "gpu_model": "A100-SXM4-40GB", "gpu_count": 2, "nvswitch": False}))
    mod = drv / f"lib/modules/{DEB_KERNEL}/updates/dkms/nvidia.ko"
    mod.parent.mkdir(parents=True)
    mod.write_text(f"gpusim-module version={VER} flavor=open kernel={DEB_KERNEL}\n")
    env = {**os.environ, "GPUSIM_ROOT": str(drv), "PYTHONPATH": str(drv / "usr/lib/gpusim")}
    sh(sys.executable, "-c", "import sys; from gpusim import ctl; sys.exit(ctl.boot_main([]))",
       env=env)
    cfg = tmp_path / "xdg" / "nvidia-container-runtime"
    cfg.mkdir(parents=True)
    conf = (tk / "etc/nvidia-container-runtime/config.toml").read_text()
    (cfg / "config.toml").write_text(conf.replace('root = "/"', f'root = "{drv}"'))

    def run_container(name: str, gpu_env: list[str]) -> subprocess.CompletedProcess:
        bundle = tmp_path / name
        (bundle / "rootfs").mkdir(parents=True)
        # a `docker save` archive: its one layer is the image's root filesystem
        with tarfile.open(artifacts / "verify-image.tar") as tar, image.layer_of(tar) as layer:
            # extraction filters came with Python 3.11.4; Debian 12 ships 3.11.2
            trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
            layer.extractall(bundle / "rootfs", **trusted)
        sh("runc", "spec", cwd=bundle)
        spec = json.loads((bundle / "config.json").read_text())
        spec["process"].update(args=["nvidia-smi", "-L"], terminal=False)
        spec["process"]["env"] += gpu_env
        (bundle / "config.json").write_text(json.dumps(spec))
        return sh(str(tk / "usr/bin/nvidia-container-runtime"), "run", "--bundle", str(bundle),
                  f"gpuhost-itest-{name}-{os.getpid()}", check=False,
                  env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")})

    ok = run_container("gpu", ["NVIDIA_VISIBLE_DEVICES=all"])
    assert ok.returncode == 0, ok.stdout
    lines = ok.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith(f"GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-")
                                   for i, line in enumerate(lines)), ok.stdout
    plain = run_container("plain", [])
    assert plain.returncode != 0 and "nvidia-smi" in plain.stdout


def test_debian12_pinning_package_holds_the_branch(artifacts, tmp_path):
    """Two branches' local repos on one host (595 and 620, both 590+ packaging): apt takes
    the newest nvidia-open like any package; nvidia-driver-pinning-595 holds it at 595, as
    NVIDIA's guide says ("the default experience will be to upgrade ... to the latest";
    branch tracking is opt-in through the pinning package)."""
    r595, r620 = "595.71.05", "620.70.06"
    only_nvidia = "-o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts=/etc/apt/sources.list.d"
    with overlay_chroot("debian12", tmp_path, DEB_KERNEL, artifacts) as c:
        for v in (r595, r620):
            c.run(f"dpkg -i {artifacts}/local-repos/{v}/nvidia-driver-local-repo-debian12-{v}_1.0-1_amd64.deb"
                  f" && cp /var/nvidia-driver-local-repo-debian12-{v}/nvidia-driver-*-keyring.gpg "
                  "/usr/share/keyrings/")
        c.run(f"apt-get update {only_nvidia}")

        def candidate(name: str) -> str:
            policy = c.run(f"apt-cache policy {name}").stdout
            return next(line.split()[1] for line in policy.splitlines()
                        if line.strip().startswith("Candidate:"))

        assert candidate("nvidia-open") == f"{r620}-1"  # no pin: the newest branch
        c.run(f"apt-get install -y {only_nvidia} nvidia-driver-pinning-595")
        pin = c.file("/etc/apt/preferences.d/nvidia-driver-pin").read_text()
        assert "Pin: version 595.*" in pin and "Pin-Priority: 1000" in pin
        for name in ("nvidia-open", "nvidia-kernel-open-dkms", "nvidia-fabricmanager", "libnvsdm"):
            assert candidate(name) == f"{r595}-1", name
        c.run(f"mkdir -p /usr/src/linux-headers-{DEB_KERNEL}/include /lib/modules/{DEB_KERNEL} && "
              f"ln -s /usr/src/linux-headers-{DEB_KERNEL} /lib/modules/{DEB_KERNEL}/build")
        c.run(f"apt-get install -y {only_nvidia} nvidia-open nvidia-fabricmanager")
        assert f"nvidia/{r595}, {DEB_KERNEL}, x86_64: installed" in c.run("dkms status").stdout
        assert json.loads(c.file("/usr/lib/gpusim/userspace.json").read_text()) == {
            "version": r595, "flavor": "open"}
        # a full upgrade stays on the branch; the 620 pinning package moves it
        c.run(f"apt-get dist-upgrade -y {only_nvidia}")
        assert c.run("dpkg-query -W -f='${Version}' nvidia-open").stdout == f"{r595}-1"
        c.run(f"apt-get install -y {only_nvidia} nvidia-driver-pinning-620")
        assert c.run("dpkg-query -W -f='${Status}' nvidia-driver-pinning-595",
                     check=False).stdout != "install ok installed"
        assert "Pin: version 620.*" in c.file("/etc/apt/preferences.d/nvidia-driver-pin").read_text()
        c.run(f"apt-get dist-upgrade -y {only_nvidia}")
        assert c.run("dpkg-query -W -f='${Version}' nvidia-open nvidia-fabricmanager").stdout == \
            f"{r620}-1{r620}-1"
        assert f"nvidia/{r620}, {DEB_KERNEL}, x86_64: installed" in c.run("dkms status").stdout


def ol9_repos(c: Chroot, artifacts: Path, version: str) -> str:
    """Oracle's channels and the rhel9 local repo of VERSION in an ol9 chroot; the dnf
    command line to use."""
    c.file("/etc/yum.repos.d").mkdir(parents=True, exist_ok=True)
    c.file("/etc/yum.repos.d/gpuhost-ol9.repo").write_text("".join(
        f"[{ch}]\nname={ch}\nbaseurl=file://{artifacts}/ol/ol9/{ch}\ngpgcheck=1\n"
        f"gpgkey=file://{artifacts}/ol/gpgkey\n" for ch in (
            "ol9_baseos_latest", "ol9_appstream", "ol9_developer_EPEL")))
    c.run(f"rpm -i {artifacts}/local-repos/{version}/"
          f"nvidia-driver-local-repo-rhel9-{version}-1.0-1.x86_64.rpm")
    return "dnf -y --releasever=9"


def test_ol9_580_companions_and_620_open_only(artifacts, tmp_path):
    """R580 on dnf: nvidia-fabricmanager (the stream's fm profile) and NSCQ, IMEX, NVSDM
    install at the driver's version, the old name nvidia-fabric-manager is no match. R620:
    only the open streams; asking for a proprietary one fails as dnf fails."""
    r580, r620 = "580.95.05", "620.70.06"
    (tmp_path / "a").mkdir()
    with overlay_chroot("ol9", tmp_path / "a", UEK8, artifacts) as c:
        dnf = ol9_repos(c, artifacts, r580)
        c.run(f"{dnf} module enable nvidia-driver:580-open")
        c.run(f"{dnf} install nvidia-open nvidia-fabricmanager libnvidia-nscq nvidia-imex libnvsdm")
        got = c.run("rpm -q --qf '%{NAME} %{EPOCH}:%{VERSION}\\n' nvidia-fabricmanager "
                    "libnvidia-nscq nvidia-imex libnvsdm kmod-nvidia-open-dkms").stdout.split("\n")
        assert sorted(filter(None, got)) == sorted(
            f"{n} 3:{r580}" for n in ("nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex",
                                      "libnvsdm", "kmod-nvidia-open-dkms"))
        old = c.run(f"{dnf} install nvidia-fabric-manager", check=False)
        assert old.returncode != 0 and "No match for argument: nvidia-fabric-manager" in old.stdout
    (tmp_path / "b").mkdir()
    with overlay_chroot("ol9", tmp_path / "b", UEK8, artifacts) as c:
        dnf = ol9_repos(c, artifacts, r620)
        streams = c.run(f"{dnf} module list nvidia-driver").stdout
        assert "nvidia-driver 620-open" in streams and "open-dkms [d]" in streams
        assert "620-dkms" not in streams and "latest-dkms" not in streams
        bad = c.run(f"{dnf} module enable nvidia-driver:620-dkms", check=False)
        assert bad.returncode != 0
        c.run(f"{dnf} module enable nvidia-driver:620-open")
        missing = c.run(f"{dnf} install cuda-drivers", check=False)
        assert missing.returncode != 0 and "No match for argument: cuda-drivers" in missing.stdout
