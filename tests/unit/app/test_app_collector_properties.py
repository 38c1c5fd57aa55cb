"""Property test: the matcher production runs agrees with a reference model.

Production path: a ``CompletedShareFetch`` in the fetch buffer, through
``FetchCollector.collect`` (batch decoding, the shaped fast path for a batch
inside one acquired range, the per-record path for batches that straddle
ranges, legacy message sets and compressed batches, optional deserializers),
into the records handed out and the GAP acknowledgements left in the
``InFlightBatch``. Not only ``share.acquired.match_records``.

Reference model, written as plainly as possible: an acquired offset that holds
a data record is delivered once, with its range's delivery count; every other
acquired offset (control records, offsets compacted away, offsets past the last
record, offsets without a batch) becomes a GAP; nothing else is delivered or
acknowledged.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_share._app import collector as collector_module
from kafka_share._app import decoding as decoding_module
from kafka_share._app.collector import FetchCollector
from kafka_share._app.in_flight import GAP, InFlightBatch
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.records.builder import (
    NewRecord,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
)
from kafka_share.records.compression import CompressionType
from tests.unit.app.helpers import take_acknowledged

TIP = TopicIdPartition(uuid.UUID(int=21), "prop", 0)
NODE = 4
ACCEPT = int(AcknowledgeType.ACCEPT)


def value_of(offset: int) -> bytes:
    return f"value-{offset}".encode()


@st.composite
def logs(draw: Any) -> tuple[bytes, set[int], int]:
    """A log segment as a broker returns it: batches from ``start`` on, some
    control batches, some compacted offsets, some legacy or compressed.

    Returns the records section, the offsets holding a data record, and the
    offset after the last batch.
    """
    offset = draw(st.integers(0, 30))
    start = offset
    chunks: list[bytes] = []
    present: set[int] = set()
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["data", "data", "data", "control", "legacy", "gap"]))
        if kind == "gap":  # offsets with no batch at all (a whole batch compacted away)
            offset += draw(st.integers(1, 4))
            continue
        if kind == "control":
            chunks.append(build_control_batch(base_offset=offset))
            offset += 1
            continue
        n = draw(st.integers(1, 8))
        if kind == "legacy":
            magic = draw(st.sampled_from([0, 1]))
            chunks.append(build_legacy_message_set(
                [(None, value_of(offset + i)) for i in range(n)],
                magic=magic, base_offset=offset,
                compression=draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP])),
            ))
            present.update(range(offset, offset + n))
            offset += n
            continue
        # Compaction keeps some offsets of the batch; the header keeps its span.
        kept = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
        chunks.append(build_batch(
            [NewRecord(key=None, value=value_of(offset + d), offset_delta=d) for d in kept],
            base_offset=offset,
            last_offset_delta=n - 1,
            compression=draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP])),
        ))
        present.update(offset + d for d in kept)
        offset += n
    return b"".join(chunks), present, offset if chunks else start


@st.composite
def acquired_ranges(draw: Any, end: int) -> list[tuple[int, int, int]]:
    """Disjoint ascending (first, last, delivery_count) ranges, possibly past ``end``."""
    ranges: list[tuple[int, int, int]] = []
    cursor = draw(st.integers(0, 10))
    for _ in range(draw(st.integers(1, 5))):
        first = cursor + draw(st.integers(0, 6))
        last = first + draw(st.integers(0, max(0, end - first + 3)))
        ranges.append((first, last, draw(st.integers(1, 5))))
        cursor = last + 1
        if cursor > end + 3:
            break
    return ranges


@st.composite
def fetches(draw: Any) -> tuple[bytes, set[int], list[tuple[int, int, int]]]:
    data, present, end = draw(logs())
    return data, present, draw(acquired_ranges(end))


def reference(
    present: set[int], ranges: list[tuple[int, int, int]]
) -> tuple[list[tuple[int, int]], set[int]]:
    delivered: list[tuple[int, int]] = []
    gaps: set[int] = set()
    for first, last, count in ranges:
        for o in range(first, last + 1):
            if o in present:
                delivered.append((o, count))
            else:
                gaps.add(o)
    return delivered, gaps


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fetch=fetches(),
    max_poll_records=st.sampled_from([1, 2, 3, 7, 500]),
    mode=st.sampled_from(["rows", "deserialize", "columnar"]),
    sliced=st.booleans(),
    limit=st.sampled_from([None, 1, 2, 100]),
    chunk=st.sampled_from([1, 2, 3, 1000]),
    vectorised=st.booleans(),
)
def test_collector_matches_the_reference_model(
    fetch: tuple[bytes, set[int], list[tuple[int, int, int]]],
    max_poll_records: int,
    mode: str,
    sliced: bool,
    limit: int | None,
    chunk: int,
    vectorised: bool,
) -> None:
    """Also decoding a batch at a time (the asyncio consumer) and collecting in
    slices of ``limit`` records, large batches in pieces of ``chunk`` records,
    records built from numpy-decoded columns (``vectorised``, from any batch
    size), and in columnar mode (``poll_arrow``): the same records, GAPs and acks."""
    with mock.patch.object(collector_module, "_DECODE_CHUNK_RECORDS", chunk), \
            mock.patch.object(decoding_module, "_DECODE_CHUNK_RECORDS", chunk), \
            mock.patch.object(
                decoding_module, "_VECTORISED_MIN_RECORDS", 1 if vectorised else 10**9
            ):
        _check_against_the_model(fetch, max_poll_records, mode, sliced, limit)


def _rows(result: Any, columnar: bool) -> list[tuple[int, bytes | None, int]]:
    """(offset, value, delivery count) of what one collect handed out."""
    if not columnar:
        return [(r.offset, r.value, r.delivery_count) for r in result.records]
    out: list[tuple[int, bytes | None, int]] = []
    for tip, pieces in result.records.items():
        assert tip == TIP
        for piece in pieces:
            out.extend(zip(
                piece.columns.offsets.tolist(), piece.columns.values.to_pylist(),
                piece.delivery_counts.tolist(), strict=True,
            ))
    return out


def _check_against_the_model(
    fetch: tuple[bytes, set[int], list[tuple[int, int, int]]],
    max_poll_records: int,
    mode: str,
    sliced: bool,
    limit: int | None,
) -> None:
    data, present, ranges = fetch
    deserialize = mode == "deserialize"
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    in_flight = InFlightBatch()
    collector: FetchCollector[Any, Any] = FetchCollector(
        buffer=buffer, in_flight=in_flight,
        key_deserializer=None,
        value_deserializer=(lambda b: b) if deserialize else None,
        check_crcs=True, max_poll_records=max_poll_records, sliced_decoding=sliced,
    )
    collector.columnar = mode == "columnar"
    buffer.add_all([CompletedShareFetch(NODE, TIP, memoryview(data), ranges)])
    delivered: list[tuple[int, int]] = []
    acks: dict[int, int] = {}
    for _ in range(1000):
        result = collector.collect(limit=limit)
        assert result.error is None
        assert len(result.records) <= max_poll_records
        for offset, value, count in _rows(result, collector.columnar):
            assert value == value_of(offset)
            delivered.append((offset, count))
        in_flight.acknowledge_all(AcknowledgeType.ACCEPT)
        for tip, (node, taken) in take_acknowledged(in_flight).items():
            assert (tip, node) == (TIP, NODE)
            assert not set(taken) & set(acks), "an offset acknowledged twice"
            acks.update(taken)
        if not collector.has_buffered():
            break
    buffer.close()
    expected_delivered, expected_gaps = reference(present, ranges)
    assert delivered == expected_delivered
    assert {o for o, t in acks.items() if t == GAP} == expected_gaps
    assert {o for o, t in acks.items() if t == ACCEPT} == {o for o, _ in expected_delivered}
    assert set(acks) == {o for first, last, _ in ranges for o in range(first, last + 1)}
