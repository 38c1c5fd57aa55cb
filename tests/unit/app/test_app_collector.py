"""FetchCollector: completed fetches -> the records of one poll."""

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
from kafka_share.records.builder import NewRecord, build_batch, build_control_batch, with_crc
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


def test_only_the_acquired_subset_is_delivered() -> None:
    h = Harness()
    h.add(build_batch(values(6), base_offset=0), [(1, 2, 3), (4, 4, 1)])
    result = h.collector.collect()
    recs = list(result.records)
    assert [(r.offset, r.delivery_count) for r in recs] == [(1, 3), (2, 3), (4, 1)]
    assert [r.value for r in recs] == [b"v1", b"v2", b"v4"]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {1: ACCEPT, 2: ACCEPT, 4: ACCEPT}  # no gaps


def test_acquired_offsets_without_a_record_become_gaps() -> None:
    h = Harness()
    # A compacted batch: offsets 0, 1 and 3 survive; 2 is gone. Nothing after 3.
    data = build_batch(
        [NewRecord(b"a", b"0", offset_delta=0), NewRecord(b"b", b"1", offset_delta=1),
         NewRecord(b"c", b"3", offset_delta=3)],
        base_offset=0,
    )
    h.add(data, [(0, 5, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == [0, 1, 3]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {0: ACCEPT, 1: ACCEPT, 2: GAP, 3: ACCEPT, 4: GAP, 5: GAP}


def test_control_batch_offsets_become_gaps() -> None:
    h = Harness()
    data = (
        build_batch(values(2), base_offset=0, is_transactional=True, producer_id=9)
        + build_control_batch(base_offset=2, producer_id=9)
        + build_batch(values(1, 3), base_offset=3)
    )
    h.add(data, [(0, 3, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == [0, 1, 3]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {0: ACCEPT, 1: ACCEPT, 2: GAP, 3: ACCEPT}


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
    calls: list[tuple[int, int, int | None]] = []

    def on_drained(acquired: int, size: int) -> None:
        # TIP's fetch is used up and TIP1's is taken but not decoded yet.
        calls.append((acquired, size, h.collector.delivering_acquired()))

    first = h.collector.collect(on_drained)
    assert len(first.records) == 4
    assert calls == [(5, len(tip1_data), None)]  # TIP1 acquired 2 + 3 records
    assert h.collector.delivering_acquired() == 5
    h.collector.collect(on_drained)
    assert len(calls) == 1  # nothing more was taken from the queue


def test_on_drained_is_not_called_while_other_fetches_stay_queued() -> None:
    h = Harness(max_poll_records=2)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP)
    h.add(build_batch(values(3)), [(0, 2, 1)], tip=TIP1)
    calls: list[int] = []
    h.collector.collect(lambda acquired, size: calls.append(acquired))
    assert calls == []  # took TIP's fetch; TIP1's is still queued
    h.collector.collect(lambda acquired, size: calls.append(acquired))
    assert calls == [3]


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


def test_malformed_records_in_a_batch_inside_one_acquired_range_are_rejected() -> None:
    # A valid CRC over a broken records section: the batch decodes wrong, not the
    # framing, so only that batch's offsets are rejected and the next one delivers.
    h = Harness()
    good = build_batch(values(3), base_offset=0)
    bad = bytearray(build_batch(values(3, 3), base_offset=3))
    bad[61] = 0x7F  # the first record's length varint: now far too long
    after = build_batch(values(2, 6), base_offset=6)
    h.add(good + with_crc(bad) + after, [(0, 7, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == [0, 1, 2]
    assert isinstance(result.error, CorruptRecordError)
    assert collected_offsets(h.collector.collect()) == [6, 7]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert {o: acks[o] for o in (3, 4, 5)} == {3: REJECT, 4: REJECT, 5: REJECT}


@pytest.mark.parametrize(
    ("deltas", "delivered", "gaps"),
    [
        ((0, 0, 2), [10, 12], [11]),  # a repeated offset: delivered once, 11 is a gap
        ((0, 2, 1), [10, 12], [11]),  # out of order: the late 11 cannot be matched
    ],
)
def test_records_out_of_order_in_a_valid_batch_are_matched_one_by_one(
    deltas: tuple[int, ...], delivered: list[int], gaps: list[int]
) -> None:
    h = Harness()
    batch = build_batch(
        [NewRecord(b"k", f"v{d}".encode(), offset_delta=d) for d in deltas], base_offset=10
    )
    h.add(batch, [(10, 12, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == delivered
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert sorted(o for o, t in acks.items() if t == GAP) == gaps
    assert sorted(acks) == [10, 11, 12]  # every acquired offset is resolved


def test_crc_failure_rejects_the_acquired_offsets_of_that_batch_only() -> None:
    h = Harness()
    good = build_batch(values(3), base_offset=0)
    bad = bytearray(build_batch(values(3, 3), base_offset=3))
    bad[-1] ^= 0xFF  # payload byte: the stored CRC no longer matches
    after = build_batch(values(2, 6), base_offset=6)
    h.add(good + bytes(bad) + after, [(1, 7, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == [1, 2]
    assert isinstance(result.error, CorruptRecordError)
    assert "orders-0" in str(result.error) and "offset 3" in str(result.error)
    rest = h.collector.collect()
    assert rest.error is None and collected_offsets(rest) == [6, 7]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {
        1: ACCEPT, 2: ACCEPT, 3: REJECT, 4: REJECT, 5: REJECT, 6: ACCEPT, 7: ACCEPT
    }


def test_crc_failure_of_the_first_batch_is_raised_at_once() -> None:
    h = Harness()
    bad = bytearray(build_batch(values(2), base_offset=0))
    bad[-1] ^= 0xFF
    h.add(bytes(bad) + build_batch(values(1, 2), base_offset=2), [(0, 2, 1)])
    result = h.collector.collect()
    assert len(result.records) == 0 and isinstance(result.error, CorruptRecordError)
    assert take_acknowledged(h.in_flight) == {}
    h.in_flight.mark_failed_raised()
    h.in_flight.settle_failed()
    assert take_acknowledged(h.in_flight) == {TIP: (NODE, {0: REJECT, 1: REJECT})}
    assert collected_offsets(h.collector.collect()) == [2]


def test_crc_failure_of_a_batch_we_did_not_acquire_is_ignored() -> None:
    h = Harness()
    bad = bytearray(build_batch(values(2), base_offset=0))
    bad[-1] ^= 0xFF
    h.add(bytes(bad) + build_batch(values(2, 2), base_offset=2), [(2, 3, 1)])
    result = h.collector.collect()
    assert result.error is None and collected_offsets(result) == [2, 3]


def test_crc_is_not_checked_when_check_crcs_is_off() -> None:
    h = Harness(check_crcs=False)
    data = build_batch(values(2), base_offset=0)
    bad = data.replace(b"v1", b"v9")  # same length: only the CRC can tell
    assert bad != data
    h.add(bad, [(0, 1, 1)])
    result = h.collector.collect()
    assert result.error is None and collected_offsets(result) == [0, 1]
    assert [r.value for r in result.records] == [b"v0", b"v9"]
    # The same bytes with check.crcs on are rejected.
    checked = Harness(check_crcs=True)
    checked.add(bad, [(0, 1, 1)])
    assert isinstance(checked.collector.collect().error, CorruptRecordError)


def test_broken_framing_rejects_everything_acquired_from_there_on() -> None:
    h = Harness()
    good = build_batch(values(2), base_offset=0)
    broken = bytearray(build_batch(values(2, 2), base_offset=2))
    broken[16] = 7  # unknown magic: the framing can no longer be trusted
    h.add(good + bytes(broken) + build_batch(values(2, 4), base_offset=4), [(0, 5, 1)])
    result = h.collector.collect()
    assert collected_offsets(result) == [0, 1]
    assert isinstance(result.error, CorruptRecordError)
    assert not h.collector.has_buffered()
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {0: ACCEPT, 1: ACCEPT, 2: REJECT, 3: REJECT, 4: REJECT, 5: REJECT}


def _offsets_of(result: Any, columnar: bool) -> list[int]:
    if not columnar:
        return collected_offsets(result)
    return [o for _tip, pieces in result.records.items() for p in pieces
            for o in p.columns.offsets.tolist()]


MODES = [
    pytest.param(columnar, sliced, id=f"{'columnar' if columnar else 'rows'}"
                 f"{'-sliced' if sliced else ''}")
    for columnar in (False, True) for sliced in (False, True)
]


@pytest.mark.parametrize(("columnar", "sliced"), MODES)
def test_corrupt_batches_are_rejected_alike_by_every_decoder(columnar: bool, sliced: bool) -> None:
    """Row and columnar decoding, whole or a slice at a time, share one walk over
    the batches: a CRC failure rejects that batch's acquired records, a control
    batch's offsets become GAPs, lost framing rejects all the rest."""
    if columnar:
        pytest.importorskip("pyarrow")
    h = Harness(columnar=columnar, sliced_decoding=sliced)
    bad = bytearray(build_batch(values(2, 3), base_offset=3))
    bad[-1] ^= 0xFF
    broken = bytearray(build_batch(values(2, 8), base_offset=8))
    broken[16] = 7  # unknown magic: the framing can no longer be trusted
    data = (
        build_batch(values(3), base_offset=0) + bytes(bad)
        + build_control_batch(base_offset=5) + build_batch(values(2, 6), base_offset=6)
        + bytes(broken) + build_batch(values(2, 10), base_offset=10)
    )
    h.add(data, [(1, 11, 1)])
    delivered: list[int] = []
    errors = 0
    for _ in range(10):
        result = h.collector.collect()
        delivered += _offsets_of(result, columnar)
        if result.error is not None:
            assert isinstance(result.error, CorruptRecordError)
            errors += 1
        if not h.collector.has_buffered():
            break
    assert delivered == [1, 2, 6, 7]
    assert errors == 2
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert h.acks() == {
        1: ACCEPT, 2: ACCEPT, 3: REJECT, 4: REJECT, 5: GAP, 6: ACCEPT, 7: ACCEPT,
        8: REJECT, 9: REJECT, 10: REJECT, 11: REJECT,
    }


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


# -- decoding a piece at a time ------------------------------------------------


def _drain(
    h: Harness, polls: int = 50, interrupts: list[KeyboardInterrupt] | None = None
) -> tuple[list[int], list[type]]:
    """Poll until nothing is buffered: the offsets delivered and the errors
    returned. With ``interrupts``, a poll that raises KeyboardInterrupt is
    recorded there and polling goes on."""
    delivered: list[int] = []
    errors: list[type] = []
    for _ in range(polls):
        if not h.collector.has_buffered():
            break
        try:
            result = h.collector.collect()
        except KeyboardInterrupt as exc:
            if interrupts is None:
                raise
            interrupts.append(exc)
            continue
        delivered += collected_offsets(result)
        if result.error is not None:
            errors.append(type(result.error))
    return delivered, errors


def _record_starts(batch: bytes) -> list[int]:
    """Where each record of an uncompressed v2 batch starts (its length varint)."""
    starts = []
    pos = 61
    while pos < len(batch):
        starts.append(pos)
        result = shift = 0
        while True:
            b = batch[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        pos += (result >> 1) ^ -(result & 1)
    return starts


def test_a_large_batch_is_decoded_as_far_as_delivery_needs() -> None:
    h = Harness(max_poll_records=100, vectorised=False)
    h.add(build_batch(values(2000), base_offset=0), [(0, 1999, 1)])
    assert collected_offsets(h.collector.collect()) == list(range(100))
    fetch: Any = h.collector.delivering()
    assert len(fetch.pending) == 500  # one piece of the 2000 so far
    delivered, errors = _drain(h)
    assert delivered == list(range(100, 2000)) and errors == []


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


def test_offsets_out_of_order_in_a_later_piece_send_the_rest_one_by_one() -> None:
    deltas = list(range(1200))
    deltas[700], deltas[701] = 701, 700  # in the second piece of 500
    batch = build_batch(
        [NewRecord(b"k", f"v{d}".encode(), offset_delta=d) for d in deltas], base_offset=0
    )
    h = Harness(max_poll_records=300, vectorised=False)
    h.add(batch, [(0, 1199, 1)])
    delivered, errors = _drain(h)
    # The first piece was delivered as decoded; from the second on, records are
    # matched one by one, so the late 700 cannot be and is a GAP.
    assert delivered == [*range(700), *range(701, 1200)] and errors == []
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert sorted(acks) == list(range(1200))
    assert [o for o, t in acks.items() if t == GAP] == [700]


@pytest.mark.parametrize(
    ("vectorised", "first_rejected"),
    [
        (False, 500),  # the row decoder: the pieces before the bad one were delivered
        (True, 0),  # the vectorised decoder reads the whole batch before any piece
    ],
)
def test_a_malformed_record_in_a_later_piece_rejects_the_rest_of_its_batch(
    vectorised: bool, first_rejected: int
) -> None:
    if vectorised:
        pytest.importorskip("numpy")
    bad = bytearray(build_batch(values(1200), base_offset=0))
    bad[_record_starts(bytes(bad))[700]] = 0x7F  # its length: now negative
    after = build_batch(values(5, 1200), base_offset=1200)
    h = Harness(max_poll_records=300, vectorised=vectorised)
    h.add(with_crc(bad) + after, [(0, 1204, 1)])
    delivered, errors = _drain(h)
    assert delivered == [*range(first_rejected), *range(1200, 1205)]
    assert errors == [CorruptRecordError]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert sorted(acks) == list(range(1205))
    assert {o for o, t in acks.items() if t == REJECT} == set(range(first_rejected, 1200))


class _Interrupting:
    """Raises KeyboardInterrupt from the n-th call of the row decoder."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at_call: int) -> None:
        from kafka_share.records import batch as batch_module

        self.calls = 0
        self.at_call = at_call
        real = batch_module._decode_v2_records

        def decode(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.at_call:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        monkeypatch.setattr(batch_module, "_decode_v2_records", decode)


@pytest.mark.parametrize(
    ("batch_records", "at_call"),
    [
        (1200, 2),  # half way through a large batch, after its first piece
        (200, 4),  # after 3 small batches were found but not yet handed over
    ],
)
def test_a_decoder_interrupted_goes_on_from_its_last_hand_over(
    monkeypatch: pytest.MonkeyPatch, batch_records: int, at_call: int
) -> None:
    bad = bytearray(build_batch(values(3, 1300), base_offset=1300))
    bad[-1] ^= 0xFF  # a corrupt batch after the interruption: reported once
    data = b"".join(
        build_batch(values(batch_records, start), base_offset=start)
        for start in range(0, 1200, batch_records)
    ) + build_control_batch(base_offset=1200) + bytes(bad)
    h = Harness(max_poll_records=300, vectorised=False)
    h.add(data, [(0, 1302, 1)])
    interrupt = _Interrupting(monkeypatch, at_call)
    interrupts: list[KeyboardInterrupt] = []
    delivered, errors = _drain(h, 30, interrupts)
    assert interrupt.calls > at_call and len(interrupts) == 1
    assert delivered == list(range(1200))  # each record once, in order
    assert errors == [CorruptRecordError]
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    acks = h.acks()
    assert sorted(acks) == list(range(1303))
    assert [o for o, t in acks.items() if t == GAP] == [*range(1200, 1300)]
    assert all(acks[o] == REJECT for o in range(1300, 1303))


def test_interrupts_in_a_hand_over_and_in_the_roll_back_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_share.share.acquired import AcquiredCursor

    calls = {"state": 0, "restore": 0}
    real_state, real_restore = AcquiredCursor.state, AcquiredCursor.restore

    def state(self: AcquiredCursor) -> tuple[int, int, int, int]:
        calls["state"] += 1
        if calls["state"] == 3:  # the second hand-over, half done
            raise KeyboardInterrupt
        return real_state(self)

    def restore(self: AcquiredCursor, saved: tuple[int, int, int, int]) -> None:
        calls["restore"] += 1
        if calls["restore"] == 1:  # a second interrupt, during the roll-back
            raise KeyboardInterrupt
        real_restore(self, saved)

    monkeypatch.setattr(AcquiredCursor, "state", state)
    monkeypatch.setattr(AcquiredCursor, "restore", restore)
    h = Harness(max_poll_records=300, vectorised=False)
    h.add(build_batch(values(1500), base_offset=0), [(0, 1499, 1)])
    interrupts: list[KeyboardInterrupt] = []
    delivered, errors = _drain(h, 30, interrupts)
    assert len(interrupts) == 2 and calls["restore"] == 2
    assert delivered == list(range(1500)) and errors == []
    h.in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
    assert sorted(h.acks()) == list(range(1500))
