"""Failure scenario: the partition leader dies in a 3-node cluster.

Runs on a dedicated 3-node cluster (module scope). Every node is a combined
broker + controller, so two nodes keep the KRaft quorum; the harness gives the
internal topics (``__consumer_offsets``, ``__share_group_state``) replication
factor 3 with ``min.isr`` 1 on three nodes, so the group and share coordinators
survive the loss of any one node.
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
    NotLeaderOrFollowerError,
    ShareConsumer,
    TopicIdPartition,
)
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, unique_name

pytestmark = pytest.mark.integration

LOCK_MS = 3000
TOTAL = 300


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    c = LocalKafkaCluster(num_nodes=3)
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


def _partition_state(admin: KafkaAdmin, topic: str) -> tuple[int, list[int]]:
    """(leader, in-sync replicas) of partition 0 as the cluster reports them now."""
    described = admin.client.describe_topics([topic], timeout=5)[topic]
    [p] = [p for p in described.partitions if p.partition == 0]
    return (p.leader if p.leader is not None else -1), sorted(p.isr)


def _wait_for(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _poll_batch(
    consumer: ShareConsumer[Any, Any], timeout_s: float
) -> list[ConsumerRecord[Any, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = list(consumer.poll(0.5))
        if batch:
            return batch
    return []


def test_leader_killed_consumer_follows_new_leader_and_loses_nothing(
    cluster: LocalKafkaCluster, admin: KafkaAdmin
) -> None:
    topic = admin.create_topic(partitions=1, replication_factor=3)
    group = unique_name("leader-move")
    admin.set_group_config(
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS)},
    )
    produced = admin.produce(topic, [f"v{i}".encode() for i in range(TOTAL)], partition=0)
    expected = {p.offset for p in produced}
    old_leader, _ = _wait_for(
        lambda: (s := _partition_state(admin, topic))[1] == [1, 2, 3] and s,
        30,
        "all three replicas in sync",
    )
    outcomes: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None]] = []

    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        share_acknowledgement_mode="explicit",
        max_poll_records=20,
    )
    try:
        consumer.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
        consumer.subscribe([topic])
        first = _poll_batch(consumer, 30)
        assert first, "nothing consumed from the first leader"
        for r in first:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        assert all(e is None for e in consumer.commit_sync(timeout=10).values())

        held = _poll_batch(consumer, 30)
        assert held
        cluster.kill_node(old_leader)
        for r in held:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        started = time.monotonic()
        results = consumer.commit_sync(timeout=10)
        took = time.monotonic() - started
        assert took < 11.0, f"commit_sync took {took:.1f} s with a 10 s timeout"
        failed = [e for e in results.values() if e is not None]
        # The acks belong to the dead leader's share-partition: they fail locally.
        assert failed, f"acks for records of the dead leader reported success: {results}"
        assert all(isinstance(e, (NetworkError, NotLeaderOrFollowerError)) for e in failed), failed

        new_leader = _wait_for(
            lambda: (
                (leader := _partition_state(admin, topic)[0]) not in (-1, old_leader) and leader
            ),
            30,
            "a new leader",
        )
        assert new_leader != old_leader

        deadline = time.monotonic() + 90
        accepted: set[int] = set()
        while time.monotonic() < deadline and not expected <= accepted:
            batch = list(consumer.poll(0.5))
            for r in batch:
                consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            if batch:
                consumer.commit_sync(timeout=10)
            accepted = {
                o for offsets, e in outcomes if e is None for s in offsets.values() for o in s
            }
        missing = expected - accepted
        # Records prefetched from the old leader before it died fail the same way.
        old_node_failures = [e for _, e in outcomes if e is not None]
        assert all(
            isinstance(e, (NetworkError, NotLeaderOrFollowerError)) for e in old_node_failures
        ), old_node_failures
        assert not missing, f"{len(missing)} records never accepted, e.g. {sorted(missing)[:10]}"
    finally:
        consumer.close(timeout=5)
