"""The secure-boot traits on Ubuntu hosts and the dkms line of each release (issue 23 item 3),
in effect on booted hosts before any product behaviour is tested against them: Ubuntu 22.04
installs dkms 2.8 (Debian bullseye's 2.8.4), which ignores framework.conf.d and signs with
kmodsign and shim-signed's own pair, made by update-secureboot-policy and not enrolled;
Ubuntu 24.04 installs dkms 3.0 (bookworm's 3.0.10), which signs with the drop-in's key.

Bare hosts (a module of their own: the traits' files and a fresh dkms install are the point).
"""
from __future__ import annotations

import pytest

SPEC = {"hosts": 2, "ol": 0, "ubuntu": 2, "docker_hosts": 0, "overrides": {
    "u22-01": {"traits": ["secure-boot-enrolled"]}, "u24-02": {"traits": ["secure-boot-enrolled"]}}}
pytestmark = [pytest.mark.integration, pytest.mark.fleet(**SPEC, state="bare")]

# A tiny DKMS module whose MAKE writes a text .ko (as gpusim-build.sh does), and the signer of
# its installed copy's last appended signature, read with gpusim's own parser.
SETUP = r"""set -e
apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends dkms "linux-headers-$(uname -r)" >/dev/null
mkdir -p /usr/src/sbtest-1.0 /etc/dkms/framework.conf.d
printf '%s\n' 'PACKAGE_NAME="sbtest"' 'PACKAGE_VERSION="1.0"' 'BUILT_MODULE_NAME[0]="sbtest"' \
    'DEST_MODULE_LOCATION[0]="/updates/dkms"' 'MAKE[0]="echo sbtest > sbtest.ko"' \
    'CLEAN="true"' > /usr/src/sbtest-1.0/dkms.conf
echo '/* no source: MAKE writes the module */' > /usr/src/sbtest-1.0/sbtest.c
printf 'mok_signing_key=/root/enrolled.key\nmok_certificate=/root/enrolled.der\n' \
    > /etc/dkms/framework.conf.d/test-signing.conf
dkms add -m sbtest -v 1.0 >/dev/null 2>&1 || true
dkms install -m sbtest -v 1.0 -k "$(uname -r)" >/dev/null 2>&1
"""
SIGNER = ("python3 -c \"import sys; sys.path.append('/usr/local/lib/gpusim'); "
          "from gpusim import firmware as f; m = open(sys.argv[1], 'rb').read(); "
          "end = len(m) - len(f.MAGIC) - 12; n = int.from_bytes(m[end + 8:end + 12], 'big'); "
          "sig = m[end - n:end]; print(*[p for p in sys.argv[2:] if f.os.path.isfile(p) "
          "and all(x in sig for x in f.issuer_serial(open(p, 'rb').read()))])\" "
          "/lib/modules/$(uname -r)/updates/dkms/sbtest.ko "
          "/root/enrolled.der /var/lib/shim-signed/mok/MOK.der")


def _put_enrolled_pair(ssh, name):
    from sandbox.traits import boot
    ssh(name, "umask 077; python3 -c \"import sys; open('/root/enrolled.key', 'wb')"
              f".write(bytes.fromhex('{boot.MOK_KEY.read_bytes().hex()}')); "
              f"open('/root/enrolled.der', 'wb').write(bytes.fromhex('{boot.MOK_CERT.read_bytes().hex()}'))\"")


def test_ubuntu_secure_boot_hosts_have_shim_signed_and_kmodsign(fleet, ssh):
    for h in fleet["hosts"]:
        name = h["name"]
        assert ssh(name, "ls -A /var/lib/shim-signed/mok").stdout.strip() == ""   # no pair yet
        usage = ssh(name, "kmodsign", check=False)
        assert usage.returncode == 2 and "kmodsign [-dpkD] <hash algo>" in usage.stderr
        ssh(name, "update-secureboot-policy --new-key && update-secureboot-policy --new-key")
        subject = ssh(name, "openssl x509 -inform DER -in /var/lib/shim-signed/mok/MOK.der "
                            "-noout -subject").stdout
        assert f"{name} Secure Boot Module Signature key" in subject
        enroll = ssh(name, "update-secureboot-policy --enroll-key")
        assert "is not enrolled" in enroll.stderr           # nobody confirmed it at MokManager
        ssh(name, "rm -f /var/lib/shim-signed/mok/MOK.der /var/lib/shim-signed/mok/MOK.priv")


def test_jammy_dkms_ignores_the_drop_in_and_signs_with_shim_signeds_pair(fleet, ssh):
    name = next(h["name"] for h in fleet["hosts"] if h["os"] == "ubuntu2204")
    _put_enrolled_pair(ssh, name)
    ssh(name, SETUP, timeout=600)
    assert ssh(name, "dkms --version").stdout.strip() == "dkms:2.8"   # bullseye's 2.8.4
    assert ssh(name, SIGNER).stdout.split() == ["/var/lib/shim-signed/mok/MOK.der"]


def test_noble_dkms_signs_with_the_drop_ins_key(fleet, ssh):
    name = next(h["name"] for h in fleet["hosts"] if h["os"] == "ubuntu2404")
    _put_enrolled_pair(ssh, name)
    ssh(name, SETUP, timeout=600)
    assert ssh(name, "dkms --version").stdout.strip().startswith("dkms-3.0.")
    assert ssh(name, SIGNER).stdout.split() == ["/root/enrolled.der"]
