"""The sandbox's test signing key: generated once, no passphrase, signs everything."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .common import GNUPG_DIR, BuildError, log, run, write

KEY_UID = "gpuhost sandbox NVIDIA test key (not NVIDIA) <nvidia-sandbox@gpuhost.invalid>"


class SigningKey:
    def __init__(self, home: Path = GNUPG_DIR):
        self.home = home
        self._fpr: str | None = None

    @property
    def env(self) -> dict:
        return {"GNUPGHOME": str(self.home)}

    def gpg(self, *args: str, input: str | None = None) -> str:
        return run(["gpg", "--batch", "--yes", "--no-tty", *args], env=self.env, input=input)

    def ensure(self) -> SigningKey:
        """Create the key the first time; later runs reuse it (every signature stays valid)."""
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
        if not self._list_secret():
            log(f"generating the sandbox signing key in {self.home}")
            self.gpg("--passphrase", "", "--quick-generate-key", KEY_UID, "rsa3072", "sign", "never")
            if not self._list_secret():
                raise BuildError(f"gpg made no secret key in {self.home}; remove that directory "
                                 "and run the build again")
        return self

    def _list_secret(self) -> list[str]:
        out = self.gpg("--with-colons", "--list-secret-keys")
        return [line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:")]

    @property
    def fingerprint(self) -> str:
        if self._fpr is None:
            fprs = self._list_secret()
            if len(fprs) != 1:
                raise BuildError(f"{self.home} should hold exactly one secret key, found "
                                 f"{len(fprs)}; remove the directory to start over")
            self._fpr = fprs[0]
        return self._fpr

    @property
    def keyid(self) -> str:
        """Short key id, as in NVIDIA's nvidia-driver-local-<KEYID>-keyring.gpg names."""
        return self.fingerprint[-8:].upper()

    def export_binary(self, path: Path) -> Path:
        data = run_bytes(["gpg", "--batch", "--export", self.fingerprint], self.env)
        return write(path, data)

    def export_armored(self, path: Path) -> Path:
        return write(path, self.gpg("--armor", "--export", self.fingerprint))

    def clearsign(self, src: Path, dst: Path) -> None:
        self.gpg("--digest-algo", "SHA256", "--local-user", self.fingerprint,
                 "--clearsign", "--output", str(dst), str(src))

    def detach_sign(self, src: Path, dst: Path) -> None:
        self.gpg("--digest-algo", "SHA256", "--local-user", self.fingerprint,
                 "--armor", "--detach-sign", "--output", str(dst), str(src))

    def rpmsign(self, *rpms: Path) -> None:
        if not rpms:
            return
        run(["rpmsign", "--define", f"__gpg {shutil.which('gpg') or '/usr/bin/gpg'}",
             "--define", f"_gpg_name {self.fingerprint}",
             "--define", f"_gpg_path {self.home}",
             "--define", "_gpg_digest_algo sha256", "--addsign", *map(str, rpms)],
            env=self.env)


def run_bytes(cmd: list[str], env: dict) -> bytes:
    import subprocess
    proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True)
    if proc.returncode != 0 or not proc.stdout:
        raise BuildError(f"command failed: {' '.join(cmd)}\n{proc.stderr.decode()[-2000:]}")
    return proc.stdout
