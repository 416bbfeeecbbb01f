"""The Ubuntu 24.04 kernel repository's packages (sandbox/kernels_ubuntu.py), without building
them: two real noble kernel names after the running one, the newest broken for drivers before
595.71.05, both metas pointing at it, and Ubuntu's image/modules/headers split with the
maintainer scripts that run the kernel hooks."""
from __future__ import annotations

from sandbox import kernels_debian, kernels_ubuntu, ubuntu


def test_two_noble_kernels_after_the_running_one_the_newest_broken_and_the_metas_on_it():
    good, broken = kernels_ubuntu.GOOD[0], kernels_ubuntu.BROKEN[0]
    running = ubuntu.RELEASES["ubuntu2404"]
    abis = [int(rel.split("-")[1]) for rel in (running["kernel"], running["newer"], good, broken)]
    assert abis == sorted(set(abis))  # 51 < 53 (the archive's -updates) < 60 < 71
    pkgs = {p.name: p for p in kernels_ubuntu.packages()}
    assert pkgs["linux-headers-generic"].depends == [f"linux-headers-{broken}"]
    assert pkgs["linux-image-generic"].depends == [f"linux-image-{broken}"]
    # after the archive's own meta (6.8.0.53.55): apt's candidate once the repository is on
    assert pkgs["linux-headers-generic"].version == "6.8.0.71.71"
    removed = f"/usr/src/linux-headers-{broken}/include/generated/gpusim-api-removed"
    assert pkgs[f"linux-headers-{broken}"].files[removed][0] == \
        "".join(f"{fn} {first} {where}\n" for fn, first, where in kernels_debian.REMOVED)
    assert not any(path.endswith("gpusim-api-removed")
                   for path in pkgs[f"linux-headers-{good}"].files)


def test_ubuntus_package_split_and_kernel_hooks():
    good = kernels_ubuntu.GOOD[0]
    abi = good.rsplit("-", 1)[0]
    pkgs = {p.name: p for p in kernels_ubuntu.packages()}
    image, modules = pkgs[f"linux-image-{good}"], pkgs[f"linux-modules-{good}"]
    assert image.depends == [f"linux-modules-{good}"] and f"/boot/vmlinuz-{good}" in image.files
    assert f"/lib/modules/{good}/modules.dep" in modules.files
    assert (f"run-parts --report --exit-on-error --arg={good} --arg=/boot/vmlinuz-{good} "
            "/etc/kernel/postinst.d") in image.scripts["postinst"]
    assert "/etc/kernel/postrm.d" in image.scripts["postrm"]
    headers = pkgs[f"linux-headers-{good}"]
    assert headers.depends == [f"linux-headers-{abi}"] and pkgs[f"linux-headers-{abi}"].arch == "all"
    src = f"/usr/src/linux-headers-{good}"
    assert f"ln -sfn {src} /lib/modules/{good}/build" in headers.scripts["postinst"]
    assert "/etc/kernel/header_postinst.d" in headers.scripts["postinst"]
    assert f'#define UTS_RELEASE "{good}"' in headers.files[f"{src}/include/generated/utsrelease.h"][0]


def test_the_source_lines_name_the_repository_of_each_distribution():
    assert "/nvidia/kernels/ubuntu2404\nSuites: ./" in kernels_ubuntu.enable_command()
    assert "/nvidia/kernels/debian12\nSuites: ./" in kernels_debian.enable_command()
