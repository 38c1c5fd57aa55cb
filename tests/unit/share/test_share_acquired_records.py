"""The matcher against real decoded record batches (compaction, markers)."""

from __future__ import annotations

from kafka_share.records import iter_batches
from kafka_share.records.builder import NewRecord, build_batch, build_control_batch
from kafka_share.share.acquired import TUPLE_OFFSET, AcquiredRecords, match_records


def test_matches_decoded_batches_with_compaction_and_marker() -> None:
    # Offsets 0..4 in one batch with 1 and 3 compacted away (last_offset_delta 4),
    # a commit marker at 5, then records 6..7.
    compacted = build_batch(
        [
            NewRecord(b"k", b"v0", offset_delta=0),
            NewRecord(b"k", b"v2", offset_delta=2),
            NewRecord(b"k", b"v4", offset_delta=4),
        ],
        base_offset=0,
        is_transactional=True,
        producer_id=7,
        producer_epoch=0,
        last_offset_delta=4,
    )
    marker = build_control_batch(base_offset=5, producer_id=7)
    tail = build_batch([(None, b"v6"), (None, b"v7")], base_offset=6)
    data = compacted + marker + tail
    acquired = AcquiredRecords.from_ranges([(1, 6, 2), (7, 9, 1)])

    result = match_records(acquired, iter_batches(data, check_crcs=True), offset_of=TUPLE_OFFSET)

    assert [(r[0], r[3], c) for r, c in result.records] == [
        (2, b"v2", 2),
        (4, b"v4", 2),
        (6, b"v6", 2),
        (7, b"v7", 1),
    ]
    assert result.gaps == [1, 3, 5, 8, 9]
