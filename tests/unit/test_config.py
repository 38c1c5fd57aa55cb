"""Tests for kafka_share.config: parsing, coercion and validation of share consumer configs."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest

from kafka_share.config import (
    REJECTED_KEYS,
    AcknowledgementMode,
    AcquireMode,
    SaslMechanism,
    SecurityProtocol,
    ShareConsumerConfig,
    parse_config,
)
from kafka_share.errors import ConfigError

BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "g1"}
SECRET = "s3cr3t-Pa55"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="alice" password="{SECRET}";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="bob" password="{SECRET}";'
)


def parse(**overrides: object) -> ShareConsumerConfig:
    """parse_config with BASE plus dotted-key overrides (given as dotted strings)."""
    return parse_config({**BASE, **overrides})


def parse_dotted(extra: dict[str, object]) -> ShareConsumerConfig:
    return parse_config({**BASE, **extra})


def config_error(extra: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, **extra})
    return str(info.value)


# ---------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("attr", "expected"),
    [
        ("client_id", ""),
        ("client_rack", None),
        ("share_acknowledgement_mode", AcknowledgementMode.IMPLICIT),
        ("share_acquire_mode", AcquireMode.BATCH_OPTIMIZED),
        ("share_auto_renew", False),
        ("share_auto_renew_max_ms", 300_000),
        ("max_poll_records", 500),
        ("max_poll_interval_ms", 300_000),
        ("fetch_max_wait_ms", 500),
        ("fetch_min_bytes", 1),
        ("fetch_max_bytes", 52_428_800),
        ("max_partition_fetch_bytes", 1_048_576),
        ("check_crcs", True),
        ("record_decoder", "auto"),
        ("fetch_ahead", "auto"),
        ("request_timeout_ms", 30_000),
        ("default_api_timeout_ms", 60_000),
        ("retry_backoff_ms", 100),
        ("retry_backoff_max_ms", 1000),
        ("reconnect_backoff_ms", 50),
        ("reconnect_backoff_max_ms", 1000),
        ("socket_connection_setup_timeout_ms", 10_000),
        ("socket_connection_setup_timeout_max_ms", 30_000),
        ("connections_max_idle_ms", 540_000),
        ("receive_buffer_bytes", -1),
        ("send_buffer_bytes", 131_072),
        ("metadata_max_age_ms", 300_000),
        ("metadata_recovery_strategy", "rebootstrap"),
        ("metadata_recovery_rebootstrap_trigger_ms", 300_000),
        ("allow_auto_create_topics", True),
        ("client_dns_lookup", "use_all_dns_ips"),
        ("security_protocol", SecurityProtocol.PLAINTEXT),
        ("sasl_mechanism", None),
        ("sasl_username", None),
        ("sasl_password", None),
        ("ssl_cafile", None),
        ("ssl_certfile", None),
        ("ssl_keyfile", None),
        ("ssl_key_password", None),
        ("ssl_check_hostname", True),
        ("ssl_verify", True),
        ("ssl_cadata", None),
        ("ssl_certdata", None),
        ("ssl_keydata", None),
        ("ssl_crlfile", None),
        ("ssl_ciphers", None),
        ("ssl_enabled_protocols", "TLSv1.2,TLSv1.3"),
        ("ssl_truststore_pkcs12", None),
        ("ssl_truststore_pkcs12_password", None),
        ("ssl_keystore_pkcs12", None),
        ("ssl_keystore_pkcs12_password", None),
        ("ssl_context", None),
        ("sasl_kerberos_service_name", "kafka"),
        ("sasl_kerberos_domain_name", None),
        ("sasl_kerberos_principal", None),
        ("sasl_kerberos_keytab", None),
        ("sasl_oauth_token_provider", None),
        ("sasl_oauthbearer_token_endpoint_url", None),
        ("sasl_oauthbearer_client_credentials_client_id", None),
        ("sasl_oauthbearer_client_credentials_client_secret", None),
        ("sasl_oauthbearer_scope", None),
        ("sasl_oauthbearer_cafile", None),
        ("sasl_oauthbearer_token_endpoint_allow_http", False),
        ("sasl_login_refresh_window_factor", 0.8),
        ("sasl_login_refresh_window_jitter", 0.05),
        ("sasl_login_refresh_min_period_seconds", 60),
        ("sasl_login_refresh_buffer_seconds", 300),
        ("sasl_login_retry_backoff_ms", 100),
        ("sasl_login_retry_backoff_max_ms", 10_000),
        ("key_deserializer", None),
        ("value_deserializer", None),
        ("metrics_sample_window_ms", 30_000),
        ("metrics_num_samples", 2),
        ("metrics_recording_level", "INFO"),
        ("enable_metrics_push", True),
    ],
)
def test_default(attr: str, expected: object) -> None:
    config = parse_config(BASE)
    assert getattr(config, attr) == expected
    assert type(getattr(config, attr)) is type(expected)


def test_defaults_table_covers_every_attribute() -> None:
    # Every attribute is a Kafka key with dots turned into underscores, and
    # to_properties lists exactly those keys.
    names = {field.name for field in attrs.fields(ShareConsumerConfig)}
    properties = parse_config(BASE).to_properties()
    assert {key.replace(".", "_") for key in properties} == names
    assert len(names) == 77


def test_required_values_are_parsed() -> None:
    config = parse_config(BASE)
    assert config.bootstrap_servers == (("localhost", 9092),)
    assert config.group_id == "g1"


def test_none_means_default() -> None:
    config = parse_config({**BASE, "max.poll.records": None}, client_rack=None, check_crcs=None)
    assert config.max_poll_records == 500
    assert config.check_crcs is True
    assert config.client_rack is None


# ---------------------------------------------------------------- coercion


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(1, 1), (7, 7), ("500", 500), (" 42 ", 42), ("+3", 3), (2_147_483_647, 2_147_483_647)],
)
def test_int_coercion(raw: object, expected: int) -> None:
    assert parse_dotted({"max.poll.records": raw}).max_poll_records == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (True, "got a boolean"),
        (False, "got a boolean"),
        (1.0, "got a float"),
        (1.5, "got a float"),
        ("1.0", "expected an integer or a decimal string"),
        ("1_000", "expected an integer or a decimal string"),
        ("ten", "expected an integer or a decimal string"),
        ("", "expected an integer or a decimal string"),
        ([5], "got list"),
    ],
)
def test_int_rejects_non_integers(raw: object, reason: str) -> None:
    message = config_error({"max.poll.records": raw})
    assert "max.poll.records" in message
    assert reason in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("max.poll.records", 0, "[1, 2147483647]"),
        ("max.poll.records", 2_147_483_648, "[1, 2147483647]"),
        ("max.poll.interval.ms", 0, "[1, 2147483647]"),
        ("fetch.max.wait.ms", -1, "[0, 2147483647]"),
        ("fetch.min.bytes", -1, "[0, 2147483647]"),
        ("fetch.max.bytes", "-5", "[0, 2147483647]"),
        ("max.partition.fetch.bytes", -1, "[0, 2147483647]"),
        ("request.timeout.ms", -1, "[0, 2147483647]"),
        ("default.api.timeout.ms", -1, "[0, 2147483647]"),
        ("retry.backoff.ms", -1, "[0, 9223372036854775807]"),
        ("retry.backoff.max.ms", -1, "[0, 9223372036854775807]"),
        ("reconnect.backoff.ms", -1, "[0, 9223372036854775807]"),
        ("reconnect.backoff.max.ms", -1, "[0, 9223372036854775807]"),
        ("socket.connection.setup.timeout.ms", -1, "[0, 9223372036854775807]"),
        ("connections.max.idle.ms", -2, "[-1, 9223372036854775807]"),
        ("receive.buffer.bytes", -2, "[-1, 2147483647]"),
        ("metadata.max.age.ms", -1, "[0, 9223372036854775807]"),
        ("metrics.num.samples", 0, "[1, 2147483647]"),
        ("metrics.sample.window.ms", 2**63, "[0, 9223372036854775807]"),
    ],
)
def test_range_errors_name_key_value_and_range(key: str, value: object, allowed: str) -> None:
    message = config_error({key: value})
    assert f"Invalid value {value!r} for configuration {key}" in message
    assert allowed in message


def test_range_boundaries_are_inclusive() -> None:
    config = parse_dotted(
        {
            "max.poll.records": 1,
            "fetch.max.wait.ms": 0,
            "fetch.min.bytes": 0,
            "connections.max.idle.ms": -1,
            "send.buffer.bytes": -1,
        }
    )
    assert config.max_poll_records == 1
    assert config.fetch_max_wait_ms == 0
    assert config.fetch_min_bytes == 0
    assert config.connections_max_idle_ms == -1
    assert config.send_buffer_bytes == -1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, True), (False, False), ("true", True), ("FALSE", False), (" True ", True)],
)
def test_bool_coercion(raw: object, expected: bool) -> None:
    config = parse_dotted({"check.crcs": raw, "allow.auto.create.topics": raw})
    assert config.check_crcs is expected
    assert config.allow_auto_create_topics is expected


@pytest.mark.parametrize("raw", [1, 0, 1.0, "yes", "1", "", "on"])
def test_bool_rejects_other_values(raw: object) -> None:
    message = config_error({"check.crcs": raw})
    assert "for configuration check.crcs" in message
    assert "expected a boolean" in message


@pytest.mark.parametrize("key", ["client.id", "group.id", "sasl.username", "ssl.cafile"])
def test_string_keys_reject_non_strings(key: str) -> None:
    message = config_error({key: 12})
    assert f"configuration {key}: expected a string, got int" in message


def test_strings_are_stripped_and_empty_rack_means_none() -> None:
    config = parse_dotted({"client.id": "  app-1 ", "client.rack": "   ", "group.id": " g2 "})
    assert config.client_id == "app-1"
    assert config.client_rack is None
    assert config.group_id == "g2"
    assert parse_dotted({"client.rack": "rack-a"}).client_rack == "rack-a"


# ---------------------------------------------------------------- share modes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("implicit", AcknowledgementMode.IMPLICIT),
        ("explicit", AcknowledgementMode.EXPLICIT),
        (AcknowledgementMode.EXPLICIT, AcknowledgementMode.EXPLICIT),
    ],
)
def test_acknowledgement_mode_values(raw: object, expected: AcknowledgementMode) -> None:
    assert parse_dotted({"share.acknowledgement.mode": raw}).share_acknowledgement_mode is expected


@pytest.mark.parametrize("raw", ["Explicit", "IMPLICIT", "bogus", "", 1])
def test_acknowledgement_mode_is_case_sensitive(raw: object) -> None:
    message = config_error({"share.acknowledgement.mode": raw})
    assert message == (
        f"Invalid value {raw!r} for configuration share.acknowledgement.mode: "
        "the value must be either 'implicit' or 'explicit'"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("batch_optimized", AcquireMode.BATCH_OPTIMIZED),
        ("BATCH_OPTIMIZED", AcquireMode.BATCH_OPTIMIZED),
        ("record_limit", AcquireMode.RECORD_LIMIT),
        ("Record_Limit", AcquireMode.RECORD_LIMIT),
        (" RECORD_LIMIT ", AcquireMode.RECORD_LIMIT),
        (AcquireMode.RECORD_LIMIT, AcquireMode.RECORD_LIMIT),
    ],
)
def test_acquire_mode_is_case_insensitive(raw: object, expected: AcquireMode) -> None:
    config = parse_dotted({"share.acquire.mode": raw})
    assert config.share_acquire_mode is expected
    # Normalised to lower case in the properties view.
    assert config.to_properties()["share.acquire.mode"] == expected.name.lower()


@pytest.mark.parametrize("raw", ["record-limit", "fast", "", 1])
def test_acquire_mode_rejects_unknown(raw: object) -> None:
    message = config_error({"share.acquire.mode": raw})
    assert "configuration share.acquire.mode" in message
    assert "'batch_optimized' or 'record_limit'" in message


def test_enum_wire_values_and_strings() -> None:
    assert int(AcquireMode.BATCH_OPTIMIZED) == 0
    assert int(AcquireMode.RECORD_LIMIT) == 1
    assert str(AcquireMode.RECORD_LIMIT) == "record_limit"
    assert str(AcknowledgementMode.EXPLICIT) == "explicit"
    assert [m.name for m in AcknowledgementMode] == ["IMPLICIT", "EXPLICIT"]


# ---------------------------------------------------------------- rejected keys

REJECTED_FIXES = {
    "auto.offset.reset": ("share.auto.offset.reset", "IncrementalAlterConfigs", "GROUP"),
    "enable.auto.commit": ("acknowledged",),
    "group.instance.id": ("static membership",),
    "isolation.level": ("share.isolation.level", "IncrementalAlterConfigs"),
    "partition.assignment.strategy": ("assignor",),
    "interceptor.classes": ("interceptors",),
    "session.timeout.ms": ("share.session.timeout.ms", "group.share.session.timeout.ms"),
    "heartbeat.interval.ms": ("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms"),
    "group.protocol": ("share group protocol",),
    "group.remote.assignor": ("assignor",),
}

# Java's defaults: rejected even so.
REJECTED_DEFAULT_VALUES = {
    "auto.offset.reset": "latest",
    "enable.auto.commit": True,
    "group.instance.id": None,
    "isolation.level": "read_uncommitted",
    "partition.assignment.strategy": "range",
    "interceptor.classes": "",
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "group.protocol": "classic",
    "group.remote.assignor": "uniform",
}


def test_rejected_key_table_is_complete() -> None:
    assert set(REJECTED_KEYS) == set(REJECTED_FIXES) == set(REJECTED_DEFAULT_VALUES)


@pytest.mark.parametrize("key", sorted(REJECTED_FIXES))
def test_rejected_key_names_key_and_fix(key: str) -> None:
    message = config_error({key: REJECTED_DEFAULT_VALUES[key]})
    assert message.startswith(f"{key} cannot be set when using a share group:")
    for fragment in REJECTED_FIXES[key]:
        assert fragment in message


@pytest.mark.parametrize("key", sorted(REJECTED_FIXES))
def test_rejected_key_as_keyword(key: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key} cannot be set"):
        parse_config(BASE, **{key.replace(".", "_"): REJECTED_DEFAULT_VALUES[key]})


def test_auto_offset_reset_fix_lists_the_values() -> None:
    message = config_error({"auto.offset.reset": "earliest"})
    assert "earliest|latest|by_duration:" in message


def test_all_rejected_keys_in_one_message() -> None:
    message = config_error(
        {"auto.offset.reset": "earliest", "isolation.level": "read_committed"}
        | {"session.timeout.ms": 10_000, "enable.auto.commit": False}
    )
    assert message.startswith(
        "auto.offset.reset, isolation.level, session.timeout.ms, enable.auto.commit "
        "cannot be set when using a share group"
    )
    for key in ("auto.offset.reset", "isolation.level", "session.timeout.ms"):
        assert f"    {key}: " in message
    assert "share.isolation.level" in message
    assert "share.session.timeout.ms" in message


def test_rejected_unknown_and_invalid_reported_together() -> None:
    message = config_error(
        {"auto.offset.reset": "earliest", "max.poll.record": 5, "fetch.min.bytes": "lots"}
    )
    assert message.startswith("3 configuration problems:")
    assert "auto.offset.reset cannot be set" in message
    assert "Unknown configuration 'max.poll.record'" in message
    assert "configuration fetch.min.bytes" in message


# ---------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("max.poll.record", "max.poll.records"),
        ("bootstrap.server", "bootstrap.servers"),
        ("share.acknowledgment.mode", "share.acknowledgement.mode"),
        ("fetch.max.wait", "fetch.max.wait.ms"),
        ("Check.CRCS", "check.crcs"),
        ("request.timeout", "request.timeout.ms"),
    ],
)
def test_unknown_key_suggests_closest(key: str, suggestion: str) -> None:
    message = config_error({key: 1})
    assert message == f"Unknown configuration {key!r}: did you mean {suggestion!r}?"


def test_unknown_keyword_suggests_keyword_name() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE, max_poll_record=5)
    assert str(info.value) == (
        "Unknown configuration 'max_poll_record': did you mean 'max.poll.records' "
        "(keyword max_poll_records)?"
    )


@pytest.mark.parametrize("key", ["totally.unrelated", "x", "buffer.memory"])
def test_unknown_key_without_suggestion(key: str) -> None:
    assert config_error({key: 1}) == f"Unknown configuration {key!r}"


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("ssl.truststore.password", "keytool -importkeystore"),
        ("ssl.keystore.password", "ssl.key.password"),
        ("sasl.login.callback.handler.class", "sasl_oauth_token_provider"),
        ("linger.ms", "producer config"),
        ("acks", "producer config"),
        ("value.serializer", "producer config"),
        ("auto.commit.interval.ms", "commit no offsets"),
    ],
)
def test_unknown_key_with_specific_hint(key: str, hint: str) -> None:
    message = config_error({key: "x"})
    assert message.startswith(f"Unknown configuration {key!r}: ")
    assert hint in message


@pytest.mark.parametrize("key", ["", "   ", "\t"])
def test_empty_or_blank_key(key: str) -> None:
    assert config_error({key: 1}) == f"Configuration keys must be non-empty, got {key!r}"


def test_key_with_surrounding_whitespace() -> None:
    message = config_error({" max.poll.records": 5})
    assert message == (
        "Configuration key ' max.poll.records' has surrounding whitespace; use 'max.poll.records'"
    )


def test_non_string_key() -> None:
    with pytest.raises(ConfigError, match="Configuration keys must be strings, got 42"):
        parse_config({**BASE, 42: 1})  # type: ignore[dict-item]


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping of keys to values, got list"):
        parse_config([("group.id", "g")])  # type: ignore[arg-type]


# ---------------------------------------------------------------- dotted vs keyword

FULL_DOTTED: dict[str, object] = {
    "bootstrap.servers": "b1:9092,b2:9093",
    "group.id": "orders",
    "client.id": "worker-1",
    "client.rack": "use1-az1",
    "share.acknowledgement.mode": "explicit",
    "share.acquire.mode": "record_limit",
    "max.poll.records": "50",
    "fetch.max.wait.ms": 250,
    "check.crcs": "false",
    "retry.backoff.ms": 200,
    "security.protocol": "sasl_plaintext",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": SECRET,
}


def test_dotted_and_keyword_forms_are_equivalent() -> None:
    keyword = {key.replace(".", "_"): value for key, value in FULL_DOTTED.items()}
    from_dotted = parse_config(FULL_DOTTED)
    from_keywords = parse_config(**keyword)
    assert from_dotted == from_keywords
    assert from_keywords.share_acknowledgement_mode is AcknowledgementMode.EXPLICIT
    assert from_keywords.share_acquire_mode is AcquireMode.RECORD_LIMIT
    assert from_keywords.max_poll_records == 50
    assert from_keywords.check_crcs is False
    assert from_keywords.security_protocol is SecurityProtocol.SASL_PLAINTEXT


def test_mixing_dotted_and_keyword() -> None:
    config = parse_config({"bootstrap.servers": "h:1"}, group_id="g", max_poll_records=7)
    assert (config.group_id, config.max_poll_records) == ("g", 7)


def test_same_key_both_ways_with_same_value_is_fine() -> None:
    config = parse_config({**BASE, "max.poll.records": 10}, max_poll_records=10)
    assert config.max_poll_records == 10


def test_same_key_both_ways_with_different_values_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "max.poll.records": 10}, max_poll_records=20)
    assert str(info.value) == (
        "Configuration max.poll.records is given twice with different values "
        "('max.poll.records'=10 and 'max_poll_records'=20); give it once"
    )


def test_conflict_inside_the_mapping_is_an_error() -> None:
    message = config_error({"group_id": "other"})
    assert "Configuration group.id is given twice" in message


def test_conflicting_passwords_are_not_shown() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "sasl.password": SECRET}, sasl_password=SECRET + "x")
    assert SECRET not in str(info.value)
    assert "'sasl.password'=[hidden] and 'sasl_password'=[hidden]" in str(info.value)


# ---------------------------------------------------------------- bootstrap.servers


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("h1:9092", (("h1", 9092),)),
        ("h1:9092,h2:9093", (("h1", 9092), ("h2", 9093))),
        (" h1:9092 , h2:9093 ,", (("h1", 9092), ("h2", 9093))),
        (["h1:9092", " h2:1 "], (("h1", 9092), ("h2", 1))),
        (("h1:65535",), (("h1", 65535),)),
        ("[::1]:9092", (("::1", 9092),)),
        ("[fe80::1%eth0]:9092,10.0.0.1:9093", (("fe80::1%eth0", 9092), ("10.0.0.1", 9093))),
        ("broker-1.kafka.svc.cluster.local:9092", (("broker-1.kafka.svc.cluster.local", 9092),)),
        ([("h1", 9092), ("::1", 9093)], (("h1", 9092), ("::1", 9093))),
    ],
)
def test_bootstrap_parsing(raw: object, expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_dotted({"bootstrap.servers": raw}).bootstrap_servers == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("h1", "is not host:port"),
        ("h1:", "must be a number from 1 to 65535"),
        (":9092", "is not host:port"),
        ("h1:0", "port '0' in 'h1:0' must be a number from 1 to 65535"),
        ("h1:65536", "port '65536'"),
        ("h1:-1", "port '-1'"),
        ("h1:abc", "port 'abc'"),
        ("h1:9092,h2", "'h2' is not host:port"),
        ("::1:9092", "put IPv6 addresses in brackets"),
        ("[::1]", "is not host:port (IPv6 form is [::1]:9092)"),
        ("[not-ipv6]:9092", "is not an IPv6 address"),
        ("bad host:9092", "is not a valid host name"),
        ("-bad:9092", "is not a valid host name"),
        ("", "at least one host:port is required"),
        (" , ", "at least one host:port is required"),
        ([], "at least one host:port is required"),
        ([9092], "each server must be a 'host:port' string"),
        (9092, "got int"),
    ],
)
def test_bootstrap_errors(raw: object, reason: str) -> None:
    message = config_error({"bootstrap.servers": raw})
    assert "for configuration bootstrap.servers" in message
    assert reason in message


def test_bootstrap_missing() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(group_id="g")
    assert str(info.value).startswith(
        'Missing required configuration "bootstrap.servers" which has no default value'
    )


def test_bootstrap_round_trips_through_properties() -> None:
    config = parse_dotted({"bootstrap.servers": "h1:1,[::1]:2"})
    assert config.to_properties()["bootstrap.servers"] == "h1:1,[::1]:2"


# ---------------------------------------------------------------- group.id

GROUP_ID_MESSAGE = "You must provide a valid group.id in the consumer configuration"


@pytest.mark.parametrize("value", ["", "   ", None])
def test_group_id_blank_or_missing(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"bootstrap.servers": "h:1", "group.id": value})
    assert GROUP_ID_MESSAGE in str(info.value)
    assert "group.id" in str(info.value)


def test_group_id_absent() -> None:
    with pytest.raises(ConfigError, match=GROUP_ID_MESSAGE):
        parse_config(bootstrap_servers="h:1")


def test_both_required_missing_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config()
    message = str(info.value)
    assert message.startswith("2 configuration problems:")
    assert "bootstrap.servers" in message
    assert GROUP_ID_MESSAGE in message


# ---------------------------------------------------------------- deserializers


def _decode(raw: bytes) -> str:
    return raw.decode()


class _Upper:
    def __call__(self, raw: bytes) -> str:
        return raw.decode().upper()


@pytest.mark.parametrize("deserializer", [_decode, _Upper(), bytes.hex, lambda b: b])
def test_callable_deserializers_are_kept(deserializer: Any) -> None:
    config = parse_config(BASE, key_deserializer=deserializer, value_deserializer=deserializer)
    assert config.key_deserializer is deserializer
    assert config.value_deserializer is deserializer


def test_deserializer_is_usable() -> None:
    config = parse_config(BASE, value_deserializer=_Upper())
    assert config.value_deserializer is not None
    assert config.value_deserializer(b"abc") == "ABC"


@pytest.mark.parametrize("key", ["key.deserializer", "value.deserializer"])
def test_java_class_name_deserializer_is_an_error(key: str) -> None:
    message = config_error({key: "org.apache.kafka.common.serialization.StringDeserializer"})
    assert f"for configuration {key}" in message
    assert "Java class names are not supported; pass a Python callable" in message


@pytest.mark.parametrize("value", [42, b"bytes", ["f"]])
def test_non_callable_deserializer_is_an_error(value: object) -> None:
    message = config_error({"value.deserializer": value})
    assert "for configuration value.deserializer" in message
    assert "expected a callable (bytes -> object) or None" in message


# ---------------------------------------------------------------- security


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT),
        ("ssl", SecurityProtocol.SSL),
        ("Sasl_Ssl", SecurityProtocol.SASL_SSL),
    ],
)
def test_security_protocol_case_insensitive(raw: str, expected: SecurityProtocol) -> None:
    extra: dict[str, object] = {"security.protocol": raw}
    if expected.uses_sasl:
        extra |= {"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}
    assert parse_dotted(extra).security_protocol is expected


def test_security_protocol_invalid() -> None:
    message = config_error({"security.protocol": "TLS"})
    assert message == (
        "Invalid value 'TLS' for configuration security.protocol: the value must be one of "
        "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("PLAIN", SaslMechanism.PLAIN),
        ("scram-sha-256", SaslMechanism.SCRAM_SHA_256),
        ("SCRAM-SHA-512", SaslMechanism.SCRAM_SHA_512),
    ],
)
def test_sasl_mechanisms(raw: str, expected: SaslMechanism) -> None:
    config = parse_dotted(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": raw,
            "sasl.username": "u",
            "sasl.password": "p",
        }
    )
    assert config.sasl_mechanism is expected


@pytest.mark.parametrize("raw", ["DIGEST-MD5", "scram"])
def test_unsupported_sasl_mechanism(raw: str) -> None:
    message = config_error({"security.protocol": "SASL_SSL", "sasl.mechanism": raw})
    assert f"Invalid value {raw!r} for configuration sasl.mechanism" in message
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512" in message


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({}, "sasl.mechanism, sasl.username, sasl.password"),
        ({"sasl.mechanism": "PLAIN"}, "sasl.username, sasl.password"),
        ({"sasl.mechanism": "PLAIN", "sasl.username": "u"}, "sasl.password"),
        ({"sasl.username": "u", "sasl.password": "p"}, "sasl.mechanism"),
    ],
)
def test_sasl_without_mechanism_or_credentials(given: dict[str, object], missing: str) -> None:
    message = config_error({"security.protocol": "SASL_PLAINTEXT", **given})
    assert message.startswith(f"security.protocol=SASL_PLAINTEXT needs {missing}:")


def test_a_gssapi_keytab_needs_a_principal_and_must_be_readable(tmp_path: Any) -> None:
    gssapi = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}
    keytab = tmp_path / "client.keytab"
    keytab.write_bytes(b"\x05\x02")
    message = config_error({**gssapi, "sasl.kerberos.keytab": str(keytab)})
    assert "sasl.kerberos.keytab needs sasl.kerberos.principal" in message
    missing = str(tmp_path / "missing.keytab")
    message = config_error({**gssapi, "sasl.kerberos.keytab": missing,
                            "sasl.kerberos.principal": "client@EXAMPLE.COM"})
    assert f"sasl.kerberos.keytab {missing!r} cannot be read: No such file" in message


def test_sasl_settings_without_sasl_protocol() -> None:
    message = config_error({"sasl.mechanism": "PLAIN", "sasl.username": "u"})
    assert message.startswith("sasl.mechanism, sasl.username set but security.protocol=PLAINTEXT")
    assert "SASL_PLAINTEXT or SASL_SSL" in message


def test_ssl_settings_without_ssl_protocol() -> None:
    message = config_error({"ssl.cafile": "/ca.pem"})
    assert message.startswith("ssl.cafile set but security.protocol=PLAINTEXT does not use TLS")


def test_ssl_files() -> None:
    config = parse_dotted(
        {
            "security.protocol": "SSL",
            "ssl.cafile": "/ca.pem",
            "ssl.certfile": "/c.pem",
            "ssl.keyfile": "/k.pem",
            "ssl.key.password": SECRET,
            "ssl.check.hostname": "false",
        }
    )
    assert (config.ssl_cafile, config.ssl_certfile, config.ssl_keyfile) == (
        "/ca.pem",
        "/c.pem",
        "/k.pem",
    )
    assert config.ssl_key_password == SECRET
    assert config.ssl_check_hostname is False


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"ssl.keyfile": "/k.pem"}, "ssl.keyfile is set without ssl.certfile"),
        (
            {"ssl.certfile": "/c.pem", "ssl.key.password": "x"},
            "ssl.key.password is set without ssl.keyfile",
        ),
    ],
)
def test_ssl_file_dependencies(extra: dict[str, object], problem: str) -> None:
    assert problem in config_error({"security.protocol": "SSL", **extra})


# ---------------------------------------------------------------- sasl.jaas.config


@pytest.mark.parametrize(
    ("mechanism", "jaas", "username"),
    [
        ("PLAIN", PLAIN_JAAS, "alice"),
        ("SCRAM-SHA-256", SCRAM_JAAS, "bob"),
        ("SCRAM-SHA-512", SCRAM_JAAS, "bob"),
    ],
)
def test_jaas_config_gives_credentials(mechanism: str, jaas: str, username: str) -> None:
    config = parse_dotted(
        {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}
    )
    assert config.sasl_username == username
    assert config.sasl_password == SECRET


def test_jaas_escapes_and_bare_values() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule   optional\n"
        '  username=carol password="a\\"b\\\\c" ;'
    )
    config = parse_dotted(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}
    )
    assert config.sasl_username == "carol"
    assert config.sasl_password == 'a"b\\c'


@pytest.mark.parametrize(
    ("jaas", "reason"),
    [
        ("not a jaas config", "expected '<LoginModule class> required"),
        (
            'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true password="x";',
            "login module com.sun.security.auth.module.Krb5LoginModule is not supported",
        ),
        (PLAIN_JAAS.replace(";", ""), 'ending with ";"'),
        (PLAIN_JAAS + " " + PLAIN_JAAS, "exactly one login module entry"),
        (PLAIN_JAAS.replace(f' password="{SECRET}"', ""), "missing option(s): password"),
        (PLAIN_JAAS.replace(";", ' tokenauth="true";'), "unsupported login module option(s)"),
        (42, "expected a string, got int"),
    ],
)
def test_bad_jaas_config(jaas: object, reason: str) -> None:
    message = config_error(
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}
    )
    assert message.startswith("Invalid value [hidden] for configuration sasl.jaas.config: ")
    assert reason in message
    assert SECRET not in message


def test_jaas_module_must_match_mechanism() -> None:
    message = config_error(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": PLAIN_JAAS,
        }
    )
    assert "PlainLoginModule, which does not match sasl.mechanism=SCRAM-SHA-256; use PLAIN" in (
        message
    )


def test_jaas_and_username_together_is_an_error() -> None:
    message = config_error(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "sasl.username": "alice",
        }
    )
    assert "sasl.jaas.config and sasl.username are both set" in message


# ---------------------------------------------------------------- redaction


def _sasl_config() -> ShareConsumerConfig:
    return parse_dotted(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.certfile": "/c.pem",
            "ssl.keyfile": "/k.pem",
            "ssl.key.password": SECRET + "-key",
        }
    )


def test_repr_redacts_secrets() -> None:
    config = _sasl_config()
    text = repr(config)
    assert SECRET not in text
    assert "sasl_password='[hidden]'" in text
    assert "ssl_key_password='[hidden]'" in text
    assert "sasl_username='alice'" in text
    assert SECRET not in str(config)


def test_repr_shows_none_for_unset_secrets() -> None:
    assert "sasl_password=None" in repr(parse_config(BASE))


def test_to_properties_redacts_by_default() -> None:
    properties = _sasl_config().to_properties()
    assert properties["sasl.password"] == "[hidden]"
    assert properties["ssl.key.password"] == "[hidden]"
    assert properties["sasl.username"] == "alice"
    assert SECRET not in repr(properties)


def test_to_properties_unredacted_round_trips() -> None:
    config = _sasl_config()
    properties = config.to_properties(redact=False)
    assert properties["sasl.password"] == SECRET
    assert parse_config(properties) == config


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password"])
def test_invalid_secret_value_is_not_shown(key: str) -> None:
    message = config_error({key: 123456789})
    assert message == f"Invalid value [hidden] for configuration {key}: expected a string, got int"


def test_full_round_trip_of_a_busy_config() -> None:
    config = parse_config(FULL_DOTTED, value_deserializer=_decode)
    assert parse_config(config.to_properties(redact=False)) == config


# ---------------------------------------------------------------- cross-field checks


@pytest.mark.parametrize(("wait", "timeout"), [(30_000, 30_000), (40_000, 30_000), (10, 5)])
def test_fetch_max_wait_must_be_below_request_timeout(wait: int, timeout: int) -> None:
    message = config_error({"fetch.max.wait.ms": wait, "request.timeout.ms": timeout})
    assert message.startswith(
        f"fetch.max.wait.ms ({wait}) must be less than request.timeout.ms ({timeout})"
    )


def test_fetch_max_wait_just_below_request_timeout_is_fine() -> None:
    config = parse_dotted({"fetch.max.wait.ms": 29_999})
    assert config.fetch_max_wait_ms == 29_999


def test_retry_backoff_above_max_is_clamped_like_java(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_share.config"):
        config = parse_dotted({"retry.backoff.ms": 5000, "retry.backoff.max.ms": 2000})
    assert config.retry_backoff_ms == 2000
    assert config.retry_backoff_max_ms == 2000
    assert "retry.backoff.ms=5000 is greater than retry.backoff.max.ms=2000" in caplog.text


def test_retry_backoff_default_max_clamps_large_backoff() -> None:
    assert parse_dotted({"retry.backoff.ms": 3000}).retry_backoff_ms == 1000


def test_socket_setup_timeout_above_max_is_clamped() -> None:
    config = parse_dotted({"socket.connection.setup.timeout.ms": 60_000})
    assert config.socket_connection_setup_timeout_ms == 30_000


def test_reconnect_backoff_alone_disables_exponential_backoff() -> None:
    config = parse_dotted({"reconnect.backoff.ms": 200})
    assert (config.reconnect_backoff_ms, config.reconnect_backoff_max_ms) == (200, 200)
    both = parse_dotted({"reconnect.backoff.ms": 200, "reconnect.backoff.max.ms": 5000})
    assert (both.reconnect_backoff_ms, both.reconnect_backoff_max_ms) == (200, 5000)


# ---------------------------------------------------------------- other choices


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("client.dns.lookup", "resolve_canonical_bootstrap_servers_only", "default"),
        ("metadata.recovery.strategy", "none", "NONE"),
        ("metrics.recording.level", "DEBUG", "debug"),
    ],
)
def test_string_choices(key: str, good: str, bad: str) -> None:
    assert getattr(parse_dotted({key: good}), key.replace(".", "_")) == good
    message = config_error({key: bad})
    assert f"Invalid value {bad!r} for configuration {key}: the value must be one of" in message


def test_accepted_compatibility_keys() -> None:
    config = parse_dotted(
        {"enable.metrics.push": "false", "max.partition.fetch.bytes": 1, "client.id": "c"}
    )
    assert config.enable_metrics_push is False
    assert config.max_partition_fetch_bytes == 1


# ---------------------------------------------------------------- the class itself


def test_config_is_frozen() -> None:
    config = parse_config(BASE)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.max_poll_records = 1  # type: ignore[misc]


def test_direct_construction_normalises_and_validates() -> None:
    config = ShareConsumerConfig(
        bootstrap_servers="h:1",  # type: ignore[arg-type]
        group_id="g",
        share_acknowledgement_mode="explicit",  # type: ignore[arg-type]
    )
    assert config.bootstrap_servers == (("h", 1),)
    assert config.share_acknowledgement_mode is AcknowledgementMode.EXPLICIT
    assert config == parse_config(
        BASE | {"bootstrap.servers": "h:1", "group.id": "g"}, share_acknowledgement_mode="explicit"
    )
    with pytest.raises(ConfigError, match=r"configuration max.poll.records: .*\[1, 2147483647\]"):
        ShareConsumerConfig(bootstrap_servers=(("h", 1),), group_id="g", max_poll_records=0)
    with pytest.raises(ConfigError, match=r"max\.poll\.records must not be None"):
        ShareConsumerConfig(
            bootstrap_servers=(("h", 1),),
            group_id="g",
            max_poll_records=None,  # type: ignore[arg-type]
        )


def test_evolve_revalidates() -> None:
    config = parse_config(BASE)
    assert attrs.evolve(config, max_poll_records=9).max_poll_records == 9
    with pytest.raises(ConfigError, match=r"must be less than request\.timeout\.ms"):
        attrs.evolve(config, fetch_max_wait_ms=config.request_timeout_ms)


# ---------------------------------------------------------------- record.decoder


def test_record_decoder_takes_dotted_key_and_keyword() -> None:
    assert parse_config({**BASE, "record.decoder": " python "}).record_decoder == "python"
    assert parse_config(BASE, record_decoder="auto").record_decoder == "auto"
    assert parse_dotted({"record.decoder": "python"}).to_properties()["record.decoder"] == "python"
    message = config_error({"record.decoder": "numpy"})
    assert "record.decoder" in message and "'auto', 'python'" in message


def test_fetch_ahead_takes_dotted_key_and_keyword() -> None:
    assert parse_config({**BASE, "fetch.ahead": "manual"}).fetch_ahead == "manual"
    assert parse_config(BASE, fetch_ahead="auto").fetch_ahead == "auto"
    message = config_error({"fetch.ahead": "never"})
    assert "fetch.ahead" in message and "'auto', 'manual'" in message


# ---------------------------------------------------------------- auto-renew


def test_share_auto_renew_takes_dotted_keys_and_keywords() -> None:
    config = parse_config({**BASE, "share.auto.renew": "true", "share.auto.renew.max.ms": 60_000})
    assert config.share_auto_renew is True and config.share_auto_renew_max_ms == 60_000
    config = parse_config(BASE, share_auto_renew=True, share_auto_renew_max_ms="1000")
    assert config.share_auto_renew is True and config.share_auto_renew_max_ms == 1000


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"share.auto.renew": "yes"}, "share.auto.renew"),
        ({"share.auto.renew": 1}, "share.auto.renew"),
        ({"share.auto.renew.max.ms": 0}, "share.auto.renew.max.ms"),
        ({"share.auto.renew.max.ms": -5}, "share.auto.renew.max.ms"),
        ({"share.auto.renew.max.ms": 1.5}, "share.auto.renew.max.ms"),
    ],
)
def test_share_auto_renew_bad_values_are_named(extra: dict[str, object], named: str) -> None:
    assert named in config_error(extra)


@pytest.mark.parametrize("given", [
    {"share.auto.offset.reset": "earliest"}, {"share_auto_offset_reset": "earliest"},
    {"share.record.lock.duration.ms": 60_000},
])
def test_a_share_group_config_on_the_consumer_says_how_to_set_it(given: dict[str, object]) -> None:
    # It used to answer "did you mean 'share.auto.renew'?".
    message = config_error(given)
    assert "is a share-group config, not a consumer setting" in message
    assert "kafka-share groups config GROUP --set" in message
    assert "Admin.alter_group_configs" in message and "did you mean" not in message
