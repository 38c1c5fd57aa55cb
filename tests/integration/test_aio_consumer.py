"""AsyncShareConsumer against a real Kafka broker: the queue semantics of the
synchronous suite, through the asyncio facade (default loop and uvloop)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from share_helpers import apoll_for, apoll_until, run_loop

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    InvalidRecordStateError,
    KafkaError,
    RecordDeserializationError,
    TopicIdPartition,
    WakeupError,
)
from kafka_share.aio import AsyncShareConsumer

pytestmark = pytest.mark.integration

LOOPS = ["asyncio", "uvloop"]
TICKER_WORKER = Path(__file__).with_name("aio_ticker_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _keys(records: list[ConsumerRecord[Any, Any]]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in records]


def _consumer(bootstrap: str, group: str, **config: Any) -> AsyncShareConsumer[Any, Any]:
    return AsyncShareConsumer(bootstrap_servers=bootstrap, group_id=group, **config)


@pytest.mark.parametrize("loop", LOOPS)
def test_implicit_mode_delivers_each_record_once(
    loop: str, topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=3)
    for p in range(3):
        kafka_produce(topic, [f"p{p}-{i}".encode() for i in range(2000)], partition=p)
    total = 6000

    async def main() -> None:
        async with _consumer(kafka_bootstrap, share_group) as consumer:
            await consumer.subscribe([topic])
            seen = await apoll_until(consumer, lambda s: len(s) >= total, timeout_s=60)
            counts = Counter(_keys(seen))
            assert len(counts) == total, f"got {len(counts)} distinct records of {total}"
            assert max(counts.values()) == 1, "a record was delivered twice"
            assert {r.delivery_count for r in seen} == {1}
            assert all(r.value == f"p{r.partition}-{r.offset}".encode() for r in seen)
            results = await consumer.commit_sync(timeout=10.0)
            assert results and all(err is None for err in results.values()), results
        async with _consumer(kafka_bootstrap, share_group) as again:
            await again.subscribe([topic])
            assert await apoll_for(again, 5.0) == []

    run_loop(main(), loop)


def test_async_for_accepts_each_record_as_iteration_moves_on(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"r{i}".encode() for i in range(20)], partition=0)

    async def main() -> list[int]:
        seen: list[int] = []
        async with _consumer(kafka_bootstrap, share_group, max_poll_records=50) as consumer:
            await consumer.subscribe([topic])
            async for record in consumer:
                seen.append(record.offset)
                await asyncio.sleep(0)  # an awaited call per record
                if len(seen) == 10:
                    break  # record 9 was not accepted: close releases it and 10..19
        async with _consumer(kafka_bootstrap, share_group) as again:
            await again.subscribe([topic])
            rest = await apoll_until(again, lambda s: len(s) >= 11, timeout_s=30)
            # Nothing accepted comes back; the record being processed at the break does.
            assert sorted(r.offset for r in rest) == list(range(9, 20))
            assert {r.delivery_count for r in rest if r.offset == 9} == {2}
        return seen

    assert run_loop(main()) == list(range(10))


def test_explicit_release_redelivers_reject_never(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.delivery.count.limit": "2"})
    kafka_produce(topic, [b"release-me", b"reject-me", b"accept-me"], partition=0)
    calls: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None]] = []

    async def main() -> None:
        async with _consumer(
            kafka_bootstrap, group, share_acknowledgement_mode="explicit"
        ) as c:
            c.set_acknowledgement_commit_callback(lambda o, e: calls.append((o, e)))
            await c.subscribe([topic])
            first = await apoll_until(c, lambda s: len(s) >= 3, timeout_s=30)
            by_value = {r.value: r for r in first}
            c.acknowledge(by_value[b"release-me"], AcknowledgeType.RELEASE)
            c.acknowledge(by_value[b"reject-me"], AcknowledgeType.REJECT)
            c.acknowledge(by_value[b"accept-me"], AcknowledgeType.ACCEPT)
            results = await c.commit_sync(timeout=10.0)
            assert results and all(e is None for e in results.values()), results
            again = await apoll_until(c, lambda s: len(s) >= 1, timeout_s=30)
            assert [(r.value, r.delivery_count) for r in again] == [(b"release-me", 2)]
            c.acknowledge(again[0], AcknowledgeType.RELEASE)  # the limit: archived
            await c.commit_sync(timeout=10.0)
            assert await apoll_for(c, 4.0) == []
        committed = {o for offsets, err in calls for s in offsets.values() for o in s}
        assert committed == {0, 1, 2} and all(err is None for _, err in calls)

    run_loop(main())


def test_lock_expiry_and_late_ack_fails(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    kafka_produce(topic, [b"slow"], partition=0)

    async def main() -> None:
        async with _consumer(kafka_bootstrap, group, share_acknowledgement_mode="explicit") as slow:
            await slow.subscribe([topic])
            got = await apoll_until(slow, lambda s: len(s) >= 1, timeout_s=30)
            assert slow.acquisition_lock_timeout_ms == 2000
            async with _consumer(kafka_bootstrap, group) as other:
                await other.subscribe([topic])
                redelivered = await apoll_until(other, lambda s: len(s) >= 1, timeout_s=30)
                assert [(r.offset, r.delivery_count) for r in redelivered] == [(got[0].offset, 2)]
            slow.acknowledge(got[0])
            (error,) = (await slow.commit_sync(timeout=10.0)).values()
            assert isinstance(error, InvalidRecordStateError)

    run_loop(main())


def test_renew_keeps_records_past_the_lock_duration(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    kafka_produce(topic, [b"long-job"], partition=0)

    async def main() -> None:
        async with _consumer(kafka_bootstrap, group, share_acknowledgement_mode="explicit") as c:
            await c.subscribe([topic])
            (record,) = await apoll_until(c, lambda s: len(s) >= 1, timeout_s=30)
            async with _consumer(kafka_bootstrap, group) as other:
                await other.subscribe([topic])
                for _ in range(4):  # 4 x 1 s of "work", renewing each second: 4 s > 2 s lock
                    stolen = await apoll_for(other, 1.0)
                    assert stolen == [], "the renewed record was given to another consumer"
                    c.acknowledge(record, AcknowledgeType.RENEW)
                    await c.commit_sync(timeout=10.0)
                    back = await apoll_until(c, lambda s: len(s) >= 1, timeout_s=10)
                    assert [(r.offset, r.delivery_count) for r in back] == [(record.offset, 1)]
                    record = back[0]
                c.acknowledge(record, AcknowledgeType.ACCEPT)
                results = await c.commit_sync(timeout=10.0)
                assert all(e is None for e in results.values()), results
                assert await apoll_for(other, 3.0) == []

    run_loop(main())


def test_record_limit_acquires_at_most_max_poll_records(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"r{i}".encode() for i in range(100)], partition=0)

    async def main() -> None:
        async with _consumer(
            kafka_bootstrap, share_group, max_poll_records=7, share_acquire_mode="record_limit"
        ) as c:
            await c.subscribe([topic])
            sizes: list[int] = []
            seen = 0
            deadline = time.monotonic() + 30
            while seen < 100 and time.monotonic() < deadline:
                batch = await c.poll(0.5)
                if batch:
                    sizes.append(batch.count())
                seen += batch.count()
            assert seen == 100 and max(sizes) <= 7, sizes

    run_loop(main())


def test_poison_record_rejected_by_coordinates_is_never_redelivered(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"ok-0", b"POISON", b"ok-2"], partition=0)

    def deserialize(value: bytes) -> str:
        if value == b"POISON":
            raise ValueError("cannot parse")
        return value.decode()

    async def main() -> None:
        async with _consumer(
            kafka_bootstrap, share_group, share_acknowledgement_mode="explicit",
            value_deserializer=deserialize,
        ) as c:
            await c.subscribe([topic])
            good: list[tuple[int, str]] = []
            errors: list[RecordDeserializationError] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (errors and len(good) >= 2):
                try:
                    records = await c.poll(0.5)
                except RecordDeserializationError as exc:
                    errors.append(exc)
                    c.acknowledge_offset(
                        exc.topic, exc.partition, exc.offset, AcknowledgeType.REJECT
                    )
                    await c.commit_sync(timeout=10.0)
                    continue
                for r in records:
                    good.append((r.offset, r.value))
                    c.acknowledge(r)
                await c.commit_sync(timeout=10.0)
            assert [(e.offset, e.value) for e in errors] == [(1, b"POISON")]
            assert good == [(0, "ok-0"), (2, "ok-2")]
            assert await apoll_for(c, 4.0) == []

    run_loop(main())


def test_close_releases_unacknowledged_records_at_once(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": "60000"})
    kafka_produce(topic, [f"r{i}".encode() for i in range(10)], partition=0)

    async def main() -> None:
        first = _consumer(kafka_bootstrap, group, share_acknowledgement_mode="explicit")
        await first.subscribe([topic])
        held = await apoll_until(first, lambda s: len(s) >= 10, timeout_s=30)
        async with _consumer(kafka_bootstrap, group) as second:
            await second.subscribe([topic])
            await apoll_for(second, 3.0)  # joined; nothing while the records are locked
            started = time.monotonic()
            await first.close(timeout=10.0)
            got = await apoll_until(second, lambda s: len(s) >= 10, timeout_s=25)
            assert sorted(r.offset for r in got) == sorted(r.offset for r in held)
            assert time.monotonic() - started < 25, "records came back only after the lock"
            assert all(r.delivery_count == 2 for r in got)

    run_loop(main())


@pytest.mark.parametrize("loop", LOOPS)
def test_two_consumers_in_one_loop_share_a_partition_without_duplicates(
    loop: str, topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    total = 3000

    async def main() -> dict[int, list[tuple[int, int]]]:
        received: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
        consumers = [
            _consumer(kafka_bootstrap, share_group, max_poll_records=50,
                      share_acquire_mode="record_limit")
            for _ in range(2)
        ]
        stop = asyncio.Event()

        async def work(i: int) -> None:
            c = consumers[i]
            await c.subscribe([topic])
            while not stop.is_set():
                batch = await c.poll(0.2)
                received[i].extend(_keys(list(batch)))
                if batch:
                    await asyncio.sleep(0.005)  # "processing", so the other gets a turn
            await c.commit_sync(timeout=10.0)

        tasks = [asyncio.create_task(work(i)) for i in range(2)]
        await asyncio.sleep(5.0)  # both join before any data exists
        await asyncio.to_thread(
            kafka_produce, topic, [b"x" * 50 for _ in range(total)], partition=0
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(map(len, received.values())) < total:
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks)
        for c in consumers:
            await c.close()
        return received

    received = run_loop(main(), loop)
    everything = [k for v in received.values() for k in v]
    assert len(everything) == total, f"received {len(everything)} of {total}"
    assert len(set(everything)) == total, "duplicates with everything accepted"
    assert all(received.values()), {i: len(v) for i, v in received.items()}


@pytest.mark.parametrize("loop", LOOPS)
def test_ticker_stays_on_time_while_consuming_at_full_speed(
    loop: str, topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    """A task ticking every 10 ms on the consumer's loop stays on time while the
    consumer takes records as fast as it can: decoding yields to the loop,
    network I/O is callbacks. Measured in a service-like process of its own (see
    aio_ticker_worker.py): no step runs long on the loop (p99 lateness under
    20 ms in the loop thread's CPU time, which a busy machine does not inflate),
    and on the wall clock only loosely (p99 under 250 ms: a clean-clone run on a
    loaded machine saw 28.9 ms of wall lateness that was the machine's, not the
    consumer's)."""
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    topic = topic_factory(partitions=3)
    per_partition = 150_000
    for p in range(3):
        kafka_produce(topic, [b"v" * 100 for _ in range(per_partition)], partition=p)
    total = 3 * per_partition
    proc = subprocess.run(
        [sys.executable, str(TICKER_WORKER), kafka_bootstrap, share_group, topic, str(total),
         loop],
        capture_output=True, text=True, timeout=120, check=False,
        # This checkout's kafka_share, whatever is installed.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        )},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"\nticker ({loop}): {result['ticks']} ticks while consuming {result['records']} records "
        f"in {result['elapsed_s']:.2f} s ({result['records'] / result['elapsed_s']:,.0f} "
        f"records/s); lateness p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
        f"max {result['max_ms']:.2f} ms; in CPU time p99 {result['cpu_p99_ms']:.2f} ms, max "
        f"{result['cpu_max_ms']:.2f} ms; longest GC pause {result['gc_max_pause_ms']:.1f} ms"
    )
    assert result["records"] >= total
    assert result["ticks"] >= 50, "too short a run to measure"
    assert result["cpu_p99_ms"] < 20, f"p99 lateness in CPU time {result['cpu_p99_ms']:.1f} ms"
    assert result["p99_ms"] < 250, f"p99 wall lateness {result['p99_ms']:.1f} ms"


def test_close_from_another_task_ends_a_pending_poll(
    topic_factory: Any, share_group: str, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)

    async def main() -> None:
        c = _consumer(kafka_bootstrap, share_group)
        await c.subscribe([topic])
        pending = asyncio.create_task(c.poll())
        await asyncio.sleep(2.0)
        started = time.monotonic()
        await c.close(timeout=10.0)
        with pytest.raises(WakeupError, match=r"poll\(\) was interrupted by close\(\)"):
            await pending
        assert time.monotonic() - started < 10

    run_loop(main())
