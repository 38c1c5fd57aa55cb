"""FetchCollector: completed fetches -> the records of one poll (what decoding
itself does is in test_app_decoding.py)."""

from __future__ import annotations

import gc
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import GAP, InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.errors import CorruptRecordError, RecordDeserializationError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TimestampType, TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch, build_control_batch
from tests.unit.app.helpers import current_records, is_empty, take_acknowledged

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)
TIP1 = TopicIdPartition(uuid.UUID(int=7), "orders", 1)
NODE = 3
ACCEPT = int(AcknowledgeType.ACCEPT)
RELEASE = int(AcknowledgeType.RELEASE)
REJECT = int(AcknowledgeType.REJECT)


class Harness:
    def __init__(
        self,
        *,
        max_poll_records: int = 500,
        check_crcs: bool = True,
        key_deserializer: Callable[[bytes], Any] | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
        sliced_decoding: bool = False,
        columnar: bool = False,
        vectorised: bool = True,
        implicit: bool = False,
    ) -> None:
        self.buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
        self.in_flight = InFlightBatch(record_spans=implicit)
        self.collector: FetchCollector[Any, Any] = FetchCollector(
            buffer=self.buffer,
            in_flight=self.in_flight,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            check_crcs=check_crcs,
            max_poll_records=max_poll_records,
            sliced_decoding=sliced_decoding,
            vectorised=vectorised,
        )
        self.collector.columnar = columnar

    def add(
        self,
        data: bytes,
        acquired: list[tuple[int, int, int]],
        tip: TopicIdPartition = TIP,
        lock_ms: int | None = None,
    ) -> None:
        self.buffer.add_all([CompletedShareFetch(NODE, tip, memoryview(data), acquired, lock_ms)])

    def acks(self) -> dict[int, int]:
        """Everything acknowledged so far for TIP (taken from the in-flight batch),
        failed records with their default type (as once their error was raised
        and the next poll came)."""
        self.in_flight.settle_failed(everything=True)
        taken = take_acknowledged(self.in_flight)
        if TIP not in taken:
            return {}
        node, acks = taken[TIP]
        assert node == NODE
        return acks


def values(n: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + n)]


def collected_offsets(result: Any, tip: TopicIdPartition = TIP) -> list[int]:
    return [r.offset for r in result.records if r.partition == tip.partition]


def test_records_of_acquired_offsets_are_delivered_with_their_fields() -> None:
    h = Harness(value_deserializer=lambda b: b.decode().upper())
    data = build_batch(
        [NewRecord(key=b"k", value=b"v0", headers=[("h", b"x")], timestamp=1000),
         NewRecord(key=None, value=None, timestamp=1001)],
        base_offset=10, partition_leader_epoch=4,
    )
    h.add(data, [(10, 11, 2)], lock_ms=15000)
    result = h.collector.collect()
    assert result.error is None
    assert result.acquisition_lock_timeout_ms == 15000
    recs: list[ConsumerRecord[Any, Any]] = list(result.records)
    assert [r.offset for r in recs] == [10, 11]
    first, second = recs
    assert (first.topic, first.partition) == ("orders", 0)
    assert first.key == b"k" and first.value == "V0"
    assert list(first.headers) == [("h", b"x")]
    assert first.timestamp == 1000 and first.timestamp_type is TimestampType.CREATE_TIME
    assert first.leader_epoch == 4 and first.delivery_count == 2
    assert (first.serialized_key_size, first.serialized_value_size) == (1, 2)
    # Null key and value: no deserializer call, sizes -1.
    assert second.key is None and second.value is None
    assert (second.serialized_key_size, second.serialized_value_size) == (-1, -1)
    assert current_records(h.in_flight) == {TIP: recs}
    assert not h.collector.has_buffered()


def test_gap_only_fetch_returns_nothing_but_leaves_gap_acks() -> None:
    h = Harness()
    h.add(build_control_batch(base_offset=5), [(5, 5, 1)])
    result = h.collector.collect()
    assert len(result.records) == 0 and result.error is None
    assert h.acks() == {5: GAP}
    assert not h.collector.has_buffered()


def test_empty_acquired_delivers_nothing_and_acknowledges_nothing() -> None:
    h = Harness()
    h.add(build_batch(values(3)), [])
    result = h.collector.collect()
    assert len(result.records) == 0 and result.error is None
    assert is_empty(h.in_flight)


def test_max_poll_records_splits_a_fetch_across_polls() -> None:
    h = Harness(max_poll_records=2)
    h.add(build_batch(values(5), base_offset=100), [(100, 104, 1)])
    seen: list[list[int]] = []
    for _ in range(3):
        assert h.collector.has_buffered()
        result = h.collector.collect()
        seen.append(collected_offsets(result))
        h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        take_acknowledged(h.in_flight)
    assert seen == [[100, 101], [102, 103], [104]]
    assert not h.collector.has_buffered()
    assert len(h.collector.collect().records) == 0


def test_on_drained_runs_when_the_last_queued_fetch_is_taken_before_it_is_decoded() -> None:
    h = Harness(max_poll_records=4)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    tip1_data = build_batch(values(6))
    h.add(tip1_data, [(0, 1, 1), (3, 5, 2)], tip=TIP1)
    calls: list[tuple[int, int, int, TopicIdPartition, bool, int | None]] = []

    def on_drained(
        acquired: int, size: int, node_id: int, tip: TopicIdPartition, holding: bool
    ) -> bool:
        # TIP's fetch is used up and TIP1's is taken but not decoded yet.
        calls.append((acquired, size, node_id, tip, holding, h.collector.delivering_acquired()))
        return False

    first = h.collector.collect(on_drained)
    assert len(first.records) == 4
    # TIP1 acquired 2 + 3 records; the poll holds TIP's three already
    assert calls == [(5, len(tip1_data), NODE, TIP1, True, None)]
    assert h.collector.delivering_acquired() == 5
    h.collector.collect(on_drained)
    assert len(calls) == 1  # nothing more was taken from the queue


@pytest.mark.parametrize("holding_before", [False, True])
def test_on_drained_may_leave_the_last_fetch_for_the_next_poll(holding_before: bool) -> None:
    """A hook that returns True (a fetch ahead would carry acks missing the records
    the poll holds) ends the poll before that fetch; the next poll takes it. A
    slice of a poll holding records of an earlier slice says so (``holding``)."""
    h = Harness(max_poll_records=10)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    h.add(build_batch(values(4)), [(0, 3, 1)], tip=TIP1)
    calls: list[tuple[TopicIdPartition, bool]] = []

    def on_drained(
        acquired: int, size: int, node_id: int, tip: TopicIdPartition, holding: bool
    ) -> bool:
        calls.append((tip, holding))
        return holding

    first = h.collector.collect(on_drained, holding=holding_before)
    assert collected_offsets(first) == [0, 1, 2]
    assert collected_offsets(first, TIP1) == []
    assert calls == [(TIP1, True)]
    assert h.collector.has_buffered()
    assert h.collector.delivering_acquired() is None  # TIP1's fetch is queued, not taken
    second = h.collector.collect(on_drained)
    assert collected_offsets(second, TIP1) == [0, 1, 2, 3]
    assert calls == [(TIP1, True), (TIP1, False)]
    assert not h.collector.has_buffered()
    # Holding records of an earlier slice, the first fetch taken is the last one too.
    h.add(build_batch(values(2)), [(0, 1, 1)], tip=TIP)
    third = h.collector.collect(on_drained, holding=holding_before)
    assert collected_offsets(third) == ([] if holding_before else [0, 1])
    assert calls[2:] == [(TIP, holding_before)]


def test_on_drained_is_not_called_while_other_fetches_stay_queued() -> None:
    h = Harness(max_poll_records=2)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP1)
    calls: list[int] = []

    def on_drained(
        acquired: int, size: int, node_id: int, tip: TopicIdPartition, holding: bool
    ) -> bool:
        calls.append(acquired)
        return False

    h.collector.collect(on_drained)
    assert calls == []  # took TIP's fetch; TIP1's is still queued
    h.collector.collect(on_drained)
    assert calls == [3]


def test_a_node_has_company_while_it_recently_served_another_partition_still_assigned(
) -> None:
    """has_company: one of the last fetches taken came from the node with records
    of another partition that is still assigned (a fetch there can acquire its
    records while this one is at the broker's record-lock limit); once that
    partition stops coming, it stops counting."""
    h = Harness(max_poll_records=2, implicit=True)
    both = {TIP.topic_partition, TIP1.topic_partition}

    def take_all() -> None:
        while h.collector.has_buffered():
            h.collector.collect()
            h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
            take_acknowledged(h.in_flight)

    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    h.collector.collect()
    assert not h.collector.has_company(NODE, TIP, both)  # only TIP served so far
    assert not h.collector.delivering_has_company(both)
    h.add(build_batch(values(5)), [(0, 4, 1)], tip=TIP1)
    h.collector.collect()  # TIP's last record and TIP1's first: TIP1 is being delivered
    assert h.collector.has_company(NODE, TIP, both)
    assert h.collector.has_company(NODE, TIP1, both)
    assert h.collector.delivering_has_company(both)
    assert not h.collector.has_company(NODE, TIP, {TIP.topic_partition})  # TIP1 revoked
    assert not h.collector.has_company(NODE + 1, TIP, both)  # another node served nothing
    take_all()
    for i in range(8):  # only TIP from now on: TIP1 ages out of the recent fetches
        assert h.collector.has_company(NODE, TIP, both)
        h.add(build_batch(values(2), base_offset=10 + 2 * i), [(10 + 2 * i, 11 + 2 * i, 1)])
        take_all()
    assert not h.collector.has_company(NODE, TIP, both)


@pytest.mark.parametrize(
    "acquired",
    [[(0, 3, 1)], [(1, 3, 1)]],  # the whole batch (decoded shaped) or part of it
)
def test_size_bytes_counts_keys_and_values_with_nulls_as_zero(
    acquired: list[tuple[int, int, int]],
) -> None:
    h = Harness()
    h.add(build_batch([(b"k0", b"v00"), (None, b"value"), (b"key", None), (None, None)]),
          acquired)
    result = h.collector.collect()
    expected = {0: 5, 1: 5, 2: 3, 3: 0}
    assert result.size_bytes == sum(expected[o] for o in collected_offsets(result))


def test_max_poll_records_spans_partitions_in_buffer_order() -> None:
    h = Harness(max_poll_records=4)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP1)
    first = h.collector.collect()
    assert [(r.partition, r.offset) for r in first.records] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    second = h.collector.collect()
    assert [(r.partition, r.offset) for r in second.records] == [(1, 1), (1, 2)]


def test_value_deserializer_failure_returns_earlier_records_and_releases_the_offset() -> None:
    def value(b: bytes) -> str:
        if b == b"v2":
            raise ValueError("bad value")
        return b.decode()

    h = Harness(value_deserializer=value)
    h.add(build_batch(values(5)), [(0, 4, 1)])
    result = h.collector.collect()
    # Records before the poison record come first; the error is raised by the next poll.
    assert collected_offsets(result) == [0, 1]
    err = result.error
    assert isinstance(err, RecordDeserializationError)
    assert (err.topic, err.partition, err.offset) == ("orders", 0, 2)
    assert err.value == b"v2" and err.key == b"k2" and err.is_key is False
    assert "released by the next poll or commit" in str(err)
    assert isinstance(err.__cause__, ValueError)
    # The poison offset is acknowledged RELEASE; the app may override it by coordinates.
    h.in_flight.acknowledge_offset("orders", 0, 2, AcknowledgeType.REJECT)
    # The next poll continues after the poison record.
    rest = h.collector.collect()
    assert rest.error is None and collected_offsets(rest) == [3, 4]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {0: ACCEPT, 1: ACCEPT, 2: REJECT, 3: ACCEPT, 4: ACCEPT}


def test_deserializer_failure_on_the_first_record_is_raised_by_this_poll() -> None:
    def key(b: bytes) -> str:
        if b == b"k0":
            raise UnicodeError("bad key")
        return b.decode()

    h = Harness(key_deserializer=key)
    h.add(build_batch(values(3)), [(0, 2, 1)])
    result = h.collector.collect()
    assert len(result.records) == 0
    assert isinstance(result.error, RecordDeserializationError)
    assert result.error.is_key is True and result.error.offset == 0
    # Not released before the application has seen the error...
    assert take_acknowledged(h.in_flight) == {}
    # ...but by the poll (or commit) after it was raised.
    h.in_flight.mark_failed_raised()
    h.in_flight.settle_failed()
    assert take_acknowledged(h.in_flight) == {TIP: (NODE, {0: RELEASE})}
    assert collected_offsets(h.collector.collect()) == [1, 2]


@pytest.mark.parametrize("budget", [1, 2, 3, 500])
def test_every_acquired_offset_is_resolved_exactly_once_whatever_the_budget(budget: int) -> None:
    def value(b: bytes) -> bytes:
        if b == b"v4":
            raise ValueError("poison")
        return b

    h = Harness(max_poll_records=budget, value_deserializer=value)
    bad = bytearray(build_batch(values(2, 6), base_offset=6))
    bad[-1] ^= 0xFF
    data = (
        build_batch(values(3), base_offset=0)
        + build_control_batch(base_offset=3)
        + build_batch(values(2, 4), base_offset=4)
        + bytes(bad)
        + build_batch(values(3, 8), base_offset=8)
    )
    h.add(data, [(0, 10, 1), (12, 12, 2)])
    delivered: list[int] = []
    errors: list[type] = []
    for _ in range(30):
        if not h.collector.has_buffered():
            break
        result = h.collector.collect()
        delivered.extend(r.offset for r in result.records)
        if result.error is not None:
            errors.append(type(result.error))
    assert delivered == [0, 1, 2, 5, 8, 9, 10]
    assert errors == [RecordDeserializationError, CorruptRecordError]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert sorted(acks) == [*range(11), 12]
    assert acks[3] == GAP and acks[12] == GAP
    assert acks[4] == RELEASE and acks[6] == acks[7] == REJECT


def test_fetches_of_a_lost_share_session_are_dropped_not_delivered() -> None:
    """After a share session is lost the broker releases what it had acquired and
    delivers it again: records of that session still buffered here must not be
    worked on (they would be processed twice, and their acks cannot succeed)."""
    h = Harness(max_poll_records=2)
    batch = build_batch([NewRecord(value=f"v{i}".encode()) for i in range(4)], base_offset=0)
    other = TopicIdPartition(uuid.UUID(int=7), "orders", 5)
    h.buffer.add_all([
        CompletedShareFetch(NODE, TIP, memoryview(batch), [(0, 3, 1)], None, 1),
        CompletedShareFetch(NODE + 1, other, memoryview(batch), [(0, 3, 1)], None, 1),
    ])
    first = h.collector.collect()  # decodes TIP's fetch, hands out 2 of its 4 records
    assert [r.offset for r in first.records] == [0, 1]
    dropped = h.collector.drop_stale(NODE, 2)
    assert dropped == 1  # the rest of TIP's fetch; node NODE + 1 is untouched
    rest = h.collector.collect()
    assert {(r.partition, r.offset) for r in rest.records} == {(5, 0), (5, 1)}
    assert h.collector.drop_stale(NODE, 2) == 0


@pytest.mark.parametrize(("vectorised", "batch_records", "polls"), [
    (False, 1000, 1),
    (True, 1000, 1),
    # Batches of 200 are decoded whole, three to a piece; the fifth poll ends
    # with the third batch's records.
    (False, 200, 5),
])
def test_the_collector_lets_go_of_the_records_it_delivered(
    vectorised: bool, batch_records: int, polls: int
) -> None:
    # They die with the application's last reference, young, instead of living on
    # in the fetch until its last record is delivered (and being traversed by the
    # cyclic garbage collector on the way).
    if vectorised:
        pytest.importorskip("numpy")
    h = Harness(max_poll_records=100, vectorised=vectorised, implicit=True)
    data = b"".join(
        build_batch(values(batch_records, start), base_offset=start)
        for start in range(0, 1000, batch_records)
    )
    h.add(data, [(0, 999, 1)])
    for _ in range(polls):
        result = h.collector.collect()
    first, last = result.records.records(TIP)[0], result.records.records(TIP)[-1]
    assert (first.offset, last.offset) == (100 * polls - 100, 100 * polls - 1)
    assert h.collector.has_buffered()
    del result  # the application is done with this poll
    gc.collect()
    # Only this test's own locals hold them now (getrefcount adds its argument).
    assert sys.getrefcount(first) == 2 and sys.getrefcount(last) == 2
