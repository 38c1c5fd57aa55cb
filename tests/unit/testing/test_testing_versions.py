from __future__ import annotations

import pytest

from kafka_share.testing.errors import UnsupportedKafkaVersionError
from kafka_share.testing.versions import DEFAULT_KAFKA_VERSION, KafkaVersion, parse_kafka_version


def test_default_is_4_4_0() -> None:
    assert parse_kafka_version(DEFAULT_KAFKA_VERSION) == KafkaVersion(4, 4, 0)


@pytest.mark.parametrize("text", ["4.1.1", "4.2.1", "4.3.1", " 4.4.0 ", "5.0.0"])
def test_share_capable_versions_parse(text: str) -> None:
    version = parse_kafka_version(text)
    assert str(version) == text.strip()


@pytest.mark.parametrize("text", ["4.0.0", "4.0.2"])
def test_4_0_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(UnsupportedKafkaVersionError, match=r"early-access.*4\.1\.0 or newer"):
        parse_kafka_version(text)


def test_3_x_is_refused() -> None:
    with pytest.raises(UnsupportedKafkaVersionError, match="no share groups"):
        parse_kafka_version("3.9.1")


@pytest.mark.parametrize("text", ["", "4.4", "latest", "4.4.0-rc1", "v4.4.0"])
def test_malformed_versions_name_the_expected_form(text: str) -> None:
    with pytest.raises(UnsupportedKafkaVersionError, match=r"major\.minor\.patch"):
        parse_kafka_version(text)


def test_share_default_flips_at_4_2() -> None:
    assert not parse_kafka_version("4.1.1").share_on_by_default
    assert parse_kafka_version("4.2.0").share_on_by_default


def test_refusal_is_a_kafka_error_and_value_error() -> None:
    from kafka_share.errors import KafkaError

    with pytest.raises(KafkaError):
        parse_kafka_version("4.0.1")
    with pytest.raises(ValueError):
        parse_kafka_version("4.0.1")


def test_share_version_2_comes_with_4_4() -> None:
    assert parse_kafka_version("4.3.1").max_share_version == 1
    assert parse_kafka_version("4.4.0").max_share_version == 2
    assert parse_kafka_version("4.4.0").check_share_version(2) == 2


@pytest.mark.parametrize(("text", "level"), [("4.3.1", 2), ("4.4.0", 3), ("4.4.0", -1)])
def test_a_share_version_the_release_lacks_is_refused(text: str, level: int) -> None:
    with pytest.raises(UnsupportedKafkaVersionError, match=rf"share.version={level} is not"):
        parse_kafka_version(text).check_share_version(level)


def test_local_cluster_checks_its_share_version_before_starting() -> None:
    from kafka_share.testing.local import LocalKafkaCluster

    with pytest.raises(UnsupportedKafkaVersionError, match=r"needs Kafka 4\.4\.0 or newer"):
        LocalKafkaCluster(kafka_version="4.2.1", share_version=2)
    with pytest.raises(ValueError, match="share_enabled=False contradicts share_version=2"):
        LocalKafkaCluster(kafka_version="4.4.0", share_enabled=False, share_version=2)
    cluster = LocalKafkaCluster(kafka_version="4.4.0", share_version=2)
    assert cluster.share_enabled and cluster.share_version == 2
    assert not LocalKafkaCluster(kafka_version="4.4.0", share_version=0).share_enabled
