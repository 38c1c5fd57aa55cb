"""Against Kafka 4.1 (share protocol v1 only): the core works; v2 features fail up front."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share import AcknowledgeType, ShareConsumer, UnsupportedVersionError
from kafka_share.testing import LocalKafkaCluster

pytestmark = pytest.mark.integration

KAFKA_41 = "4.1.1"


@pytest.fixture(scope="module")
def kafka41() -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(kafka_version=KAFKA_41)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def topic_with_records(kafka41: LocalKafkaCluster) -> Iterator[tuple[str, str]]:
    admin = kafka41.admin()
    try:
        topic = admin.create_topic(partitions=1)
        group = f"g41-{topic}"
        admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
        admin.produce(topic, [f"r{i}".encode() for i in range(5)], partition=0)
        yield topic, group
    finally:
        admin.close()


def test_v1_broker_consumes_and_refuses_renew(
    kafka41: LocalKafkaCluster, topic_with_records: tuple[str, str]
) -> None:
    topic, group = topic_with_records
    with ShareConsumer(bootstrap_servers=kafka41.bootstrap_servers, group_id=group,
                       share_acknowledgement_mode="explicit") as c:
        c.subscribe([topic])
        records = poll_until(c, lambda s: len(s) >= 5, timeout_s=30)
        assert sorted(r.value for r in records) == [f"r{i}".encode() for i in range(5)]
        with pytest.raises(UnsupportedVersionError, match="RENEW"):
            c.acknowledge(records[0], AcknowledgeType.RENEW)
        for r in records:
            c.acknowledge(r)
        results = c.commit_sync(timeout=10.0)
        assert results and all(e is None for e in results.values())


def test_v1_broker_refuses_record_limit_mode(
    kafka41: LocalKafkaCluster, topic_with_records: tuple[str, str]
) -> None:
    topic, group = topic_with_records
    with ShareConsumer(bootstrap_servers=kafka41.bootstrap_servers, group_id=group,
                       share_acquire_mode="record_limit", max_poll_records=2) as c:
        c.subscribe([topic])
        got: list[Any] = []
        with pytest.raises(UnsupportedVersionError, match="record_limit"):
            for _ in range(60):
                got.extend(c.poll(0.5))
        assert got == [], "record_limit must not silently fall back to batch_optimized"
        with pytest.raises(UnsupportedVersionError):
            c.poll(0.1)  # fatal: every later poll says so too


def test_v1_broker_refuses_auto_renew(
    kafka41: LocalKafkaCluster, topic_with_records: tuple[str, str]
) -> None:
    topic, group = topic_with_records
    with ShareConsumer(bootstrap_servers=kafka41.bootstrap_servers, group_id=group,
                       share_auto_renew=True) as c:
        c.subscribe([topic])
        got: list[Any] = []
        with pytest.raises(UnsupportedVersionError, match=r"share\.auto\.renew"):
            for _ in range(60):
                got.extend(c.poll(0.5))
        # Without renewal the records could not be held as configured: none is handed out.
        assert got == []
