"""A converged host costs one read (issue 27 item 7): the fast path and the stamp it trusts.

``as_wanted()``, first in ``gpu_host``: when the composite fact (read once, as every run
does) shows the host exactly as gpuhost's last successful run left it, for the same settings
and code, and ``converged.judge`` finds nothing, no role is walked: one operation that
changes nothing says so. ``record()``, last: writes the stamp (gpuhost/stamp.py) after a
run whose every operation succeeded, only when it differs from the host's.
"""

from __future__ import annotations

from importlib import metadata

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, operation

from gpuhost import converged, fabric, stamp
from gpuhost.reports import audit
from gpuhost.runtime import cdi
from gpuhost.facts.script import SECTIONS
from gpuhost.facts.stamp import ConvergedStamp
from gpuhost.roles.common import executing, host_data, host_settings, host_state, run_cache


def _version() -> str:
    try:
        return metadata.version("gpuhost")
    except metadata.PackageNotFoundError:
        return "checkout"


def host_digest() -> str:
    """This run's ``gpuhost.stamp.run_digest`` for the current host, computed once (the fast
    path and the record both need it)."""
    cache = run_cache("stamp_digest")
    if host.name not in cache:
        cache[host.name] = stamp.run_digest(host_settings())
    return cache[host.name]


def why_not(digest: str) -> list[str]:
    """Why this host must be walked role by role (empty: it is as wanted)."""
    state = host_state()
    reasons = stamp.stale(state.get("stamp"), digest)
    if reasons:
        return reasons
    if state["driver"]["state"] != "loaded":
        return [f"driver {state['driver']['state']}"]
    if not any(gpu["source"] == "nvidia-smi" for gpu in state["gpus"]):
        return ["the driver is loaded but nvidia-smi lists no GPU"]
    try:
        wanted = audit.desired_settings(host_data(), host.name)
    except audit.AuditError as error:
        return [str(error)]
    reasons = converged.judge(state, wanted).messages()
    if cdi.refresh_unit_failed(state):  # the deploy reruns it (roles/cdi.py)
        reasons.append(f"{cdi.REFRESH_UNIT} is failed")
    spec = cdi.judge(state)  # a stale spec is refreshed in every mode (roles/cdi.py)
    if spec["status"] == "stale" and not any(r.startswith("cdi-spec-stale") for r in reasons):
        reasons.append("stale CDI spec: " + "; ".join(spec["problems"]))
    waiting = fabric.incomplete(state)
    if waiting:
        reasons.append("NVLink fabric not Completed on " + ", ".join(sorted(waiting)))
    return reasons


@operation()
def host_as_wanted(summary: str):
    """
    Nothing to do: the host is as gpuhost's last successful run left it (gpuhost/stamp.py).

    + summary: what was found, shown with ``-v``
    """
    host.noop(summary)
    yield from ()


def as_wanted() -> bool:
    """The fast path: True when this host needs nothing (one operation says so)."""
    config = host_settings()
    if config.full_check:
        return False
    reasons = why_not(host_digest())
    if reasons:
        if host_state().get("stamp") is not None:
            shown = "; ".join(reasons[:5]) + (f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else "")
            logger.info(f"{host.print_prefix}gpuhost checks every role: {shown}")
        return False
    text = stamp.summary(host_state()["stamp"])
    logger.info(f"{host.print_prefix}gpuhost: {text}")
    host_as_wanted(name="gpuhost: the host is as wanted (unchanged since its last run)",
                   summary=text)
    return True


def writer_script() -> str:
    """Write the stamp atomically, root only (``sh -c SCRIPT gpuhost-stamp DIGEST VERSION``):
    the header, then the witness computed on the host right now, with the package lists read
    as the composite fact reads them."""
    return ("umask 077; mkdir -p /var/lib/gpuhost; t=/var/lib/gpuhost/.converged.gpuhost-new; "
            f"_gh_dpkg=$( ({SECTIONS['dpkg']}) 2>&1); _gh_rpm=$( ({SECTIONS['rpm']}) 2>&1); "
            f"{{ printf '%s\\n' '{stamp.FORMAT}' \"digest $1\" \"version $2\" "
            f"\"written $(date +%s)\" --; {stamp.WITNESS}; }} > \"$t\" && chmod 600 \"$t\" "
            f"&& mv -f \"$t\" {stamp.PATH}")


@operation()
def record(digest: str, version: str):
    """
    Record the host as converged (the stamp), after every other operation of the run
    succeeded; nothing when the host's stamp already says the same.

    + digest: this run's ``gpuhost.stamp.run_digest``
    + version: gpuhost's version, for people reading the stamp
    """
    if not executing():
        host.noop("the stamp is recorded after the run")
        return
    found = host.get_fact(ConvergedStamp)
    reasons = stamp.stale(found, digest)
    if not reasons:
        host.noop(f"{stamp.PATH} is current")
        return
    logger.info(f"{host.print_prefix}gpuhost records the host as converged ({reasons[0]}"
                + (f", +{len(reasons) - 1} more" if len(reasons) > 1 else "") + ")")
    yield StringCommand("sh -c", QuoteString(writer_script()), "gpuhost-stamp",
                        QuoteString(digest), QuoteString(version))


def configure_record() -> None:
    """The last operation of ``gpu_host``."""
    record(name="Record the host as converged (/var/lib/gpuhost/converged)",
           digest=host_digest(), version=_version())
