"""Read-only audit, host by host, as a pyinfra deploy.

    pyinfra -y INVENTORY deploys/audit.py [--data cuda=12.4]

For the fleet report (table, JSON, HTML, exit status 0 ok / 2 drift / 4 unhealthy / 3
failed or unreachable) use ``gpuhost audit INVENTORY [--json OUT] [--html OUT] [--cuda 12.4]``:
it runs this file and builds the report from what every host wrote.

Every host runs ONE remote command (the script of ``gpuhost.facts.host.GpuHostState``, read with
pyinfra's ``server.Command`` fact and processed by ``GpuHostState.process``, so output that
cannot be parsed is reported with the parser's message), no other command and no upload.
Then, as each host's facts arrive:

* under pyinfra alone: its row and its health findings are printed (and, with ``--data
  cuda=12.4``, its CUDA answer); a host that drifts from its inventory settings
  (``nvidia_driver_version``, ``container_toolkit_version``, ``nvidia_default_runtime``,
  ``mig_mode``, ``mig_layout``), has a critical health finding (docs/health.md) or whose
  output cannot be read gets one operation that fails on the controller
  (``python.raise_exception``, no remote command) with the reason, so pyinfra's exit status
  is non-zero. Unreachable hosts fail as pyinfra fails them. ``--dry`` shows the failing
  operations without running them (exit 0). Invalid settings or options stop the run
  before any fact is read (exit 1).
* with ``--data gpuhost_audit_dir=DIR`` (set by ``gpuhost audit``): the first host writes
  ``DIR/fleet.json`` once (the run's hosts, their groups, addresses and audited settings, or
  every invalid setting: then the run stops before any fact is read); every host writes
  ``DIR/<id>.json`` = ``{"host"}`` when it is reached, then ``{"host", "state"}`` or
  ``{"host", "error"}``, and adds no operation.

pyinfra parses ``--data cuda=12.4`` as a float, which is accepted; quote CUDA updates as a
string: ``--data 'cuda="12.8.1"'``.
"""

from gpuhost.roles.audit import audit_host

audit_host()
