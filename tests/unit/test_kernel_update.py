"""gpuhost kernel-update, the read-only part: the decisions (gpuhost.kernel_update), the fact's
commands and parser (facts/kernel_update.py) and ``--dry`` through the CLI with pyinfra
replaced by a fake that writes the events the deploy writes."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from gpuhost import cli, kernel_update
from gpuhost.cli import kernel_update as cli_kernel, upgrade as cli_upgrade
from gpuhost.facts.kernel_update import KernelCandidate, apt_command, dnf_command, parse

DEB_OS = {"distro_tag": "debian12", "family": "debian", "kernel_release": "6.1.0-56-amd64"}
OL8_OS = {"distro_tag": "rhel8", "family": "rhel",
          "kernel_release": "5.15.0-307.178.5.el8uek.x86_64"}
DRIVER = {"loaded_version": "570.172.08", "installed_version": "570.172.08"}


def _kernel(os_info, dkms=(), flavour=None, running_module=True):
    own = [{"module": "nvidia", "version": "570.172.08", "kernel": os_info["kernel_release"],
            "status": "installed"}] if running_module else []
    return {"flavour": flavour or ("generic" if os_info["family"] == "debian" else "uek"),
            "problem": None, "dkms": own + list(dkms),
            "next_boot": {"kernel_release": os_info["kernel_release"],
                          "source": "grub" if os_info["family"] == "debian" else "grubby"}}


def _candidate(target, **states):
    return {"target": target, "packages": dict(states),
            "boot_image": False}


def test_release_key_orders_kernels_of_one_flavour():
    assert kernel_update.release_key("6.1.0-57-amd64") > kernel_update.release_key("6.1.0-56-amd64")
    assert kernel_update.release_key("5.15.0-310.184.5.2.el8uek.x86_64") > \
        kernel_update.release_key("5.15.0-307.178.5.el8uek.x86_64")
    assert kernel_update.release_key("6.12.119+deb13-amd64") > \
        kernel_update.release_key("6.12.118+deb13-amd64")


def test_parse_targets_per_distribution_and_its_one_line_error():
    assert kernel_update.parse_targets("debian12=6.1.0-58-amd64, rhel9=5.14.0-611.el9_7.x86_64") \
        == {"debian12": "6.1.0-58-amd64", "rhel9": "5.14.0-611.el9_7.x86_64"}
    assert kernel_update.parse_targets(None) == {}
    for bad in ("debian99=6.1.0-58-amd64", "debian12", "debian12=6.1 0; rm -rf /"):
        with pytest.raises(ValueError, match="want DISTRO=RELEASE"):
            kernel_update.parse_targets(bad)


def test_fact_args_name_the_flavour_meta_and_devel_packages():
    deb = kernel_update.fact_args(DEB_OS, _kernel(DEB_OS), {})
    assert deb == {"family": "debian", "meta": "linux-headers-amd64", "requested": None}
    ol8 = kernel_update.fact_args(OL8_OS, _kernel(OL8_OS), {"rhel8": "5.15.0-310.1.el8uek.x86_64"})
    assert ol8 == {"family": "rhel", "package": "kernel-uek", "devel": (
        "kernel-uek-devel-{}", "kernel-headers"), "requested": "5.15.0-310.1.el8uek.x86_64"}
    assert kernel_update.fact_args({"distro_tag": None}, {}, {}) is None


def test_newer_kernel_with_headers_is_planned_with_a_dkms_build():
    plan = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), DRIVER, _candidate(
        "6.1.0-58-amd64", **{"linux-image-6.1.0-58-amd64": "available",
                             "linux-headers-6.1.0-58-amd64": "available"}), {})
    assert plan["action"] == "update" and not plan["problems"] and plan["module"] == "nvidia"
    assert plan["packages"] == ["linux-image-6.1.0-58-amd64", "linux-headers-6.1.0-58-amd64"]
    assert (plan["headers"], plan["build"]) == ("available", "needed")
    line = kernel_update.describe(plan)
    assert "DKMS build needed" in line and "then boot 6.1.0-58-amd64 (now 6.1.0-56-amd64)" in line


def test_a_module_dkms_already_built_needs_no_build_and_the_unsigned_image_is_taken():
    dkms = [{"module": "nvidia", "version": "570.172.08", "kernel": "6.1.0-58-amd64",
             "status": "installed"}]
    plan = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS, dkms), DRIVER, _candidate(
        "6.1.0-58-amd64", **{"linux-image-6.1.0-58-amd64": "missing",
                             "linux-image-6.1.0-58-amd64-unsigned": "available",
                             "linux-headers-6.1.0-58-amd64": "installed"}), {})
    assert plan["packages"][0] == "linux-image-6.1.0-58-amd64-unsigned"
    assert (plan["headers"], plan["build"], plan["problems"]) == ("installed", "installed", [])


def test_missing_headers_refuse_the_run_naming_the_package():
    plan = kernel_update.assess("ol8-01", OL8_OS, _kernel(OL8_OS), DRIVER, _candidate(
        "5.15.0-310.184.5.el8uek.x86_64",
        **{"kernel-uek-5.15.0-310.184.5.el8uek.x86_64": "available",
           "kernel-uek-devel-5.15.0-310.184.5.el8uek.x86_64": "missing",
           "kernel-headers": "installed"}), {})
    assert plan["headers"] == "missing"
    assert plan["problems"] == [
        "kernel 5.15.0-310.184.5.el8uek.x86_64 cannot be installed with its headers: "
        "kernel-uek-devel-5.15.0-310.184.5.el8uek.x86_64 not in this host's repositories; "
        "add the repository that carries them or name another kernel (--kernel)"]
    assert kernel_update.refusal([plan]).startswith(
        "kernel update refused, nothing was changed on any host:\n  ol8-01: kernel 5.15.0-310")


def test_running_the_newest_is_nothing_to_do_and_an_older_repo_kernel_too():
    same = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), DRIVER,
                                _candidate("6.1.0-56-amd64"), {})
    older = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), DRIVER,
                                 _candidate("6.1.0-55-amd64"), {})
    assert same["action"] == older["action"] == "none"
    assert older["note"] == "runs 6.1.0-56-amd64, newer than the repositories' 6.1.0-55-amd64"
    # an exact older kernel the operator asked for is an update, not "nothing to do"
    asked = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), DRIVER, _candidate(
        "6.1.0-55-amd64", **{"linux-image-6.1.0-55-amd64": "available",
                             "linux-headers-6.1.0-55-amd64": "available"}),
        {"debian12": "6.1.0-55-amd64"})
    assert asked["action"] == "update" and asked["requested"]


def test_no_driver_no_candidate_and_a_known_bad_pair_are_refused():
    none = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), DRIVER, _candidate(None), {})
    assert "offer no kernel of the running flavour (generic)" in none["problems"][0]
    bare = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS), {}, _candidate(
        "6.1.0-58-amd64", **{"linux-image-6.1.0-58-amd64": "available",
                             "linux-headers-6.1.0-58-amd64": "available"}), {})
    assert bare["problems"][0].startswith("no NVIDIA driver is installed")
    no_dkms = kernel_update.assess("gpu-01", DEB_OS, _kernel(DEB_OS, running_module=False),
                                   DRIVER, _candidate("6.1.0-58-amd64", **{
                                       "linux-image-6.1.0-58-amd64": "available",
                                       "linux-headers-6.1.0-58-amd64": "available"}), {})
    assert no_dkms["problems"] == ["DKMS does not build the NVIDIA module 570.172.08 on this "
                                   "host (no dkms entry): gpuhost cannot build it for a new kernel"]
    u26 = {"distro_tag": "ubuntu2604", "family": "debian", "kernel_release": "7.0.0-14-generic"}
    own = [{"module": "nvidia", "version": "580.126.18", "kernel": "7.0.0-14-generic",
            "status": "installed"}]
    bad = kernel_update.assess("u26-01", u26, _kernel(u26, own, running_module=False),
                               {"loaded_version": "580.126.18"},
                               _candidate("7.0.0-15-generic", **{
                                   "linux-image-7.0.0-15-generic": "available",
                                   "linux-headers-7.0.0-15-generic": "available"}), {})
    assert len(bad["problems"]) == 1
    assert bad["problems"][0].startswith("kernel 7.0.0-15-generic would not get a driver module: "
                                         "driver 580.126.18 does not build on kernel 7.0.0-15")


def test_the_fact_commands_parse_in_sh_and_quote_the_requested_release():
    for command in (apt_command("linux-headers-amd64", None),
                    apt_command("linux-headers-amd64", "6.1.0-58-amd64"),
                    dnf_command("kernel-uek", None, ["kernel-uek-devel-{}", "kernel-headers"]),
                    dnf_command("kernel", "5.14.0-611.el9_7.x86_64",
                                ["kernel-devel-matched-{}", "kernel-headers"])):
        assert subprocess.run(["sh", "-n", "-c", command], check=False).returncode == 0
    assert "t=6.1.0-58-amd64;" in apt_command("m", "6.1.0-58-amd64")
    assert shlex.quote("a b") in apt_command("m", "a b")
    assert '"kernel-uek-devel-$t"' in dnf_command("kernel-uek", None, ["kernel-uek-devel-{}"])
    assert KernelCandidate().command("debian", meta="linux-headers-amd64").startswith(
        ": gpuhost-kernel-candidate;")


def test_the_fact_output_parses():
    assert parse(["target 6.1.0-58-amd64", "pkg linux-image-6.1.0-58-amd64 available",
                  "pkg linux-headers-6.1.0-58-amd64 missing", "boot_image 6.1.0-58-amd64",
                  "noise"]) == {
        "target": "6.1.0-58-amd64", "boot_image": True,
        "packages": {"linux-image-6.1.0-58-amd64": "available",
                     "linux-headers-6.1.0-58-amd64": "missing"}}
    assert parse(["target "])["target"] is None


class FakePyinfra:
    """Writes the plan/refused events of deploys/kernel_update.py for a --dry pre-flight."""

    def __init__(self, events):
        self.events, self.runs = events, []

    def read_inventory(self, pyinfra, inventory, data=()):
        return [{"name": name, "groups": [], "data": {}} for name in self.events]

    def run_pyinfra(self, argv, out=None, capture_json=False):
        self.runs.append(argv)
        values = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--data")
        with open(values["gpuhost_upgrade_record"], "a") as handle:
            for name, event in self.events.items():
                handle.write(json.dumps({"run": values["gpuhost_upgrade_run"], "time": 1.0,
                                         "host": name, **event}) + "\n")
        refused = any(e["event"] == "refused" for e in self.events.values())
        return (1 if refused else 0), {"results": {"failed_hosts": []}}


def _dry(monkeypatch, tmp_path, fake, *args):
    monkeypatch.setattr(cli_upgrade, "read_inventory", fake.read_inventory)
    monkeypatch.setattr(cli_kernel, "run_pyinfra", fake.run_pyinfra)
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = []\n")
    return cli.main(["kernel-update", str(inventory), "--dry", "--report",
                     str(tmp_path / "r.json"), *args])


def test_dry_prints_the_plan_per_host_and_changes_nothing(monkeypatch, tmp_path, capsys):
    fake = FakePyinfra({
        "gpu-01": {"event": "plan", "action": "update", "from": "6.1.0-56-amd64",
                   "to": "6.1.0-58-amd64", "headers": "available", "build": "needed",
                   "detail": "install linux-image-6.1.0-58-amd64, ..."},
        "ol8-01": {"event": "plan", "action": "none", "from": "5.15.0-307.178.5.el8uek.x86_64",
                   "to": "5.15.0-307.178.5.el8uek.x86_64", "headers": None, "build": None,
                   "detail": "nothing to do (runs 5.15.0-307.178.5.el8uek.x86_64)"}})
    code = _dry(monkeypatch, tmp_path, fake, "--kernel", "debian12=6.1.0-58-amd64")
    out = capsys.readouterr().out
    assert code == 0 and len(fake.runs) == 1 and "--dry" in fake.runs[0]
    assert "gpuhost_kernel_targets=debian12=6.1.0-58-amd64" in fake.runs[0]
    assert any(a.endswith("deploys/kernel_update.py") for a in fake.runs[0])
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith(("gpu-01", "ol8-01"))}
    assert rows["gpu-01"][1:6] == ["6.1.0-56-amd64", "6.1.0-58-amd64", "available", "to", "build"]
    assert "nothing to do" in " ".join(rows["ol8-01"])
    assert "--dry: nothing was changed; 1 host(s) would get a new kernel" in out


def test_dry_refused_exit_2_and_a_bad_kernel_option_before_pyinfra(monkeypatch, tmp_path,
                                                                   capsys):
    fake = FakePyinfra({"gpu-01": {"event": "refused", "from": "6.1.0-56-amd64",
                                   "to": "6.1.0-58-amd64", "reason": "headers missing"}})
    assert _dry(monkeypatch, tmp_path, fake) == 2
    assert "headers missing" in capsys.readouterr().out
    fake = FakePyinfra({"gpu-01": {}})
    assert _dry(monkeypatch, tmp_path, fake, "--kernel", "debian12") == 2
    assert fake.runs == [] and "want DISTRO=RELEASE" in capsys.readouterr().err


# --- the operations' commands (roles/kernel_update_ops.py), rendered without a host ----------


class _Host:
    def __init__(self, fact):
        self.fact, self.noops = fact, []

    def get_fact(self, *args, **kwargs):
        return self.fact

    def noop(self, text):
        self.noops.append(text)


def _commands(monkeypatch, op, fact=None, **kwargs):
    from gpuhost.roles import kernel_update_ops as ops

    fake = _Host(fact)
    monkeypatch.setattr(ops, "host", fake)
    monkeypatch.setattr(ops, "executing", lambda: False)
    return [c.get_raw_value() for c in getattr(ops, op)._inner(**kwargs)], fake.noops


def test_install_holds_updatedefault_and_puts_the_running_kernel_back(monkeypatch):
    running, new = "4.18.0-553.el8_10.x86_64", "4.18.0-553.40.1.el8_10.x86_64"
    pkgs = [f"kernel-{new}", f"kernel-devel-{new}", "kernel-headers"]
    commands, _ = _commands(monkeypatch, "install_kernel", {"packages": {
        pkgs[0]: "available", pkgs[1]: "available", pkgs[2]: "installed"}},
        family="rhel", packages=pkgs, running=running, fact_args={})
    (command,) = commands
    assert subprocess.run(["sh", "-n", "-c", command], check=False).returncode == 0
    hold = command.index("UPDATEDEFAULT=no")
    install = command.index("dnf install -y --setopt=install_weak_deps=False")
    back = command.index(f"grubby --set-default /boot/vmlinuz-{running}")
    assert hold < install < back and command.endswith("exit $rc")
    done, noops = _commands(monkeypatch, "install_kernel", {"packages": dict.fromkeys(
        pkgs, "installed")}, family="rhel", packages=pkgs, running=running, fact_args={})
    assert done == [] and noops


def test_a_failed_build_prints_make_log_errors_first_and_fails(monkeypatch):
    commands, _ = _commands(monkeypatch, "build_module", module="nvidia", version="580.95.05",
                            release="4.18.0-553.44.1.el8_10.x86_64")
    (command,) = commands
    assert subprocess.run(["sh", "-n", "-c", command], check=False).returncode == 0
    assert command.index("/var/lib/dkms/nvidia/580.95.05/build/make.log") < \
        command.index('tail -n 4 "$out"') < command.index("gpuhost: DKMS could not build")
    assert "is not the boot default" in command and command.rstrip().endswith("fi")
    assert "> /var/lib/gpuhost/kernel-held-back" in command  # the audit's note


def test_remove_failed_removes_the_new_kernel_but_not_kernel_headers(monkeypatch):
    new = "4.18.0-553.44.1.el8_10.x86_64"
    commands, _ = _commands(monkeypatch, "build_module", module="nvidia", version="580.95.05",
                            release=new, remove=[f"kernel-{new}", f"kernel-devel-{new}",
                                                 "kernel-headers"])
    (command,) = commands
    assert subprocess.run(["sh", "-n", "-c", command], check=False).returncode == 0
    removal = f"dnf remove -y kernel-{new} kernel-devel-{new} >/dev/null 2>&1;"
    assert removal in command and "kernel-headers" not in command
    assert command.index(removal) < command.index("gpuhost: DKMS could not build")
    assert f"kernel {new} was removed again" in command
    assert "> /var/lib/gpuhost/kernel-held-back" not in command  # no note of a removed kernel


def test_remove_failed_reaches_the_deploy_as_data(monkeypatch, tmp_path, capsys):
    fake = FakePyinfra({"gpu-01": {"event": "plan", "action": "none", "from": "a", "to": "a"}})
    assert _dry(monkeypatch, tmp_path, fake, "--remove-failed") == 0
    assert "gpuhost_kernel_remove_failed=true" in fake.runs[0]


# --- the audit's note of a held-back kernel -------------------------------------------------


def test_the_held_back_note_parses_and_becomes_a_warning_naming_kernel_driver_and_reason():
    from gpuhost.facts.assemble_kernel import held_back
    from gpuhost.health.host import next_boot_findings

    note = held_back("kernel 4.18.0-553.44.1.el8_10.x86_64\ndriver 580.95.05\nreason "
                     "nv-caps.c: error: implicit declaration of function 'sys_close'\n")
    assert note == {"kernel": "4.18.0-553.44.1.el8_10.x86_64", "driver": "580.95.05",
                    "reason": "nv-caps.c: error: implicit declaration of function 'sys_close'"}
    assert held_back("") is None and held_back("driver 580.95.05\n") is None
    running = "4.18.0-553.el8_10.x86_64"
    state = {"driver": {"installed_version": "580.95.05"}, "kernel": {
        "dkms": [{"module": "nvidia", "version": "580.95.05", "kernel": running,
                  "status": "installed"}], "held_back": note,
        "next_boot": {"kernel_release": running, "differs": False,
                      "nvidia_module": ["580.95.05"]}}}
    (finding,) = next_boot_findings(state)
    assert (finding["id"], finding["severity"]) == ("kernel-held-back", "warning")
    assert "kernel 4.18.0-553.44.1.el8_10.x86_64 is installed and held back" in finding["message"]
    assert "'sys_close'" in finding["message"]
    state["kernel"]["held_back"] = None
    assert next_boot_findings(state) == []


# --- the boot default on Debian/Ubuntu: GRUB's saved entry (roles/kernel_boot_default.py) --------

_UUID = "0e4d2a6c-5b7e-4a8f-9c1d-3f2e1a0b9c8d"


def _grub_cfg(*releases):
    """grub-mkconfig's 10_linux layout: the newest kernel's simple entry, then the submenu."""
    def entry(rel, title, ident, indent=""):
        return (f"{indent}menuentry '{title}' --class debian $menuentry_id_option '{ident}' {{\n"
                f"{indent}\tlinux\t/boot/vmlinuz-{rel} root=UUID={_UUID} ro  quiet\n{indent}}}\n")
    text = entry(releases[0], "Debian GNU/Linux", f"gnulinux-simple-{_UUID}")
    text += (f"submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option "
             f"'gnulinux-advanced-{_UUID}' {{\n")
    for rel in releases:
        text += entry(rel, f"Debian GNU/Linux, with Linux {rel}",
                      f"gnulinux-{rel}-advanced-{_UUID}", "\t")
        text += entry(rel, f"Debian GNU/Linux, with Linux {rel} (recovery mode)",
                      f"gnulinux-{rel}-recovery-{_UUID}", "\t")
    return text + "}\n"


def _grub_host(tmp_path, default="0", saved=None):
    """A directory standing in for / with GRUB's files and grub-set-default / grub-editenv /
    update-grub recording what they are asked (the commands' paths rewritten into it)."""
    (tmp_path / "grub.cfg").write_text(_grub_cfg("6.1.0-58-amd64", "6.1.0-57-amd64"))
    (tmp_path / "default").write_text(f"GRUB_DEFAULT={default}\nGRUB_TIMEOUT=5\n")
    (tmp_path / "grubenv").write_text(f"saved_entry={saved}\n" if saved else "")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, body in {
            "grub-set-default": f'echo "saved_entry=$1" > {tmp_path}/grubenv; echo set >> {tmp_path}/log',
            "grub-editenv": f"cat {tmp_path}/grubenv",
            "update-grub": f"echo update-grub >> {tmp_path}/log"}.items():
        (bin_dir / tool).write_text("#!/bin/sh\n" + body + "\n")
        (bin_dir / tool).chmod(0o755)
    return tmp_path


def _run_on(root, command):
    from gpuhost.roles import kernel_boot_default as boot

    text = (command.replace(boot.GRUB_CFG, str(root / "grub.cfg"))
            .replace(boot.GRUB_DEFAULTS, str(root / "default"))
            .replace(boot.GRUBENV, str(root / "grubenv")))
    return subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=False,
                          env={"PATH": f"{root}/bin:/usr/bin:/bin"})


def test_apt_keeps_the_running_kernel_grubs_saved_default_before_the_package_runs(
        monkeypatch, tmp_path):
    running, new = "6.1.0-57-amd64", "6.1.0-58-amd64"
    pkgs = [f"linux-image-{new}", f"linux-headers-{new}"]
    commands, _ = _commands(monkeypatch, "install_kernel", {"packages": dict.fromkeys(
        pkgs, "available")}, family="debian", packages=pkgs, running=running, fact_args={})
    (command,) = commands
    assert subprocess.run(["sh", "-n", "-c", command], check=False).returncode == 0
    first_keep = command.index("grub-set-default")
    install = command.index("apt-get install -y --no-install-recommends "
                            f"linux-image-{new} linux-headers-{new}")
    assert first_keep < install < command.rindex("grub-set-default") and \
        command.endswith("exit $rc")
    # the keep step on a host with Debian's GRUB_DEFAULT=0 (newest first): the running
    # kernel's own entry is saved, then GRUB_DEFAULT=saved, then grub.cfg regenerated
    root = _grub_host(tmp_path)
    (keep,) = _commands(monkeypatch, "keep_default", family="debian", running=running)[0]
    done = _run_on(root, keep)
    assert done.returncode == 0, done.stderr
    assert (root / "grubenv").read_text() == \
        f"saved_entry=gnulinux-advanced-{_UUID}>gnulinux-{running}-advanced-{_UUID}\n"
    assert "GRUB_DEFAULT=saved\n" in (root / "default").read_text()
    assert (root / "log").read_text() == "set\nupdate-grub\n"
    # a second time: nothing to do (no grub-set-default, no update-grub)
    assert _run_on(root, keep).returncode == 0 and (root / "log").read_text() == "set\nupdate-grub\n"


def test_apt_make_default_names_the_new_kernels_entry_and_fails_without_one(monkeypatch,
                                                                             tmp_path):
    from gpuhost.roles import kernel_boot_default as boot

    new = "6.1.0-58-amd64"
    root = _grub_host(tmp_path, default="saved",
                      saved=f"gnulinux-advanced-{_UUID}>gnulinux-6.1.0-57-amd64-advanced-{_UUID}")
    (make,) = _commands(monkeypatch, "make_default", release=new, family="debian")[0]
    assert _run_on(root, boot.default_is("debian", new).get_raw_value()).returncode == 1
    assert _run_on(root, make).returncode == 0
    assert f">gnulinux-{new}-advanced-" in (root / "grubenv").read_text()
    assert _run_on(root, boot.default_is("debian", new).get_raw_value()).returncode == 0
    (absent,) = _commands(monkeypatch, "make_default", release="6.1.0-99-amd64",
                          family="debian")[0]
    failed = _run_on(root, absent)
    assert failed.returncode != 0 and "no entry for kernel 6.1.0-99-amd64" in failed.stderr
    assert f">gnulinux-{new}-advanced-" in (root / "grubenv").read_text()  # unchanged


def test_an_apt_host_without_grub_is_refused_before_any_host_is_touched():
    kernel = _kernel(DEB_OS)
    kernel["next_boot"]["source"] = None
    plan = kernel_update.assess("gpu-01", DEB_OS, kernel, DRIVER, _candidate(
        "6.1.0-58-amd64", **{"linux-image-6.1.0-58-amd64": "available",
                             "linux-headers-6.1.0-58-amd64": "available"}), {})
    assert plan["action"] == "update"
    assert plan["problems"] == [
        "no GRUB menu entry for the running kernel in /boot/grub/grub.cfg: gpuhost moves the "
        "boot default with grub-set-default on Debian and Ubuntu; run update-grub (or boot "
        "with GRUB) first"]
