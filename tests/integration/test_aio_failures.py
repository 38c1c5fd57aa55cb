"""AsyncShareConsumer failure scenarios on dedicated clusters: the only broker
restarted, connections cut at random (a TcpProxy advertised as the broker), and
the partition leader killed in a 3-node cluster. The same outcomes as the
synchronous suite (test_failures_restart.py, test_failures_chaos.py,
test_failures_leader.py): nothing lost, no call hangs, failed acks reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from share_helpers import proxied_cluster, run_loop

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    KafkaError,
    NetworkError,
    NotLeaderOrFollowerError,
    TopicIdPartition,
)
from kafka_share.aio import AsyncShareConsumer
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, unique_name
from kafka_share.testing.proxy import TcpProxy

pytestmark = pytest.mark.integration

LOCK_MS = 3000
NODE = 1
Outcome = tuple[dict[TopicIdPartition, set[int]], KafkaError | None]


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[LocalKafkaCluster, TcpProxy]]:
    """One node, reached only through a proxy (advertised as its address)."""
    with proxied_cluster(seed=932) as pair:
        yield pair


@pytest.fixture
def single(proxied: tuple[LocalKafkaCluster, TcpProxy]) -> tuple[LocalKafkaCluster, TcpProxy]:
    """The proxied cluster with its node up (a previous test may have left it down)."""
    cluster, _ = proxied
    if NODE not in cluster.pids:
        cluster.start_node(NODE)
    return proxied


@pytest.fixture(scope="module")
def admin(proxied: tuple[LocalKafkaCluster, TcpProxy]) -> KafkaAdmin:
    return proxied[0].admin()  # closed when the cluster stops


async def _poll_batch(
    consumer: AsyncShareConsumer[Any, Any], timeout_s: float
) -> list[ConsumerRecord[Any, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = list(await consumer.poll(0.5))
        if batch:
            return batch
    return []


def _group_and_records(
    admin: KafkaAdmin, what: str, topic: str, count: int, **group_config: str
) -> tuple[str, set[tuple[int, int]]]:
    """A new group reading ``topic`` from the start, and ``count`` records produced
    to it: (group, their (partition, offset))."""
    group = unique_name(f"aio-{what}")
    admin.set_group_config(group, {"share.auto.offset.reset": "earliest", **group_config})
    produced = admin.produce(topic, [f"{what}-{i}".encode() for i in range(count)])
    return group, {(p.partition, p.offset) for p in produced}


def _accepted(outcomes: list[Outcome]) -> set[tuple[int, int]]:
    return {
        (tip.partition, o) for offsets, e in outcomes if e is None
        for tip, s in offsets.items() for o in s
    }


async def _consume_until_all_accepted(
    consumer: AsyncShareConsumer[Any, Any], outcomes: list[Outcome],
    expected: set[tuple[int, int]], timeout_s: float,
) -> set[tuple[int, int]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not expected <= _accepted(outcomes):
        batch = list(await consumer.poll(0.5))
        for r in batch:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        if batch:
            await consumer.commit_sync(timeout=10)
    return expected - _accepted(outcomes)


def test_broker_restart_fails_inflight_acks_and_loses_nothing(
    single: tuple[LocalKafkaCluster, TcpProxy], admin: KafkaAdmin
) -> None:
    cluster, proxy = single
    topic = admin.create_topic(partitions=2)
    group, expected = _group_and_records(
        admin, "restart", topic, 200, **{"share.record.lock.duration.ms": str(LOCK_MS)}
    )
    outcomes: list[Outcome] = []

    async def main() -> None:
        async with AsyncShareConsumer(
            bootstrap_servers=proxy.bootstrap, group_id=group,
            share_acknowledgement_mode="explicit", max_poll_records=20,
        ) as consumer:
            consumer.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
            await consumer.subscribe([topic])
            first = await _poll_batch(consumer, 30)
            assert first, "nothing consumed before the restart"
            for r in first:
                consumer.acknowledge(r)
            assert all(e is None for e in (await consumer.commit_sync(timeout=10)).values())

            held = await _poll_batch(consumer, 30)
            assert held
            await asyncio.to_thread(cluster.kill_node, NODE)
            for r in held:
                consumer.acknowledge(r)
            started = time.monotonic()
            results = await consumer.commit_sync(timeout=10)
            assert time.monotonic() - started < 11.0
            failed = [e for e in results.values() if e is not None]
            assert failed, f"acks sent to a dead broker reported success: {results}"
            assert all(isinstance(e, NetworkError) for e in failed), failed

            await asyncio.to_thread(cluster.start_node, NODE)
            missing = await _consume_until_all_accepted(consumer, outcomes, expected, 90)
            assert not missing, f"{len(missing)} never accepted, e.g. {sorted(missing)[:10]}"
            failed_in_callback = [e for _, e in outcomes if e is not None]
            assert failed_in_callback and all(
                isinstance(e, NetworkError) for e in failed_in_callback
            ), failed_in_callback

    run_loop(main())


def test_connection_cuts_never_hang_calls_and_lose_nothing(
    single: tuple[LocalKafkaCluster, TcpProxy], admin: KafkaAdmin
) -> None:
    _, proxy = single
    topic = admin.create_topic(partitions=2)
    group, expected = _group_and_records(admin, "cuts", topic, 400, **{
        "share.record.lock.duration.ms": "2000",
        # Each cut fails a round of acks and counts a delivery: leave room so no
        # record is archived by the delivery limit (default 5) under chaos.
        "share.delivery.count.limit": "10",
    })
    outcomes: list[Outcome] = []
    chaos_s = 10.0
    longest: dict[str, float] = {}

    async def timed(name: str, limit_s: float, call: Any) -> Any:
        started = time.monotonic()
        result = await asyncio.wait_for(call, limit_s + 5)  # a hang fails the test
        longest[name] = max(longest.get(name, 0.0), time.monotonic() - started)
        return result

    async def main() -> None:
        consumer: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=proxy.bootstrap, group_id=group,
            share_acknowledgement_mode="explicit", max_poll_records=10,
        )
        consumer.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
        await consumer.subscribe([topic])
        proxy.start_chaos(min_interval_s=0.5, max_interval_s=1.5, duration_s=chaos_s)
        chaos_until = time.monotonic() + chaos_s
        seen: set[tuple[int, int]] = set()
        quiet_since = time.monotonic()
        deadline = time.monotonic() + chaos_s + 60
        rounds = 0
        try:
            while time.monotonic() < deadline:
                batch = list(await timed("poll", 1.0, consumer.poll(1.0)))
                rounds += 1
                for r in batch:
                    seen.add((r.partition, r.offset))
                    consumer.acknowledge(r)
                if batch:
                    quiet_since = time.monotonic()
                    await asyncio.sleep(0.05)  # "processing" spans the chaos
                    if rounds % 3 == 0:
                        await timed("commit_sync", 5.0, consumer.commit_sync(5.0))
                if expected <= _accepted(outcomes) and time.monotonic() >= chaos_until:
                    break
                # A lost ack answer is reported failed although applied: such records
                # never come back. Once everything was seen and nothing came back for
                # longer than the lock after the chaos, nothing is left.
                if (
                    expected <= seen and time.monotonic() >= chaos_until + 1
                    and time.monotonic() - quiet_since > 5.0
                ):
                    await timed("commit_sync", 5.0, consumer.commit_sync(5.0))
                    break
            unseen = expected - seen
            assert not unseen, f"{len(unseen)} never delivered, e.g. {sorted(unseen)[:10]}"
            assert len(_accepted(outcomes)) >= len(expected) * 0.9
            assert proxy.cuts >= 3, f"only {proxy.cuts} connections were cut"
            proxy.stop_chaos()
            proxy.start_chaos(min_interval_s=0.1, max_interval_s=0.3, duration_s=6)
            await timed("close", 5.0, consumer.close(5.0))
        finally:
            proxy.stop_chaos()
            await consumer.close(timeout=5)
        print(f"cuts={proxy.cuts} longest={longest}")

    run_loop(main())


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(num_nodes=3) as cluster:
        yield cluster


def test_leader_killed_consumer_follows_the_new_leader_and_loses_nothing(
    three_nodes: LocalKafkaCluster,
) -> None:
    cluster = three_nodes
    with KafkaAdmin(cluster.bootstrap_servers) as admin:
        topic = admin.create_topic(partitions=1, replication_factor=3)
        group, expected = _group_and_records(
            admin, "leader", topic, 300, **{"share.record.lock.duration.ms": str(LOCK_MS)}
        )

        def state() -> tuple[int, list[int]]:
            described = admin.client.describe_topics([topic], timeout=5)[topic]
            [p] = [p for p in described.partitions if p.partition == 0]
            return (p.leader if p.leader is not None else -1), sorted(p.isr)

        deadline = time.monotonic() + 30
        while (s := state())[1] != [1, 2, 3]:
            assert time.monotonic() < deadline, "replicas never in sync"
            time.sleep(0.2)
        old_leader = s[0]
        outcomes: list[Outcome] = []

        async def main() -> None:
            async with AsyncShareConsumer(
                bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                share_acknowledgement_mode="explicit", max_poll_records=20,
            ) as consumer:
                consumer.set_acknowledgement_commit_callback(
                    lambda o, e: outcomes.append((o, e))
                )
                await consumer.subscribe([topic])
                first = await _poll_batch(consumer, 30)
                assert first
                for r in first:
                    consumer.acknowledge(r)
                assert all(e is None for e in (await consumer.commit_sync(10)).values())
                held = await _poll_batch(consumer, 30)
                assert held
                await asyncio.to_thread(cluster.kill_node, old_leader)
                for r in held:
                    consumer.acknowledge(r)
                results = await consumer.commit_sync(timeout=10)
                failed = [e for e in results.values() if e is not None]
                assert failed and all(
                    isinstance(e, (NetworkError, NotLeaderOrFollowerError)) for e in failed
                ), results
                missing = await _consume_until_all_accepted(consumer, outcomes, expected, 90)
                assert not missing, f"{len(missing)} never accepted, e.g. {sorted(missing)[:10]}"
                assert all(
                    isinstance(e, (NetworkError, NotLeaderOrFollowerError))
                    for _, e in outcomes if e is not None
                )

        run_loop(main())
        assert state()[0] not in (-1, old_leader)
