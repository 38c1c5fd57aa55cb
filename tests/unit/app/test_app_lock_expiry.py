"""FetchCollector: records whose acquisition lock ran out are not handed out."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from kafka_share.share.results import LocksLost
from tests.unit.app.helpers import current_records

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)
NODE = 3


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


def _harness(
    *, drop_expired: bool = True, max_poll_records: int = 500, sliced: bool = False,
    columnar: bool = False,
) -> tuple[
    FetchCollector[Any, Any], FetchBuffer[CompletedShareFetch], InFlightBatch, Clock,
    ShareConsumerMetrics,
]:
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    in_flight = InFlightBatch()
    clock = Clock()
    metrics = ShareConsumerMetrics()
    collector: FetchCollector[Any, Any] = FetchCollector(
        buffer=buffer, in_flight=in_flight, key_deserializer=None, value_deserializer=None,
        check_crcs=True, max_poll_records=max_poll_records, metrics=metrics,
        drop_expired=drop_expired, clock=clock, sliced_decoding=sliced,
    )
    collector.columnar = columnar
    return collector, buffer, in_flight, clock, metrics


def _fetch(first: int, count: int, expires_ms: int | None, generation: int = 1) -> (
    CompletedShareFetch
):
    batch = build_batch(
        [NewRecord(value=f"v{i}".encode()) for i in range(count)], base_offset=first
    )
    return CompletedShareFetch(
        NODE, TIP, memoryview(batch), [(first, first + count - 1, 1)], 1_000, generation,
        expires_ms,
    )


def _dropped(metrics: ShareConsumerMetrics, reason: str) -> float:
    return metrics.snapshot(0)[f"records-dropped-{reason}-total"]


def test_a_buffered_response_whose_lock_ran_out_is_dropped_and_counted() -> None:
    collector, buffer, in_flight, clock, metrics = _harness()
    buffer.add_all([_fetch(0, 10, expires_ms=950), _fetch(10, 10, expires_ms=1_950)])
    clock.now_ms = 950
    result = collector.collect()
    assert [r.offset for r in result.records] == list(range(10, 20))
    assert _dropped(metrics, "lock-expired") == 10
    # Nothing of the expired response joins the batch: no acknowledgement (not
    # even a GAP) can be sent for records the broker has given to someone else.
    assert sorted(o for r in current_records(in_flight).values() for o in
                  (x.offset for x in r)) == list(range(10, 20))


def test_the_rest_of_a_response_being_delivered_is_dropped_when_its_lock_runs_out() -> None:
    collector, buffer, _in_flight, clock, metrics = _harness(max_poll_records=4)
    buffer.add_all([_fetch(0, 10, expires_ms=950)])
    assert [r.offset for r in collector.collect().records] == [0, 1, 2, 3]
    clock.now_ms = 949
    assert [r.offset for r in collector.collect().records] == [4, 5, 6, 7]
    clock.now_ms = 950
    assert collector.collect().records.count() == 0
    assert _dropped(metrics, "lock-expired") == 2
    assert not collector.has_buffered()


@pytest.mark.parametrize("columnar", [False, True])
def test_under_auto_renewal_only_records_reported_lost_are_dropped(columnar: bool) -> None:
    collector, buffer, _in_flight, clock, metrics = _harness(
        drop_expired=False, max_poll_records=3, columnar=columnar
    )
    buffer.add_all([_fetch(0, 6, expires_ms=950), _fetch(6, 4, expires_ms=950)])
    clock.now_ms = 5_000  # renewed meanwhile by the network thread
    assert _offsets(collector) == [0, 1, 2]
    collector.drop_lost(LocksLost(TIP, NODE, 1, frozenset({3, 4, 7, 8})))
    offsets = []
    while True:
        got = _offsets(collector)
        if not got:
            break
        offsets += got
    assert offsets == [5, 6, 9]
    assert _dropped(metrics, "lock-expired") == 4


def test_records_of_a_lost_session_are_counted() -> None:
    collector, buffer, _in_flight, _clock, metrics = _harness(max_poll_records=2)
    buffer.add_all([_fetch(0, 4, expires_ms=None), _fetch(4, 4, expires_ms=None)])
    assert [r.offset for r in collector.collect().records] == [0, 1]
    assert collector.drop_stale(NODE, 2) == 2
    assert _dropped(metrics, "session-lost") == 6


def _multi_batch_fetch(batches: int, per_batch: int, expires_ms: int | None) -> CompletedShareFetch:
    data = b"".join(
        build_batch(
            [NewRecord(value=f"v{b * per_batch + i}".encode()) for i in range(per_batch)],
            base_offset=b * per_batch,
        )
        for b in range(batches)
    )
    last = batches * per_batch - 1
    return CompletedShareFetch(NODE, TIP, memoryview(data), [(0, last, 1)], 1_000, 1, expires_ms)


def _offsets(collector: FetchCollector[Any, Any]) -> list[int]:
    """Offsets handed out by one collect (records, or poll_arrow's columns)."""
    records = collector.collect().records
    if collector.columnar:
        return [o for _, pieces in records.items() for p in pieces
                for o in p.columns.offsets.tolist()]
    return [r.offset for r in records]


def _drain(collector: FetchCollector[Any, Any]) -> list[int]:
    offsets: list[int] = []
    for _ in range(100):
        offsets += _offsets(collector)
        if not collector.has_buffered():
            break
    return offsets


@pytest.mark.parametrize("columnar", [False, True])
@pytest.mark.parametrize("sliced", [False, True])
def test_lost_locks_in_batches_not_decoded_yet_are_dropped(sliced: bool, columnar: bool) -> None:
    # Sliced decoding (the asyncio consumer) leaves later batches undecoded: the
    # records of lost locks among them must not be delivered once decoded.
    collector, buffer, _in_flight, _clock, metrics = _harness(
        drop_expired=False, max_poll_records=2, sliced=sliced, columnar=columnar
    )
    buffer.add_all([_multi_batch_fetch(4, 3, expires_ms=None)])
    assert _offsets(collector) == [0, 1]
    collector.drop_lost(LocksLost(TIP, NODE, 1, frozenset({2, 7, 10})))
    assert _drain(collector) == [3, 4, 5, 6, 8, 9, 11]
    assert _dropped(metrics, "lock-expired") == 3


@pytest.mark.parametrize("sliced", [False, True])
def test_records_of_a_lost_session_not_decoded_yet_are_counted(sliced: bool) -> None:
    collector, buffer, _in_flight, _clock, metrics = _harness(max_poll_records=2, sliced=sliced)
    buffer.add_all([_multi_batch_fetch(4, 3, expires_ms=None)])
    assert [r.offset for r in collector.collect().records] == [0, 1]
    collector.drop_stale(NODE, 2)
    assert _dropped(metrics, "session-lost") == 10
    assert not collector.has_buffered()


@pytest.mark.parametrize("sliced", [False, True])
def test_a_partly_decoded_response_whose_lock_ran_out_counts_every_record(sliced: bool) -> None:
    collector, buffer, _in_flight, clock, metrics = _harness(max_poll_records=2, sliced=sliced)
    buffer.add_all([_multi_batch_fetch(4, 3, expires_ms=950)])
    assert [r.offset for r in collector.collect().records] == [0, 1]
    clock.now_ms = 950
    assert collector.collect().records.count() == 0
    assert _dropped(metrics, "lock-expired") == 10


def test_records_whose_lock_ends_within_the_margin_are_not_handed_out() -> None:
    collector, buffer, _in_flight, clock, metrics = _harness(max_poll_records=3)
    buffer.add_all([_fetch(0, 6, expires_ms=1_000)])
    collector.expiry_margin_ms = 200
    clock.now_ms = 700
    assert _offsets(collector) == [0, 1, 2]  # 300 ms left: enough
    clock.now_ms = 800  # 200 ms left: not enough to process and acknowledge
    assert _offsets(collector) == []
    assert _dropped(metrics, "lock-expired") == 3
