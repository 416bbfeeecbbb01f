"""`dmesg` of a sandbox host: the simulated kernel ring buffer (gpusim/health.py, KMSG).

A systemd-nspawn container has no kernel log of its own (no /dev/kmsg; `journalctl -k`
is empty), so this stands in for it, the way the sandbox's `uname` stands in for the
kernel release. Output follows util-linux's dmesg (2.38, Debian 12):

    (default)              [  123.456789] message
    -T, --ctime            [Mon Jan  5 10:00:00 2026] message
    --time-format=iso      2026-01-05T10:00:00,123456+00:00 message
    -t, --notime           message
    -r, --raw              <3>[  123.456789] message
    -x, --decode           kern  :err   : [  123.456789] message

also -k (kernel messages: all of them here), -l/--level LIST, -f/--facility LIST,
-c (print, then clear), -C (clear), -L/--color[=WHEN] and -P/--nopager (no effect here).
"""

import os
import sys
import time

from . import health, host

FACILITIES = ("kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news")
USAGE_HINT = "Try 'dmesg --help' for more information.\n"
HELP = """
Usage:
 dmesg [options]

Display or control the kernel ring buffer (gpusim: the sandbox host's simulated one).

Options:
 -C, --clear                 clear the kernel ring buffer
 -c, --read-clear            read and clear all messages
 -f, --facility <list>       restrict output to defined facilities
 -k, --kernel                display kernel messages
 -L, --color[=<when>]        colorize messages (auto, always or never)
 -l, --level <list>          restrict output to defined levels
 -P, --nopager               do not pipe output into a pager
 -r, --raw                   print the raw message buffer
 -T, --ctime                 show human-readable timestamp
 -t, --notime                don't show any timestamp with messages
     --time-format <format>  show timestamp using the given format:
                               [delta|reltime|ctime|notime|iso]
 -x, --decode                decode facility and level to readable string
 -h, --help                  display this help
"""
SHORT = {"C": "clear", "c": "read_clear", "k": "kernel", "L": "color", "P": "nopager",
         "r": "raw", "T": "ctime", "t": "notime", "x": "decode", "h": "help"}
LONG = {"--clear": "clear", "--read-clear": "read_clear", "--kernel": "kernel",
        "--color": "color", "--nopager": "nopager", "--raw": "raw", "--ctime": "ctime",
        "--notime": "notime", "--decode": "decode", "--help": "help"}


class Usage(Exception):
    pass


def _list(value, names, what):
    out = set()
    for token in value.split(","):
        token = token.strip()
        if token not in names:
            raise Usage(f"dmesg: unknown {what} '{token}'\n")
        out.add(names.index(token))
    return out


def parse(argv):
    opts = {"format": "default", "levels": None, "facilities": None}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--level", "--facility", "--time-format") or arg in ("-l", "-f"):
            if not eq:
                if not args:
                    raise Usage(f"dmesg: option requires an argument -- '{arg.lstrip('-')}'\n"
                                + USAGE_HINT)
                value = args.pop(0)
            if name in ("--level", "-l"):
                opts["levels"] = _list(value, health.LEVELS, "level")
            elif name in ("--facility", "-f"):
                opts["facilities"] = _list(value, FACILITIES, "facility")
            elif value in ("ctime", "notime", "iso", "raw"):
                opts["format"] = value
            elif value in ("delta", "reltime"):
                raise Usage(f"dmesg: gpusim's dmesg does not support --time-format={value}\n")
            else:
                raise Usage(f"dmesg: unknown time format: {value}\n")
        elif name in LONG:
            opts[LONG[name]] = True
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            for ch in arg[1:]:
                if ch not in SHORT:
                    raise Usage(f"dmesg: invalid option -- '{ch}'\n" + USAGE_HINT)
                opts[SHORT[ch]] = True
        elif arg.startswith("--"):
            raise Usage(f"dmesg: unrecognized option '{arg}'\n" + USAGE_HINT)
        else:
            raise Usage(f"dmesg: bad usage\n{USAGE_HINT}")
    for flag, fmt in (("ctime", "ctime"), ("notime", "notime"), ("raw", "raw")):
        if opts.get(flag):
            opts["format"] = fmt
    return opts


def _stamp(usec):
    return f"[{usec // 1000000:5d}.{usec % 1000000:06d}]"


def render(records, opts, boot_time):
    out = []
    for level, _seq, usec, text in records:
        if opts["levels"] is not None and level not in opts["levels"]:
            continue
        if opts["facilities"] is not None and 0 not in opts["facilities"]:
            continue
        fmt = opts["format"]
        if fmt == "raw":
            out.append(f"<{level}>{_stamp(usec)} {text}")
            continue
        if fmt == "notime":
            prefix = ""
        elif fmt == "ctime":
            when = time.localtime(boot_time + usec / 1e6)
            prefix = "[" + time.strftime(f"%a %b {when.tm_mday:2d} %H:%M:%S %Y", when) + "] "
        elif fmt == "iso":
            secs = boot_time + usec / 1e6
            when = time.localtime(secs)
            off = when.tm_gmtoff or 0
            sign = "-" if off < 0 else "+"
            prefix = (time.strftime("%Y-%m-%dT%H:%M:%S", when) +
                      f",{int(secs * 1e6) % 1000000:06d}{sign}{abs(off) // 3600:02d}:"
                      f"{abs(off) % 3600 // 60:02d} ")
        else:
            prefix = _stamp(usec) + " "
        if opts.get("decode"):
            prefix = f"{'kern':<6}:{health.LEVELS[level]:<6}: " + prefix
        out.append(prefix + text)
    return "".join(line + "\n" for line in out)


def restricted():
    """kernel.dmesg_restrict=1, the default of Debian (since 10) and Ubuntu (since 20.10)
    kernels: only root (CAP_SYSLOG) reads the buffer. Enterprise Linux keeps 0."""
    if host.under_test() or os.geteuid() == 0:
        return False
    try:
        with open(host.path(host.MACHINE), encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return False
    return '"debian' in text or '"ubuntu' in text


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse(argv)
    except Usage as err:
        sys.stderr.write(str(err))
        return 1
    if opts.get("help"):
        sys.stdout.write(HELP)
        return 0
    if restricted():
        sys.stderr.write("dmesg: read kernel buffer failed: Operation not permitted\n")
        return 1
    if opts.get("clear"):
        health.kmsg_clear()
        return 0
    records = health.kmsg_records()
    sys.stdout.write(render(records, opts, time.time() - health.uptime()))
    if opts.get("read_clear"):
        health.kmsg_clear()
    return 0
