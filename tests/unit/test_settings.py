"""gpuhost.settings: the model, validation messages, resolve, docs in sync, group_data reads it."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost import settings as S

ROOT = Path(__file__).resolve().parents[2]
SHA = "a" * 64
MIRROR = "http://127.77.0.1:8000"


def minimal(**extra):
    data = {
        "nvidia_driver_version": "570.172.08",
        "container_toolkit_version": "1.17.8",
        "nvidia_local_repo": {"debian12": {"url": f"{MIRROR}/nvidia/local-repos/x.deb", "sha256": SHA}},
    }
    data.update(extra)
    return data


def problems_for(**extra):
    return S.validate(minimal(**extra))


def test_minimal_data_is_valid_and_resolves_with_defaults():
    assert problems_for() == []
    s = S.resolve(minimal(ssh_user="root", _sudo=True))  # foreign keys are ignored
    assert s.nvidia_driver_version == "570.172.08"
    assert s.nvidia_driver_flavor == "auto" and s.reboot_policy == "never"
    assert s.nvidia_persistenced is True and s.offline is False and s.mig_layout is None
    assert s.upgrade_stop_services == () and s.docker_local_packages == ()
    assert S.docker_repo(s, "ubuntu") == ("https://download.docker.com/linux/ubuntu",
                                          "https://download.docker.com/linux/ubuntu/gpg")
    assert S.docker_repo(s, "ol")[0].startswith("https://download.docker.com/linux/rhel/")
    assert S.toolkit_repo(s, "rhel")[0].endswith("/stable/rpm/$basearch")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.offline = True
    assert set(s.as_dict()) == {x.name for x in S.SETTINGS}


def test_resolve_normalises_single_urls_and_digests():
    s = S.resolve(minimal(container_toolkit_source="mirror",
                          container_toolkit_repo_url=f"{MIRROR}/nvidia/toolkit/deb",
                          nvidia_local_repo={"rhel9": {"path": "/srv/x.rpm", "sha256": "AB" * 32}}))
    assert s.container_toolkit_repo_url == {"apt": f"{MIRROR}/nvidia/toolkit/deb",
                                            "rpm": f"{MIRROR}/nvidia/toolkit/deb"}
    assert s.nvidia_local_repo["rhel9"]["sha256"] == "ab" * 32


def test_injection_in_driver_version_is_refused_with_a_clear_line():
    assert problems_for(nvidia_driver_version="570.124.06; rm -rf /") == [
        'nvidia_driver_version: "570.124.06; rm -rf /" is not a driver version '
        '(want digits and dots like "570.172.08")'
    ]


@pytest.mark.parametrize("key, value", [
    ("nvidia_driver_version", 550), ("nvidia_driver_version", 550.54),
    ("container_toolkit_version", 1.17), ("nvidia_driver_version", True),
])
def test_numbers_from_the_command_line_must_be_quoted(key, value):
    (problem,) = problems_for(**{key: value})
    assert problem.startswith(f"{key}: ") and "not a string: quote it" in problem
    assert f"--data '{key}=" in problem


@pytest.mark.parametrize("key, value, fragment", [
    ("nvidia_driver_version", "570", "not a driver version"),
    ("nvidia_driver_version", "5700.1.2", "not a driver version"),
    ("nvidia_driver_version", "570.124.06\n", "not a driver version"),
    ("container_toolkit_version", "1.17", "not a toolkit version"),
    ("container_toolkit_version", "1.17.8-1 && id", "not a toolkit version"),
    ("nvidia_driver_flavor", "closed", "want one of open, proprietary, auto"),
    ("nvidia_fabricmanager", "yes", "not a boolean"),
    ("nvidia_artifact_cache", "cache/gpuhost", "not an absolute path"),
    ("nvidia_artifact_cache", "/var/cache/x\nrm", "newline or control character"),
    ("docker_source", "snap", "want one of docker, distro, local, none"),
    ("docker_repo_url", "ftp://mirror/docker", "not a http/https/file URL"),
    ("docker_repo_url", "https://mirror/docker'; id; '", "contains \"'\""),
    ("docker_repo_url", "https://mirror/$(id)", "contains '$'"),
    ("docker_repo_url", {"fedora": "https://x/y"}, "unknown key 'fedora'"),
    ("docker_repo_gpgkey", {"debian": "https://x/ y"}, "[debian]"),
    ("docker_local_packages", "/srv/docker.deb", "not a list"),
    ("docker_local_packages", ["relative.deb"], "[0]"),
    ("container_toolkit_source", "github", "want one of nvidia, mirror, local"),
    ("docker_daemon_settings", {"default-runtime": "nvidia"}, "use nvidia_default_runtime"),
    ("docker_daemon_settings", {"runtimes": {"nvidia": {}}}, "runtimes.nvidia is managed"),
    ("docker_daemon_settings", {"data-root": {1, 2}}, "not JSON-serialisable"),
    ("reboot_policy", "always", "want one of never, when_needed"),
    ("http_proxy", "socks5://proxy:1080", "not a http/https URL"),
    ("offline_mirror_urls", "http://m", "not a list of URLs"),
    ("verify_image", "nvidia/cuda:12.8 ; id", "not an image reference"),
    ("verify_image_archive", "image.tar", "not an absolute path"),
    ("mig_mode", True, "want one of enabled, disabled or null"),
    ("mig_layout", "3g.20gb", "not a list of MIG profiles"),
    ("mig_layout", ["3g.20gb", "3g.20gb;id"], "[1]"),
    ("upgrade_force", 1, "not a boolean"),
    ("upgrade_drain_command", "kubectl drain {host}\nreboot", "newline"),
    ("upgrade_drain_command", "kubectl drain {node}", "unknown placeholders ['node']"),
    ("upgrade_drain_command", "kubectl drain {host", "broken {placeholder}"),
    ("upgrade_stop_services", ["dcgm", "nv-hostengine; id"], "[1]"),
    ("upgrade_stop_services", ["dcgm\n"], "[0]"),
    ("nvidia_local_repo", {"debian12": {"path": "/x.deb", "sha256": SHA + "\n"}}, "not a sha256"),
])
def test_each_bad_value_gives_one_line_naming_the_key(key, value, fragment):
    problems = problems_for(**{key: value})
    assert problems, (key, value)
    assert all(p.startswith(f"{key}: ") for p in problems), problems
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("key, value", [
    ("docker_repo_url", {"rhel": "https://mirror/docker/rhel/$releasever/$basearch/stable"}),
    ("container_toolkit_repo_url", "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"),
    ("http_proxy", "http://user:pw@proxy:3128"),
    ("mig_mode", "enabled"),
    ("upgrade_drain_command", "kubectl drain --ignore-daemonsets {host}"),
    ("upgrade_stop_services", ["nvidia-dcgm", "dcgm-exporter@0.service"]),
    ("verify_image", "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"),
    ("nvidia_artifact_cache", "/var/cache/gpuhost"),
    ("docker_daemon_settings", {"log-driver": "journald", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}),
])
def test_good_values_pass(key, value):
    assert problems_for(**{key: value}) == []


def test_local_repo_entries():
    bad = problems_for(nvidia_local_repo={
        "rhel7": {"url": "https://x/y.rpm", "sha256": SHA},
        "debian12": {"url": "https://x/y.deb", "path": "/y.deb", "sha256": SHA},
        "ubuntu2404": {"path": "y.deb", "sha256": "xyz"},
        "rhel9": "https://x/y.rpm",
    })
    assert ("nvidia_local_repo: unknown distro tag 'rhel7' "
            "(want debian12, debian13, ubuntu2204, ubuntu2404, ubuntu2604, rhel8, rhel9, "
            "rhel10)") in bad
    assert "nvidia_local_repo: [debian12] give exactly one of url or path" in bad
    assert any(p.startswith("nvidia_local_repo: [ubuntu2404] path:") for p in bad)
    assert any("[ubuntu2404] sha256" in p and "64 hex digits" in p for p in bad)
    assert any("[rhel9]" in p and "not a mapping" in p for p in bad)
    assert problems_for(nvidia_local_repo={}) != []


def test_missing_required_keys_and_typos():
    problems = S.validate({"nvidia_drvier_version": "570.172.08", "mig_layuot": None}, host_name="gpu-01")
    assert "gpu-01: nvidia_driver_version: missing (required): driver to install, full version " \
        "like \"580.95.05\"" in problems
    assert any(p.startswith("gpu-01: nvidia_local_repo: not set") for p in problems)
    # the toolkit has a default (1.20.0): never "missing"
    assert not any(p.startswith("gpu-01: container_toolkit_version") for p in problems)
    assert "gpu-01: nvidia_drvier_version: unknown gpuhost setting (did you mean " \
        "nvidia_driver_version?); see docs/settings.md" in problems
    assert any(p.startswith("gpu-01: mig_layuot: unknown gpuhost setting (did you mean mig_layout?)")
               for p in problems)
    assert S.validate(minimal(nvidia_driver_version=None))[0].startswith("nvidia_driver_version: missing")


def test_cross_field_rules():
    assert problems_for(docker_source="local") == [
        "docker_local_packages: empty, but docker_source is local (list the package files)"]
    assert problems_for(docker_source="local", docker_local_packages=["/srv/docker-ce.deb"]) == []
    assert problems_for(container_toolkit_source="local")[0].startswith("container_toolkit_local_packages")
    assert problems_for(container_toolkit_source="mirror")[0].startswith("container_toolkit_repo_url")
    assert problems_for(mig_layout=["3g.20gb"])[0].startswith("mig_layout: set, but mig_mode")
    assert problems_for(mig_layout=["3g.20gb"], mig_mode="enabled") == []
    assert problems_for(verify_image_archive="/srv/verify.tar")[0].startswith("verify_image_archive")


def test_offline_requires_local_sources_or_the_mirror():
    sandbox = dict(offline=True, offline_mirror_urls=[MIRROR], docker_source="distro",
                   container_toolkit_source="mirror",
                   container_toolkit_repo_url={"apt": f"{MIRROR}/nvidia/toolkit/deb",
                                               "rpm": f"{MIRROR}/nvidia/toolkit/rpm"},
                   container_toolkit_gpgkey=f"{MIRROR}/nvidia/toolkit/gpgkey")
    assert problems_for(**sandbox) == []
    # NVIDIA's and Docker's default URLs are not reachable offline: one line per key
    problems = problems_for(offline=True, offline_mirror_urls=[MIRROR])
    assert [p.split(":")[0] for p in problems] == [
        "docker_repo_url", "docker_repo_gpgkey", "container_toolkit_repo_url", "container_toolkit_gpgkey"]
    assert all("not reachable offline" in p and MIRROR in p for p in problems)
    # local paths and file:// URLs are always fine; the mirror prefix must end on a "/" boundary
    local = dict(sandbox, nvidia_local_repo={
        "debian12": {"path": "/srv/x.deb", "sha256": SHA},
        "rhel9": {"url": "file:///srv/x.rpm", "sha256": SHA},
        "rhel8": {"url": "http://127.77.0.1:8000/nvidia/x.rpm", "sha256": SHA}})
    assert problems_for(**dict(local, offline_mirror_urls=[MIRROR + "/nvidia/"])) == []
    assert problems_for(**dict(local, offline_mirror_urls=[MIRROR + "/nvidia2"])) != []
    assert problems_for(**dict(local, offline_mirror_urls=["http://127.77.0.1:8001"])) != []
    assert problems_for(**dict(local, offline_mirror_urls=["https://127.77.0.1:8000"])) != []
    # without offline, anything goes
    assert problems_for() == []


def test_messages_never_show_credentials():
    problems = problems_for(http_proxy="http://alice:s3cret@proxy:3128/ x",
                            nvidia_local_repo={"debian12": {"url": "https://bob:hunter2@h/x.deb?token=t0k",
                                                            "sha256": "1"}})
    text = "\n".join(problems)
    assert problems and not re.search(r"alice|s3cret|bob|hunter2|t0k", text)
    assert S.mask_url("https://u:p@host:8443/a/b.deb?sig=x#f") == "https://***@host:8443/a/b.deb?***"
    assert S.mask_url("http://host/a") == "http://host/a"
    resolved = S.resolve(minimal(http_proxy="http://alice:s3cret@proxy:3128", nvidia_local_repo={
        "debian12": {"url": "https://bob:hunter2@h/x.deb", "sha256": SHA}}))
    assert not re.search(r"alice|s3cret|bob|hunter2", repr(resolved))
    assert resolved.http_proxy == "http://alice:s3cret@proxy:3128"  # the value itself is intact


def test_settings_error_lists_every_problem():
    with pytest.raises(S.SettingsError) as info:
        S.resolve({"nvidia_driver_version": 570, "reboot_policy": "always"}, host_name="gpu-07")
    err = info.value
    assert len(err.problems) == 3  # driver, local repo, reboot policy (the toolkit defaults)
    assert all(line in str(err) for line in err.problems)
    assert isinstance(err, ValueError)


def test_schema_is_complete():
    names = [s.name for s in S.SETTINGS]
    assert len(names) == len(set(names))
    for s in S.SETTINGS:
        assert s.meaning and s.type, s.name
        if not s.required:  # every default passes its own check
            assert s.check(s.name, s.default) == [], s.name
    # the architecture keeps no copy of the table (it went stale): it points at the one source
    arch = (ROOT / "docs" / "architecture.md").read_text()
    section = arch.split("## Inventory data keys", 1)[1]
    assert "gpuhost/settings.py" in section and "settings.md" in section
    assert not any(line.startswith("| `") for line in section.splitlines())


def test_docs_settings_md_is_in_sync():
    doc = (ROOT / "docs" / "settings.md").read_text()
    assert S.sync_docs(doc) == doc, \
        "docs/settings.md is stale: run .venv/bin/python -m gpuhost.settings docs/settings.md"
    for s in S.SETTINGS:
        assert f"| `{s.name}` |" in doc


def test_group_data_all_defines_no_default_itself():
    """Defaults live in the Settings model only: all.py may import and hand them over, but
    assign no value of its own (a literal here would be a second copy that can drift)."""
    all_py = ROOT / "inventories" / "group_data" / "all.py"
    tree = ast.parse(all_py.read_text())
    assigned = [node for node in tree.body
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
    assert assigned == [], [ast.unparse(node) for node in assigned]
    loaded = {k: v for k, v in runpy.run_path(str(all_py)).items() if not k.startswith("__")}
    assert set(loaded) - {"defaults"} == {s.name for s in S.SETTINGS if not s.required}


def test_defaults_come_from_the_model():
    fields = {f.name: f for f in dataclasses.fields(S.Settings)}
    assert list(fields) == [s.name for s in S.SETTINGS]
    for s in S.SETTINGS:
        f = fields[s.name]
        assert s.required == (f.default is dataclasses.MISSING
                              and f.default_factory is dataclasses.MISSING), s.name
    assert S.defaults()["docker_repo_url"] == S.DOCKER_REPO_URL
    assert S.defaults()["upgrade_stop_services"] == []
    # a dict default is a fresh copy per instance, never shared
    a, b = S.resolve(minimal()), S.resolve(minimal())
    assert a.docker_daemon_settings == {} and a.docker_daemon_settings is not b.docker_daemon_settings


def test_group_data_all_as_pyinfra_loads_it():
    """pyinfra's own group-data loader (in a subprocess: pyinfra_cli patches with gevent)."""
    code = "\n".join([
        "import json, sys",
        "from pyinfra.api import Config, Inventory, State",
        "from pyinfra.context import ctx_state",
        "from pyinfra_cli.inventory import _get_group_data",
        "with ctx_state.use(State(Inventory(([], {})), Config())):",
        "    print(json.dumps(_get_group_data(sys.argv[1])['all']))",
    ])
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "inventories" / "group_data")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == S.defaults()


def test_validate_inventory_checks_every_host_once_naming_them():
    hosts = {"gpu-01": minimal(), "gpu-02": minimal(reboot_policy="always"),
             "gpu-03": minimal(reboot_policy="always", offline="yes")}
    lines = S.validate_inventory(hosts)
    assert lines == [
        'reboot_policy: "always" is not allowed (want one of never, when_needed)  [gpu-02, gpu-03]',
        'offline: "yes" is not a boolean (want true or false, unquoted)  [gpu-03]',
    ]
    assert S.validate_inventory({"gpu-01": minimal()}) == []


def test_roles_read_settings_per_run_never_from_an_earlier_run():
    """gpuhost.roles.common keeps what it reads once per pyinfra run (State), not per process: a
    second run with other data sees that data, and is validated again."""
    from pyinfra.api import Config, Inventory, State
    from pyinfra.context import ctx_host, ctx_inventory, ctx_state

    from gpuhost.roles import common

    def run(**data):
        inventory = Inventory((["gpu-01"], data))
        state = State(inventory, Config())
        target = inventory.get_host("gpu-01")
        with ctx_state.use(state), ctx_inventory.use(inventory), ctx_host.use(target):
            return common.host_settings()

    first = run(**minimal())
    assert isinstance(first, S.Settings) and first.nvidia_driver_version == "570.172.08"
    assert run(**minimal(nvidia_driver_version="550.163.01")).nvidia_driver_version == "550.163.01"
    with pytest.raises(common.GpuhostError, match=r"reboot_policy: .*\[gpu-01\]"):
        run(**minimal(reboot_policy="always"))


def test_a_local_repo_named_for_another_driver_or_distro_is_refused():
    from gpuhost.settings_cross import local_repo_version_problem

    base = "https://example.com/nvidia/"
    good = {"debian12": {"url": base + "nvidia-driver-local-repo-debian12-570.172.08_1.0-1_amd64.deb",
                         "sha256": SHA},
            "rhel9": {"path": "/srv/nvidia-driver-local-repo-rhel9-570.172.08-1.0-1.x86_64.rpm",
                      "sha256": SHA}}
    assert problems_for(nvidia_local_repo=good) == []
    # the version moved, the package did not: said per host, for the host's own tag only
    # (a host with its own nvidia_driver_version does not use the other tags' entries)
    assert problems_for(nvidia_local_repo=good, nvidia_driver_version="580.95.05") == []
    line = local_repo_version_problem(good, "rhel9", "580.95.05")
    assert line == (
        "nvidia_local_repo[rhel9]: nvidia-driver-local-repo-rhel9-570.172.08 is the local repo "
        "of driver 570.172.08, but nvidia_driver_version is 580.95.05 (point "
        "nvidia_local_repo[rhel9] at the 580.95.05 package and its sha256, or set "
        "nvidia_driver_version to match)")
    assert local_repo_version_problem(good, "rhel9", "570.172.08") is None
    # no entry for the tag (said where the package is fetched), a network source, or a
    # release without a local repo package (auto takes the network repository there)
    assert local_repo_version_problem(good, "rhel10", "580.95.05") is None
    assert local_repo_version_problem(good, "debian12", "580.95.05", "network") is None
    assert "nvidia_local_repo[debian12]" in local_repo_version_problem(
        good, "debian12", "580.95.05", "local_repo")
    u26 = {"ubuntu2604": {"url": base + "nvidia-driver-local-repo-ubuntu2604-570.172.08_1.0-1_amd64.deb",
                          "sha256": SHA}}
    assert local_repo_version_problem(u26, "ubuntu2604", "580.95.05", "auto") is None
    # a package under the wrong tag
    swapped = {"ubuntu2204": good["debian12"]}
    assert problems_for(nvidia_local_repo=swapped) == [
        "nvidia_local_repo[ubuntu2204]: nvidia-driver-local-repo-debian12-570.172.08 is "
        "NVIDIA's package for debian12, not ubuntu2204"]
    # a name that is not NVIDIA's is not judged here (the header is read once fetched)
    assert problems_for(nvidia_local_repo={"debian12": {"url": base + "driver.deb",
                                                        "sha256": SHA}}) == []


def test_the_toolkit_defaults_to_1_20_0_and_a_host_may_keep_an_older_one():
    base = minimal()
    del base["container_toolkit_version"]
    assert S.defaults()["container_toolkit_version"] == "1.20.0"
    assert S.resolve(dict(base), host_name="gpu-01").container_toolkit_version == "1.20.0"
    for older in ("1.19.1", "1.18.2"):
        chosen = S.resolve({**base, "container_toolkit_version": older}, host_name="gpu-02")
        assert chosen.container_toolkit_version == older
