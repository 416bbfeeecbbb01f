"""The HTTP proxy for the hosts' package managers (``http_proxy``), when one is set.

apt gets an apt.conf snippet, dnf a ``proxy=`` line in /etc/dnf/dnf.conf. The proxy URL can
carry credentials: it is written to files (mode 600 for apt's snippet), never shown in an
operation name, a diff or a command line.
"""

from __future__ import annotations

from pyinfra.api import deploy
from pyinfra.operations import files

from gpuhost import packages
from roles.common import distro_tag, host_settings, host_state
from roles.files import config_file

APT_PROXY = "/etc/apt/apt.conf.d/95gpuhost-proxy"


@deploy("Package manager proxy")
def configure() -> None:
    config = host_settings()
    proxy = config.http_proxy
    if not proxy:
        return
    if packages.family(distro_tag(host_state())) == "debian":
        config_file(
            name="apt uses the configured HTTP proxy",
            dest=APT_PROXY,
            content=(
                "// Managed by gpuhost (http_proxy)\n"
                f'Acquire::http::Proxy "{proxy}";\nAcquire::https::Proxy "{proxy}";\n'
            ),
            mode="600",
            secret=True,
        )
    else:
        files.line(
            name="dnf uses the configured HTTP proxy",
            path="/etc/dnf/dnf.conf",
            line="^proxy=.*",
            replace=f"proxy={proxy}",
            present=True,
        )
