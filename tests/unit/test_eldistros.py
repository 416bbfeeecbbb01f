"""The Enterprise Linux table (gpuhost.eldistros): one module per distribution, recognised
from os-release, every supported major taking NVIDIA's rhel<major> build; an unknown release
refused in one line naming what gpuhost supports."""

from __future__ import annotations

import pytest

from gpuhost import distro, eldistros, packages


def test_every_distribution_module_is_in_the_table_and_every_major_has_its_tag():
    assert set(eldistros.DISTRIBUTIONS) == {"ol", "rhel", "rocky", "almalinux"}
    for os_id, d in eldistros.DISTRIBUTIONS.items():
        assert d.majors == (8, 9, 10), os_id
        for major in d.majors:
            info = distro.identify({"ID": os_id, "VERSION_ID": f"{major}.0"})
            assert info["distro_tag"] == f"rhel{major}" in distro.DISTRO_TAGS
            assert info["distro_tag"] in packages.RPM_DISTROS
            channels = d.channels(major, 0, "x86_64")
            assert channels.crb and channels.epel and channels.epel_release


def test_module_streams_end_at_el9():
    assert packages.has_module_streams("rhel8") and packages.has_module_streams("rhel9")
    assert not packages.has_module_streams("rhel10")
    assert not packages.has_module_streams("debian12")


def test_update_level_and_unknown_releases():
    assert eldistros.update_level("10.1") == 1 and eldistros.update_level("10") == 0
    assert eldistros.channels("ol", "10.2").epel == "ol10_u2_developer_EPEL"
    assert eldistros.channels("ol", "9.6").epel == "ol9_developer_EPEL"
    with pytest.raises(ValueError, match="no Enterprise Linux entry for rocky 11.0"):
        eldistros.channels("rocky", "11.0")
    with pytest.raises(ValueError, match="no Enterprise Linux entry for centos 9"):
        eldistros.channels("centos", "9")


def test_el11_is_refused_in_one_line_naming_the_supported_releases():
    with pytest.raises(ValueError) as error:
        distro.identify({"ID": "rocky", "VERSION_ID": "11.0", "PRETTY_NAME": "Rocky Linux 11.0"})
    text = str(error.value)
    assert "\n" not in text and text.startswith("unsupported operating system 'Rocky Linux 11.0'")
    assert "Oracle Linux 8/9/10" in text and "RHEL 8/9/10" in text
    assert "Rocky Linux 8/9/10" in text and "AlmaLinux 8/9/10" in text


def test_a_rhel10_tag_has_major_10():
    # the tag alone (facts pass it so): kernel-devel-matched from EL9 on, not EL8's name
    release = "6.12.0-55.9.1.el10_0.x86_64"
    assert distro.headers_packages("rhel10", release)[0] == f"kernel-devel-matched-{release}"
    assert distro.needs_gcc_toolset("rhel10", "6.12.0-100.28.2.el10uek.x86_64") is None


@pytest.mark.parametrize(("os_id", "version_id", "pretty", "name"), [
    ("ol", "10.0", "Oracle Linux Server 10.0", "Oracle Linux 10.0"),
    ("rocky", "10.0", "Rocky Linux 10.0 (Red Quartz)", "Rocky Linux 10.0"),
    ("rhel", "9.6", "Red Hat Enterprise Linux 9.6 (Plow)", "RHEL 9.6"),
    ("almalinux", "10.0", "AlmaLinux 10.0 (Purple Lion)", "AlmaLinux 10.0"),
    ("debian", "13", "Debian GNU/Linux 13 (trixie)", "Debian 13"),
    ("ubuntu", "26.04", "Ubuntu Resolute Raccoon", "Ubuntu 26.04"),
    ("rocky", "11.0", "Rocky Linux 11.0", "Rocky Linux 11.0"),  # a release gpuhost lacks
    ("debian", "14", "Debian GNU/Linux 14 (forky)", "Debian 14"),
    ("fedora", "41", "Fedora Linux 41 (Server Edition)", "Fedora Linux 41 (Server Edition)"),
    ("", "", "", "unknown"),
])
def test_release_names_as_a_person_writes_them(os_id, version_id, pretty, name):
    from gpuhost.distro import release_name

    assert release_name(os_id, version_id, pretty) == name


def test_an_el10_deploy_names_an_install_or_the_switch_it_makes():
    from gpuhost import el_packages

    open_570 = {"nvidia-open": "3:570.172.08-1.el10", "kmod-nvidia-open-dkms":
                "3:570.172.08-1.el10", "nvidia-container-toolkit": "0:1.17.8-1"}
    assert not el_packages.driver_switch({}, "570.172.08", "open")
    assert not el_packages.driver_switch(open_570, "570.172.08", "open")  # the toolkit: no driver
    assert el_packages.driver_switch(open_570, "580.95.05", "open")
    assert el_packages.driver_switch(open_570, "570.172.08", "proprietary")
    wanted = ["nvidia-open"]
    bare = {"installed_versions": [], "installed_flavor": None}
    assert el_packages.install_name("open", "580.95.05", wanted, bare) == (
        "Install the open driver 580.95.05 (nvidia-open) and lock it (dnf versionlock)")
    at = {"installed_versions": ["580.95.05"], "installed_flavor": "open"}
    assert el_packages.install_name("open", "580.95.05", wanted, at).startswith("Install ")
    assert el_packages.install_name("open", "595.71.05", wanted, at) == (
        "Switch to the open driver 595.71.05 (nvidia-open) from the open driver 580.95.05, "
        "removing it, and move the dnf versionlock with it")
    assert el_packages.install_name("proprietary", "580.95.05", ["cuda-drivers"], at) == (
        "Switch to the proprietary driver 580.95.05 (cuda-drivers) from the open driver "
        "580.95.05, removing it, and move the dnf versionlock with it")
