"""SASL mechanisms as small sans-IO state machines.

Each mechanism turns server bytes into the next client bytes: :meth:`start`
gives the first SaslAuthenticate payload, :meth:`step` takes the broker's
``auth_bytes`` and returns the next payload, or None when the exchange is
complete on the client's side. The connection (``connection.py``) wraps the
payloads in SaslHandshake v1 / SaslAuthenticate v2 requests.

Nothing here logs or formats a password, token or proof: errors name the
mechanism and the step, never the secret.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from typing import Any, Protocol

from kafka_share.credentials import OAuthToken
from kafka_share.errors import AuthenticationError, ConfigError, SaslAuthenticationFailedError

__all__ = [
    "GssapiMechanism",
    "OAuthBearerMechanism",
    "PlainMechanism",
    "SaslClientMechanism",
    "ScramMechanism",
]

#: A hostile server must not make PBKDF2 run for minutes (kafka-python's cap).
SCRAM_MAX_ITERATIONS = 1_000_000
#: Java's ScramMechanism minimum.
SCRAM_MIN_ITERATIONS = 4096


class SaslClientMechanism(Protocol):
    name: str

    def start(self) -> bytes: ...

    def step(self, server_bytes: bytes) -> bytes | None: ...


class PlainMechanism:
    """RFC 4616 with an empty authorization id (what Java sends)."""

    def __init__(self, username: str, password: str) -> None:
        self.name = "PLAIN"
        self._username = username
        self._password = password

    def start(self) -> bytes:
        return b"\0" + self._username.encode() + b"\0" + self._password.encode()

    def step(self, server_bytes: bytes) -> bytes | None:
        return None


def _escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramMechanism:
    """SCRAM-SHA-256/512 as Kafka implements it (RFC 5802/7677 without SASLprep:
    Kafka encodes passwords as plain UTF-8). The server signature is checked in
    constant time."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        token_auth: bool = False,
        nonce: str | None = None,
    ) -> None:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"unknown SCRAM mechanism {mechanism!r}")
        self.name = mechanism
        self._hash = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._username = username
        self._password = password
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        ext = ",tokenauth=true" if token_auth else ""
        self._client_first_bare = f"n={_escape_saslname(username)},r={self._nonce}{ext}"
        self._server_signature: bytes | None = None
        self._stage = 0

    def start(self) -> bytes:
        self._stage = 1
        return ("n,," + self._client_first_bare).encode()

    def step(self, server_bytes: bytes) -> bytes | None:
        if self._stage == 1:
            self._stage = 2
            return self._client_final(server_bytes)
        if self._stage == 2:
            self._stage = 3
            self._verify_server_final(server_bytes)
            return None
        raise AuthenticationError(f"{self.name}: unexpected message from the broker")

    def _fail(self, what: str) -> AuthenticationError:
        return SaslAuthenticationFailedError(f"{self.name} authentication failed: {what}")

    def _client_final(self, server_first_bytes: bytes) -> bytes:
        try:
            server_first = server_first_bytes.decode()
        except UnicodeDecodeError:
            raise self._fail("the server-first message is not UTF-8") from None
        attrs_: dict[str, str] = {}
        for part in server_first.split(","):
            key, sep, value = part.partition("=")
            if sep and key not in attrs_:
                attrs_[key] = value
        if "e" in attrs_:
            raise self._fail(f"the broker answered {attrs_['e']}")
        nonce, salt_b64, iterations_text = attrs_.get("r"), attrs_.get("s"), attrs_.get("i")
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise self._fail("the server-first message lacks r=, s= or i=")
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise self._fail("the server nonce does not extend the client nonce")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iterations_text)
        except ValueError:
            raise self._fail("the salt or iteration count is malformed") from None
        if not SCRAM_MIN_ITERATIONS <= iterations <= SCRAM_MAX_ITERATIONS:
            raise self._fail(
                f"iteration count {iterations} is outside "
                f"{SCRAM_MIN_ITERATIONS}..{SCRAM_MAX_ITERATIONS}"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_signature = hmac.new(stored_key, auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final_bytes: bytes) -> None:
        text = server_final_bytes.decode(errors="replace")
        if text.startswith("e="):
            raise self._fail(f"the broker answered {text[2:]}")
        if not text.startswith("v="):
            raise self._fail("the server-final message lacks v=")
        try:
            signature = base64.b64decode(text[2:].split(",", 1)[0], validate=True)
        except ValueError:
            raise self._fail("the server signature is not base64") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._fail(
                "the broker's server signature does not match: it does not know the "
                "password (a man in the middle?)"
            )


class OAuthBearerMechanism:
    """RFC 7628 initial client response with Kafka's SASL extensions (KIP-342).

    A rejected token comes back as a JSON challenge with error code 0; the
    client answers it with ``\\x01`` and the broker then fails the exchange with
    error 58 carrying the JSON (which the connection raises).
    """

    def __init__(self, token: OAuthToken) -> None:
        self.name = "OAUTHBEARER"
        self._token = token
        self._stage = 0
        self.challenge: str | None = None

    def start(self) -> bytes:
        self._stage = 1
        parts = [f"auth=Bearer {self._token.value}"]
        for key, value in sorted(self._token.extensions.items()):
            parts.append(f"{key}={value}")
        return ("n,," + "\x01" + "\x01".join(parts) + "\x01\x01").encode()

    def step(self, server_bytes: bytes) -> bytes | None:
        if self._stage == 1 and server_bytes:
            self._stage = 2
            self.challenge = server_bytes.decode(errors="replace")
            return b"\x01"
        return None


class GssapiMechanism:
    """Kerberos (RFC 4752) through the optional ``gssapi`` package
    (``pip install 'kafka-share[gssapi]'``). Kafka supports no security layer,
    so the final message offers "none" with the server's buffer size.

    Credentials: with ``keytab``, a login from it as ``principal`` into a
    ticket cache in memory, one per principal and process (so connections share
    its tickets, and the user's own ticket cache is left alone); else the ticket
    cache (``KRB5CCNAME``, or the default that ``kinit`` fills), as ``principal``
    if given. GSSAPI failures (no ticket, an unknown principal, a KDC that does
    not answer) raise SaslAuthenticationFailedError with the library's words.
    """

    def __init__(
        self, service_name: str, host: str, principal: str | None = None,
        keytab: str | None = None,
    ) -> None:
        self.name = "GSSAPI"
        gssapi = import_gssapi()
        self._gss_error: type[Exception] = gssapi.exceptions.GSSError
        who = principal or "the ticket cache's principal"
        self._where = f"GSSAPI authentication as {who} to service {service_name}@{host}"
        self._principal = principal or ""
        hint = (
            f" (is {principal} in the keytab {keytab}? klist -k lists what it holds)"
            if keytab else " (no ticket? kinit, or set sasl.kerberos.keytab)"
        )
        with self._translated(hint):
            target = gssapi.Name(
                f"{service_name}@{host}", name_type=gssapi.NameType.hostbased_service
            )
            creds = None
            if principal or keytab:
                store = None
                if keytab:
                    store = {"client_keytab": keytab, "ccache": f"MEMORY:kafka-share-{principal}"}
                creds = gssapi.Credentials(
                    name=gssapi.Name(principal, name_type=gssapi.NameType.kerberos_principal)
                    if principal else None,
                    usage="initiate", store=store,
                )
            self._ctx: Any = gssapi.SecurityContext(name=target, creds=creds, usage="initiate")
        self._negotiated = False

    @contextlib.contextmanager
    def _translated(self, hint: str = "") -> Iterator[None]:
        try:
            yield
        except self._gss_error as exc:
            text = " ".join(str(exc).split())
            raise SaslAuthenticationFailedError(f"{self._where} failed: {text}{hint}") from None

    def start(self) -> bytes:
        with self._translated():
            return bytes(self._ctx.step(None) or b"")

    def step(self, server_bytes: bytes) -> bytes | None:
        with self._translated():
            if not self._ctx.complete:
                return bytes(self._ctx.step(server_bytes) or b"")
            if self._negotiated:
                return None
            self._negotiated = True
            layers = self._ctx.unwrap(server_bytes).message
            if len(layers) != 4 or not layers[0] & 1:
                raise SaslAuthenticationFailedError(
                    "GSSAPI: the broker does not offer the 'no security layer' option"
                )
            reply = b"\x01" + bytes(layers[1:4]) + self._principal.encode()
            return bytes(self._ctx.wrap(reply, False).message)


def import_gssapi() -> Any:
    """The ``gssapi`` module, or a ConfigError naming the extra to install."""
    try:
        import gssapi  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - optional extra
    except ImportError:
        raise ConfigError(
            "sasl.mechanism=GSSAPI needs the gssapi package (MIT Kerberos bindings): "
            "pip install 'kafka-share[gssapi]' (on Debian/Ubuntu it builds against "
            "libkrb5-dev)"
        ) from None
    return gssapi
