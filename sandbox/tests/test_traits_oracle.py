"""Oracle Linux hosts as Oracle ships them (sandbox/README.md, "Oracle Linux channels"),
shown on real hosts over SSH: the stock enabled channel set, dkms only from developer EPEL
(after oracle-epel-release-elN), and the container-tools trait's runc conflicting with
Docker's containerd.io. Each test puts the host back as it found it."""
from __future__ import annotations

import pytest

from sandbox import traits
from sandbox.nvidia.pkg.oracle import CHANNELS

# the integration tests: bare hosts of the default spec (OL8 with container-tools, OL9)
pytestmark = pytest.mark.fleet(hosts=4, ol=2, docker_hosts=1, state="bare")


def integration(test):
    """Integration test on the fleet's hosts as `sandbox up` made them."""
    return pytest.mark.integration(test)


def _hosts(fleet, os_name: str, trait: str | None = None) -> list[str]:
    return [h["name"] for h in fleet["hosts"] if h["os"] == os_name
            and (trait is None or trait in h.get("traits", []))]


def _enabled_repos(ssh, host: str) -> list[str]:
    out = ssh(host, "dnf -q repolist --enabled").stdout.split("\n")
    return sorted(line.split()[0] for line in out[1:] if line.strip())


@integration
@pytest.mark.parametrize("ol", ["ol8", "ol9"])
def test_stock_channels_enabled_and_dkms_only_from_epel(fleet, ssh, ol):
    hosts = _hosts(fleet, ol)
    if not hosts:
        pytest.fail(f"no {ol} host in this fleet (the fleet marker changed?)")
    host = hosts[0]
    baseos, appstream, uek, crb, epel = CHANNELS[ol]
    assert _enabled_repos(ssh, host) == sorted([baseos, appstream, uek])
    files = ssh(host, "ls /etc/yum.repos.d").stdout.split()
    assert files == [f"oracle-linux-{ol}.repo", f"uek-{ol}.repo"]
    assert "enabled=0" in ssh(host, f"dnf config-manager --dump {crb} | tr -d ' '").stdout
    # a stock host: NVIDIA's kmod-nvidia-*-dkms would stop at "nothing provides dkms"
    proc = ssh(host, "dnf -y install dkms", check=False)
    assert proc.returncode != 0
    assert "No match for argument: dkms" in proc.stdout + proc.stderr
    try:
        ssh(host, f"dnf -q -y install oracle-epel-release-el{ol[-1]}")
        assert ssh(host, "ls /etc/yum.repos.d").stdout.split() == sorted(
            [f"oracle-epel-{ol}.repo", f"oracle-linux-{ol}.repo", f"uek-{ol}.repo"])
        ssh(host, f"dnf config-manager --set-enabled {epel}")
        assert epel in _enabled_repos(ssh, host)
        ssh(host, "dnf -q -y install dkms && rpm -q dkms && test -x /usr/sbin/dkms")
        # the versionlock plugin is not there on a stock host; Oracle's package brings it
        assert ssh(host, "dnf versionlock list", check=False).returncode != 0
    finally:
        ssh(host, f"dnf -q -y remove dkms gcc oracle-epel-release-el{ol[-1]}; "
                  "dnf clean expire-cache", check=False)
    assert _enabled_repos(ssh, host) == sorted([baseos, appstream, uek])


@integration
def test_container_tools_trait_is_installed_and_conflicts_with_containerd_io(fleet, ssh):
    hosts = _hosts(fleet, "ol8", "container-tools")
    if not hosts:
        pytest.fail("no OL8 host with the container-tools trait in this fleet")
    host = hosts[0]
    out = ssh(host, "rpm -q --qf '%{NAME}\\n' podman buildah runc containers-common").stdout
    assert out.split() == ["podman", "buildah", "runc", "containers-common"]
    assert ssh(host, "dnf -q repoquery --installed --qf '%{reponame}' runc").stdout.strip() in (
        "ol8_appstream", "@System")
    url = ssh(host, "cat /etc/dnf/vars/gpuhost_sandbox_url").stdout.strip()
    proc = ssh(host, "dnf -y install docker-ce containerd.io --nogpgcheck "
                     f"--repofrompath=docker-ce-stable,{url}/ol/ol8/docker-ce-stable",
               check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "conflicts with runc provided by runc" in text, text[-2000:]
    assert ssh(host, "rpm -q containerd.io", check=False).returncode != 0


def test_container_tools_is_on_by_default_for_ol8_only():
    assert "container-tools" in traits.defaults({"name": "ol8-03", "os": "ol8"})
    assert "container-tools" not in traits.defaults({"name": "ol9-04", "os": "ol9"})
    assert "container-tools" not in traits.defaults({"name": "gpu-01", "os": "debian12"})


@integration
def test_deploy_stops_a_container_tools_host_before_any_change_without_replace(fleet, ssh,
                                                                                pyinfra):
    """gpuhost on the container-tools host with docker_replace_podman false (issue 13
    item 2): the host stops with the packages and the setting named, nothing changed."""
    hosts = _hosts(fleet, "ol8", "container-tools")
    if not hosts:
        pytest.fail("no OL8 host with the container-tools trait in this fleet")
    host = hosts[0]
    if ssh(host, "rpm -q docker-ce", check=False).returncode == 0:
        pytest.fail(f"{host} already has Docker: its fleet is not bare")
    before = ssh(host, "rpm -qa | sort; ls /etc/yum.repos.d /etc/modprobe.d").stdout
    proc = pyinfra("-y", "--limit", host, "deploys/gpu_host.py",
                   "--data", "docker_replace_podman=False", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "buildah, containers-common, podman, runc installed" in out, out[-3000:]
    assert "docker_replace_podman: true" in out
    assert ssh(host, "rpm -qa | sort; ls /etc/yum.repos.d /etc/modprobe.d").stdout == before


@integration
def test_epel9_dkms_pulls_the_newest_rhck_onto_a_host_with_kernel_core(fleet, ssh):
    """EPEL 9's `Requires: (kernel-devel-matched if kernel-core)` as the fake repos model it
    (issue 23 item 4): with the rhck-installed trait's older kernel-core on the OL9 host,
    `dnf install dkms` brings the newest kernel-devel-matched and with it a new kernel-core."""
    from sandbox.traits.oracle import RHCK_INSTALLED
    host = _hosts(fleet, "ol9")[0]
    epel = CHANNELS["ol9"][4]
    query = "rpm -qa --qf '%{NAME}-%{VERSION}-%{RELEASE}\\n' 'kernel-core' 'kernel-devel*' | sort"
    try:
        ssh(host, f"dnf -q -y install kernel-core-{RHCK_INSTALLED} oracle-epel-release-el9 && "
                  f"dnf config-manager --set-enabled {epel}")
        assert ssh(host, query).stdout.split() == [f"kernel-core-{RHCK_INSTALLED}"]
        ssh(host, "dnf -q -y install dkms")
        newest = "5.14.0-503.11.1.el9_5"
        assert ssh(host, query).stdout.split() == sorted([
            f"kernel-core-{RHCK_INSTALLED}", f"kernel-core-{newest}",
            f"kernel-devel-{newest}", f"kernel-devel-matched-{newest}"])
    finally:
        ssh(host, "dnf -q -y remove dkms gcc kernel-devel-matched kernel-devel kernel-core "
                  "oracle-epel-release-el9; dnf clean expire-cache", check=False)
