"""SASL mechanisms, TLS sessions and the security config keys, without a broker."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from kafka_share._net.sasl import OAuthBearerMechanism, PlainMechanism, ScramMechanism
from kafka_share._net.security import security_from_config
from kafka_share._net.security_checks import validate_supported
from kafka_share._net.tls import TlsSession, build_ssl_context, describe_ssl_error
from kafka_share.config import (
    IMPLEMENTED_SECURITY_PROTOCOLS,
    SaslMechanism,
    SecurityProtocol,
    parse_config,
)
from kafka_share.credentials import OAuthToken, as_token_provider, jwt_claims
from kafka_share.errors import ConfigError, SaslAuthenticationError
from tests.fresh import run_fresh

BASE = {"bootstrap.servers": "b:9092", "group.id": "g"}

# ---------------------------------------------------------------- SCRAM (RFC 7677 vector)

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_scram() -> ScramMechanism:
    return ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce=RFC_NONCE)


def test_scram_sha_256_matches_the_rfc_7677_exchange() -> None:
    scram = rfc_scram()
    assert scram.start() == b"n,,n=user,r=" + RFC_NONCE.encode()
    assert scram.step(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert scram.step(RFC_SERVER_FINAL) is None


def test_scram_rejects_a_wrong_server_signature() -> None:
    scram = rfc_scram()
    scram.start()
    scram.step(RFC_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationError, match="server signature does not match"):
        scram.step(b"v=" + b"A" * 43 + b"=")


@pytest.mark.parametrize(
    ("server_first", "problem"),
    [
        (b"r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
        (b"r=" + RFC_NONCE.encode() + b"x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000", "iteration"),
        (b"r=" + RFC_NONCE.encode() + b"x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999", "iteration"),
        (b"r=" + RFC_NONCE.encode() + b"x,i=4096", "lacks"),
        (b"e=unknown-user", "unknown-user"),
    ],
)
def test_scram_rejects_a_bad_server_first_message(server_first: bytes, problem: str) -> None:
    scram = rfc_scram()
    scram.start()
    with pytest.raises(SaslAuthenticationError, match=problem):
        scram.step(server_first)


def test_scram_escapes_the_username_and_does_not_saslprep() -> None:
    scram = ScramMechanism("SCRAM-SHA-512", "we=i,rd", "\ufb01x\u00a0me", nonce="n0nce")
    assert scram.start() == b"n,,n=we=3Di=2Crd,r=n0nce"


def test_plain_sends_an_empty_authzid() -> None:
    assert PlainMechanism("alice", "pw").start() == b"\0alice\0pw"


def test_oauthbearer_initial_response_and_error_challenge() -> None:
    token = OAuthToken("eyJ.abc.", extensions={"traceId": "t1"})
    mechanism = OAuthBearerMechanism(token)
    assert mechanism.start() == b"n,,\x01auth=Bearer eyJ.abc.\x01traceId=t1\x01\x01"
    # A rejected token: error code 0 with a JSON challenge, answered with \x01.
    assert mechanism.step(b'{"status":"invalid_token"}') == b"\x01"
    assert mechanism.challenge == '{"status":"invalid_token"}'
    assert "eyJ" not in repr(token)


def test_token_provider_shapes() -> None:
    jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjoxMDB9."  # {"sub":"a","exp":100}
    assert jwt_claims(jwt) == {"sub": "a", "exp": 100}
    assert as_token_provider(lambda: jwt).token().expires_at_ms == 100_000
    assert as_token_provider(lambda: (jwt, 5)).token().expires_at_ms == 5000
    assert as_token_provider(lambda _cfg: (jwt, 5.5)).token().expires_at_ms == 5500

    class KafkaPythonStyle:
        def token(self) -> str:
            return jwt

        def extensions(self) -> dict[str, str]:
            return {"k": "v"}

    assert as_token_provider(KafkaPythonStyle()).token().extensions == {"k": "v"}
    with pytest.raises(ConfigError):
        as_token_provider(42)


# ---------------------------------------------------------------- config keys


def test_librdkafka_keys_are_accepted() -> None:
    config = parse_config(
        BASE,
        **{
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "secret-pw",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.endpoint.identification.algorithm": "none",
            "enable.ssl.certificate.verification": "true",
        },
    )
    assert config.security_protocol is SecurityProtocol.SASL_SSL
    assert config.sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    assert (config.ssl_cafile, config.ssl_certfile, config.ssl_keyfile) == (
        "/ca.pem", "/c.pem", "/k.pem")
    assert config.ssl_check_hostname is False
    assert "secret-pw" not in repr(config)


def test_java_pem_stores_are_accepted() -> None:
    config = parse_config(
        BASE,
        **{
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/keystore.pem",
            "ssl.endpoint.identification.algorithm": "",
        },
    )
    assert config.ssl_cafile == "/ca.pem"
    assert config.ssl_certfile == config.ssl_keyfile == "/keystore.pem"
    assert config.ssl_check_hostname is False


def test_java_inline_pem_keys_are_secret() -> None:
    config = parse_config(
        BASE,
        **{
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nsecret-key\n",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\n",
        },
    )
    assert config.ssl_keydata is not None
    assert "secret-key" not in repr(config)
    assert "secret-key" not in str(config.to_properties())


@pytest.mark.parametrize("store_type", ["JKS", None])
def test_java_key_stores_get_the_keytool_command(store_type: str | None) -> None:
    given: dict[str, object] = {"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"}
    if store_type:
        given["ssl.truststore.type"] = store_type
    with pytest.raises(ConfigError, match="keytool -importkeystore"):
        parse_config(BASE, **given)


def test_endpoint_identification_algorithm_none_is_the_default_https(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # None means "not given" for every key: host-name checks stay on. Before,
    # it turned them off without a word.
    config = parse_config(BASE, **{"security.protocol": "SSL",
                                   "ssl.endpoint.identification.algorithm": None})
    assert config.ssl_check_hostname is True
    with caplog.at_level("WARNING", logger="kafka_share"):
        assert build_ssl_context(config).check_hostname
    assert not [r for r in caplog.records if "host name" in r.getMessage()]


@pytest.mark.parametrize("key, value", [
    ("ssl.endpoint.identification.algorithm", ""),
    ("ssl.endpoint.identification.algorithm", "none"),
    ("ssl.check.hostname", False),
])
def test_host_name_checks_turned_off_by_configuration_warn(
    key: str, value: object, caplog: pytest.LogCaptureFixture,
) -> None:
    config = parse_config(BASE, **{"security.protocol": "SSL", key: value})
    with caplog.at_level("WARNING", logger="kafka_share"):
        context = build_ssl_context(config)
    assert not context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("host name" in r.getMessage() and "ssl.check.hostname=false" in r.getMessage()
               for r in warned)


def test_endpoint_identification_algorithm_values() -> None:
    with pytest.raises(ConfigError, match="'https'"):
        parse_config(BASE, **{"security.protocol": "SSL",
                              "ssl.endpoint.identification.algorithm": "ldap"})


def test_alias_and_canonical_key_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"both set ssl\.cafile"):
        parse_config(BASE, **{"security.protocol": "SSL", "ssl.cafile": "/a",
                              "ssl.ca.location": "/b"})


def test_oauthbearer_needs_a_token_source() -> None:
    with pytest.raises(ConfigError, match="needs a token source"):
        parse_config(BASE, security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER")
    config = parse_config(BASE, security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                          sasl_oauth_token_provider=lambda: "t")
    assert "<token provider>" in repr(config)


def test_oauthbearer_jaas_options() -> None:
    config = parse_config(
        BASE,
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="app" clientSecret="very-secret" scope="a b";'
            ),
        },
    )
    assert config.sasl_oauthbearer_client_credentials_client_id == "app"
    assert config.sasl_oauthbearer_client_credentials_client_secret == "very-secret"
    assert config.sasl_oauthbearer_scope == "a b"
    assert "very-secret" not in repr(config)
    provider = security_from_config(config).token_source
    assert provider is not None


def test_ssl_context_replaces_the_other_ssl_keys() -> None:
    context = ssl.create_default_context()
    config = parse_config(BASE, security_protocol="SSL", ssl_context=context)
    assert build_ssl_context(config) is context
    with pytest.raises(ConfigError, match=r"ssl_context is given together with ssl\.cafile"):
        parse_config(BASE, security_protocol="SSL", ssl_context=context, ssl_cafile="/ca")


def test_gssapi_without_the_package_names_the_extra() -> None:
    pytest.importorskip("cryptography")  # any environment; gssapi is not installed here
    try:
        import gssapi  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gssapi is installed")
    config = parse_config(BASE, security_protocol="SASL_SSL", sasl_mechanism="GSSAPI")
    with pytest.raises(ConfigError, match=r"kafka-share\[gssapi\]"):
        validate_supported(config)


def test_tls_minimum_version_and_verification_defaults() -> None:
    context = build_ssl_context(parse_config(BASE, security_protocol="SSL"))
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    with pytest.raises(ConfigError, match=r"TLSv1\.2"):
        parse_config(BASE, security_protocol="SSL", ssl_enabled_protocols="TLSv1.1")


# ---------------------------------------------------------------- TLS sessions (in memory)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> object:
    pytest.importorskip("cryptography")
    from kafka_share.testing.secure import generate_pki

    return generate_pki(Path(tmp_path_factory.mktemp("pki")))


def handshake(client: TlsSession, server: ssl.SSLObject, s_in: ssl.MemoryBIO,
              s_out: ssl.MemoryBIO) -> None:
    for _ in range(10):
        done = client.do_handshake()
        s_in.write(client.take_outgoing())
        try:
            server.do_handshake()
        except ssl.SSLWantReadError:
            pass
        client.feed(s_out.read())
        if done:
            return


def server_for(pki: object, *, require_client_cert: bool = False) -> tuple[
        ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.broker_keystore)  # type: ignore[attr-defined]
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca_file)  # type: ignore[attr-defined]
    s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    return context.wrap_bio(s_in, s_out, server_side=True), s_in, s_out


def test_tls_session_handshakes_and_moves_data(pki: object) -> None:
    config = parse_config(BASE, security_protocol="SSL", ssl_cafile=str(pki.ca_file))  # type: ignore[attr-defined]
    client = TlsSession(build_ssl_context(config), "127.0.0.1")
    server, s_in, s_out = server_for(pki)
    handshake(client, server, s_in, s_out)
    assert client.handshake_done
    client.encrypt(b"hello broker")
    s_in.write(client.take_outgoing())
    assert server.read(100) == b"hello broker"
    server.write(b"x" * 5000)
    client.feed(s_out.read())
    buf = bytearray(8192)
    total = 0
    while (n := client.read_into(memoryview(buf)[total:])):
        total += n
    assert bytes(buf[:total]) == b"x" * 5000


def test_tls_session_rejects_a_host_name_the_certificate_does_not_name(pki: object) -> None:
    config = parse_config(BASE, security_protocol="SSL", ssl_cafile=str(pki.ca_file))  # type: ignore[attr-defined]
    client = TlsSession(build_ssl_context(config), "localhost")
    server, s_in, s_out = server_for(pki)
    with pytest.raises(ssl.SSLCertVerificationError) as info:
        handshake(client, server, s_in, s_out)
    text = describe_ssl_error(info.value, "localhost:9093", "localhost")
    assert "did not verify" in text and "localhost" in text and "mismatch" in text.lower()
    # The same certificate passes with host-name checks off (the chain is still verified).
    off = parse_config(BASE, security_protocol="SSL", ssl_cafile=str(pki.ca_file),  # type: ignore[attr-defined]
                       ssl_check_hostname=False)
    client = TlsSession(build_ssl_context(off), "localhost")
    server, s_in, s_out = server_for(pki)
    handshake(client, server, s_in, s_out)
    assert client.handshake_done


def test_tls_client_certificate_from_java_style_keystore(pki: object) -> None:
    config = parse_config(BASE, **{
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),  # type: ignore[attr-defined]
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.client_keystore),  # type: ignore[attr-defined]
    })
    client = TlsSession(build_ssl_context(config), "127.0.0.1")
    server, s_in, s_out = server_for(pki, require_client_cert=True)
    handshake(client, server, s_in, s_out)
    client.encrypt(b"ping")
    s_in.write(client.take_outgoing())
    assert server.read(10) == b"ping"
    assert server.getpeercert() is not None


def test_sasl_messages_keep_credentials_out_of_their_repr() -> None:
    from kafka_share.protocol.messages import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
    )

    assert "pw" not in repr(SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"))
    assert "v=sig" not in repr(SaslAuthenticateResponse(auth_bytes=b"v=sig"))


def test_sasl_errors_are_authentication_errors_as_in_java() -> None:
    from kafka_share.errors import (
        AuthenticationError,
        IllegalSaslStateError,
        SslAuthenticationError,
        UnsupportedSaslMechanismError,
    )

    for cls in (SaslAuthenticationError, UnsupportedSaslMechanismError, IllegalSaslStateError,
                SslAuthenticationError):
        assert issubclass(cls, AuthenticationError)
        assert not cls.retriable


def test_pkcs12_trust_and_key_stores(
    pki: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography import x509

    from kafka_share._net import tls

    # What goes to disk while the key loads (Python's ssl reads keys from
    # paths only): the key encrypted, never in the clear.
    written: list[str] = []
    real_private_file = tls._private_file

    def watching(data: str) -> Any:
        written.append(data)
        return real_private_file(data)

    monkeypatch.setattr(tls, "_private_file", watching)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    ca = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())  # type: ignore[attr-defined]
    key: Any = serialization.load_pem_private_key(
        pki.client_key.read_bytes(), None)  # type: ignore[attr-defined]
    cert = x509.load_pem_x509_certificate(pki.client_cert.read_bytes())  # type: ignore[attr-defined]
    encryption = serialization.BestAvailableEncryption(b"p12-secret")
    trust = tmp_path / "trust.p12"
    trust.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], encryption))
    keystore = tmp_path / "client.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, None, encryption))
    config = parse_config(BASE, **{
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(trust),
        "ssl.truststore.password": "p12-secret",
        "ssl.keystore.location": str(keystore),  # librdkafka: PKCS#12 by its name
        "ssl.keystore.password": "p12-secret",
    })
    assert "p12-secret" not in repr(config)
    client = TlsSession(build_ssl_context(config), "127.0.0.1")
    assert len(written) == 1 and "BEGIN ENCRYPTED PRIVATE KEY" in written[0]
    assert "BEGIN PRIVATE KEY" not in written[0]
    server, s_in, s_out = server_for(pki, require_client_cert=True)
    handshake(client, server, s_in, s_out)
    client.encrypt(b"ping")
    s_in.write(client.take_outgoing())
    assert server.read(10) == b"ping"
    wrong = parse_config(BASE, **{
        "security.protocol": "SSL", "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "nope",
    })
    with pytest.raises(ConfigError, match="is the password right"):
        build_ssl_context(wrong)


def test_a_store_password_with_a_pem_store_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        parse_config(BASE, **{"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                              "ssl.keystore.location": "/k.pem",
                              "ssl.keystore.password": "x"})


def test_generated_key_files_are_private_from_their_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each file is created 0600, not written readable and chmod-ed after (a
    # window in which another user could read a key).
    pytest.importorskip("cryptography")
    import os as os_module

    from kafka_share.testing import secure

    created: list[int] = []
    real_open = os_module.open

    def watching_open(path: object, flags: int, mode: int = 0o777, *a: object) -> int:
        if flags & os_module.O_CREAT:
            created.append(mode)
        return real_open(path, flags, mode, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(secure.os, "open", watching_open)
    pki = secure.generate_pki(tmp_path / "pki")
    assert created and set(created) == {0o600}
    for path in (pki.ca_file, pki.broker_keystore, pki.client_key, pki.jwt_key):
        assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("mechanism, warned", [
    ("PLAIN", "the password"), ("SCRAM-SHA-256", "SCRAM exchange"),
    ("OAUTHBEARER", "the access token"),
])
def test_credentials_over_a_plaintext_listener_warn_once_per_client(
    mechanism: str, warned: str, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka_share._net.client import NetworkClient

    extra: dict[str, object] = (
        {"sasl_oauth_token_provider": lambda: "token"} if mechanism == "OAUTHBEARER"
        else {"sasl_username": "u", "sasl_password": "secret-pw"}
    )
    config = parse_config(BASE, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                          **extra)
    with caplog.at_level("WARNING", logger="kafka_share"):
        client = NetworkClient.from_config(config, client_id="c", address_of=lambda n: None)
    client.close()
    lines = [r.getMessage() for r in caplog.records if "SASL_PLAINTEXT" in r.getMessage()]
    assert len(lines) == 1 and warned in lines[0] and "SASL_SSL" in lines[0]
    assert "secret-pw" not in lines[0]
    caplog.clear()
    tls = parse_config(BASE, security_protocol="SASL_SSL", sasl_mechanism=mechanism, **extra)
    with caplog.at_level("WARNING", logger="kafka_share"):
        NetworkClient.from_config(tls, client_id="c", address_of=lambda n: None).close()
    assert not [r for r in caplog.records if "SASL_PLAINTEXT" in r.getMessage()]


def test_validate_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SecurityProtocol.PLAINTEXT in IMPLEMENTED_SECURITY_PROTOCOLS
    validate_supported(parse_config(BASE))  # PLAINTEXT is implemented: no error
    config = parse_config(BASE, security_protocol="SSL")
    monkeypatch.setattr(
        "kafka_share._net.security_checks.IMPLEMENTED_SECURITY_PROTOCOLS",
        frozenset({SecurityProtocol.PLAINTEXT}),
    )
    with pytest.raises(ConfigError) as info:
        validate_supported(config)
    assert str(info.value) == (
        "security.protocol=SSL is not implemented by this client yet; implemented: PLAINTEXT"
    )
    monkeypatch.setattr(
        "kafka_share._net.security_checks.IMPLEMENTED_SECURITY_PROTOCOLS",
        frozenset({SecurityProtocol.PLAINTEXT, SecurityProtocol.SSL}),
    )
    validate_supported(config)


_HEAVY = ("ssl", "http.client", "tempfile", "difflib", "ipaddress", "kafka_share._net.security",
          "kafka_share._net.sasl", "kafka_share._net.tls", "kafka_share.credentials")


def _modules_after_construction(config: str) -> list[str]:
    script = (
        "import sys\n"
        "from kafka_share import ShareConsumer\n"
        f"c = ShareConsumer({{'bootstrap.servers': 'localhost:1', 'group.id': 'g', {config}}})\n"
        "c.close(timeout=1)\n"
        f"print(','.join(m for m in {_HEAVY!r} if m in sys.modules))\n"
    )
    return [m for m in run_fresh(script).strip().split(",") if m]


def test_a_plaintext_consumer_imports_no_tls_sasl_or_token_code() -> None:
    # Start-up time: ssl, the SASL mechanisms and the token provider (with
    # http.client) load only for a protocol that uses them.
    assert _modules_after_construction("") == []
    loaded = _modules_after_construction("'security.protocol': 'SSL'")
    assert {"ssl", "kafka_share._net.security", "kafka_share._net.tls"} <= set(loaded)
