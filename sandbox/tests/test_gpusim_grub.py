"""gpusim's GRUB tools (gpusim/grub.py) and the boot's choice (firmware.default_kernel), in a
temporary GPUSIM_ROOT: update-grub writes grub-mkconfig's layout, newest kernel first, and
`set default` from GRUB_DEFAULT; grub-set-default's saved entry is what boots with
GRUB_DEFAULT=saved, a SUBMENU>ENTRY id path too; /etc/default/grub acts only through
update-grub, as on a real host."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GPUSIM = Path(__file__).resolve().parents[1] / "nvidia" / "machine" / "usr/local/lib/gpusim"
UUID = "0e4d2a6c-5b7e-4a8f-9c1d-3f2e1a0b9c8d"


@pytest.fixture
def root(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text("GRUB_DEFAULT=0\nGRUB_DISTRIBUTOR=`lsb_release "
                                               "-i -s 2> /dev/null || echo Debian`\n")
    for rel in ("6.1.0-9-amd64", "6.1.0-10-amd64"):   # version order, not text order
        (tmp_path / f"boot/vmlinuz-{rel}").write_text("image\n")
    return tmp_path


def tool(root, name, *args):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpusim import firmware; "
            "sys.exit(firmware.main(sys.argv[2], sys.argv[3:]))")
    return subprocess.run([sys.executable, "-c", code, str(GPUSIM), name, *args],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "GPUSIM_ROOT": str(root)})


def boots(root):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpusim import firmware; "
            "print(firmware.default_kernel())")
    return subprocess.run([sys.executable, "-c", code, str(GPUSIM)], capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "GPUSIM_ROOT": str(root)}).stdout.strip()


def test_update_grub_lists_the_newest_first_and_boots_it_with_grub_default_0(root):
    done = tool(root, "update-grub")
    assert done.returncode == 0 and "Found linux image: /boot/vmlinuz-6.1.0-10-amd64" in done.stderr
    cfg = (root / "boot/grub/grub.cfg").read_text()
    assert 'set default="0"' in cfg
    assert cfg.index("vmlinuz-6.1.0-10-amd64") < cfg.index("vmlinuz-6.1.0-9-amd64")
    assert f"'gnulinux-6.1.0-9-amd64-advanced-{UUID}'" in cfg
    assert f"'gnulinux-6.1.0-9-amd64-recovery-{UUID}'" in cfg
    assert boots(root) == "6.1.0-10-amd64"


def test_the_saved_entry_boots_once_update_grub_wrote_grub_default_saved(root):
    tool(root, "update-grub")
    entry = f"gnulinux-advanced-{UUID}>gnulinux-6.1.0-9-amd64-advanced-{UUID}"
    assert tool(root, "grub-set-default", entry).returncode == 0
    assert tool(root, "grub-editenv", "/boot/grub/grubenv", "list").stdout == \
        f"saved_entry={entry}\n"
    # GRUB_DEFAULT=saved without update-grub: grub.cfg still says 0, the newest boots
    (root / "etc/default/grub").write_text("GRUB_DEFAULT=saved\n")
    assert boots(root) == "6.1.0-10-amd64"
    tool(root, "update-grub")
    assert 'set default="${saved_entry}"' in (root / "boot/grub/grub.cfg").read_text()
    assert boots(root) == "6.1.0-9-amd64"
    tool(root, "grub-editenv", "/boot/grub/grubenv", "unset", "saved_entry")
    assert boots(root) == "6.1.0-10-amd64"   # no saved entry: the first
    bad = tool(root, "grub-set-default", "--boot-directory=/boot", entry)
    assert bad.returncode == 1 and "no options" in bad.stderr
