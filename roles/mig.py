"""MIG mode and layout, declared in the inventory, applied only where they differ.

``mig_mode: enabled|disabled`` (null: leave as is) and ``mig_layout: [profiles]`` (null:
leave as is) apply to every MIG-capable GPU of the host. Like NVIDIA's mig-parted, the
desired state is validated before it is applied (``gpuhost.policy.mig_layout_valid``) and
compared with the actual state (``facts.mig.MigState``) at execute time: a converged host
gets no command. On Ampere a mode change stays *pending* until a GPU reset or a reboot;
gpuhost reboots for it only when ``reboot_policy`` is ``when_needed``. GPU instances never
survive a reboot, so the layout is re-created by the next run.
"""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, deploy, operation
from pyinfra.operations import files, server, systemd
from pyinfra.operations.util import any_changed

from facts.mig import MigState
from facts.nvidia import NvidiaGpus
from gpuhost import policy
from roles.common import fail_command, host_settings, host_state
from roles.files import config_file

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


def boot_script(names: list[str]) -> str:
    """The boot-time script: on every GPU whose MIG mode is enabled and that has no GPU
    instance yet, create ``names`` (each with its default compute instance). A GPU that
    already has instances is left alone (someone made them after the boot)."""
    import shlex

    return f"""#!/bin/sh
# gpuhost (roles/mig.py): re-create the MIG layout of the inventory at boot
set -u
LAYOUT={shlex.quote(",".join(names))}
rc=0
# Hopper and newer lose the MIG mode with the driver (NVIDIA MIG user guide): enable it
# again on every MIG-capable GPU where it is off (Ampere keeps it in the InfoROM)
for i in $(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader \
           | awk -F', *' '$2 == "Disabled" {{print $1}}'); do
    nvidia-smi -i "$i" -mig 1 >/dev/null || rc=1
done
for i in $(nvidia-smi --query-gpu=index,mig.mode.current --format=csv,noheader \
           | awk -F', *' '$2 == "Enabled" {{print $1}}'); do
    if nvidia-smi mig -i "$i" -lgi 2>/dev/null | grep -q 'MIG '; then
        continue
    fi
    nvidia-smi mig -i "$i" -cgi "$LAYOUT" -C || rc=1
done
exit $rc
"""


@operation()
def mode(wanted: str):
    """
    Set the MIG mode of every MIG-capable GPU.

    + wanted: ``enabled`` or ``disabled``
    """
    state = host.get_fact(MigState)
    flag = "1" if wanted == "enabled" else "0"
    changed = False
    commands: list[StringCommand] = []
    for gpu in state["gpus"]:
        if not gpu["mig_capable"]:
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
        host.noop(f"MIG mode is {wanted} (or pending {wanted}) on every MIG-capable GPU")


# Clients that hold the GPU and keep an Ampere mode change pending ("In use by another
# client"): NVIDIA's MIG user guide names DCGM and nvsm; nvidia-persistenced holds it too
# (NVIDIA/gpu-operator#118). official-procedures.md section 5.
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
def layout(profiles: list[str]):
    """
    Make every MIG-enabled GPU carry exactly these GPU instances (each with its default
    compute instance), recreating the layout only where it differs.

    + profiles: GPU instance profiles: names (``["3g.20gb", "3g.20gb"]``), "MIG 3g.20gb"
      or profile ids (``[9, 9]``), as the settings accept them
    """
    state = host.get_fact(MigState)
    changed = False
    shown = ", ".join(str(p) for p in profiles)
    for gpu in state["gpus"]:
        if gpu["mode_current"] != "enabled":
            continue
        # ids (19), "MIG 1g.5gb" and names all become this GPU's profile names before the
        # comparison: a layout given as ids must not be re-created on every run
        wanted = layout_names(gpu, profiles)
        current = sorted(instance["profile"] for instance in gpu["gpu_instances"])
        if current == sorted(wanted):
            continue
        index = QuoteString(str(gpu["index"]))
        if gpu["compute_instances"]:
            yield StringCommand("nvidia-smi mig -i", index, "-dci")
        if gpu["gpu_instances"]:
            yield StringCommand("nvidia-smi mig -i", index, "-dgi")
        yield StringCommand("nvidia-smi mig -i", index, "-cgi", QuoteString(",".join(wanted)), "-C")
        changed = True
    if not changed:
        host.noop(f"every MIG-enabled GPU has the layout {shown}")


def layout_names(gpu: dict, profiles: list) -> list[str]:
    """The layout as the profile names this GPU lists (``gpuhost.policy.mig_profile_names``
    with the GPU's model; an id unknown to the table is named from the GPU's own
    instances when one of them has it)."""
    names = policy.mig_profile_names(gpu.get("name"), profiles)
    seen = {str(i.get("profile_id")): i["profile"] for i in gpu["gpu_instances"]
            if i.get("profile_id") is not None}
    return [seen.get(n, n) if n.isdigit() else n for n in names]


@deploy("MIG")
def configure() -> None:
    config = host_settings()
    wanted_mode, wanted_layout = config.mig_mode, config.mig_layout
    if wanted_mode is None and wanted_layout is None:
        return
    state = host_state()
    capable = [gpu for gpu in state["gpus"] if gpu["mig_capable"]]
    if not capable:
        logger.warning(f"{host.name}: mig_mode/mig_layout set but no GPU here is MIG-capable")
        return
    if wanted_layout:
        for model in sorted({gpu["model"] for gpu in capable if gpu["model"]}):
            problems = policy.mig_layout_valid(model, list(wanted_layout))
            if problems:
                server.shell(name="gpuhost refuses this MIG layout",
                             commands=[fail_command(f"mig_layout on {model}: {'; '.join(problems)}")])
                return
    if wanted_mode:
        mode(name=f"MIG mode {wanted_mode}", wanted=wanted_mode)
        if config.reboot_policy == "when_needed":
            server.reboot(
                name="Reboot to apply the pending MIG mode (reboot_policy: when_needed)",
                reboot_timeout=600,
                _if=lambda: any(g["pending_change"] for g in host.get_fact(MigState)["gpus"]),
            )
    if wanted_mode == "disabled":  # the boot-time unit would enable MIG again: remove it
        files.link(name=f"MIG layout: {BOOT_UNIT} not enabled (mig_mode: disabled)",
                   path=f"/etc/systemd/system/multi-user.target.wants/{BOOT_UNIT}",
                   present=False)
        for path in (f"/etc/systemd/system/{BOOT_UNIT}", BOOT_SCRIPT):
            files.file(name=f"MIG layout: no {path} (mig_mode: disabled)", path=path,
                       present=False)
    if wanted_layout and wanted_mode != "disabled":
        layout(name=f"MIG layout {', '.join(str(p) for p in wanted_layout)}",
               profiles=list(wanted_layout))
        model = next((gpu["model"] for gpu in capable if gpu["model"]), None)
        names = policy.mig_profile_names(model, list(wanted_layout))
        script = config_file(name="MIG layout: boot-time script", dest=BOOT_SCRIPT,
                             content=boot_script(names), mode="755")
        unit = config_file(name=f"MIG layout: {BOOT_UNIT}", dest=f"/etc/systemd/system/{BOOT_UNIT}",
                           content=BOOT_UNIT_TEXT)
        systemd.daemon_reload(name="MIG layout: systemd reads the unit",
                              _if=any_changed(unit, script))
        systemd.service(name=f"MIG layout: {BOOT_UNIT} enabled for the next boot",
                        service=BOOT_UNIT, enabled=True)
