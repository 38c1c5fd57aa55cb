"""poll_arrow's columnar pieces and the record batch built from them."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pytest

from kafka_share._app import columnar
from kafka_share._app.columnar import (
    ARROW_SCHEMA,
    ColumnarPending,
    ColumnarRecords,
    Piece,
    rows_to_acknowledge,
    to_record_batch,
)
from kafka_share.models import TopicIdPartition
from kafka_share.records.batch import iter_batches
from kafka_share.records.builder import build_batch
from kafka_share.records.columnar import columns_from_rows, decode_columns
from tests.fresh import run_fresh

TIP = TopicIdPartition(uuid.UUID(int=5), "orders", 3)
TIP1 = TopicIdPartition(uuid.UUID(int=6), "audit", 0)


def piece(offsets: list[int], counts: list[int] | None = None, headers: bool = False) -> Piece:
    rows = [
        (o, 1_700_000_000_000 + o if o % 5 else -1, b"k%d" % o if o % 2 else None, b"v%d" % o,
         (("h", b"x"),) if headers and o % 3 == 0 else ())
        for o in offsets
    ]
    return Piece(
        columns_from_rows(rows),
        np.array(counts or [1] * len(offsets), dtype=np.int32), 0,
    )


def test_record_batch_columns_in_partition_then_offset_order() -> None:
    records = ColumnarRecords({
        TIP: [piece([10, 11, 12], [1, 2, 1]), piece([14], [1], headers=True)],
        TIP1: [piece([0, 1])],
    })
    assert records.count() == 6 and len(records) == 6 and records
    batch = to_record_batch(records, view_types=True)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
        ("orders", 3, 10), ("orders", 3, 11), ("orders", 3, 12), ("orders", 3, 14),
        ("audit", 0, 0), ("audit", 0, 1),
    ]
    assert [r["delivery_count"] for r in rows] == [1, 2, 1, 1, 1, 1]
    assert rows[0]["timestamp"] is None and rows[1]["timestamp"] is not None  # -1 is null
    assert rows[1]["key"] == b"k11" and rows[0]["key"] is None and rows[0]["value"] == b"v10"
    assert rows[3]["headers"] == [] and rows[0]["headers"] == []
    binary = to_record_batch(records, view_types=False)
    assert binary.schema.field("value").type == pa.binary()
    assert binary.column("value").to_pylist() == batch.column("value").to_pylist()
    empty = to_record_batch(ColumnarRecords(), view_types=False)
    assert empty.num_rows == 0 and empty.schema == binary.schema


def test_pending_rows_are_sliced_across_pieces_and_removed_by_offset() -> None:
    pending = ColumnarPending()
    pending.append(piece([0, 1, 2]))
    pending.append(piece([]))  # an empty piece is not kept
    pending.append(piece([5, 6]))
    assert len(pending) == 5

    def offsets(pieces: list[Piece]) -> list[int]:
        return [o for p in pieces for o in p.columns.offsets.tolist()]

    assert offsets(pending.rows(1, 4)) == [1, 2, 5]
    mask = pending.removal_mask(1, frozenset({2, 6}))
    assert mask.tolist() == [False, True, False, True]
    pending.remove(1, mask)
    assert offsets(pending.rows(0, len(pending))) == [0, 1, 5]


def test_rows_to_acknowledge_groups_by_partition() -> None:
    batch = to_record_batch(
        ColumnarRecords({TIP: [piece([7, 8], [2, 1])], TIP1: [piece([3])]}), view_types=False
    )
    rows = rows_to_acknowledge(batch, [1, 2, 3])
    by_partition = {(t, p): (o.tolist(), c.tolist(), ty.tolist()) for t, p, o, c, ty in rows}
    assert by_partition == {
        ("orders", 3): ([7, 8], [2, 1], [1, 2]), ("audit", 0): ([3], [1], [3]),
    }
    (_, _, _, _, one_type), = rows_to_acknowledge(batch.slice(2), 2)
    assert one_type == 2


def test_the_columnar_path_does_not_import_pandas() -> None:
    # pa.array() imports pandas on first use: half a second of CPU in a consumer.
    script = (
        "import sys, uuid, numpy as np\n"
        "from kafka_share._app.columnar import ColumnarRecords, Piece, to_record_batch, "
        "rows_to_acknowledge\n"
        "from kafka_share.models import TopicIdPartition\n"
        "from kafka_share.records.builder import NewRecord, build_batch\n"
        "from kafka_share.records.batch import iter_batches\n"
        "from kafka_share.records.columnar import decode_columns, decode_small_columns\n"
        "data = build_batch([NewRecord(b'k', b'v' * 100, headers=[('h', b'x')])] * 100)\n"
        "cols = decode_columns(next(iter_batches(data, check_crcs=True)))\n"
        "tip = TopicIdPartition(uuid.UUID(int=1), 't', 0)\n"
        "p = Piece(cols.take(np.arange(0, 100, 2)), np.ones(50, dtype=np.int32), 0)\n"
        "b = to_record_batch(ColumnarRecords({tip: [p]}), view_types=False)\n"
        "rows_to_acknowledge(b, [1] * 50)\n"
        "small = decode_small_columns(next(iter_batches(build_batch([(None, b'v')]), "
        "check_crcs=True)))\n"
        "to_record_batch(ColumnarRecords({tip: [Piece(small, np.ones(1, np.int32), 0)]}), "
        "view_types=False)\n"
        "print('pandas' in sys.modules)\n"
    )
    assert run_fresh(script).strip() == "False"


def decoded_piece(offsets: list[int], null_keys: bool) -> Piece:
    """A piece of the vectorised decoder (keys and values as views, no items)."""
    data = build_batch(
        [(None if null_keys or o % 2 else b"k%d" % o, b"v%d" % o) for o in offsets],
        base_offset=offsets[0],
    )
    columns = decode_columns(next(iter_batches(data, check_crcs=True)))
    assert columns.items is None
    return Piece(columns, np.ones(len(offsets), dtype=np.int32), 0)


@pytest.mark.parametrize("offsets", [[5], [10, 11, 12, 14], list(range(40))])
@pytest.mark.parametrize("view_types", [False, True])
@pytest.mark.parametrize("source", ["rows", "decoded", "decoded-null-keys"])
def test_few_rows_build_the_same_batch_as_many(
    offsets: list[int], view_types: bool, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to _FEW_ROWS rows the arrays are built through Python lists (cheaper
    than numpy and cast calls at a record or two a poll): the same batch."""
    counts = [1 + (o % 3 == 0) for o in offsets]
    first = (
        piece(offsets, counts) if source == "rows"
        else decoded_piece(offsets, null_keys=source == "decoded-null-keys")
    )
    records = ColumnarRecords({TIP: [first, piece([90], [2])], TIP1: [piece([1])]})
    few = to_record_batch(records, view_types=view_types)
    monkeypatch.setattr(columnar, "_FEW_ROWS", -1)
    many = to_record_batch(records, view_types=view_types)
    few.validate(full=True)
    assert few.schema == many.schema
    assert few.equals(many)
    assert few.to_pylist() == many.to_pylist()
    if source == "rows":
        assert records.records(TIP)[0].payload_size() == sum(
            len(b"v%d" % o) + (len(b"k%d" % o) if o % 2 else 0) for o in offsets
        )


def test_columns_from_rows_build_their_views_only_when_read() -> None:
    columns = piece([3, 4, 5]).columns
    assert columns.items is not None and columns._keys is None and columns._values is None
    part = columns.slice(1, 3)
    assert part.items == ([None, b"k5"], [b"v4", b"v5"])
    assert part.values.to_pylist() == [b"v4", b"v5"]  # built on first read
    assert columns._values is None
    assert columns.take(np.array([2, 0])).keys.to_pylist() == [b"k5", b"k3"]
    assert columns.slice(0, 2).keys.to_pylist() == [b"k3", None]


def test_poll_arrow_decodes_a_one_record_fetch_without_the_vectorised_decoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a low rate each poll_arrow gets a record or two; the vectorised
    decoder's fixed cost (about 80 µs) made its latency twice poll()'s."""
    from kafka_share._app.collector import FetchCollector
    from kafka_share._app.in_flight import InFlightBatch
    from kafka_share._handoff.events import CompletedShareFetch
    from kafka_share._handoff.fetch_buffer import FetchBuffer
    from kafka_share.records import columnar as record_columns
    from kafka_share.records.builder import build_batch

    def refuse(*args: object) -> None:
        raise AssertionError("vectorised decoder used for a one-record batch")

    monkeypatch.setattr(record_columns, "decode_fields", refuse)
    buffer: FetchBuffer[CompletedShareFetch] = FetchBuffer()
    collector: FetchCollector[bytes, bytes] = FetchCollector(
        buffer=buffer, in_flight=InFlightBatch(), key_deserializer=None,
        value_deserializer=None, check_crcs=True, max_poll_records=500,
    )
    collector.columnar = True
    data = build_batch([(b"k", b"v")], base_offset=41)
    buffer.add_all([CompletedShareFetch(1, TIP, memoryview(data), [(41, 41, 1)], None)])
    batch = to_record_batch(collector.collect(None).records, view_types=False)
    assert batch.column("offset").to_pylist() == [41]
    assert batch.column("value").to_pylist() == [b"v"]


def test_few_rows_over_the_int32_offsets_fall_back_to_the_cast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A few values holding over 2 GiB cannot take int32 offsets: the kernel
    builds the column (shown by making the Python packing give up)."""
    records = ColumnarRecords({TIP: [piece([1, 2, 3])], TIP1: [decoded_piece([7, 8], False)]})
    expected = to_record_batch(records, view_types=False)
    monkeypatch.setattr(columnar, "_binary", lambda items: None)
    assert to_record_batch(records, view_types=False).equals(expected)
