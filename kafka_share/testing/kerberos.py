"""A real MIT Kerberos KDC for the GSSAPI tests, from Debian's ``krb5-kdc`` and
``krb5-admin-server`` packages (``./run.sh test`` installs them where it can).

:class:`MitKdc` makes a realm in a directory of its own (its database, stash,
``krb5.conf`` and ``kdc.conf``), adds principals with keytabs, and runs
``krb5kdc`` in the foreground on a free loopback port (TCP and UDP), stopped on
exit. Nothing outside the directory is touched: every command gets
``KRB5_CONFIG`` and ``KRB5_KDC_PROFILE`` pointing into it, and a broker JVM
finds the realm through ``-Djava.security.krb5.conf`` (:attr:`MitKdc.krb5_conf`).

    with MitKdc(tmp_path / "kdc") as kdc:
        broker_keytab = kdc.add_principal("kafka/127.0.0.1")
        client_keytab = kdc.add_principal("client")
        kdc.kinit("client", client_keytab, ccache)  # a ticket cache, as kinit makes
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from kafka_share.testing.errors import HarnessError

__all__ = ["KDC_TOOLS", "REALM", "MitKdc", "kerberos_missing"]

REALM = "KAFKA.TEST"
#: The programs the KDC needs, from krb5-kdc, krb5-admin-server and krb5-user.
KDC_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in _SBIN:
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def kerberos_missing() -> str | None:
    """Why a KDC cannot run here (None: it can): the programs that are missing."""
    missing = [name for name in KDC_TOOLS if _tool(name) is None]
    if missing:
        return (
            f"MIT Kerberos programs missing ({', '.join(missing)}): install Debian's "
            "krb5-kdc, krb5-admin-server and krb5-user (./run.sh test does, as root)"
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MitKdc:
    """A KDC for realm :data:`REALM` under ``directory`` (see the module docstring)."""

    def __init__(self, directory: Path, *, ticket_lifetime: str = "1h") -> None:
        self.directory = Path(directory)
        self.port = _free_port()
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        self.log_file = self.directory / "kdc.log"
        self._ticket_lifetime = ticket_lifetime
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """The environment that points Kerberos programs and libraries at this realm."""
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf),
                "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def start(self) -> MitKdc:
        missing = kerberos_missing()
        if missing:
            raise HarnessError(missing)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        # The database's master key is only ever used here, by this realm.
        self._run("kdb5_util", "create", "-s", "-r", REALM, "-P", secrets.token_urlsafe(16))
        self._process = subprocess.Popen(
            [str(_tool("krb5kdc")), "-n", "-r", REALM],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self._wait_listening()
        return self

    def _write_configs(self) -> None:
        d, port = self.directory, self.port
        # No DNS anywhere: service principals are named by the broker's address
        # as given (kafka/127.0.0.1), and the KDC is reached over TCP (as Java
        # prefers for anything but tiny messages).
        self.krb5_conf.write_text(f"""[libdefaults]
    default_realm = {REALM}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = {self._ticket_lifetime}
    forwardable = true

[realms]
    {REALM} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    127.0.0.1 = {REALM}
    localhost = {REALM}
""")
        self.kdc_conf.write_text(f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {REALM} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        max_life = {self._ticket_lifetime}
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log_file}
""")

    def _wait_listening(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                err = self._process.stderr.read().decode(errors="replace") if (
                    self._process.stderr is not None) else ""
                raise HarnessError(f"krb5kdc exited with {self._process.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise HarnessError(f"krb5kdc did not listen on 127.0.0.1:{self.port} within "
                           f"{timeout_s} s; see {self.log_file}")

    def _run(self, tool: str, *args: str) -> str:
        path = _tool(tool)
        if path is None:
            raise HarnessError(f"{tool} is not installed")
        done = subprocess.run(
            [path, *args], env=self.env, capture_output=True, text=True, timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise HarnessError(f"{tool} {' '.join(args)} failed ({done.returncode}): "
                               f"{done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def add_principal(self, name: str) -> Path:
        """Add ``name`` (in this realm) with a random key; returns a keytab with it."""
        keytab = self.directory / (name.replace("/", "_") + ".keytab")
        self._run("kadmin.local", "-r", REALM, "-q", f"addprinc -randkey {name}@{REALM}")
        self._run("kadmin.local", "-r", REALM, "-q", f"ktadd -k {keytab} {name}@{REALM}")
        return keytab

    def kinit(self, name: str, keytab: Path, ccache: Path) -> None:
        """Log ``name`` in from ``keytab`` into the ticket cache ``ccache``."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", f"{name}@{REALM}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stderr is not None:
                self._process.stderr.close()
            self._process = None

    def __enter__(self) -> MitKdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
