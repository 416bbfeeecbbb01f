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
from pyinfra.operations import server

from facts.mig import MigState
from facts.nvidia import NvidiaGpus
from gpuhost import policy
from roles.common import fail_command, host_settings, host_state


@operation()
def mode(wanted: str):
    """
    Set the MIG mode of every MIG-capable GPU.

    + wanted: ``enabled`` or ``disabled``
    """
    state = host.get_fact(MigState)
    flag = "1" if wanted == "enabled" else "0"
    changed = False
    for gpu in state["gpus"]:
        if not gpu["mig_capable"]:
            continue
        if gpu["mode_current"] == wanted and gpu["mode_pending"] in (wanted, None):
            continue
        if gpu["mode_pending"] == wanted:
            continue  # already asked for; waits for a reset or reboot
        busy = _processes(gpu["index"])
        if busy:
            yield fail_command(
                f"GPU {gpu['index']} runs {len(busy)} process(es) "
                f"({', '.join(str(p.get('pid')) for p in busy[:5])}): stop them before changing "
                "its MIG mode"
            )
            return
        yield StringCommand("nvidia-smi -i", QuoteString(str(gpu["index"])), "-mig", flag)
        changed = True
    if not changed:
        host.noop(f"MIG mode is {wanted} (or pending {wanted}) on every MIG-capable GPU")


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
    if wanted_layout and wanted_mode != "disabled":
        layout(name=f"MIG layout {', '.join(str(p) for p in wanted_layout)}",
               profiles=list(wanted_layout))
