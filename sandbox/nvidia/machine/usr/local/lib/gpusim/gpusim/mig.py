"""MIG geometry: GPU instances (GI) and compute instances (CI) on one GPU.

A GPU has memory placement units and compute slices (its model's "geometry": 8 and 7 on
A100/H100/B200, 12 and 4 on the RTX PRO 6000 Blackwell). A GI of profile P takes
P.mem_slices memory units at one of P.placements and P.compute compute slices; a
profile can be used at most P.max times. A CI takes c compute slices of its GI.
State per GPU: gpu["gis"] = [{"id", "profile_id", "start", "cis": [{"id", "profile_id",
"start", "uuid"}]}].
"""

from . import host, models

class MigError(Exception):
    """An NVML-level failure: `reason` as nvidia-smi words it ("Insufficient Resources")."""

    def __init__(self, reason, rc):
        super().__init__(reason)
        self.reason = reason
        self.rc = rc


INSUFFICIENT = ("Insufficient Resources", 23)   # NVML_ERROR_INSUFFICIENT_RESOURCES
IN_USE = ("In use by another client", 19)       # NVML_ERROR_IN_USE
NOT_FOUND = ("Not Found", 6)                    # NVML_ERROR_NOT_FOUND
INVALID = ("Invalid Argument", 2)               # NVML_ERROR_INVALID_ARGUMENT


def profile(info, profile_id):
    for prof in info["profiles"]:
        if prof["id"] == profile_id:
            return prof
    raise KeyError(profile_id)


def _used(info, gis):
    mem, compute = set(), 0
    for gi in gis:
        prof = profile(info, gi["profile_id"])
        mem.update(range(gi["start"], gi["start"] + prof["mem_slices"]))
        compute += prof["compute"]
    return mem, compute


def _fits(info, gis, prof, start):
    mem, compute = _used(info, gis)
    if compute + prof["compute"] > info["geometry"]["compute_slices"]:
        return False
    if sum(1 for gi in gis if gi["profile_id"] == prof["id"]) >= prof["max"]:
        return False
    return not mem.intersection(range(start, start + prof["mem_slices"]))


def _choose_start(info, gis, prof):
    order = info["geometry"]["preference"][prof["mem_slices"]]
    for start in order:
        if start in prof["placements"] and _fits(info, gis, prof, start):
            return start
    return None


def remaining(info, gis, prof):
    """How many more GIs of `prof` fit now (the Free column of -lgip)."""
    trial = [dict(gi) for gi in gis]
    count = 0
    while True:
        start = _choose_start(info, trial, prof)
        if start is None:
            return count
        trial.append({"id": -1, "profile_id": prof["id"], "start": start, "cis": []})
        count += 1


def create_gi(gpu, info, prof):
    start = _choose_start(info, gpu["gis"], prof)
    if start is None:
        raise MigError(*INSUFFICIENT)
    gi = {"id": info["geometry"]["gi_ids"][prof["mem_slices"]][start], "profile_id": prof["id"],
          "start": start, "cis": []}
    gpu["gis"].append(gi)
    return gi


def find_gi(gpu, gi_id):
    for gi in gpu["gis"]:
        if gi["id"] == gi_id:
            return gi
    return None


# ----- compute instances ---------------------------------------------------------------
def ci_profiles(info, gi):
    """[(ci profile id, compute slices, name, starts)] a GI offers (full-size one last)."""
    gprof = profile(info, gi["profile_id"])
    g = gprof["compute"]
    out = []
    for ci_id, c in sorted(models.CI_PROFILE_SLICES.items()):
        if c > g or (c == 7 and g != 7):
            continue
        starts = (0, 4) if c == 3 else tuple(range(0, g, c))
        starts = tuple(s for s in starts if s + c <= g)
        name = gprof["name"] if c == g else f"{c}c.{gprof['name']}"
        out.append((ci_id, c, name, starts))
    return out


def default_ci_profile(info, gi):
    return ci_profiles(info, gi)[-1]


def ci_profile(info, gi, ci_profile_id):
    for entry in ci_profiles(info, gi):
        if entry[0] == ci_profile_id:
            return entry
    return None


def create_ci(state, machine, index, gi, ci_profile_id=None):
    info = models.model(machine["gpu_model"])
    entry = (default_ci_profile(info, gi) if ci_profile_id is None
             else ci_profile(info, gi, ci_profile_id))
    if entry is None:
        raise MigError(*INVALID)
    ci_id, c, _name, starts = entry
    used = set()
    for ci in gi["cis"]:
        used.update(range(ci["start"], ci["start"] + ci_slices(ci)))
    start = next((s for s in starts if not used.intersection(range(s, s + c))), None)
    if start is None:
        raise MigError(*INSUFFICIENT)
    new_id = 0
    while any(ci["id"] == new_id for ci in gi["cis"]):
        new_id += 1
    state["serial"] = state.get("serial", 0) + 1
    uuid = host.mig_uuid(host.gpu_uuid(machine, index), gi["id"], new_id, state["serial"])
    ci = {"id": new_id, "profile_id": ci_id, "start": start, "uuid": uuid}
    gi["cis"].append(ci)
    gi["cis"].sort(key=lambda x: x["id"])
    return ci


def ci_slices(ci):
    return models.CI_PROFILE_SLICES[ci["profile_id"]]


def ci_name(info, gi, ci):
    gprof = profile(info, gi["profile_id"])
    c = ci_slices(ci)
    return gprof["name"] if c == gprof["compute"] else f"{c}c.{gprof['name']}"


def ci_busy(state, index, gi, ci):
    return any(p["gpu"] == index and p.get("gi") == gi["id"] and p.get("ci") == ci["id"]
               for p in state["processes"])


# ----- views ------------------------------------------------------------------------------
def listing_order(gis):
    """-lgi/-lci order: by profile id descending, then GI id (as in real listings)."""
    return sorted(gis, key=lambda gi: (-gi["profile_id"], gi["id"]))


def devices(info, gpu):
    """MIG devices as -L and the table number them: by GI id, then CI id."""
    out = []
    for gi in sorted(gpu["gis"], key=lambda g: g["id"]):
        for ci in sorted(gi["cis"], key=lambda c: c["id"]):
            out.append({"gi": gi, "ci": ci, "name": ci_name(info, gi, ci),
                        "gprof": profile(info, gi["profile_id"])})
    return out
