"""The boot default of a kernel update, per boot loader (``roles/kernel_update_ops.py`` uses
these command pieces; each is valid ``sh``, every value quoted).

Enterprise Linux: ``grubby --default-kernel`` / ``grubby --set-default /boot/vmlinuz-REL``
(RHEL 8/9 "Managing, monitoring and updating the kernel": BLS entries, the default in grubenv).

Debian and Ubuntu: GRUB 2's saved default. ``GRUB_DEFAULT=saved`` in ``/etc/default/grub``
makes the entry ``grub-set-default`` stored in ``/boot/grub/grubenv`` the default (GNU GRUB
manual, "Simple configuration handling": GRUB_DEFAULT, "If you set this to 'saved', then the
default menu entry will be that saved by GRUB_SAVEDEFAULT or grub-set-default"; an entry is
named by its id, a submenu's by ``SUBMENU_ID>ENTRY_ID``). With the numeric default Debian
and Ubuntu ship (``GRUB_DEFAULT=0``) the kernel package's ``update-grub`` (run from
``/etc/kernel/postinst.d/zz-update-grub``) would make the newest kernel the default at once,
so before installing a kernel gpuhost names the running kernel's own entry with
``grub-set-default``, then sets ``GRUB_DEFAULT=saved`` and regenerates ``grub.cfg``. The
entry ids are ``grub-mkconfig``'s (``/etc/grub.d/10_linux``: ``gnulinux-REL-advanced-UUID``
in the submenu ``gnulinux-advanced-UUID``), read from ``/boot/grub/grub.cfg``.
"""

from __future__ import annotations

from typing import Any

from pyinfra.api import QuoteString, StringCommand

GRUB_DEFAULTS = "/etc/default/grub"
GRUB_CFG = "/boot/grub/grub.cfg"
GRUBENV = "/boot/grub/grubenv"

# The id path of a kernel's own (not recovery, not the "simple" first) entry in grub.cfg:
# fields split at single quotes, an entry's id is the last quoted word of its line.
_ENTRY_AWK = (
    '/^submenu / { menu = $(NF-1); next } '
    '/^[ \\t]*menuentry / { cur = $(NF-1); nested = ($0 ~ /^[ \\t]/); next } '
    '/^[ \\t]*linux(efi)?[ \\t]/ && index($0, "/vmlinuz-" rel " ") && cur !~ /recovery|-simple-/ '
    '{ print (nested ? menu ">" : "") cur; exit }')


def _q(value: str) -> QuoteString:
    return QuoteString(value)


def _entry_function() -> list[Any]:
    """``grub_entry REL`` prints REL's entry id path (empty when grub.cfg has none)."""
    return ["grub_entry() { awk -F \"'\" -v rel=\"$1\"", _q(_ENTRY_AWK), GRUB_CFG,
            "2>/dev/null; };"]


def _saved() -> str:
    return (f"$(grub-editenv {GRUBENV} list 2>/dev/null | sed -n 's/^saved_entry=//p')")


def default_is(family: str, release: str) -> StringCommand:
    """A test: ``release`` is the boot default."""
    if family == "rhel":
        return StringCommand('[ "$(grubby --default-kernel 2>/dev/null)" =',
                             _q(f"/boot/vmlinuz-{release}"), "]")
    return StringCommand("{", *_entry_function(), f"grep -qx GRUB_DEFAULT=saved {GRUB_DEFAULTS} &&",
                         '[ -n "$(grub_entry', _q(release), ')" ] &&',
                         f'[ "{_saved()}" = "$(grub_entry', _q(release), ')" ]; }')


def set_default(family: str, release: str, fail: Any = None) -> StringCommand:
    """Make ``release`` the boot default (nothing when it is); ``fail`` (a command) runs when
    the boot loader has no entry for it."""
    if family == "rhel":
        return StringCommand(default_is(family, release), "|| grubby --set-default",
                             _q(f"/boot/vmlinuz-{release}"), ">/dev/null")
    # grub-set-default first: with GRUB_DEFAULT=saved and no saved entry GRUB boots entry 0
    missing: list[Any] = [fail] if fail is not None else ["false"]
    return StringCommand(
        "{", *_entry_function(), "e=$(grub_entry", _q(release), ");",
        'if [ -z "$e" ]; then update-grub >/dev/null 2>&1; e=$(grub_entry', _q(release), "); fi;",
        'if [ -z "$e" ]; then', *missing, "; else",
        'if [ "$e" != "' + _saved() + '" ]; then grub-set-default "$e"; fi &&',
        f"if ! grep -qx GRUB_DEFAULT=saved {GRUB_DEFAULTS}; then",
        f"if grep -q '^GRUB_DEFAULT=' {GRUB_DEFAULTS}; then",
        f"sed -i 's/^GRUB_DEFAULT=.*/GRUB_DEFAULT=saved/' {GRUB_DEFAULTS};",
        f"else echo GRUB_DEFAULT=saved >> {GRUB_DEFAULTS}; fi && update-grub >/dev/null 2>&1;",
        "fi; fi; }")
