"""Failure scenarios: the only broker restarted mid-consumption, and close() with it down.

These kill the broker, so they run on a dedicated single-node cluster (module
scope), never on the session's shared one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    KafkaError,
    NetworkError,
    ShareConsumer,
    TopicIdPartition,
)
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, unique_name

pytestmark = pytest.mark.integration

LOCK_MS = 3000
NODE = 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    c = LocalKafkaCluster(num_nodes=1)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def admin(cluster: LocalKafkaCluster) -> Iterator[KafkaAdmin]:
    a = KafkaAdmin(cluster.bootstrap_servers)
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def running(cluster: LocalKafkaCluster) -> LocalKafkaCluster:
    """The cluster with its node up (a previous test may have left it down)."""
    if NODE not in cluster.pids:
        cluster.start_node(NODE)
    return cluster


@pytest.fixture
def consumers() -> Iterator[list[ShareConsumer[Any, Any]]]:
    made: list[ShareConsumer[Any, Any]] = []
    yield made
    for c in made:
        try:
            c.close(timeout=5.0)
        except Exception:
            pass


Outcome = tuple[dict[TopicIdPartition, set[int]], KafkaError | None]


def _poll_batch(
    consumer: ShareConsumer[Any, Any], timeout_s: float
) -> list[ConsumerRecord[Any, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = list(consumer.poll(0.5))
        if batch:
            return batch
    return []


def test_broker_restart_mid_consumption_fails_inflight_acks_and_loses_nothing(
    running: LocalKafkaCluster, admin: KafkaAdmin, consumers: list[ShareConsumer[Any, Any]]
) -> None:
    topic = admin.create_topic(partitions=2)
    group = unique_name("restart")
    admin.set_group_config(
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)},
    )
    produced = admin.produce(topic, [f"v{i}".encode() for i in range(200)])
    expected = {(p.partition, p.offset) for p in produced}
    outcomes: list[Outcome] = []

    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=running.bootstrap_servers,
        group_id=group,
        share_acknowledgement_mode="explicit",
        max_poll_records=20,
    )
    consumers.append(consumer)
    consumer.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
    consumer.subscribe([topic])

    # A first batch, acknowledged while the broker is up.
    first = _poll_batch(consumer, 30)
    assert first, "nothing consumed before the restart"
    for r in first:
        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
    assert all(e is None for e in consumer.commit_sync(timeout=10).values())

    # A batch in hand when the broker dies: its acks cannot reach the broker.
    held = _poll_batch(consumer, 30)
    assert held
    running.kill_node(NODE)
    for r in held:
        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
    started = time.monotonic()
    results = consumer.commit_sync(timeout=10)
    took = time.monotonic() - started
    assert took < 11.0, f"commit_sync took {took:.1f} s with a 10 s timeout"
    assert results, "the held batch had acknowledgements"
    failed = [e for e in results.values() if e is not None]
    assert failed, f"acks sent to a dead broker reported success: {results}"
    # Failed at once with a clear reason: locally (the share session died with the
    # connection), or by the connection's close if the acks went out before the
    # loop had read the close (the application thread held the loop meanwhile).
    assert all(
        isinstance(e, NetworkError) and ("session" in str(e) or "closed by the peer" in str(e))
        for e in failed
    ), failed
    assert took < 2.0, f"a local failure should be immediate, took {took:.1f} s"

    running.start_node(NODE)
    # The consumer reconnects by itself; keep consuming, accepting every record.
    deadline = time.monotonic() + 90
    accepted: set[tuple[int, int]] = set()
    while time.monotonic() < deadline and not expected <= accepted:
        batch = list(consumer.poll(0.5))
        for r in batch:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        if batch:
            consumer.commit_sync(timeout=10)
        accepted = {
            (tip.partition, o)
            for offsets, e in outcomes
            if e is None
            for tip, s in offsets.items()
            for o in s
        }
    missing = expected - accepted
    assert not missing, f"{len(missing)} records never accepted, e.g. {sorted(missing)[:10]}"
    # Every failure reached the callback with the error too.
    failed_in_callback = [e for _, e in outcomes if e is not None]
    assert failed_in_callback, "the failed acks never reached the commit callback"
    assert all(isinstance(e, NetworkError) for e in failed_in_callback), failed_in_callback


def test_close_with_the_broker_down_returns_quickly(
    running: LocalKafkaCluster, admin: KafkaAdmin, consumers: list[ShareConsumer[Any, Any]]
) -> None:
    topic = admin.create_topic(partitions=1)
    group = unique_name("close-down")
    admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    admin.produce(topic, [b"a", b"b", b"c"])
    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=running.bootstrap_servers,
        group_id=group,
        share_acknowledgement_mode="explicit",
    )
    consumers.append(consumer)
    consumer.subscribe([topic])
    batch = _poll_batch(consumer, 30)
    assert batch
    for r in batch:
        consumer.acknowledge(r, AcknowledgeType.ACCEPT)  # pending acks for close to send

    running.kill_node(NODE)
    started = time.monotonic()
    consumer.close()  # default timeout: 30 s
    took = time.monotonic() - started
    assert took < 5.0, f"close() with the broker down took {took:.1f} s"
