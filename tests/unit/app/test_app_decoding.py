"""FetchDecoder through the collector: acquired matching and GAPs, corrupt and
broken batches, decoding a piece at a time, and a decoder that raises."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_share._app.in_flight import GAP
from kafka_share.errors import CorruptRecordError
from kafka_share.models import AcknowledgeType
from kafka_share.records.builder import NewRecord, build_batch, build_control_batch, with_crc
from tests.unit.app.helpers import take_acknowledged
from tests.unit.app.test_app_collector import (
    ACCEPT,
    NODE,
    REJECT,
    TIP,
    Harness,
    collected_offsets,
    values,
)


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


def test_the_varint_table_thread_sleeps_between_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is built on a thread of its own while the consumer joins; a
    short sleep between slices releases the GIL, so that the join's first
    requests do not wait for the whole build (6-12 ms)."""
    from kafka_share._app import decoding
    from kafka_share.records import row_decoder

    pauses: list[float] = []
    monkeypatch.setattr(row_decoder, "_VARINTS", None)
    monkeypatch.setattr(decoding, "_preparing", None)
    # The module's own view of time only: other threads keep the real sleep.
    monkeypatch.setattr(decoding, "time", SimpleNamespace(sleep=pauses.append))
    decoding.prepare_row_decoder()
    thread = decoding._preparing
    assert thread is not None
    thread.join(30)
    assert row_decoder.prepared()
    assert pauses == [decoding._PREPARE_PAUSE_S] * (0x80 // row_decoder._PREPARE_SLICE)
