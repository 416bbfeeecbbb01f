"""The Debian 12 kernel repository's packages (sandbox/kernels_debian.py), without building
them: the two ABIs after the running one, the newest one broken for drivers before 595.71.05,
the headers meta pointing at it, and the maintainer scripts that run Debian's kernel hooks."""
from __future__ import annotations

from sandbox import kernels_debian


def test_two_abis_after_the_running_one_the_newest_broken_and_the_meta_on_it():
    good, broken = kernels_debian.releases("6.1.0-56-amd64")
    assert (good, broken) == ("6.1.0-57-amd64", "6.1.0-58-amd64")
    pkgs = {p.name: p for p in kernels_debian.packages("6.1.0-56-amd64")}
    assert sorted(pkgs) == sorted(["linux-headers-amd64", f"linux-image-{good}",
                                   f"linux-headers-{good}", f"linux-image-{broken}",
                                   f"linux-headers-{broken}"])
    assert pkgs["linux-headers-amd64"].depends == [f"linux-headers-{broken}"]
    removed = f"/usr/src/linux-headers-{broken}/include/generated/gpusim-api-removed"
    assert pkgs[f"linux-headers-{broken}"].files[removed][0] == \
        "sys_close 595.71.05 nvidia/nv-caps.c\n"
    assert not any(path.endswith("gpusim-api-removed")
                   for path in pkgs[f"linux-headers-{good}"].files)


def test_the_packages_run_debians_kernel_hooks_and_name_dkms_compiler():
    good, _ = kernels_debian.releases("6.1.0-56-amd64")
    pkgs = {p.name: p for p in kernels_debian.packages("6.1.0-56-amd64")}
    image = pkgs[f"linux-image-{good}"]
    assert f"/boot/vmlinuz-{good}" in image.files
    assert (f"run-parts --report --exit-on-error --arg={good} --arg=/boot/vmlinuz-{good} "
            "/etc/kernel/postinst.d") in image.scripts["postinst"]
    assert "/etc/kernel/postrm.d" in image.scripts["postrm"]
    headers = pkgs[f"linux-headers-{good}"]
    src = f"/usr/src/linux-headers-{good}"
    assert f"ln -sfn {src} /lib/modules/{good}/build" in headers.scripts["postinst"]
    assert "/etc/kernel/header_postinst.d" in headers.scripts["postinst"]
    assert "CC = gcc-12\n" in headers.files[f"{src}/.kernelvariables"][0]
    assert 'CONFIG_CC_VERSION_TEXT="gcc-12 ' in headers.files[f"{src}/.config"][0]
