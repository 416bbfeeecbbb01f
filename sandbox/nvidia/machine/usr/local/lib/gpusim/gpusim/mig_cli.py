"""`nvidia-smi mig ...`: list profiles/instances, create and destroy GIs and CIs.

Tables use the column layout of recent drivers (the 81-column -lgip seen from 570.169
and 580, the 59-column -lgi and the -lci with a Placement column). Messages are the
real ones ("Successfully created GPU instance ID  9 on GPU  0 using profile MIG 1g.5gb
(ID 19)", "Unable to destroy GPU instance ID  3 from GPU  0: In use by another client").
"""

from . import mig, models

LGIP_W, LGI_W, LCI_W = 81, 59, 70


def _cols(width, cells):
    """A bordered row: cells are (column, text, 'l' starts there | 'r' ends there)."""
    line = [" "] * width
    line[0] = line[-1] = "|"
    for col, text, align in cells:
        text = str(text)
        start = col if align == "l" else col - len(text) + 1
        line[start:start + len(text)] = list(text)
    return "".join(line)


def _rule(width, ch="-"):
    return "+" + ch * (width - 2) + "+"


def _head(width, lines):
    return [_rule(width)] + ["|" + text.ljust(width - 2) + "|" for text in lines] + [
        "|" + "=" * (width - 2) + "|"]


def list_profiles(machine, state, indexes):
    info = models.model(machine["gpu_model"])
    out = _head(LGIP_W, [
        " GPU instance profiles:",
        " GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC",
        "                                Free/Total   GiB              CE    JPEG  OFA"])
    for i in indexes:
        gis = state["gpus"][i]["gis"]
        for p in info["profiles"]:
            free = mig.remaining(info, gis, p)
            out.append(_cols(LGIP_W, [(4, i, "r"), (7, "MIG " + p["name"], "l"),
                                      (28, p["id"], "r"), (34, f"{free}/{p['max']}", "l"),
                                      (45, p["gib"], "l"), (56, "No", "l"), (63, p["sm"], "l"),
                                      (70, p["dec"], "r"), (76, p["enc"], "r")]))
            out.append(_cols(LGIP_W, [(64, p["ce"], "r"), (70, p["jpeg"], "r"),
                                      (76, p["ofa"], "r")]))
            out.append(_rule(LGIP_W))
    return "\n".join(out) + "\n"


def list_placements(machine, indexes):
    info = models.model(machine["gpu_model"])
    out = []
    for i in indexes:
        for p in info["profiles"]:
            word = "Placements" if len(p["placements"]) > 1 else "Placement "
            starts = ",".join(str(s) for s in p["placements"])
            out.append(f"GPU {i:>2} Profile ID {p['id']:>2} {word}: {{{starts}}}:"
                       f"{p['mem_slices']}")
    return "\n".join(out) + "\n"


def list_gpu_instances(machine, state, indexes, gi_filter):
    info = models.model(machine["gpu_model"])
    rows = []
    for i in indexes:
        for gi in mig.listing_order(state["gpus"][i]["gis"]):
            if gi_filter and gi["id"] not in gi_filter:
                continue
            prof = mig.profile(info, gi["profile_id"])
            rows += [_cols(LGI_W, [(4, i, "r"), (7, "MIG " + prof["name"], "l"),
                                   (30, prof["id"], "r"), (39, gi["id"], "r"),
                                   (50, f"{gi['start']}:{prof['mem_slices']}", "l")]),
                     _rule(LGI_W)]
    if not rows:
        return None
    return "\n".join(_head(LGI_W, [
        " GPU instances:",
        " GPU   Name               Profile  Instance   Placement",
        "                            ID       ID       Start:Size"]) + rows) + "\n"


def list_compute_instances(machine, state, indexes, gi_filter, ci_filter):
    info = models.model(machine["gpu_model"])
    rows = []
    for i in indexes:
        for gi in mig.listing_order(state["gpus"][i]["gis"]):
            if gi_filter and gi["id"] not in gi_filter:
                continue
            for ci in gi["cis"]:
                if ci_filter and ci["id"] not in ci_filter:
                    continue
                rows += [_cols(LCI_W, [(4, i, "r"), (11, gi["id"], "r"),
                                       (19, "MIG " + mig.ci_name(info, gi, ci), "l"),
                                       (40, ci["profile_id"], "r"), (50, ci["id"], "r"),
                                       (61, f"{ci['start']}:{mig.ci_slices(ci)}", "l")]),
                         _rule(LCI_W)]
    if not rows:
        return None
    return "\n".join(_head(LCI_W, [
        " Compute instances:",
        " GPU     GPU       Name             Profile   Instance   Placement",
        "       Instance                       ID        ID       Start:Size",
        "         ID"]) + rows) + "\n"


def create_gpu_instances(machine, state, indexes, tokens, with_ci):
    """-cgi [-C]: returns (output, rc); stops at the first failure like the real tool."""
    info = models.model(machine["gpu_model"])
    out = []
    for i in indexes:
        gpu = state["gpus"][i]
        for token in tokens:
            prof = models.profile_by_token(info, token)
            try:
                if prof is None:
                    raise mig.MigError(*mig.INVALID)
                gi = mig.create_gi(gpu, info, prof)
            except mig.MigError as err:
                out.append(f"Unable to create a GPU instance on GPU {i:>2} using profile "
                           f"{token}: {err.reason}")
                out.append(f"Failed to create GPU instances: {err.reason}")
                return "\n".join(out) + "\n", err.rc
            out.append(f"Successfully created GPU instance ID {gi['id']:>2} on GPU {i:>2} "
                       f"using profile MIG {prof['name']} (ID {prof['id']:>2})")
            if with_ci:
                ci = mig.create_ci(state, machine, i, gi)
                out.append(f"Successfully created compute instance ID {ci['id']:>2} on GPU "
                           f"{i:>2} GPU instance ID {gi['id']:>2} using profile MIG "
                           f"{mig.ci_name(info, gi, ci)} (ID {ci['profile_id']:>2})")
    return "\n".join(out) + "\n", 0


def create_compute_instances(machine, state, indexes, tokens, gi_filter):
    info = models.model(machine["gpu_model"])
    out = []
    for i in indexes:
        for gi in sorted(state["gpus"][i]["gis"], key=lambda g: g["id"]):
            if gi_filter and gi["id"] not in gi_filter:
                continue
            for token in tokens or [None]:
                try:
                    if token is not None and not token.strip().isdigit():
                        raise mig.MigError(*mig.INVALID)
                    ci = mig.create_ci(state, machine, i, gi,
                                       None if token is None else int(token))
                except mig.MigError as err:
                    shown = token if token is not None else mig.default_ci_profile(info, gi)[0]
                    out.append(f"Unable to create a compute instance on GPU {i:>2} GPU instance "
                               f"ID {gi['id']:>2} using profile {shown}: {err.reason}")
                    out.append(f"Failed to create compute instances: {err.reason}")
                    return "\n".join(out) + "\n", err.rc
                out.append(f"Successfully created compute instance ID {ci['id']:>2} on GPU "
                           f"{i:>2} GPU instance ID {gi['id']:>2} using profile MIG "
                           f"{mig.ci_name(info, gi, ci)} (ID {ci['profile_id']:>2})")
    if not out:
        return "Failed to create compute instances: Not Found\n", mig.NOT_FOUND[1]
    return "\n".join(out) + "\n", 0


def destroy_compute_instances(state, indexes, gi_filter, ci_filter):
    out = []
    for i in indexes:
        for gi in sorted(state["gpus"][i]["gis"], key=lambda g: g["id"]):
            if gi_filter and gi["id"] not in gi_filter:
                continue
            for ci in list(gi["cis"]):
                if ci_filter and ci["id"] not in ci_filter:
                    continue
                if mig.ci_busy(state, i, gi, ci):
                    out.append(f"Unable to destroy compute instance ID {ci['id']:>2} from GPU "
                               f"{i:>2} GPU instance ID {gi['id']:>2}: {mig.IN_USE[0]}")
                    out.append(f"Failed to destroy compute instances: {mig.IN_USE[0]}")
                    return "\n".join(out) + "\n", mig.IN_USE[1]
                gi["cis"].remove(ci)
                out.append(f"Successfully destroyed compute instance ID {ci['id']:>2} from GPU "
                           f"{i:>2} GPU instance ID {gi['id']:>2}")
    if not out:
        return "Failed to destroy compute instances: Not Found\n", mig.NOT_FOUND[1]
    return "\n".join(out) + "\n", 0


def destroy_gpu_instances(state, indexes, gi_filter):
    out = []
    for i in indexes:
        gpu = state["gpus"][i]
        for gi in sorted(gpu["gis"], key=lambda g: g["id"]):
            if gi_filter and gi["id"] not in gi_filter:
                continue
            if gi["cis"]:
                out.append(f"Unable to destroy GPU instance ID {gi['id']:>2} from GPU {i:>2}: "
                           f"{mig.IN_USE[0]}")
                out.append(f"Failed to destroy GPU instances: {mig.IN_USE[0]}")
                return "\n".join(out) + "\n", mig.IN_USE[1]
            gpu["gis"].remove(gi)
            out.append(f"Successfully destroyed GPU instance ID {gi['id']:>2} from GPU {i:>2}")
    if not out:
        return "Failed to destroy GPU instances: Not Found\n", mig.NOT_FOUND[1]
    return "\n".join(out) + "\n", 0
