"""TLS, SASL, re-authentication and authorization against a real secured broker.

Every test shares one secured broker (the session's ``secure_kafka`` fixture):
the SSL, SASL_PLAINTEXT, SASL_SSL, REAUTH (5 s sessions) and OIDC listeners.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share._net import connection as connection_module
from kafka_share.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    SaslAuthenticationError,
    SslAuthenticationError,
    TopicAuthorizationFailedError,
    UnsupportedSaslMechanismError,
)
from kafka_share.testing import KafkaAdmin, unique_name
from kafka_share.testing.secure import OidcTokenServer, SecureKafkaCluster, unsecured_jwt

pytestmark = pytest.mark.integration

RECORDS = 20


@pytest.fixture(scope="module")
def admin(secure_kafka: SecureKafkaCluster) -> Iterator[KafkaAdmin]:
    a = KafkaAdmin(secure_kafka.bootstrap_servers)
    yield a
    a.close()


@pytest.fixture
def topic(admin: KafkaAdmin) -> str:
    name = unique_name("secure")
    admin.create_topic(name, partitions=1)
    admin.produce(name, [f"v{i}".encode() for i in range(RECORDS)])
    return name


@pytest.fixture
def group(admin: KafkaAdmin) -> str:
    name = unique_name("secure-group")
    admin.set_group_config(name, {"share.auto.offset.reset": "earliest"})
    return name


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every BrokerConnection made during the test (to count connection attempts)."""
    made: list[Any] = []
    original = connection_module.BrokerConnection.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(connection_module.BrokerConnection, "__init__", counting)
    return made


def consume_and_acknowledge(config: dict[str, Any], topic: str, group: str) -> int:
    """Consume every record in explicit mode, acknowledge each, commit; return the count."""
    with ShareConsumer(config, group_id=group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            records = list(c.poll(1.0))
            for record in records:
                c.acknowledge(record)
            got += len(records)
            if records:
                results = c.commit_sync()
                assert all(error is None for error in results.values()), results
        return got


def raised_within(config: dict[str, Any], topic: str, group: str, seconds: float = 10.0,
                  expect: type[KafkaError] = KafkaError) -> tuple[KafkaError, float]:
    """Poll until the consumer raises an ``expect``; the error and how long it took."""
    start = time.monotonic()
    others: list[KafkaError] = []
    with ShareConsumer(config, group_id=group) as c:
        c.subscribe([topic])
        while time.monotonic() - start < seconds:
            try:
                c.poll(0.5)
            except KafkaError as exc:
                if isinstance(exc, expect):
                    return exc, time.monotonic() - start
                others.append(exc)
    raise AssertionError(f"no {expect.__name__} was raised within {seconds} s: {others}")


# ---------------------------------------------------------------- end to end


def test_sasl_ssl_scram_sha_512_with_librdkafka_keys(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    assert secure_kafka.pki is not None
    config = {
        "bootstrap.servers": secure_kafka.listeners["SASL_SSL"],
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": secure_kafka.users["alice"],
        "ssl.ca.location": str(secure_kafka.pki.ca_file),
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert consume_and_acknowledge(config, topic, group) == RECORDS


def test_sasl_plaintext_plain_with_jaas_config(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    password = secure_kafka.users["alice"]
    config = {
        "bootstrap.servers": secure_kafka.listeners["SASL_PLAINTEXT"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="alice" password="{password}";'
        ),
    }
    assert consume_and_acknowledge(config, topic, group) == RECORDS


def test_ssl_client_certificate_with_java_pem_keys(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    assert secure_kafka.pki is not None
    config = {
        "bootstrap.servers": secure_kafka.listeners["SSL"],
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secure_kafka.pki.ca_file),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(secure_kafka.pki.client_keystore),
    }
    assert consume_and_acknowledge(config, topic, group) == RECORDS


def test_oauthbearer_with_a_token_callable(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    calls: list[int] = []

    def provider() -> tuple[str, float]:
        calls.append(1)
        return unsecured_jwt("alice", 600), time.time() + 600

    config = {
        **secure_kafka.client_config("SASL_SSL", mechanism="OAUTHBEARER"),
        "sasl_oauth_token_provider": provider,
    }
    assert consume_and_acknowledge(config, topic, group) == RECORDS
    assert calls


def test_oauthbearer_oidc_client_credentials(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    assert secure_kafka.pki is not None
    with OidcTokenServer(secure_kafka.pki, {"orders-app": "s3cr3t-client"}) as idp:
        config = {
            "bootstrap.servers": secure_kafka.listeners["OIDC"],
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.cafile": str(secure_kafka.pki.ca_file),
            "sasl.oauthbearer.client.id": "orders-app",
            "sasl.oauthbearer.client.secret": "s3cr3t-client",
            "sasl.oauthbearer.scope": "kafka.read kafka.write",
        }
        assert consume_and_acknowledge(config, topic, group) == RECORDS
        # One token serves every connection until its refresh point.
        assert idp.requests == 1
        assert idp.last_form["scope"] == "kafka.read kafka.write"


# ---------------------------------------------------------------- TLS checks


def test_hostname_mismatch_is_rejected_and_passes_when_turned_off(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    # The broker certificate names 127.0.0.1 and broker.kafka-share.test, not localhost.
    port = secure_kafka.listeners["SSL"].rsplit(":", 1)[1]
    config = {**secure_kafka.client_config("SSL"), "bootstrap.servers": f"localhost:{port}"}
    error, seconds = raised_within(config, topic, group)
    assert isinstance(error, SslAuthenticationError), error
    assert "localhost" in str(error) and "mismatch" in str(error).lower(), error
    assert seconds < 10
    off = {**config, "ssl.endpoint.identification.algorithm": ""}
    # The failed consumer never joined: the group still starts from the earliest record.
    assert consume_and_acknowledge(off, topic, group) == RECORDS


def test_untrusted_certificate_raises_ssl_authentication_error(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    config = secure_kafka.client_config("SASL_SSL")
    del config["ssl.cafile"]  # the system store does not know the run's CA
    error, _ = raised_within(config, topic, group)
    assert isinstance(error, SslAuthenticationError), error
    assert "did not verify" in str(error)


# ---------------------------------------------------------------- authentication errors


def test_wrong_password_raises_within_10_s_with_bounded_attempts_and_no_secret_logged(
    secure_kafka: SecureKafkaCluster, topic: str, group: str, connections: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = "wr0ng-Passw0rd-that-must-not-leak"
    config = {**secure_kafka.client_config("SASL_SSL"), "sasl.password": wrong}
    caplog.set_level(logging.DEBUG)
    error, seconds = raised_within(config, topic, group)
    assert isinstance(error, SaslAuthenticationError), error
    assert "SCRAM-SHA-512" in str(error) and "invalid credentials" in str(error), error
    assert seconds < 10
    # Keep polling: the consumer backs off between attempts instead of storming.
    start = time.monotonic()
    with ShareConsumer(config, group_id=group) as c:
        c.subscribe([topic])
        while time.monotonic() - start < 5:
            try:
                c.poll(0.5)
            except SaslAuthenticationError:
                pass
    # reconnect.backoff.ms 50 doubling to reconnect.backoff.max.ms 1000: about ten
    # attempts in 5 s; a retry storm would make hundreds.
    print(f"wrong password: raised after {seconds:.2f} s; {len(connections)} connection "
          f"attempts by two consumers in {seconds + time.monotonic() - start:.1f} s")
    assert 1 <= len(connections) <= 25, len(connections)
    logged = "\n".join(r.getMessage() for r in caplog.records) + repr(error)
    assert wrong not in logged
    assert secure_kafka.users["alice"] not in logged


def test_mechanism_the_listener_does_not_enable_lists_the_enabled_ones(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    config = {
        **secure_kafka.client_config("SASL_PLAINTEXT", mechanism="PLAIN"),
        "bootstrap.servers": secure_kafka.listeners["OIDC"],
    }
    error, _ = raised_within(config, topic, group)
    assert isinstance(error, UnsupportedSaslMechanismError), error
    assert "PLAIN" in str(error) and "enables: OAUTHBEARER" in str(error)


# ---------------------------------------------------------------- authorization errors


def test_user_without_rights_gets_group_authorization_failed(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    config = secure_kafka.client_config("SASL_PLAINTEXT", user="mallory", mechanism="PLAIN")
    # (mallory may hear of the topic first: it has no right on it either)
    error, _ = raised_within(config, topic, group, expect=GroupAuthorizationFailedError)
    assert isinstance(error, GroupAuthorizationFailedError), error
    assert group in str(error)


def test_user_without_topic_rights_gets_topic_authorization_failed(
    secure_kafka: SecureKafkaCluster, topic: str, group: str
) -> None:
    config = secure_kafka.client_config("SASL_PLAINTEXT", user="carol", mechanism="PLAIN")
    error, _ = raised_within(config, topic, group, expect=TopicAuthorizationFailedError)
    assert isinstance(error, TopicAuthorizationFailedError), error
    assert topic in str(error)


# ---------------------------------------------------------------- re-authentication


def test_30_s_of_consuming_across_re_authentications(
    secure_kafka: SecureKafkaCluster, admin: KafkaAdmin, group: str, connections: list[Any]
) -> None:
    name = unique_name("reauth")
    admin.create_topic(name, partitions=1)
    config = secure_kafka.client_config("REAUTH", mechanism="SCRAM-SHA-256")
    acked = 0
    produced = 0
    with ShareConsumer(config, group_id=group, share_acknowledgement_mode="explicit") as c:
        c.subscribe([name])
        end = time.monotonic() + 30
        while time.monotonic() < end:
            admin.produce(name, [f"r{produced + i}".encode() for i in range(5)])
            produced += 5
            records = list(c.poll(1.0))
            for record in records:
                c.acknowledge(record)
            if records:
                results = c.commit_sync()
                assert all(error is None for error in results.values()), results
                acked += len(records)
    share_connections = [conn for conn in connections if conn.node_id >= 0]
    print(f"re-authentication: {acked} of {produced} records acknowledged in 30 s; "
          f"authentications per broker connection: "
          f"{[conn.authentications for conn in share_connections]}")
    assert acked >= produced - 10, (acked, produced)
    # The broker ends a session after 5 s: without re-authentication every
    # connection would be cut about six times in 30 s.
    assert max(conn.authentications for conn in share_connections) >= 5
    assert all(conn.close_reason is None or "closing" in str(conn.close_reason)
               for conn in share_connections), [str(c.close_reason) for c in share_connections]
