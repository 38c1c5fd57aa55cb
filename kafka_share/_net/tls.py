"""TLS for broker connections: the ``SSLContext`` from the config, and a sans-IO
TLS session (``SSLObject`` over two ``MemoryBIO``s).

The session never touches the socket: the connection feeds it the bytes it
read and sends the bytes it produces. That keeps the socket a plain
non-blocking socket under the selector, and avoids the traps of ``SSLSocket``
with selectors (decrypted bytes hidden from ``select``; a readable event that
carries only a TLS 1.3 session ticket). Decrypted bytes are read straight into
the codec's receive buffer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import ssl
from collections.abc import Iterator

from kafka_share.config import ShareConsumerConfig
from kafka_share.errors import ConfigError

__all__ = ["TlsSession", "build_ssl_context", "describe_ssl_error"]

log = logging.getLogger("kafka_share.net")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@contextlib.contextmanager
def _private_file(data: str) -> Iterator[str]:
    """A 0600 temporary file holding ``data`` (``load_cert_chain`` needs a path)."""
    import tempfile  # noqa: PLC0415  (with shutil and random: only for PEM keys)

    fd, path = tempfile.mkstemp(prefix="kafka-share-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def build_ssl_context(config: ShareConsumerConfig) -> ssl.SSLContext:
    """The client ``SSLContext`` the ssl.* settings describe.

    Verification of the broker's certificate and host name is on unless turned
    off; TLS 1.2 is the minimum. Raises ConfigError naming the setting whose
    file or value cannot be used (never quoting a key or password).
    """
    if config.ssl_context is not None:
        context: ssl.SSLContext = config.ssl_context
        return context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = sorted(_VERSIONS[v] for v in (config.ssl_enabled_protocols or "").split(","))
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]
    _load_trust(context, config)
    _load_client_identity(context, config)
    if config.ssl_ciphers is not None:
        try:
            context.set_ciphers(config.ssl_ciphers)
        except ssl.SSLError:
            raise ConfigError(
                f"ssl.ciphers={config.ssl_ciphers!r} selects no cipher: give an OpenSSL "
                "cipher list (e.g. 'ECDHE+AESGCM'), not Java's IANA names"
            ) from None
    _set_verification(context, config)
    return context


def _load_trust(context: ssl.SSLContext, config: ShareConsumerConfig) -> None:
    """The CAs (system, file, directory, PEM data, PKCS12 trust store) and CRLs."""
    try:
        if config.ssl_cafile is None and config.ssl_cadata is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if config.ssl_cafile is not None:
            if os.path.isdir(config.ssl_cafile):
                context.load_verify_locations(capath=config.ssl_cafile)
            else:
                context.load_verify_locations(cafile=config.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load the CA certificates of ssl.cafile={config.ssl_cafile!r}: {exc}"
        ) from None
    try:
        if config.ssl_cadata is not None:
            context.load_verify_locations(cadata=config.ssl_cadata)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"cannot load the PEM certificates of ssl.cadata: {exc}") from None
    if config.ssl_truststore_pkcs12 is not None:
        _, leaf, others = _load_pkcs12(
            config.ssl_truststore_pkcs12, config.ssl_truststore_pkcs12_password,
            "ssl.truststore.location",
        )
        anchors = leaf + others
        if not anchors:
            raise ConfigError(
                f"the PKCS12 trust store {config.ssl_truststore_pkcs12!r} holds no certificate"
            )
        context.load_verify_locations(cadata="".join(anchors))
    if config.ssl_crlfile is not None:
        try:
            context.load_verify_locations(cafile=config.ssl_crlfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the CRL of ssl.crlfile={config.ssl_crlfile!r}: {exc}"
            ) from None
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF


def _load_client_identity(context: ssl.SSLContext, config: ShareConsumerConfig) -> None:
    """The client's certificate and key (PEM files, PEM data, PKCS12 key store)."""
    password = config.ssl_key_password
    try:
        if config.ssl_certfile is not None:
            context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile, password)
        elif config.ssl_certdata is not None:
            with _private_file(config.ssl_certdata + "\n" + (config.ssl_keydata or "")) as path:
                context.load_cert_chain(path, None, password)
    except (OSError, ssl.SSLError) as exc:
        where = (
            f"ssl.certfile={config.ssl_certfile!r}, ssl.keyfile={config.ssl_keyfile!r}"
            if config.ssl_certfile is not None
            else "ssl.certdata/ssl.keydata"
        )
        raise ConfigError(
            f"cannot load the client certificate and key ({where}): {exc}; an encrypted "
            "key needs ssl.key.password"
        ) from None
    if config.ssl_keystore_pkcs12 is not None:
        # The key goes to load_cert_chain through a file (Python's ssl reads
        # keys from paths only): encrypted with a passphrase made for this load,
        # never in the clear on disk.
        passphrase = secrets.token_urlsafe(32)
        key, chain, extra = _load_pkcs12(
            config.ssl_keystore_pkcs12, config.ssl_keystore_pkcs12_password,
            "ssl.keystore.location", key_passphrase=passphrase,
        )
        if key is None or not chain:
            raise ConfigError(
                f"the PKCS12 key store {config.ssl_keystore_pkcs12!r} holds no private key "
                "with a certificate"
            )
        with _private_file(key + "".join(chain) + "".join(extra)) as path:
            context.load_cert_chain(path, password=passphrase)


def _set_verification(context: ssl.SSLContext, config: ShareConsumerConfig) -> None:
    context.check_hostname = config.ssl_check_hostname and config.ssl_verify
    if not config.ssl_verify:
        log.warning(
            "ssl.verify=false: broker certificates are NOT verified; anyone on the network "
            "path can impersonate the broker"
        )
        context.verify_mode = ssl.CERT_NONE
    elif not config.ssl_check_hostname:
        log.warning(
            "ssl.check.hostname=false (ssl.endpoint.identification.algorithm is empty): the "
            "broker's certificate is verified but not its host name; any certificate the "
            "CA signed, for any host, is accepted as this broker's"
        )


def _load_pkcs12(
    path: str, password: str | None, key_name: str, *, key_passphrase: str | None = None
) -> tuple[str | None, list[str], list[str]]:
    """(private key PEM, [leaf certificate PEM], [other certificates PEM]) of a
    PKCS#12 file, read with the optional cryptography package. The key PEM is
    encrypted with ``key_passphrase`` (its only use is to be written to a file)."""
    try:
        from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
            BestAvailableEncryption,
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise ConfigError(
            f"{key_name} is a PKCS12 file, which needs the cryptography package: "
            "pip install 'kafka-share[pkcs12]' (or convert it to PEM with "
            "'openssl pkcs12 -in store.p12 -out store.pem -nodes')"
        ) from None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        key, cert, others = pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None
        )
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the PKCS12 file {key_name}={path!r}: {exc} (is the password right?)"
        ) from None
    encryption = (
        BestAvailableEncryption(key_passphrase.encode()) if key_passphrase is not None
        else NoEncryption()
    )
    key_pem = (
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encryption).decode()
        if key is not None else None
    )
    leaf = [cert.public_bytes(Encoding.PEM).decode()] if cert is not None else []
    return key_pem, leaf, [c.public_bytes(Encoding.PEM).decode() for c in others]


def describe_ssl_error(exc: BaseException, address: str, server_hostname: str) -> str:
    """Say in words what failed to verify."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or str(exc)
        return (
            f"TLS handshake with broker {address} failed: the broker's certificate did not "
            f"verify ({reason}) for host name {server_hostname!r}; check ssl.cafile, or turn "
            "host name checks off with ssl.endpoint.identification.algorithm="
        )
    reason = getattr(exc, "reason", None) or str(exc)
    hint = ""
    if "CERTIFICATE" in str(reason).upper() or "ALERT" in str(reason).upper():
        hint = "; the broker refused the client certificate (check ssl.certfile/ssl.keyfile)"
    return f"TLS with broker {address} failed: {reason}{hint}"


class TlsSession:
    """One TLS client session, fed and drained by the connection."""

    def __init__(self, context: ssl.SSLContext, server_hostname: str) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.server_hostname = server_hostname
        self._obj = context.wrap_bio(
            self._incoming, self._outgoing, server_side=False, server_hostname=server_hostname
        )
        self.handshake_done = False

    def do_handshake(self) -> bool:
        """Advance the handshake; True once it is complete. Raises ssl.SSLError."""
        try:
            self._obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.handshake_done = True
        return True

    def feed(self, data: bytes) -> None:
        self._incoming.write(data)

    def read_into(self, buf: memoryview) -> int:
        """Decrypt into ``buf``; 0 when no complete record is buffered.
        Raises ssl.SSLZeroReturnError on close_notify, ssl.SSLError on failure."""
        try:
            return int(self._obj.read(len(buf), buf))  # with a buffer: a count
        except ssl.SSLWantReadError:
            return 0

    def encrypt(self, data: bytes | bytearray | memoryview) -> None:
        self._obj.write(data)

    def take_outgoing(self) -> bytes:
        return self._outgoing.read()

    @property
    def version(self) -> str | None:
        return self._obj.version()

