"""gpuhost.runtime.containerd (the drop-in's rules), facts.containerd's parser and the two
containerd settings: hand-written configs shaped like the ones hosts carry (Debian 12's
containerd package, Docker's containerd.io, a kubeadm node's `containerd config default`
with SystemdCgroup, containerd 2.x's version 3)."""

from __future__ import annotations

import tomllib

import pytest

from gpuhost.facts.containerd import MARK, ContainerdView, config_flag
from gpuhost.runtime import containerd as C
from gpuhost import settings as S

# the shape of Debian 12's /etc/containerd/config.toml (containerd 1.6.20~ds1-1+deb12u3)
DEBIAN = """\
version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""
IMPORTS = 'imports = ["/etc/containerd/conf.d/*.toml"]\n'
# the shape of Docker's containerd.io config (docker/containerd-packaging common/containerd.toml)
CONTAINERD_IO = '# comments\n\ndisabled_plugins = ["cri"]\n\n#root = "/var/lib/containerd"\n'
# a kubeadm-style node: runc with SystemdCgroup, a registry mirror, its own default
KUBE_NODE = """\
version = 2
imports = ["conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.example:5000"]
"""
V3 = """\
version = 3
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


def problems_for(**extra) -> list[str]:
    return S.validate({
        "nvidia_driver_version": "570.172.08", "container_toolkit_version": "1.17.8",
        "nvidia_local_repo": {"debian12": {"url": "http://127.77.0.1:8000/nvidia/x.deb",
                                           "sha256": "a" * 64}}, **extra})


def check(text: str, major: int | None = 1) -> list[str]:
    config = C.parse(text)
    return C.problems(config, C.CONFIG, C.config_version(config, major), major)


def drop_in(text: str, major: int | None = 1, default: bool = False) -> dict:
    config = C.parse(text)
    rendered = C.render_drop_in(config, C.config_version(config, major), default)
    assert rendered.startswith("# Written by gpuhost")
    return tomllib.loads(rendered)


def nvidia(data: dict, plugin: str = "io.containerd.grpc.v1.cri") -> dict:
    return data["plugins"][plugin]["containerd"]["runtimes"]["nvidia"]


def test_debian_stock_config_is_refused_with_the_line_to_add():
    found = check(DEBIAN)
    assert len(found) == 1
    assert "does not import /etc/containerd/conf.d (imports: none)" in found[0]
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in found[0]
    assert "does not rewrite your config.toml" in found[0]


@pytest.mark.parametrize("imports, covered", [
    ('["/etc/containerd/conf.d/*.toml"]', True),
    ('["conf.d/*.toml"]', True),  # relative to config.toml's directory, as containerd resolves it
    ('["/etc/containerd/conf.d/99-*.toml"]', True),
    ('["/etc/containerd/*/*.toml"]', True),
    ('["/other/*.toml", "/etc/containerd/conf.d/*.toml"]', True),
    ('["/etc/containerd/conf.d/*.conf"]', False),
    ('["/etc/containerd/*.toml"]', False),  # '*' does not cross '/'
    ('["/etc/containerd/conf.d/10-mine.toml"]', False),
])
def test_imports_must_cover_the_drop_in(imports, covered):
    found = check(f"imports = {imports}\n" + DEBIAN)
    assert (found == []) is covered, found


def test_docker_containerd_io_config_is_refused_for_every_reason():
    found = check(CONTAINERD_IO)
    assert len(found) == 3, found
    assert "version 1 config" in found[0]
    assert "disables containerd's CRI plugin" in found[1] and "containerd.io" in found[1]
    assert "does not import" in found[2]


def test_a_version_3_config_on_containerd_1_is_refused():
    found = check(V3, major=1)
    assert any("which containerd 1.x does not read" in p for p in found), found
    assert check(V3, major=2) == []


def test_drop_in_for_debian_keeps_its_cri_table_and_containerds_runc():
    data = drop_in(IMPORTS + DEBIAN)
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    assert data["version"] == 2 and list(data["plugins"]) == ["io.containerd.grpc.v1.cri"]
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d"}
    # containerd decodes `runtimes` into a fresh map: runc must be there or CRI will not load
    assert cri["containerd"]["runtimes"]["runc"] == {"runtime_type": "io.containerd.runc.v2"}
    assert nvidia(data) == {**C.DEFAULT_RUNTIME_OPTIONS,
                            "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert "default_runtime_name" not in cri["containerd"]


def test_drop_in_copies_runcs_options_and_the_rest_of_the_cri_table():
    data = drop_in(KUBE_NODE)
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    assert nvidia(data) == {"runtime_type": "io.containerd.runc.v2",
                            "options": {"SystemdCgroup": True,
                                        "BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror.example:5000"]
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert drop_in(KUBE_NODE, default=True)["plugins"]["io.containerd.grpc.v1.cri"][
        "containerd"]["default_runtime_name"] == "nvidia"


def test_a_default_of_nvidia_is_removed_unless_asked_and_another_default_is_the_base():
    crun = KUBE_NODE.replace('default_runtime_name = "runc"', 'default_runtime_name = "crun"') + (
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]\n'
        '    BinaryName = "/usr/bin/crun"\n')
    data = drop_in(crun)
    assert nvidia(data)["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime"}
    was_nvidia = KUBE_NODE.replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"')
    containerd = drop_in(was_nvidia)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert "default_runtime_name" not in containerd
    assert nvidia(drop_in(was_nvidia))["options"]["SystemdCgroup"] is True  # runc, not nvidia


def test_version_3_uses_the_cri_runtime_plugin():
    data = drop_in(V3, major=2)
    assert data["version"] == 3
    assert nvidia(data, "io.containerd.cri.v1.runtime")["options"] == {
        "SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}


def test_no_config_gets_the_top_file_nvidia_ctk_writes():
    assert C.config_version({}, 1) == 2 and C.config_version({}, 2) == 3
    assert tomllib.loads(C.top_config(2)) == {"version": 2,
                                              "imports": ["/etc/containerd/conf.d/*.toml"]}


def test_major_version_from_containerd_version_lines():
    assert C.major_version("containerd github.com/containerd/containerd 1.6.20~ds1 "
                           "1.6.20~ds1-1+deb12u3") == 1
    assert C.major_version("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da") == 1
    assert C.major_version("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7") == 2
    assert C.major_version(None) is None and C.major_version("") is None


def test_invalid_toml_and_what_the_writer_cannot_copy_are_errors():
    with pytest.raises(C.ContainerdConfigError, match="is not valid TOML"):
        C.parse("version = \n")
    with pytest.raises(C.ContainerdConfigError, match="cannot write back as TOML"):
        C.render({"a": {1, 2}})
    with pytest.raises(C.ContainerdConfigError, match="not a number"):
        C.config_version({"version": "2"}, 1)


def test_render_round_trips_keys_and_strings_that_need_quoting():
    data = {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {
        "x": 'a "quoted" \\ back\nslash\ttab \x01 é', "n": 1.5, "flag": False,
        "list": ["a", 2, True], "nested": {"key with space": {"v": -3}}}}}
    assert tomllib.loads(C.render(data)) == data


def test_render_writes_arrays_of_tables_and_dates():
    # gpuhost's own writer refused these before tomli-w (issue 27 item 6)
    import datetime

    data = {"version": 2, "proxy_plugins": {"p": {"type": "snapshot"}},
            "plugins": {"x": {"hosts": [{"name": "a", "ports": [1, 2]}, {"name": "b"}],
                              "since": datetime.date(2026, 11, 27)}}}
    assert tomllib.loads(C.render(data)) == data


def test_a_drop_in_in_the_old_layout_is_not_drift():
    config = C.parse(DEBIAN + '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n'
                     'endpoint = ["https://a", "https://b"]\n')
    want = C.render_drop_in(config, 2)
    tomli_w_layout = '[\n    "https://a",\n    "https://b",\n]'
    assert tomli_w_layout in want
    old_layout = want.replace(tomli_w_layout, '["https://a", "https://b"]')
    assert C.same_drop_in(want, want) and C.same_drop_in(old_layout, want)
    assert not C.same_drop_in(want.replace("gpuhost", "someone", 1), want)
    assert not C.same_drop_in(want.replace("nvidia-container-runtime", "other"), want)


def _fact(version="containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
          active="active", exec_start="{ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd ; }",
          config: str | None = DEBIAN, digest: str | None = None) -> dict:
    lines = [f"{MARK} version", *([version] if version else []), f"{MARK} active", active,
             f"{MARK} exec", exec_start, f"{MARK} config"]
    if config is not None:
        lines += ["present", *config.split("\n")]  # cat, then the echo's empty line
    lines.append(f"{MARK} drop_in")
    if digest:
        lines.append(f"{digest}  {C.DROP_IN}")
    return ContainerdView().process(lines)


def test_fact_reads_the_sections():
    view = _fact(digest="ab" * 32)
    assert view["installed"] and view["active"] and view["config_flag"] is None
    assert view["config"] == DEBIAN and C.parse(view["config"])["version"] == 2
    assert view["drop_in_sha256"] == "ab" * 32
    bare = _fact(version="", active="inactive", exec_start="", config=None)
    assert bare == {"installed": False, "version": None, "active": False, "config_flag": None,
                    "config": None, "drop_in_sha256": None}


@pytest.mark.parametrize("argv, path", [
    ("/usr/bin/containerd", None),
    ("/usr/bin/containerd --config /etc/k8s/containerd.toml", "/etc/k8s/containerd.toml"),
    ("/usr/bin/containerd -c /x.toml --log-level debug", "/x.toml"),
    ("/usr/bin/containerd --config=/y.toml", "/y.toml"),
])
def test_config_flag_of_the_unit(argv, path):
    assert config_flag(f"{{ path=/usr/bin/containerd ; argv[]={argv} ; ignore_errors=no ; }}") == path


def test_settings_default_off_and_cross_checked():
    assert S.defaults()["containerd_nvidia_runtime"] is False
    assert S.defaults()["containerd_nvidia_default_runtime"] is False
    assert problems_for(containerd_nvidia_runtime=True, containerd_nvidia_default_runtime=True) == []
    assert any("containerd_nvidia_default_runtime: true without containerd_nvidia_runtime" in p
               for p in problems_for(containerd_nvidia_default_runtime=True))
    assert any("containerd_nvidia_runtme" in p for p in problems_for(containerd_nvidia_runtme=True))
    assert any("containerd_nvidia_runtime" in p for p in problems_for(containerd_nvidia_runtime="yes"))
