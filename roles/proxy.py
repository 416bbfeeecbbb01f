"""The HTTP proxy for the hosts' package managers (``http_proxy``), when one is set.

apt gets an apt.conf snippet, dnf a ``proxy=`` line in the ``[main]`` section of
/etc/dnf/dnf.conf. The proxy URL can carry credentials: it is written to files, uploaded
(never in an operation name, a diff, a command line or a log), and a file that holds a
credential is mode 600 (apt's snippet always; dnf.conf, a file every user may read
otherwise, while the URL has a user or password in it).
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from pyinfra import host
from pyinfra.api import StringCommand, QuoteString, deploy, operation

from gpuhost.facts.dnf import DnfConfRedacted
from gpuhost.facts.files import FileDigest
from gpuhost import el_packages, packages
from gpuhost.roles.common import distro_tag, host_settings, host_state
from gpuhost.roles.files import atomic_write, config_file

APT_PROXY = "/etc/apt/apt.conf.d/95gpuhost-proxy"
DNF_CONF = "/etc/dnf/dnf.conf"


def has_credentials(url: str) -> bool:
    return "@" in urlsplit(url).netloc


@operation()
def dnf_proxy(proxy: str):
    """
    ``proxy=URL`` in /etc/dnf/dnf.conf's ``[main]`` section, the rest of the file kept;
    written atomically, mode 600 while the URL holds credentials, else 644. The file is read
    with its proxy value redacted (fact output is printed at ``-vvv``) and compared by sha256.

    + proxy: the proxy URL (may carry credentials: never shown)
    """
    current = host.get_fact(DnfConfRedacted, path=DNF_CONF)
    wanted = el_packages.dnf_conf_with_proxy(current, proxy).encode()
    mode = "600" if has_credentials(proxy) else "644"
    digest = host.get_fact(FileDigest, path=DNF_CONF)
    same = bool(digest) and digest["sha256"] == hashlib.sha256(wanted).hexdigest()
    if same and digest["mode"] == mode:
        host.noop(f"{DNF_CONF} has the proxy")
        return
    if same:
        yield StringCommand("chmod", QuoteString(mode), QuoteString(DNF_CONF))
        return
    yield from atomic_write(DNF_CONF, wanted, mode)


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
        dnf_proxy(name="dnf uses the configured HTTP proxy", proxy=proxy)
