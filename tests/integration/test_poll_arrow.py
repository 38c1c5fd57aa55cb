"""``poll_arrow`` against a real Kafka broker: the rows of the Arrow record
batches are exactly the produced records, implicit mode accepts them, explicit
mode acknowledges them per row (RELEASE redelivers, REJECT archives), and
misuse gets a clear error."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from share_helpers import run_loop

from kafka_share import AcknowledgeType, IllegalStateError, ShareConsumer
from kafka_share.aio import AsyncShareConsumer
from kafka_share.testing.admin import ProduceRecord

pytestmark = pytest.mark.integration


def _consumer(bootstrap: str, group: str, **config: Any) -> ShareConsumer[Any, Any]:
    return ShareConsumer(bootstrap_servers=bootstrap, group_id=group, **config)


def _arrow_until(
    consumer: Any, total: int, *, timeout_s: float = 60.0, on_batch: Any = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(rows) < total and time.monotonic() < deadline:
        batch = consumer.poll_arrow(0.5, view_types=True)
        assert batch.schema.field("value").type == pa.binary_view()
        if on_batch is not None:
            on_batch(batch)
        rows.extend(batch.to_pylist())
    return rows


def _where_it_stood(consumer: Any, kafka_admin: Any, group: str) -> str:
    description = kafka_admin.client.describe_share_groups([group], timeout=10.0)
    offsets = kafka_admin.client.list_share_group_offsets(group, timeout=10.0)
    return (
        f"assignment {sorted(consumer.assignment())}; group {description}; "
        f"start offsets {offsets}; metrics {consumer.metrics()}"
    )


def _arrow_for(consumer: Any, seconds: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rows.extend(consumer.poll_arrow(0.5).to_pylist())
    return rows


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_rows_are_the_produced_records_and_implicit_mode_accepts_them(
    compression: str | None, topic_factory: Any, share_group: str, kafka_produce: Any,
    kafka_bootstrap: str, kafka_admin: Any,
) -> None:
    topic = topic_factory(partitions=2)
    records = [
        ProduceRecord(
            value=None if i % 97 == 5 else (b"v%d-" % i) * (i % 40),
            key=None if i % 3 == 0 else b"k%d" % i,
            partition=i % 2,
            headers=[("h", b"x%d" % i), ("n", None)] if i % 50 == 7 else None,
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(3000)
    ]
    produced = kafka_produce(topic, records, compression=compression)
    expected = {
        (p.partition, p.offset): r for p, r in zip(produced, records, strict=True)
    }
    with _consumer(kafka_bootstrap, share_group) as consumer:
        consumer.subscribe([topic])
        rows = _arrow_until(consumer, len(records))
        # Once seen with no rows at all on a loaded machine, and not since (25 runs under
        # load): say where the member stood, should it recur.
        assert len(rows) == len(records), _where_it_stood(consumer, kafka_admin, share_group)
        assert Counter((r["partition"], r["offset"]) for r in rows) == Counter(expected.keys())
        for row in rows:
            want = expected[(row["partition"], row["offset"])]
            assert row["topic"] == topic
            assert row["key"] == want.key and row["value"] == want.value
            assert row["headers"] == [
                {"key": k, "value": v} for k, v in (want.headers or [])
            ]
            assert row["timestamp"].timestamp() * 1000 == want.timestamp_ms
            assert row["timestamp_type"] == 0
            assert row["delivery_count"] == 1
        results = consumer.commit_sync(timeout=10.0)
        assert results and all(err is None for err in results.values()), results
    with _consumer(kafka_bootstrap, share_group) as again:
        again.subscribe([topic])
        assert _arrow_for(again, 4.0) == []


def test_explicit_rows_released_come_back_rejected_do_not(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"r%d" % i for i in range(300)], partition=0)
    seen: list[tuple[int, int]] = []
    with _consumer(
        kafka_bootstrap, share_group, share_acknowledgement_mode="explicit"
    ) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        released = {o for o in range(300) if o % 10 == 1}
        while time.monotonic() < deadline and (
            len({o for o, _ in seen}) < 300 or not released <= {o for o, c in seen if c == 2}
        ):
            batch = consumer.poll_arrow(0.5)
            if not batch.num_rows:
                continue
            offsets = batch.column("offset").to_pylist()
            counts = batch.column("delivery_count").to_pylist()
            seen.extend(zip(offsets, counts, strict=True))
            # First delivery: offsets ending in 1 are released, ending in 2 rejected.
            types = [
                AcknowledgeType.RELEASE if c == 1 and o % 10 == 1
                else AcknowledgeType.REJECT if c == 1 and o % 10 == 2
                else AcknowledgeType.ACCEPT
                for o, c in zip(offsets, counts, strict=True)
            ]
            with pytest.raises(IllegalStateError, match="acknowledged"):
                consumer.poll_arrow(0)  # nothing acknowledged yet
            consumer.acknowledge_arrow(batch, pa.array([int(t) for t in types]))
        assert consumer.commit_sync(timeout=10.0) is not None
    by_offset: dict[int, list[int]] = {}
    for offset, count in seen:
        by_offset.setdefault(offset, []).append(count)
    assert set(by_offset) == set(range(300))
    for offset, counts in by_offset.items():
        if offset % 10 == 1:
            assert counts == [1, 2], (offset, counts)  # released, redelivered once
        else:
            assert counts == [1], (offset, counts)  # rejected or accepted: once


def test_misuse_gets_clear_errors(
    topic_factory: Any, share_group_factory: Any, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"a", b"b", b"c"], partition=0)
    with _consumer(kafka_bootstrap, share_group_factory()) as implicit:
        implicit.subscribe([topic])
        batch = _wait_rows(implicit)
        with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
            implicit.acknowledge_arrow(batch)
        with pytest.raises(IllegalStateError, match=r"polled with poll_arrow\(\)"):
            implicit.poll(0)
    with _consumer(
        kafka_bootstrap, share_group_factory(), value_deserializer=bytes.decode
    ) as deserializing:
        deserializing.subscribe([topic])
        with pytest.raises(IllegalStateError, match="deserializer"):
            deserializing.poll_arrow(0)
    with _consumer(
        kafka_bootstrap, share_group_factory(), share_acknowledgement_mode="explicit"
    ) as explicit:
        explicit.subscribe([topic])
        batch = _wait_rows(explicit)
        n = batch.num_rows
        with pytest.raises(ValueError, match="RENEW"):
            explicit.acknowledge_arrow(batch, AcknowledgeType.RENEW)
        with pytest.raises(ValueError, match=f"1 acknowledge types for {n} rows"):
            explicit.acknowledge_arrow(batch, [AcknowledgeType.ACCEPT])
        with pytest.raises(ValueError, match="missing"):
            explicit.acknowledge_arrow(batch.drop_columns(["delivery_count"]))
        forged = batch.set_column(
            batch.schema.get_field_index("delivery_count"), "delivery_count",
            pa.array([7] * n, type=pa.int32()),
        )
        with pytest.raises(IllegalStateError, match="earlier delivery"):
            explicit.acknowledge_arrow(forged)
        # A refused call records nothing: the batch still needs its acks.
        with pytest.raises(IllegalStateError, match="acknowledged"):
            explicit.poll_arrow(0)
        explicit.acknowledge_arrow(batch.slice(0, 1), AcknowledgeType.RELEASE)
        explicit.acknowledge_arrow(batch.slice(1))
        explicit.commit_sync(timeout=10.0)
        with pytest.raises(IllegalStateError, match="already acknowledged"):
            explicit.acknowledge_arrow(batch.slice(1))
    with _consumer(kafka_bootstrap, share_group_factory()) as plain:
        plain.subscribe([topic])
        plain.poll(0)
        with pytest.raises(IllegalStateError, match=r"polled with poll\(\)"):
            plain.poll_arrow(0)


def _wait_rows(consumer: ShareConsumer[Any, Any]) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = consumer.poll_arrow(0.5)
        if batch.num_rows:
            return batch
    raise AssertionError("no records within 30 s")


def test_binary_columns_by_default(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [b"x" * 20, b"y"], partition=0, key=b"k")
    with _consumer(kafka_bootstrap, share_group) as consumer:
        consumer.subscribe([topic])
        rows: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while len(rows) < 2 and time.monotonic() < deadline:
            batch = consumer.poll_arrow(0.5)
            assert batch.schema.field("key").type == pa.binary()
            assert batch.schema.field("value").type == pa.binary()
            rows.extend(batch.to_pylist())
        assert [(r["key"], r["value"]) for r in rows] == [(b"k", b"x" * 20), (b"k", b"y")]


def test_async_poll_arrow(
    topic_factory: Any, share_group: str, kafka_produce: Any, kafka_bootstrap: str
) -> None:
    topic = topic_factory(partitions=3)
    for p in range(3):
        kafka_produce(topic, [b"p%d-%d" % (p, i) for i in range(1500)], partition=p)

    async def main() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        async with AsyncShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=share_group,
            share_acknowledgement_mode="explicit",
        ) as consumer:
            await consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(rows) < 4500 and time.monotonic() < deadline:
                batch = await consumer.poll_arrow(0.5)
                consumer.acknowledge_arrow(batch)
                rows.extend(batch.to_pylist())
            await consumer.commit_sync(timeout=10.0)
            await asyncio.sleep(0)
        return rows

    rows = run_loop(main())
    assert Counter((r["partition"], r["offset"]) for r in rows) == Counter(
        (p, i) for p in range(3) for i in range(1500)
    )
    assert all(r["value"] == b"p%d-%d" % (r["partition"], r["offset"]) for r in rows)
