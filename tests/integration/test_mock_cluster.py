"""ShareConsumer against a second broker implementation: librdkafka's mock cluster.

The mock cluster (bundled in the confluent-kafka wheel, driven through ctypes
by kafka_share.testing.mock_cluster) implements the Kafka protocol and share
groups independently of Apache Kafka, with its own quirks (an ApiVersions
error answer in a non-standard layout, an extra tag section after Metadata,
ShareFetch v1 only). Passing here as well as against Apache Kafka means the
client follows the protocol, not one broker's habits.

One known difference decides two tests below. Apache Kafka's ShareFetch
response carries only the records that request acquired; the mock's carries
every record the member holds on that broker (rd_kafka_mock_handlers.c,
rd_kafka_mock_sgrp_write_acquired_records). kafka-share fetches ahead: it can
send the next ShareFetch to a broker while the application still holds that
broker's records, and then gets them a second time (same delivery count,
same acquisition). The engine's ledger of held records
(kafka_share/share/held.py) drops such resends, so the exactly-once test
holds against the mock too.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from share_helpers import poll_for, poll_until

from kafka_share import AcknowledgeType, ShareConsumer
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.testing.mock_cluster import MockCluster

pytestmark = pytest.mark.integration

MockConsumerFactory = Callable[..., ShareConsumer[Any, Any]]
Produced = dict[tuple[int, int], bytes]

def _group() -> str:
    return f"mock-group-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def mock_consumer_factory(mock_cluster: MockCluster) -> Iterator[MockConsumerFactory]:
    """``make(group_id, **config)``: kafka-share consumers of the mock cluster, closed after."""
    made: list[ShareConsumer[Any, Any]] = []

    def make(group_id: str, /, **config: Any) -> ShareConsumer[Any, Any]:
        consumer: ShareConsumer[Any, Any] = ShareConsumer(
            bootstrap_servers=mock_cluster.bootstrap_servers, group_id=group_id, **config
        )
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        try:
            consumer.close(timeout=5.0)
        except Exception:
            pass


def _leaders(mock_cluster: MockCluster, topic: str) -> dict[int, int]:
    """Partition -> leader as the mock cluster's Metadata reports it (read by confluent-kafka)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers})
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def _produce_per_partition(
    mock_cluster: MockCluster, topic: str, partitions: int, count: int, tag: str
) -> Produced:
    produced: Produced = {}
    for partition in range(partitions):
        values = [f"{tag}-{partition}-{i}".encode() for i in range(count)]
        for (p, offset), value in zip(
            mock_cluster.produce(topic, values, partition=partition), values, strict=True
        ):
            produced[(p, offset)] = value
    return produced


def _assert_all_delivered(seen: list[Any], produced: Produced, *, exactly_once: bool) -> None:
    """Every produced record delivered with its value, none redelivered (delivery
    count 1). ``exactly_once`` also forbids the mock's resends of held records."""
    counts = Counter((r.partition, r.offset) for r in seen)
    missing = sorted(set(produced) - set(counts))
    assert not missing, f"{len(missing)} records never delivered, e.g. {missing[:5]}"
    assert set(counts) == set(produced), "records that were never produced"
    assert all(r.value == produced[(r.partition, r.offset)] for r in seen)
    assert {r.delivery_count for r in seen} == {1}, "a record was redelivered"
    if exactly_once:
        duplicates = {k: n for k, n in counts.items() if n > 1}
        assert not duplicates, f"delivered more than once: {duplicates}"


def _consume_six_partitions(
    mock_cluster: MockCluster,
    mock_consumer_factory: MockConsumerFactory,
    *,
    slow_brokers_rtt_ms: int,
    exactly_once: bool,
) -> None:
    """6 partitions led by 3 brokers (two each), 50 records each, one consumer."""
    topic = mock_cluster.create_topic(partitions=6)
    for partition in range(6):
        mock_cluster.set_partition_leader(topic, partition, partition % 3 + 1)
    assert _leaders(mock_cluster, topic) == {p: p % 3 + 1 for p in range(6)}
    produced = _produce_per_partition(mock_cluster, topic, 6, 50, "six")
    total = len(produced)
    assert total == 300

    mock_cluster.clear_requests()
    mock_cluster.start_request_tracking()
    group = _group()
    try:
        for broker_id in (2, 3):
            mock_cluster.set_broker_rtt(broker_id, slow_brokers_rtt_ms)
        consumer = mock_consumer_factory(group)
        consumer.subscribe([topic])
        seen = poll_until(consumer, lambda s: len(s) >= total, timeout_s=60)
        # A little longer: a duplicate arriving late must be caught too.
        seen += poll_for(consumer, 1.5)
        results = consumer.commit_sync(timeout=10.0)
        consumer.close(timeout=5.0)
        fetched_from = {
            r.broker_id for r in mock_cluster.requests() if r.api_key == ApiKey.SHARE_FETCH
        }
    finally:
        mock_cluster.stop_request_tracking()
        for broker_id in (2, 3):
            mock_cluster.set_broker_rtt(broker_id, 0)

    _assert_all_delivered(seen, produced, exactly_once=exactly_once)
    if exactly_once:
        # (A resent record is acknowledged twice; the second ACCEPT may fail.)
        assert all(err is None for err in results.values()), results
    # Each partition was fetched from its own leader: all three brokers served data.
    assert fetched_from == {1, 2, 3}
    # Everything was acknowledged: a new member of the group gets nothing back.
    again = mock_consumer_factory(group)
    again.subscribe([topic])
    assert poll_for(again, 3.0) == []


def test_six_partitions_on_three_brokers_are_consumed_exactly_once(
    mock_cluster: MockCluster, mock_consumer_factory: MockConsumerFactory
) -> None:
    # Brokers 2 and 3 answer 300 ms late, so their records reach the application
    # in a later poll than broker 1's: the case where a fetch ahead goes to a
    # broker whose records the application holds (every run, not one in three).
    _consume_six_partitions(
        mock_cluster, mock_consumer_factory, slow_brokers_rtt_ms=300, exactly_once=True
    )


def test_six_partitions_on_three_brokers_lose_and_redeliver_nothing(
    mock_cluster: MockCluster, mock_consumer_factory: MockConsumerFactory
) -> None:
    _consume_six_partitions(
        mock_cluster, mock_consumer_factory, slow_brokers_rtt_ms=0, exactly_once=False
    )


def test_leaders_moving_between_brokers_mid_consumption_lose_nothing(
    mock_cluster: MockCluster, mock_consumer_factory: MockConsumerFactory
) -> None:
    topic = mock_cluster.create_topic(partitions=3)
    for partition in range(3):
        mock_cluster.set_partition_leader(topic, partition, partition + 1)
    produced = _produce_per_partition(mock_cluster, topic, 3, 20, "before")
    group = _group()
    consumer = mock_consumer_factory(group)
    consumer.subscribe([topic])
    seen = poll_until(consumer, lambda s: len({(r.partition, r.offset) for r in s}) >= 60,
                      timeout_s=30)

    # Every partition moves to another broker; the consumer must follow.
    for partition in range(3):
        mock_cluster.set_partition_leader(topic, partition, (partition + 1) % 3 + 1)
    assert _leaders(mock_cluster, topic) == {0: 2, 1: 3, 2: 1}
    after = _produce_per_partition(mock_cluster, topic, 3, 20, "after")
    produced.update(after)
    seen += poll_until(
        consumer, lambda s: {(r.partition, r.offset) for r in s} >= set(after), timeout_s=30
    )
    seen += poll_for(consumer, 1.0)
    consumer.commit_sync(timeout=10.0)
    consumer.close(timeout=5.0)
    _assert_all_delivered(seen, produced, exactly_once=False)
    again = mock_consumer_factory(group)
    again.subscribe([topic])
    assert poll_for(again, 3.0) == []


def test_a_released_record_comes_back_with_delivery_count_2(
    mock_cluster: MockCluster, mock_consumer_factory: MockConsumerFactory
) -> None:
    topic = mock_cluster.create_topic(partitions=1)
    mock_cluster.set_partition_leader(topic, 0, 2)
    mock_cluster.produce(topic, [b"keep-1", b"release-me", b"keep-2"], partition=0)

    consumer = mock_consumer_factory(_group(), share_acknowledgement_mode="explicit")
    consumer.subscribe([topic])
    first: list[Any] = []

    def acknowledge_batch(batch: list[Any]) -> None:
        # Explicit mode: acknowledge each record of a batch before the next poll.
        for record in batch:
            kind = (
                AcknowledgeType.RELEASE if record.value == b"release-me"
                else AcknowledgeType.ACCEPT
            )
            consumer.acknowledge(record, kind)
        first.extend(batch)

    poll_until(consumer, lambda _: len(first) >= 3, timeout_s=30, on_batch=acknowledge_batch)
    assert sorted(r.value for r in first) == [b"keep-1", b"keep-2", b"release-me"]
    assert {r.delivery_count for r in first} == {1}
    results = consumer.commit_sync(timeout=10.0)
    assert all(err is None for err in results.values()), results
    released = next(r for r in first if r.value == b"release-me")

    back: list[Any] = []

    def accept_batch(batch: list[Any]) -> None:
        for record in batch:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        back.extend(batch)

    poll_until(consumer, lambda _: bool(back), timeout_s=30, on_batch=accept_batch)
    assert [(r.offset, r.value, r.delivery_count) for r in back] == [
        (released.offset, b"release-me", 2)
    ]
    results = consumer.commit_sync(timeout=10.0)
    assert all(err is None for err in results.values()), results
    # The accepted records stay gone.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        late = list(consumer.poll(0.5))
        assert late == [], [(r.offset, r.value, r.delivery_count) for r in late]


def test_confluent_kafka_share_consumer_reads_the_same_mock_cluster(
    mock_cluster: MockCluster,
) -> None:
    """Harness sanity check, independent of kafka-share's protocol code."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    topic = mock_cluster.create_topic(partitions=3)
    sent = [f"value-{i}".encode() for i in range(30)]
    for partition in range(3):
        mock_cluster.produce(topic, sent[partition::3], partition=partition)

    consumer = confluent_kafka.ShareConsumer(
        {"bootstrap.servers": mock_cluster.bootstrap_servers, "group.id": _group()}
    )
    received: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(received) < len(sent) and time.monotonic() < deadline:
            for message in consumer.poll(1.0):
                assert message.error() is None, message.error()
                received.append(message.value())
    finally:
        consumer.close()
    assert sorted(received) == sorted(sent)


def test_control_calls_report_the_mock_clusters_error(mock_cluster: MockCluster) -> None:
    from kafka_share.testing.errors import HarnessError

    topic = mock_cluster.create_topic(partitions=1)
    with pytest.raises(HarnessError, match="broker 99"):
        mock_cluster.set_partition_leader(topic, 0, 99)


def test_the_mock_cluster_takes_the_telemetry_pushes_as_a_second_implementation() -> None:
    """librdkafka's mock implements the broker side of KIP-714 on its own (it
    assigns instance ids, answers subscriptions and decodes pushes): a client
    that keeps pushing at the interval, with no error sending it back to
    subscribe, speaks the protocol as a second broker reads it. A dedicated mock:
    the subscription is cluster-wide."""
    with MockCluster(brokers=1) as mock:
        mock.set_telemetry_subscription(["org.apache.kafka.consumer.share."], 200)
        topic = mock.create_topic(partitions=1)
        mock.start_request_tracking()
        consumer: ShareConsumer[Any, Any] = ShareConsumer(
            bootstrap_servers=mock.bootstrap_servers, group_id=_group()
        )
        with consumer:
            instance_id = consumer.client_instance_id(timeout=10)
            assert instance_id is not None and instance_id.int != 0
            consumer.subscribe([topic])
            poll_for(consumer, 3.0)
        keys = Counter(r.api_key for r in mock.requests())
    # One subscription, then a push every 200 ms after a 0.5-1.5 interval first
    # wait: about 14 in 3 s, and the terminating one at close.
    assert keys[ApiKey.GET_TELEMETRY_SUBSCRIPTIONS] == 1, keys
    assert keys[ApiKey.PUSH_TELEMETRY] >= 8, keys
