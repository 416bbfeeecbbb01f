"""Issue 14 items 1-3: the boot chain's facts (next boot kernel, enrolled MOKs, DKMS logs)
and the Secure Boot decision (roles/boot_safety.py), without a host."""
from __future__ import annotations

import subprocess

import pytest

from gpuhost.facts import boot_parsers
from gpuhost.facts.assemble import kernel_state
from gpuhost.roles import boot_safety

GRUB = """cfg: menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-u' {
cfg: 	linux	/boot/vmlinuz-6.1.0-57-amd64 root=UUID=u ro quiet
cfg: }
cfg: submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-u' {
cfg: 	menuentry 'Debian GNU/Linux, with Linux 6.1.0-57-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-57-amd64-advanced-u' {
cfg: 		linux	/boot/vmlinuz-6.1.0-57-amd64 root=UUID=u ro quiet
cfg: 	}
cfg: 	menuentry 'Debian GNU/Linux, with Linux 6.1.0-56-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-56-amd64-advanced-u' {
cfg: 		linux	/boot/vmlinuz-6.1.0-56-amd64 root=UUID=u ro quiet
cfg: 	}
cfg: }
vmlinuz: 6.1.0-56-amd64
vmlinuz: 6.1.0-57-amd64
modules: 6.1.0-56-amd64 headers
modules: 6.1.0-57-amd64
"""


def test_grub_default_zero_is_the_first_entry():
    boot = boot_parsers.parse_boot_loader("grub_default: 0\n" + GRUB)
    assert boot["default_kernel"] == "6.1.0-57-amd64" and boot["source"] == "grub"
    assert boot["modules"] == {"6.1.0-56-amd64": True, "6.1.0-57-amd64": False}


def test_grub_saved_entry_by_submenu_path():
    text = ("grub_default: saved\nsaved_entry: gnulinux-advanced-u>gnulinux-6.1.0-56-amd64-"
            "advanced-u\n" + GRUB)
    # a submenu path names an entry inside the submenu: its last part is matched
    assert boot_parsers.parse_boot_loader(text)["default_kernel"] == "6.1.0-56-amd64"
    text = "grub_default: 'Debian GNU/Linux, with Linux 6.1.0-56-amd64'\n" + GRUB
    assert boot_parsers.parse_boot_loader(text)["default_kernel"] == "6.1.0-56-amd64"


def test_grubby_wins_and_nothing_readable_is_unknown():
    assert boot_parsers.parse_boot_loader(
        "grubby: /boot/vmlinuz-5.15.0-307.178.5.el8uek.x86_64\n")["default_kernel"] == \
        "5.15.0-307.178.5.el8uek.x86_64"
    assert boot_parsers.parse_boot_loader("")["default_kernel"] is None


def _sections(boot_loader="", dkms="", mok=None, sb=None):
    s = {"os_release": {"rc": 0, "out": 'ID=debian\nVERSION_ID="12"\n'},
         "kernel": {"rc": 0, "out": "6.1.0-56-amd64 x86_64"},
         "headers_build": {"rc": 0, "out": "/usr/src/linux-headers-6.1.0-56-amd64"},
         "boot_loader": {"rc": 0, "out": boot_loader},
         "dkms": {"rc": 0, "out": dkms}}
    if mok is not None:
        s["mok"] = {"rc": 0, "out": mok}
    if sb is not None:
        s["secure_boot"] = {"rc": 0, "out": sb}
    return s


def test_next_boot_names_the_other_kernel_its_headers_and_module():
    k = kernel_state(_sections("grub_default: 0\n" + GRUB,
                               "nvidia/570.172.08, 6.1.0-56-amd64, x86_64: installed\n"))
    nxt = k["next_boot"]
    assert nxt["kernel_release"] == "6.1.0-57-amd64" and nxt["differs"]
    assert nxt["headers_packages_missing"] == ["linux-headers-6.1.0-57-amd64"]
    assert not nxt["headers_installed"] and nxt["nvidia_module"] == []


def test_without_a_boot_loader_the_running_kernel_is_the_next():
    k = kernel_state(_sections("", "nvidia/570.172.08, 6.1.0-56-amd64, x86_64: installed\n"))
    assert k["next_boot"]["kernel_release"] == "6.1.0-56-amd64"
    assert not k["next_boot"]["differs"] and k["next_boot"]["nvidia_module"] == ["570.172.08"]
    assert k["mok_enrolled"] is None


@pytest.fixture(scope="module")
def keypair(tmp_path_factory):
    d = tmp_path_factory.mktemp("mok")
    subprocess.run(["openssl", "req", "-new", "-x509", "-nodes", "-days", "30", "-subj", "/CN=t",
                    "-newkey", "rsa:2048", "-keyout", str(d / "k.key"), "-outform", "DER",
                    "-out", str(d / "c.der")], check=True, capture_output=True)
    return d / "k.key", d / "c.der"


def test_secure_boot_without_a_key_is_refused_with_what_to_do(keypair):
    kernel = {"secure_boot": "enabled", "mok_enrolled": []}
    problem = boot_safety.secure_boot_problem(kernel, None, None)
    assert "Secure Boot is enabled" in problem and "nvidia_module_signing_key" in problem
    assert boot_safety.secure_boot_problem({"secure_boot": "disabled"}, None, None) is None


def test_secure_boot_needs_the_certificate_enrolled(keypair):
    key, cert = keypair
    fp = boot_safety.fingerprint(cert.read_bytes())
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(cert), "-noout",
                          "-fingerprint", "-sha1"], capture_output=True, text=True).stdout
    assert fp == out.strip().split("=", 1)[1].lower()
    mok = f"[key 1]\nSHA1 Fingerprint: {fp.upper()}\n"
    enrolled = boot_parsers.parse_mok_fingerprints(mok)
    assert boot_safety.secure_boot_problem(
        {"secure_boot": "enabled", "mok_enrolled": enrolled}, str(key), str(cert)) is None
    problem = boot_safety.secure_boot_problem(
        {"secure_boot": "enabled", "mok_enrolled": ["00:11"]}, str(key), str(cert))
    assert "is not enrolled" in problem and fp in problem


def test_dkms_logs_are_read_back():
    logs = boot_parsers.parse_dkms_logs("== /var/lib/dkms/nvidia/1/build/make.log\nerror: x\n"
                                        "make: *** Error 2\n")
    assert logs == {"/var/lib/dkms/nvidia/1/build/make.log": "error: x\nmake: *** Error 2"}
