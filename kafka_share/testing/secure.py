"""A single-node test broker with every kind of secured listener.

:class:`SecureKafkaCluster` starts a :class:`~kafka_share.testing.LocalKafkaCluster`
with, next to the PLAINTEXT listener the harness itself uses:

==================  =================  ============================================
listener            security.protocol  what it checks
==================  =================  ============================================
``SSL``             SSL                mutual TLS: a client certificate signed by the
                                       run's CA is required (principal = its DN)
``SASL_PLAINTEXT``  SASL_PLAINTEXT     PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
                                       (unsecured JWTs: ``alg: none``)
``SASL_SSL``        SASL_SSL           the same mechanisms over TLS (server auth only)
``REAUTH``          SASL_PLAINTEXT     as SASL_PLAINTEXT, but every SASL session ends
                                       after ``reauth_ms`` (KIP-368)
``OIDC``            SASL_PLAINTEXT     OAUTHBEARER only, RS256 JWTs checked against
                                       the run's JWKS (see :class:`OidcTokenServer`)
==================  =================  ============================================

Certificates (a CA, the broker's and a client's) are generated per run with
``cryptography`` (``pip install 'kafka-share[testing]'``) into the work
directory. The broker certificate names ``127.0.0.1`` and
``broker.kafka-share.test`` only, so connecting through ``localhost`` is a
host-name mismatch (for tests of host-name verification).

Authorization uses KRaft's ``StandardAuthorizer``. Users (random passwords per
run, in :attr:`SecureKafkaCluster.users`): ``alice`` is a super user (as are the
harness's anonymous PLAINTEXT principal and the client certificate);
``mallory`` has no rights at all; ``carol`` may use every group (READ) but no
topic. SCRAM credentials are added at format time.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import os
import secrets
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_share.testing.config import NodeAddress
from kafka_share.testing.errors import HarnessError

__all__ = [
    "CLIENT_CERT_DN",
    "OidcTokenServer",
    "Pki",
    "SecureKafkaCluster",
    "generate_pki",
    "unsecured_jwt",
]

#: The subject of the client certificate (its mTLS principal is ``User:<this>``).
CLIENT_CERT_DN = "CN=kafka-share-client"
#: The names in the broker certificate (``localhost`` deliberately missing).
BROKER_CERT_NAMES = ("127.0.0.1", "broker.kafka-share.test")
OIDC_AUDIENCE = "kafka"
OIDC_ISSUER = "https://idp.kafka-share.test"
SECURE_LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH", "OIDC")
_PROTOCOL = {
    "SSL": "SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "SASL_SSL": "SASL_SSL",
    "REAUTH": "SASL_PLAINTEXT",
    "OIDC": "SASL_PLAINTEXT",
}


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(sub: str, lifetime_s: int = 3600, **claims: Any) -> str:
    """An unsigned JWT (``alg: none``) the broker's default OAUTHBEARER validator accepts."""
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
    return (
        _b64url(json.dumps({"alg": "none"}).encode()) + "."
        + _b64url(json.dumps(body).encode()) + "."
    )


def _crypto() -> Any:
    try:
        import cryptography  # noqa: PLC0415 - optional
    except ImportError:
        raise HarnessError(
            "secured test brokers generate their certificates with the cryptography "
            "package: pip install 'kafka-share[testing]'"
        ) from None
    return cryptography


@dataclass(frozen=True)
class Pki:
    """The files of one run's certificates (all PEM, keys unencrypted, mode 0600)."""

    ca_file: Path
    #: Key + certificate + CA in one file (Java's PEM key store layout).
    broker_keystore: Path
    client_cert: Path
    client_key: Path
    #: Client key + certificate in one file (for ``ssl.keystore.location``).
    client_keystore: Path
    #: RSA key (PEM) that signs the OIDC listener's JWTs, and its JWKS.
    jwt_key: Path
    jwks_file: Path
    jwt_kid: str = "kafka-share-test"


def generate_pki(directory: Path) -> Pki:
    """Make a CA, a broker and a client certificate and a JWT signing key in
    ``directory``."""
    _crypto()
    import ipaddress  # noqa: PLC0415

    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = _TestCa(now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2))
    broker_key, broker_pem = ca.leaf(
        "broker.kafka-share.test",
        [x509.IPAddress(ipaddress.ip_address(BROKER_CERT_NAMES[0])),
         x509.DNSName(BROKER_CERT_NAMES[1])],
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    client_key, client_pem = ca.leaf(
        CLIENT_CERT_DN.removeprefix("CN="), [], [ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    jwt_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return Pki(
        ca_file=_write_private(directory / "ca.pem", ca.pem),
        broker_keystore=_write_private(
            directory / "broker-keystore.pem", _pem_key(broker_key) + broker_pem + ca.pem
        ),
        client_cert=_write_private(directory / "client.crt", client_pem),
        client_key=_write_private(directory / "client.key", _pem_key(client_key)),
        client_keystore=_write_private(
            directory / "client-keystore.pem", _pem_key(client_key) + client_pem
        ),
        jwt_key=_write_private(directory / "jwt-signing.key", _pem_key(jwt_key)),
        jwks_file=_write_private(directory / "jwks.json", json.dumps(_jwks(jwt_key)).encode()),
    )


class _TestCa:
    """A throwaway certificate authority (EC P-256) valid from ``start`` to ``end``."""

    def __init__(self, start: datetime.datetime, end: datetime.datetime) -> None:
        from cryptography import x509  # noqa: PLC0415
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

        self._start, self._end = start, end
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("kafka-share test CA"))
            .issuer_name(_name("kafka-share test CA"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self._cert.public_bytes(serialization.Encoding.PEM)

    def leaf(self, cn: str, sans: list[Any], usage: list[Any]) -> tuple[Any, bytes]:
        """A new key and its certificate (PEM) for ``cn``, signed by this CA."""
        from cryptography import x509  # noqa: PLC0415
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._start)
            .not_valid_after(self._end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return key, cert.public_bytes(serialization.Encoding.PEM)


def _name(cn: str) -> Any:
    from cryptography import x509  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    return bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ))


def _write_private(path: Path, data: bytes) -> Path:
    # Created 0600 (keys among them): no moment where another user may read it.
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _jwks(jwt_key: Any) -> dict[str, Any]:
    """The JWKS document publishing ``jwt_key``'s public half."""
    numbers = jwt_key.public_key().public_numbers()
    return {"keys": [{
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": "kafka-share-test",
        "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
        "e": _b64url(numbers.e.to_bytes(3, "big")),
    }]}


def signed_jwt(pki: Pki, sub: str, lifetime_s: int = 3600, **claims: Any) -> str:
    """An RS256 JWT the OIDC listener accepts (right issuer, audience and key)."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import padding  # noqa: PLC0415

    key: Any = serialization.load_pem_private_key(pki.jwt_key.read_bytes(), None)
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": pki.jwt_kid}
    body = {"sub": sub, "iss": OIDC_ISSUER, "aud": OIDC_AUDIENCE, "iat": now,
            "exp": now + lifetime_s, **claims}
    signing_input = (
        _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(body).encode())
    )
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64url(signature)


class OidcTokenServer:
    """A local OAuth 2 token endpoint (``client_credentials`` grant) that issues
    JWTs the OIDC listener accepts. ``requests`` counts the token requests;
    ``last_form`` is the last request body (form fields)."""

    def __init__(self, pki: Pki, clients: Mapping[str, str], *, lifetime_s: int = 3600,
                 subject: str = "alice") -> None:
        self._pki = pki
        self._clients = dict(clients)
        self.lifetime_s = lifetime_s
        self.subject = subject
        self.requests = 0
        self.last_form: dict[str, str] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                from urllib.parse import parse_qsl  # noqa: PLC0415

                form = dict(parse_qsl(self.rfile.read(length).decode()))
                server.last_form = form
                auth = self.headers.get("Authorization", "")
                ok = False
                if auth.startswith("Basic "):
                    from urllib.parse import unquote  # noqa: PLC0415

                    user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    ok = server._clients.get(unquote(user)) == unquote(password)
                if not ok or form.get("grant_type") != "client_credentials":
                    self.send_response(401)
                    self.end_headers()
                    self.wfile.write(b'{"error":"invalid_client"}')
                    return
                token = signed_jwt(server._pki, server.subject, server.lifetime_s,
                                   scope=form.get("scope", ""))
                body = json.dumps({"access_token": token, "token_type": "Bearer",
                                   "expires_in": server.lifetime_s}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # HTTPS with the broker's certificate (it names 127.0.0.1): clients
        # refuse an http:// token endpoint, whose requests carry the secret.
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(pki.broker_keystore)
        self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The token endpoint (https://; trust ``pki.ca_file`` for it)."""
        return f"https://127.0.0.1:{self._httpd.server_address[1]}/oauth2/token"

    def __enter__(self) -> OidcTokenServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@dataclass
class SecureKafkaCluster:
    """A one-node broker with secured listeners (see the module doc).

    Use as a context manager, or :meth:`start`/:meth:`stop`. After start,
    :attr:`listeners` maps a listener name to its ``host:port``,
    :attr:`pki` holds the certificate files and :attr:`users` the passwords.
    """

    reauth_ms: int = 5000
    kafka_version: str | None = None
    #: Where the certificates (``pki/``) and the broker's files (``cluster/``) go;
    #: None: a temporary directory removed by :meth:`stop`.
    work_dir: Path | None = None
    #: Passed to LocalKafkaCluster (the CLI starts a broker that outlives it).
    die_with_parent: bool = True
    share_enabled: bool = True
    #: The ``share.version`` level to format with (None: 1 or 0, from
    #: ``share_enabled``; 2 on Kafka 4.4+ for dead-letter queues).
    share_version: int | None = None
    extra_config: dict[str, str] = field(default_factory=dict)
    #: The PLAINTEXT port (None: a free one).
    broker_port: int | None = None
    #: The broker JVM's flags (None: the test broker's, ``DEFAULT_JVM_OPTIONS``).
    jvm_options: tuple[str, ...] | None = None
    users: dict[str, str] = field(default_factory=dict)
    listeners: dict[str, str] = field(default_factory=dict)
    pki: Pki | None = None
    _cluster: Any = None
    _tmp: Any = None

    def start(self) -> None:
        import tempfile  # noqa: PLC0415

        from kafka_share.testing.local import LocalKafkaCluster, _free_ports  # noqa: PLC0415

        cluster_dir: Path | None = None
        if self.work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafka-share-secure-")
            self.work_dir = Path(self._tmp.name)
        else:
            cluster_dir = self.work_dir / "cluster"
        self.pki = generate_pki(self.work_dir / "pki")
        pki = self.pki
        # Passwords without commas: StorageTool --add-scram cannot take them.
        self.users = {u: secrets.token_urlsafe(12) for u in ("alice", "mallory", "carol")}
        scram = [
            f"{mech}=[name={user},password={password}]"
            for user, password in self.users.items()
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        ]
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())

        def node_config(address: NodeAddress) -> dict[str, str]:
            ports = dict(zip(SECURE_LISTENERS, _free_ports(len(SECURE_LISTENERS)), strict=True))
            self.listeners = {name: f"{address.host}:{port}" for name, port in ports.items()}
            return secure_broker_properties(address, ports, pki, plain_users, self.reauth_ms)

        from kafka_share.testing.config import DEFAULT_JVM_OPTIONS  # noqa: PLC0415

        self._cluster = LocalKafkaCluster(
            kafka_version=self.kafka_version,
            work_dir=cluster_dir,
            die_with_parent=self.die_with_parent,
            share_enabled=self.share_enabled,
            share_version=self.share_version,
            extra_config=self.extra_config,
            broker_ports=[self.broker_port] if self.broker_port is not None else None,
            node_config=node_config,
            format_args=[arg for entry in scram for arg in ("--add-scram", entry)],
            jvm_options=[
                *(DEFAULT_JVM_OPTIONS if self.jvm_options is None else self.jvm_options),
                f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={pki.jwks_file.as_uri()}",
            ],
        )
        try:
            self._cluster.start()
            self._grant_carol_groups()
        except BaseException:
            self.stop()
            raise

    def _grant_carol_groups(self) -> None:
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
            AclBinding,
            AclOperation,
            AclPermissionType,
            AdminClient,
            ResourcePatternType,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        binding = AclBinding(
            ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:carol", "*",
            AclOperation.READ, AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(30)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SecureKafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def cluster(self) -> Any:
        """The underlying LocalKafkaCluster (its PLAINTEXT listener for admin work)."""
        if self._cluster is None:
            raise HarnessError("the secure cluster is not started")
        return self._cluster

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT listener (anonymous super user): for admin helpers."""
        return str(self.cluster.bootstrap_servers)

    def describe(self) -> str:
        """Which listener is which, and where the certificates are."""
        assert self.pki is not None
        lines = [f"PLAINTEXT       {self.bootstrap_servers}  (no auth; harness/admin)"]
        what = {
            "SSL": "mutual TLS (client certificate required)",
            "SASL_PLAINTEXT": "PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (unsecured JWT)",
            "SASL_SSL": "the same over TLS",
            "REAUTH": f"SASL_PLAINTEXT, sessions end after {self.reauth_ms} ms",
            "OIDC": "OAUTHBEARER, RS256 JWTs checked against the JWKS",
        }
        for name_, address in self.listeners.items():
            lines.append(f"{name_:<15} {address}  ({what[name_]})")
        lines += [
            f"CA file         {self.pki.ca_file}",
            f"client cert     {self.pki.client_cert} (key {self.pki.client_key}; "
            f"DN {CLIENT_CERT_DN}, a super user)",
            "users           " + ", ".join(f"{u}={p}" for u, p in self.users.items())
            + " (alice: super user; mallory: no rights; carol: groups only)",
        ]
        return "\n".join(lines)

    def client_config(self, listener: str, *, user: str = "alice",
                      mechanism: str = "SCRAM-SHA-512") -> dict[str, object]:
        """Client settings for ``listener`` (kafka-share's own key names)."""
        assert self.pki is not None
        protocol = _PROTOCOL[listener]
        config: dict[str, object] = {
            "bootstrap.servers": self.listeners[listener], "security.protocol": protocol,
        }
        if protocol in ("SSL", "SASL_SSL"):
            config["ssl.cafile"] = str(self.pki.ca_file)
        if protocol == "SSL":
            config["ssl.certfile"] = str(self.pki.client_cert)
            config["ssl.keyfile"] = str(self.pki.client_key)
        if protocol.startswith("SASL"):
            config["sasl.mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                config["sasl_oauth_token_provider"] = lambda: unsecured_jwt(user)
            else:
                config["sasl.username"] = user
                config["sasl.password"] = self.users[user]
        return config


def secure_broker_properties(
    address: NodeAddress, ports: Mapping[str, int], pki: Pki, plain_users: str, reauth_ms: int
) -> dict[str, str]:
    """server.properties entries of the secured listeners (over the harness's own)."""
    host = address.host
    listeners = [f"PLAINTEXT://{host}:{address.broker_port}"]
    listeners += [f"{name}://{host}:{port}" for name, port in ports.items()]
    protocol_map = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    protocol_map += [f"{name}:{_PROTOCOL[name]}" for name in ports]
    plain = f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    oauth = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    props: dict[str, str] = {
        "listeners": ",".join(
            [*listeners, f"CONTROLLER://{host}:{address.controller_port}"]
        ),
        "advertised.listeners": ",".join(
            [*listeners, f"CONTROLLER://{host}:{address.controller_port}"]
        ),
        "listener.security.protocol.map": ",".join(protocol_map),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;User:alice;User:{CLIENT_CERT_DN}",
        "allow.everyone.if.no.acl.found": "false",
        "listener.name.reauth.connections.max.reauth.ms": str(reauth_ms),
        "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oidc.oauthbearer.sasl.jaas.config": oauth,
        "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (
            pki.jwks_file.as_uri()
        ),
        "listener.name.oidc.oauthbearer.sasl.oauthbearer.expected.audience": OIDC_AUDIENCE,
        "listener.name.oidc.oauthbearer.sasl.oauthbearer.expected.issuer": OIDC_ISSUER,
    }
    for listener in ("sasl_plaintext", "sasl_ssl", "reauth"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        props[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = scram
        props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram
        props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = oauth
    for listener in ("ssl", "sasl_ssl"):
        props[f"listener.name.{listener}.ssl.keystore.type"] = "PEM"
        props[f"listener.name.{listener}.ssl.keystore.location"] = str(pki.broker_keystore)
        props[f"listener.name.{listener}.ssl.truststore.type"] = "PEM"
        props[f"listener.name.{listener}.ssl.truststore.location"] = str(pki.ca_file)
    props["listener.name.ssl.ssl.client.auth"] = "required"
    return props

