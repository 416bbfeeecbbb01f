"""Exact plans on the Enterprise Linux releases of issue 34: EL10 without module streams (the
exact version installed and locked in one step), each vendor's repositories, and the
refusals before any change (an unregistered RHEL host, EL 11, Oracle's EPEL release package
without the host's update level)."""

from __future__ import annotations

from pathlib import Path

from tests.plans.test_el_plans import _index, _plan

GOLDEN = Path(__file__).resolve().parent / "golden"
DRIVER = "570.172.08"
LOCKED_INSTALL = (f"dnf install -y python3-dnf-plugin-versionlock nvidia-open-{DRIVER} && "
                  "locks=$(rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' "
                  f"'*nvidia*' | grep -F -e ':{DRIVER}-') && test -n \"$locks\" && "
                  "dnf versionlock add $locks")


def _golden(name: str) -> list[str]:
    return (GOLDEN / f"{name}.plan").read_text().splitlines()


def _commands(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("FAILED")]


def test_el10_installs_the_exact_version_and_locks_it_in_one_step_without_module_streams():
    for name in ("ol10-uek8", "ol10-rhck", "rhel10", "rocky10", "alma10"):
        lines = _golden(name)
        assert LOCKED_INSTALL in lines, name
        assert not any("module" in line for line in lines), name
        assert "dnf install -y nvidia-open" not in lines, name
        assert _index(lines, "dnf -q repoquery --available dkms") < lines.index(LOCKED_INSTALL)
    for name in ("ol9-rhck", "rhel8", "rhel9", "rocky9", "alma9", "rocky8", "alma8"):
        lines = _golden(name)
        assert "dnf -y module enable nvidia-driver:570-open" in lines, name
        assert LOCKED_INSTALL not in lines, name


def test_headers_per_kernel_and_the_uek_toolset_only_where_the_compiler_differs():
    ol10 = _golden("ol10-uek8")
    assert ol10[0] == "gpuhost run lock: take (roles/runlock.py)"
    assert ol10[2] == ("dnf install -y --setopt=install_weak_deps=False "
                       "kernel-uek-devel-6.12.0-100.28.2.el10uek.x86_64")
    assert not any("gcc-toolset" in line for line in ol10)  # OL10's UEK 8: system gcc 14
    assert any("gcc-toolset-14" in line for line in _golden("ol9-uek8"))
    for name, release in (("ol10-rhck", "6.12.0-55.9.1.0.1.el10_0.x86_64"),
                          ("rhel10", "6.12.0-55.9.1.el10_0.x86_64"),
                          ("rocky10", "6.12.0-55.12.1.el10_0.x86_64"),
                          ("alma9", "5.14.0-570.12.1.el9_6.x86_64")):
        assert ("dnf install -y --setopt=install_weak_deps=False "
                f"kernel-devel-matched-{release}") in _golden(name), name
    assert ("dnf install -y --setopt=install_weak_deps=False "
            "kernel-devel-4.18.0-553.el8_10.x86_64") in _golden("rocky8")


def test_each_distribution_gets_its_vendors_repositories():
    ol10 = _golden("ol10-uek8")
    assert ol10.index("dnf install -y oracle-epel-release-el10") < ol10.index(
        "dnf config-manager --set-enabled ol10_codeready_builder ol10_u0_developer_EPEL")
    for name, major in (("rhel8", 8), ("rhel9", 9), ("rhel10", 10)):
        lines = _golden(name)
        sm = lines.index(f"subscription-manager repos --enable=codeready-builder-for-rhel-{major}"
                         "-x86_64-rpms")
        epel = lines.index("dnf install -y https://dl.fedoraproject.org/pub/epel/"
                           f"epel-release-latest-{major}.noarch.rpm")
        assert sm < epel < lines.index("dnf config-manager --set-enabled epel")
        assert not any("config-manager --set-enabled codeready" in line for line in lines)
    for name, crb in (("rocky10", "crb"), ("rocky9", "crb"), ("alma10", "crb"),
                      ("alma9", "crb"), ("rocky8", "powertools"), ("alma8", "powertools")):
        lines = _golden(name)
        assert lines.index("dnf install -y epel-release") < lines.index(
            f"dnf config-manager --set-enabled {crb} epel"), name
        assert not any("subscription-manager" in line for line in lines), name


def test_an_unregistered_rhel_host_is_refused_before_any_change_in_one_line():
    result, lines = _plan("rhel10", {"plan_rhsm": "unregistered"})
    commands = _commands(lines)
    assert len(commands) == 1, commands  # the failing line, nothing else
    assert commands[0].startswith("echo 'gpuhost: @fake/rhel10: this RHEL host is not registered")
    assert "subscription-manager register" in commands[0] and "el_repo_urls" in commands[0]


def test_a_rhel_host_without_subscription_manager_is_refused_too():
    result, lines = _plan("rhel9", {"plan_rhsm": "absent"})
    commands = _commands(lines)
    assert len(commands) == 1 and "this RHEL host has no subscription-manager" in commands[0]


def test_an_unregistered_rhel_host_with_repositories_by_url_is_provisioned():
    mirrors = {"site-crb": {"baseurl": "https://mirror.example/crb/10/x86_64",
                            "gpgkey": "https://mirror.example/RPM-GPG-KEY-redhat"},
               "site-epel": {"baseurl": "https://mirror.example/epel/10/x86_64",
                             "gpgkey": "https://mirror.example/RPM-GPG-KEY-EPEL-10"}}
    result, lines = _plan("rhel10", {"plan_rhsm": "unregistered", "el_repo_urls": mirrors})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "upload /etc/yum.repos.d/gpuhost-mirrors.repo.gpuhost-new" in lines
    assert not any("subscription-manager" in line or "epel-release" in line for line in lines)
    assert lines.index("upload /etc/yum.repos.d/gpuhost-mirrors.repo.gpuhost-new") < \
        lines.index(LOCKED_INSTALL)


def test_a_release_gpuhost_does_not_know_is_refused_before_any_change():
    result, lines = _plan("rocky11")
    commands = _commands(lines)
    assert len(commands) == 1, commands
    assert "unsupported operating system" in commands[0] and "Rocky Linux 11.0" in commands[0]
    assert "Rocky Linux 8/9/10" in commands[0]
    # said once, and that nothing changed
    assert commands[0].count("unsupported operating system") == 1, commands[0]
    assert commands[0].count("Rocky Linux 11.0") == 1, commands[0]
    assert "; nothing was changed on this host' >&2; exit 1" in commands[0]


def test_oracles_epel_release_without_the_hosts_update_level_is_refused_not_guessed():
    # an OL 10.2 host whose oracle-epel-release-el10 still defines the 10.1 channel
    lagging = ("repo ol10_u1_developer_EPEL\nenabled 0\n"
               "rpm oracle-epel-release-el10\t(none):1.0-6.el10\n")
    result, lines = _plan("ol10-uek8", {"plan_el_packaging": lagging})
    commands = _commands(lines)
    assert len(commands) == 1, commands  # before any change
    assert commands[0].startswith("echo 'gpuhost: @fake/ol10-uek8: oracle-epel-release-el10 "
                                  "is installed but defines no ol10_u0_developer_EPEL")
    assert "el_enable_repos" in commands[0]


def test_upgrade_on_el10_moves_the_versionlock_with_the_driver_and_no_module():
    lines = _golden("upgrade-ol10-uek8")
    release = lines.index("dnf versionlock delete nvidia-driver-3:550.163.01-1.el10 "
                          "kmod-nvidia-latest-dkms-3:550.163.01-1.el10")
    switch = lines.index(f"dnf install -y --allowerasing nvidia-open-{DRIVER}")
    lock = _index(lines, f"dnf versionlock add kmod-nvidia-latest-dkms-3:{DRIVER}-1.el10")
    assert release < switch < lock
    assert not any("module" in line for line in lines)


def test_el10_install_and_lock_converge_and_a_lost_lock_is_taken_again():
    from tests.plans import scenarios

    installed = scenarios.el_packaging_output("ol10-uek8", True)
    # converged (stamp stale: the deploy runs its operations): neither install nor lock
    result, lines = _plan("ol10-uek8", {"plan_stamp": "stale", "plan_el_packaging": installed})
    assert result.returncode == 0, result.stderr[-2000:]
    assert not any("nvidia-open" in line or "versionlock" in line for line in lines)
    # the driver installed, its locks gone (someone ran `dnf versionlock clear`)
    unlocked = "\n".join(line for line in installed.splitlines()
                         if not line.startswith("lock ")) + "\n"
    result, lines = _plan("ol10-uek8", {"plan_stamp": "stale", "plan_el_packaging": unlocked})
    assert f"dnf versionlock add kmod-nvidia-open-dkms-3:{DRIVER}-1.el10 " \
        f"nvidia-driver-3:{DRIVER}-1.el10 nvidia-open-3:{DRIVER}-1.el10" in lines
    assert not any(line.startswith("dnf install") and "nvidia-open" in line for line in lines)


def test_only_the_local_repo_of_the_hosts_own_distro_tag_is_checked_against_its_driver():
    """A fleet's group data gives every tag's local repo of one driver; a host with its own
    nvidia_driver_version is judged on its own tag's entry only: one line when that one is
    another driver's, and no need for ``nvidia_local_repo: {}`` when the others are."""
    from tests.plans import scenarios

    other = "580.95.05"
    everyone_old = {tag: scenarios._artifact(tag, other) for tag in ("debian12", "rhel9", "rhel10")}
    result, lines = _plan("rocky10", {"nvidia_local_repo": everyone_old})
    commands = _commands(lines)
    assert len(commands) == 1, commands  # one line, before any change
    assert commands[0].startswith(
        f"echo 'gpuhost: @fake/rocky10: nvidia_local_repo[rhel10]: nvidia-driver-local-repo-"
        f"rhel10-{other} is the local repo of driver {other}, but nvidia_driver_version is "
        f"{DRIVER} (point nvidia_local_repo[rhel10] at the {DRIVER} package")
    mine = {**everyone_old, "rhel10": scenarios._artifact("rhel10", DRIVER)}
    result, lines = _plan("rocky10", {"nvidia_local_repo": mine})
    assert result.returncode == 0, result.stderr[-2000:]
    assert LOCKED_INSTALL in lines


def test_a_deploy_that_changes_a_converged_el10_hosts_branch_or_flavour_switches_in_one_step():
    """A plain deploy (not ``gpuhost upgrade``) on an OL10 host converged at DRIVER open: to
    another branch, or to the proprietary flavour, every driver lock goes, one
    ``dnf install --allowerasing`` replaces the driver (the flavours' kmod packages
    conflict), the other flavour's meta package goes if left, and the lock is taken at the
    new version in the same command."""
    from tests.plans import scenarios

    installed = scenarios.el_packaging_output("ol10-uek8", True)
    old_locks = (f"dnf versionlock delete kmod-nvidia-open-dkms-3:{DRIVER}-1.el10 "
                 f"nvidia-driver-3:{DRIVER}-1.el10 nvidia-open-3:{DRIVER}-1.el10")
    for extra, package, other in (({"nvidia_driver_version": "580.95.05"},
                                   "nvidia-open-580.95.05", "cuda-drivers"),
                                  ({"nvidia_driver_flavor": "proprietary"},
                                   f"cuda-drivers-{DRIVER}", "nvidia-open")):
        version = extra.get("nvidia_driver_version", DRIVER)
        result, lines = _plan("ol10-uek8", {"plan_stamp": "stale",
                                            "plan_el_packaging": installed, **extra})
        assert result.returncode == 0, result.stderr[-2000:]
        switch = (f"dnf install -y --allowerasing python3-dnf-plugin-versionlock {package} && "
                  f"if rpm -q {other} >/dev/null 2>&1; then dnf remove -y {other} ; fi && "
                  "locks=$(rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' "
                  f"'*nvidia*' | grep -F -e ':{version}-') && test -n \"$locks\" && "
                  "dnf versionlock add $locks")
        assert lines.index(old_locks) + 1 == lines.index(switch), extra
        assert not any(line.startswith("dnf install -y python3-dnf") for line in lines)
