"""MIG mode and layout, declared in the inventory, applied only where they differ.

``mig_mode: enabled|disabled`` (null: leave as is) and ``mig_layout: [profiles]`` (null:
leave as is) apply to every MIG-capable GPU of the host. Like NVIDIA's mig-parted, the
desired state is validated before it is applied (``gpuhost.mig.tables.mig_layout_valid``) and
compared with the actual state (``gpuhost.facts.mig.MigState``) at execute time: a converged host
gets no command. On Ampere a mode change stays *pending* until a GPU reset or a reboot;
gpuhost reboots for it only when ``reboot_policy`` is ``when_needed``. GPU instances never
survive a reboot: ``gpuhost-mig-layout.service`` re-creates them at boot, before the GPU
clients start.

``mig_config_file`` + ``mig_config`` (the other form, never both on one host): a named
configuration in NVIDIA mig-parted's file format, a mode and a layout per GPU
(``gpuhost.mig.config``, docs/mig.md). After any change the CDI spec is refreshed.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.operations import files, server, systemd

from gpuhost.facts.mig import MigState
from gpuhost.facts.nvidia import NvidiaGpus
from gpuhost.facts.pyinfra_api import any_changed
from gpuhost.mig import driver as mig_driver, tables as mig_tables
from gpuhost.roles.common import GpuhostError, fail_command, host_settings, host_state
from gpuhost.roles.files import config_file

BOOT_SCRIPT = "/usr/local/sbin/gpuhost-mig-layout"
BOOT_UNIT = "gpuhost-mig-layout.service"
# NVIDIA mig-parted's nvidia-mig-manager.service runs after nvidia-persistenced and Fabric
# Manager; gpuhost's unit also runs before the GPU clients start (Docker, containerd, DCGM,
# kubelet), so they see the MIG devices of the inventory's layout.
BOOT_UNIT_TEXT = f"""[Unit]
Description=gpuhost: re-create the inventory's MIG layout (GPU instances do not survive a reboot)
After=systemd-modules-load.service nvidia-persistenced.service nvidia-fabricmanager.service
Before=docker.service containerd.service nvidia-dcgm.service dcgm.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={BOOT_SCRIPT}

[Install]
WantedBy=multi-user.target
"""


# After MIG devices appear or go, the CDI spec lists stale devices: refresh it as NVIDIA's
# mig-parted systemd deployment does in its apply-exit hook (deployments/systemd/hooks.sh
# `refresh-cdi`: restart nvidia-cdi-refresh.service when the unit exists, toolkit 1.18+),
# else regenerate a spec that is already there (`nvidia-ctk cdi generate`); nothing when
# the host uses no CDI spec.
CDI_SPEC = "/var/run/cdi/nvidia.yaml"
CDI_REFRESH = (
    "if systemctl list-unit-files nvidia-cdi-refresh.service --quiet >/dev/null 2>&1; then "
    "systemctl restart nvidia-cdi-refresh.service; "
    f"elif [ -e {CDI_SPEC} ] && command -v nvidia-ctk >/dev/null 2>&1; then "
    f"nvidia-ctk cdi generate --output={CDI_SPEC} >/dev/null; fi"
)
# At boot the unit must not wait for nvidia-cdi-refresh.service: toolkit v1.19.0 orders
# that unit After=multi-user.target (deployments/systemd/nvidia-cdi-refresh.service; not
# in v1.18.2 or v1.19.1), which waits for this unit, so a blocking `systemctl restart`
# would hang the boot there. The boot script runs the same generator itself, before
# Docker starts, where the toolkit's unit or an existing spec shows the host uses CDI.
BOOT_CDI_REFRESH = (
    "if command -v nvidia-ctk >/dev/null 2>&1 && { [ -e " + CDI_SPEC + " ] || "
    "systemctl list-unit-files nvidia-cdi-refresh.service --quiet >/dev/null 2>&1; }; then "
    f"nvidia-ctk cdi generate --output={CDI_SPEC} >/dev/null; fi"
)


def boot_script(layouts: dict) -> str:
    """The boot-time script. ``layouts`` maps a GPU index to its profile names, or ``"*"``
    to the names for every MIG-capable GPU (``mig_layout``). On every such GPU whose MIG
    mode is off it enables MIG (Hopper and newer lose the mode with the driver), then on
    every one without a GPU instance it creates the layout (each with its default compute
    instance); a GPU that already has instances is left alone (someone made them after the
    boot). After creating instances it refreshes the CDI spec (``BOOT_CDI_REFRESH``)."""
    import shlex

    cases = "".join(f"        {index}) echo {shlex.quote(','.join(creation_order(names)))} ;;\n"
                    for index, names in sorted(layouts.items(), key=lambda i: str(i[0]))
                    if index != "*")
    default = ",".join(creation_order(layouts["*"])) if "*" in layouts else None
    ours = "all" if default is not None else " ".join(str(i) for i in sorted(
        i for i in layouts if i != "*"))
    fallback = shlex.quote(default) if default is not None else "''"
    return f"""#!/bin/sh
# gpuhost (roles/mig.py): re-create the MIG layout of the inventory at boot
set -u
GPUS={shlex.quote(ours)}
ours() {{ [ "$GPUS" = all ] || case " $GPUS " in *" $1 "*) ;; *) return 1 ;; esac; }}
layout() {{
    case "$1" in
{cases}        *) echo {fallback} ;;
    esac
}}
rc=0
made=0
# Hopper and newer lose the MIG mode with the driver (NVIDIA MIG user guide): enable it
# again on every MIG-capable GPU where it is off (Ampere keeps it in the InfoROM)
for i in $(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader \
           | awk -F', *' '$2 == "Disabled" {{print $1}}'); do
    ours "$i" || continue
    nvidia-smi -i "$i" -mig 1 >/dev/null || rc=1
done
for i in $(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader \
           | awk -F', *' '$2 == "Enabled" {{print $1}}'); do
    ours "$i" || continue
    want=$(layout "$i")
    [ -n "$want" ] || continue
    if nvidia-smi mig -i "$i" -lgi 2>/dev/null | grep -q 'MIG '; then
        continue
    fi
    if nvidia-smi mig -i "$i" -cgi "$want" -C; then made=1; else rc=1; fi
done
if [ "$made" = 1 ]; then
    {BOOT_CDI_REFRESH} || rc=1
fi
exit $rc
"""


@operation()
def mode(wanted: str, indexes: list[int] | None = None):
    """
    Set the MIG mode of every MIG-capable GPU (or of the GPUs ``indexes``).

    + wanted: ``enabled`` or ``disabled``
    + indexes: GPU indexes (None: every MIG-capable GPU)
    """
    state = host.get_fact(MigState)
    flag = "1" if wanted == "enabled" else "0"
    changed = False
    commands: list[StringCommand] = []
    for gpu in state["gpus"]:
        if not gpu["mig_capable"] or (indexes is not None and gpu["index"] not in indexes):
            continue
        if gpu["mode_current"] == wanted and gpu["mode_pending"] in (wanted, None):
            continue
        # pending (asked for by an earlier run while a client held the GPU): asked again
        # with the holders stopped, which lets the driver reset the GPU now
        busy = _processes(gpu["index"])
        if busy:
            yield fail_command(
                f"GPU {gpu['index']} runs {len(busy)} process(es) "
                f"({', '.join(str(p.get('pid')) for p in busy[:5])}): stop them before changing "
                "its MIG mode"
            )
            return
        commands.append(StringCommand("nvidia-smi -i", QuoteString(str(gpu["index"])), "-mig", flag))
        changed = True
    if changed:
        yield around_mode_change(commands)
    if not changed:
        where = "every MIG-capable GPU" if indexes is None else \
            f"GPU {', '.join(str(i) for i in indexes)}"
        host.noop(f"MIG mode is {wanted} (or pending {wanted}) on {where}")


# Clients that hold the GPU and keep an Ampere mode change pending ("In use by another
# client"): NVIDIA's MIG user guide names DCGM and nvsm; nvidia-persistenced holds it too
# (NVIDIA/gpu-operator#118). NVIDIA's MIG user guide, "Getting Started with MIG".
GPU_HOLDERS = ("nvidia-persistenced.service", "nvidia-dcgm.service", "dcgm.service",
               "nvsm.service")


def around_mode_change(commands: list[StringCommand]) -> StringCommand:
    """One shell command: stop the running GPU_HOLDERS, run ``commands``, start again the
    ones that were running (also when a command failed), exit with the first failure."""
    bits: list = ["active=; for s in", *GPU_HOLDERS,
                  '; do if systemctl is-active -q "$s"; then active="$active $s"; fi; done;',
                  '[ -z "$active" ] || systemctl stop $active; rc=0;']
    for command in commands:
        bits += [command, "|| rc=$?;"]
    bits += ['[ -z "$active" ] || systemctl start $active; exit $rc']
    return StringCommand(*bits)


def _processes(index: int) -> list[dict]:
    """Compute processes on one GPU, read when a change is about to be made."""
    for gpu in host.get_fact(NvidiaGpus):
        if gpu["index"] == index:
            return gpu["processes"]
    return []


@operation()
def layout(profiles: list[str] | None = None, per_gpu: dict[int, list[str]] | None = None):
    """
    Make every MIG-enabled GPU carry exactly these GPU instances (each with its default
    compute instance), recreating the layout only where it differs.

    + profiles: GPU instance profiles for every MIG-enabled GPU: names (``["3g.20gb",
      "3g.20gb"]``), "MIG 3g.20gb" or profile ids (``[9, 9]``), as the settings accept them
    + per_gpu: instead, GPU index -> its profiles (a named ``mig_config``); other GPUs are
      left alone, and ``[]`` means no instances
    """
    state = host.get_fact(MigState)
    changed = False
    for gpu in state["gpus"]:
        if gpu["mode_current"] != "enabled":
            continue
        if per_gpu is not None:
            if gpu["index"] not in per_gpu:
                continue
            wanted_profiles = list(per_gpu[gpu["index"]])
        else:
            wanted_profiles = list(profiles or [])
        # ids (19), "MIG 1g.5gb" and names all become this GPU's profile names before the
        # comparison: a layout given as ids must not be re-created on every run
        wanted = creation_order(layout_names(gpu, wanted_profiles))
        current = sorted(instance["profile"] for instance in gpu["gpu_instances"])
        if current == sorted(wanted):
            continue
        index = QuoteString(str(gpu["index"]))
        if gpu["compute_instances"]:
            yield StringCommand("nvidia-smi mig -i", index, "-dci")
        if gpu["gpu_instances"]:
            yield StringCommand("nvidia-smi mig -i", index, "-dgi")
        if wanted:
            yield StringCommand("nvidia-smi mig -i", index, "-cgi",
                                QuoteString(",".join(wanted)), "-C")
        changed = True
    if not changed:
        if per_gpu is None:
            shown = ", ".join(str(p) for p in profiles or [])
            host.noop(f"every MIG-enabled GPU has the layout {shown}")
        else:
            shown = "; ".join(f"GPU {i}: {', '.join(p) or 'no instances'}"
                              for i, p in sorted(per_gpu.items()))
            host.noop(f"every GPU of the MIG configuration has its layout ({shown})")


def creation_order(names: list[str]) -> list[str]:
    """The order to pass to ``-cgi``: larger instances first. nvidia-smi creates them in the
    order given and places each where it fits then, so small ones first can take the
    memory slices a large one needs ("Insufficient Resources" for a layout that fits);
    NVIDIA's MIG user guide: "the profile ID 9 or 3g.20gb must be specified first in
    order". Names it cannot read (ids of an unknown table) keep their place at the end."""
    import re

    def size(name: str) -> tuple[int, int]:
        found = re.match(r"^(\d+)g\.(\d+)gb", name)
        return (-int(found.group(2)), -int(found.group(1))) if found else (0, 0)

    return sorted(names, key=size)


def layout_names(gpu: dict, profiles: list) -> list[str]:
    """The layout as the profile names this GPU lists (``gpuhost.mig.tables.mig_profile_names``
    with the GPU's model; an id unknown to the table is named from the GPU's own
    instances when one of them has it)."""
    names = mig_tables.mig_profile_names(gpu.get("name"), profiles)
    seen = {str(i.get("profile_id")): i["profile"] for i in gpu["gpu_instances"]
            if i.get("profile_id") is not None}
    return [seen.get(n, n) if n.isdigit() else n for n in names]


@deploy("MIG")
def configure() -> None:
    config = host_settings()
    if config.mig_config is not None:
        configure_named(config)
        return
    wanted_mode, wanted_layout = config.mig_mode, config.mig_layout
    if wanted_mode is None and wanted_layout is None:
        return
    state = host_state()
    capable = [gpu for gpu in state["gpus"] if gpu["mig_capable"]]
    if not capable:
        logger.warning(f"{host.name}: mig_mode/mig_layout set but no GPU here is MIG-capable")
        return
    if wanted_mode != "disabled":
        too_old = mig_driver.problems(((gpu["index"], gpu["model"]) for gpu in capable),
                                      config.nvidia_driver_version)
        if too_old:
            server.shell(name="gpuhost refuses MIG on a driver without it",
                         commands=[fail_command("; ".join(too_old))])
            return
    if wanted_layout:
        for model in sorted({gpu["model"] for gpu in capable if gpu["model"]}):
            problems = mig_tables.mig_layout_valid(model, list(wanted_layout))
            if problems:
                server.shell(name="gpuhost refuses this MIG layout",
                             commands=[fail_command(f"mig_layout on {model}: {'; '.join(problems)}")])
                return
    changes = []
    if wanted_mode:
        changes.append(mode(name=f"MIG mode {wanted_mode}", wanted=wanted_mode))
        _reboot_when_pending(config)
    if wanted_mode == "disabled":  # the boot-time unit would enable MIG again: remove it
        _remove_boot_unit("mig_mode: disabled")
    if wanted_layout and wanted_mode != "disabled":
        changes.append(layout(name=f"MIG layout {', '.join(str(p) for p in wanted_layout)}",
                              profiles=list(wanted_layout)))
        model = next((gpu["model"] for gpu in capable if gpu["model"]), None)
        _boot_unit({"*": mig_tables.mig_profile_names(model, list(wanted_layout))})
    _refresh_cdi(changes)


def configure_named(config) -> None:
    """``mig_config``: each GPU gets the layout of the last entry of the named configuration
    that matches it (``gpuhost.mig.config``). The file and the name were checked with the
    inventory; here every GPU of this host is checked against its entry while pyinfra
    prepares, so a layout that does not fit stops the run before any host is changed."""
    from gpuhost.mig import config as mig_config, plan as mig_plan

    state = host_state()
    entries = mig_config.select(config.mig_config_file, config.mig_config)
    wants = mig_plan.wanted(entries, state["gpus"])
    problems = mig_plan.host_problems(config.mig_config, wants, state["gpus"])
    problems += mig_driver.problems(
        ((i, w.model) for i, w in wants.items() if w.mode == "enabled"),
        config.nvidia_driver_version)
    if problems:
        raise GpuhostError(f"{host.name}: the MIG configuration does not fit this host, nothing "
                           "was changed on any host:\n  " + "\n  ".join(problems))
    if not wants:
        logger.warning(f"{host.name}: mig_config {config.mig_config}: no entry matches a "
                       "MIG-capable GPU of this host; nothing to do")
        return
    changes = []
    for wanted_mode in ("disabled", "enabled"):
        indexes = sorted(i for i, w in wants.items() if w.mode == wanted_mode)
        if indexes:
            changes.append(mode(
                name=f"MIG mode {wanted_mode} on GPU {', '.join(map(str, indexes))} "
                     f"(mig_config {config.mig_config})",
                wanted=wanted_mode, indexes=indexes))
    _reboot_when_pending(config)
    per_gpu = {i: list(w.profiles) for i, w in wants.items() if w.mode == "enabled"}
    if per_gpu:
        changes.append(layout(name=f"MIG layout of mig_config {config.mig_config}",
                              per_gpu=per_gpu))
        _boot_unit(per_gpu)
    else:
        _remove_boot_unit(f"mig_config {config.mig_config} enables MIG on no GPU")
    _refresh_cdi(changes)


def _reboot_when_pending(config) -> None:
    if config.reboot_policy == "when_needed":
        server.reboot(
            name="Reboot to apply the pending MIG mode (reboot_policy: when_needed)",
            reboot_timeout=config.reboot_timeout,
            _if=lambda: any(g["pending_change"] for g in host.get_fact(MigState)["gpus"]),
        )


def _remove_boot_unit(why: str) -> None:
    files.link(name=f"MIG layout: {BOOT_UNIT} not enabled ({why})",
               path=f"/etc/systemd/system/multi-user.target.wants/{BOOT_UNIT}",
               present=False)
    for path in (f"/etc/systemd/system/{BOOT_UNIT}", BOOT_SCRIPT):
        files.file(name=f"MIG layout: no {path} ({why})", path=path, present=False)


def _boot_unit(layouts: dict) -> None:
    script = config_file(name="MIG layout: boot-time script", dest=BOOT_SCRIPT,
                         content=boot_script(layouts), mode="755")
    unit = config_file(name=f"MIG layout: {BOOT_UNIT}", dest=f"/etc/systemd/system/{BOOT_UNIT}",
                       content=BOOT_UNIT_TEXT)
    systemd.daemon_reload(name="MIG layout: systemd reads the unit",
                          _if=any_changed(unit, script))
    systemd.service(name=f"MIG layout: {BOOT_UNIT} enabled for the next boot",
                    service=BOOT_UNIT, enabled=True)


def _refresh_cdi(changes: list) -> None:
    """The CDI spec after a MIG change (``CDI_REFRESH``, shown in the plan, run only when a
    MIG step changed something), as mig-parted's apply-exit hook does. The deploy's CDI step
    (``roles.cdi.configure``, after the toolkit) judges the spec again and regenerates it
    if it is still stale, or creates it in cdi mode."""
    if changes:
        server.shell(name="MIG changed: refresh the CDI spec (when the host has one)",
                     commands=[CDI_REFRESH], _if=any_changed(*changes))
