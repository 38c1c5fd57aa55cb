"""Columnar delivery: what ``poll_arrow`` collects, and its Arrow record batch.

Application thread only; imported only once a consumer polls with
``poll_arrow`` (it needs the ``arrow`` extra: pyarrow and numpy).

In columnar mode the collector decodes each record batch into
:class:`~kafka_share.records.columnar.RecordColumns` (numpy arrays and Arrow
arrays whose keys and values point into the fetched bytes) instead of one
``ConsumerRecord`` per record. A :class:`Piece` is such a run of records with
their delivery counts; :class:`ColumnarPending` is a fetch's pieces in offset
order with a record index across them (what the collector's ``pending`` list
is in row mode); :class:`ColumnarRecords` is what one poll hands out, turned
into one ``pyarrow.RecordBatch`` by :func:`to_record_batch`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.records.columnar import HEADERS_TYPE, RecordColumns, binary_array
from kafka_share.records.columnar import decode_small_columns as decode_columns

__all__ = [
    "ARROW_SCHEMA",
    "ColumnarPending",
    "ColumnarRecords",
    "Piece",
    "decode_columns",
    "rows_to_acknowledge",
    "to_record_batch",
]

HEADER_TYPE = HEADERS_TYPE.value_type

#: pieces of at most this many rows get their Arrow arrays built through Python
#: lists rather than numpy or a compute kernel (a ``cast``): each of those calls
#: costs a few µs whatever the size, which at one or two records a poll (a low
#: rate) is most of the poll's cost
_FEW_ROWS = 32

#: The columns of ``poll_arrow``'s record batches (keys and values as views; with
#: ``view_types=False`` they are ``binary``).
ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
    pa.field("timestamp_type", pa.int8(), nullable=False),
    pa.field("key", pa.binary_view()),
    pa.field("value", pa.binary_view()),
    pa.field("headers", HEADERS_TYPE, nullable=False),
    pa.field("delivery_count", pa.int32(), nullable=False),
])


class Piece:
    """Consecutive records of one record batch, with their delivery counts."""

    __slots__ = ("columns", "delivery_counts", "timestamp_type")

    def __init__(self, columns: RecordColumns, delivery_counts: Any, timestamp_type: int) -> None:
        self.columns = columns
        #: int32 array, one per record
        self.delivery_counts = delivery_counts
        self.timestamp_type = timestamp_type

    @property
    def count(self) -> int:
        return int(self.columns.count)

    def slice(self, start: int, stop: int) -> Piece:
        return Piece(
            self.columns.slice(start, stop), self.delivery_counts[start:stop],
            self.timestamp_type,
        )

    def take(self, indices: Any) -> Piece:
        return Piece(
            self.columns.take(indices), self.delivery_counts[indices], self.timestamp_type
        )

    def payload_size(self) -> int:
        """Key + value bytes (a null counts as 0)."""
        c = self.columns
        if c.count <= _FEW_ROWS:
            sizes: list[int] = c.key_sizes.tolist() + c.value_sizes.tolist()
            return sum(sizes) + sizes.count(-1)  # a null's size is -1: count it as 0
        return int(np.maximum(c.key_sizes, 0).sum() + np.maximum(c.value_sizes, 0).sum())


class ColumnarPending:
    """A fetch's decoded records as pieces, indexed like one list of records."""

    __slots__ = ("_pieces", "_starts", "_total")

    def __init__(self) -> None:
        self._pieces: list[Piece] = []
        #: index of each piece's first record
        self._starts: list[int] = []
        self._total = 0

    def __len__(self) -> int:
        return self._total

    def append(self, piece: Piece) -> None:
        if piece.count:
            self._pieces.append(piece)
            self._starts.append(self._total)
            self._total += piece.count

    def truncate(self, length: int) -> None:
        """Drop the pieces from record ``length`` on (a piece boundary)."""
        while self._starts and self._starts[-1] >= length:
            self._starts.pop()
            self._total -= self._pieces.pop().count
        assert self._total == length, "truncated inside a piece"

    def rows(self, start: int, stop: int) -> list[Piece]:
        """Records ``start`` to ``stop`` (exclusive) as zero-copy piece slices."""
        out: list[Piece] = []
        for piece, first in zip(self._pieces, self._starts, strict=True):
            last = first + piece.count
            if last <= start:
                continue
            if first >= stop:
                break
            lo, hi = max(start, first) - first, min(stop, last) - first
            out.append(piece if lo == 0 and hi == piece.count else piece.slice(lo, hi))
        return out

    def removal_mask(self, start: int, offsets: frozenset[int]) -> Any:
        """For the records from ``start`` on: True where the offset is in ``offsets``."""
        rest = self.rows(start, self._total)
        if not rest:
            return np.zeros(0, dtype=bool)
        wanted = np.fromiter(offsets, dtype=np.int64, count=len(offsets))
        return np.concatenate([np.isin(p.columns.offsets, wanted) for p in rest])

    def remove(self, start: int, mask: Any) -> None:
        """Remove the records from ``start`` on where ``mask`` is True."""
        kept = self.rows(0, start)
        rest = self.rows(start, self._total)
        at = 0
        for piece in rest:
            drop = mask[at : at + piece.count]
            at += piece.count
            kept.append(piece.take(np.flatnonzero(~drop)) if drop.any() else piece)
        self._pieces, self._starts, self._total = [], [], 0
        for piece in kept:
            self.append(piece)


class ColumnarRecords:
    """The records one ``poll_arrow`` hands out, by partition (the columnar
    counterpart of ``ConsumerRecords``)."""

    __slots__ = ("_by_partition", "_count")

    def __init__(self, by_partition: dict[TopicIdPartition, list[Piece]] | None = None) -> None:
        self._by_partition = by_partition or {}
        self._count = sum(p.count for pieces in self._by_partition.values() for p in pieces)

    def partitions(self) -> frozenset[TopicIdPartition]:
        return frozenset(self._by_partition)

    def records(self, partition: TopicIdPartition) -> list[Piece]:
        return self._by_partition.get(partition, [])

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def items(self) -> Iterator[tuple[TopicIdPartition, list[Piece]]]:
        return iter(self._by_partition.items())


def _primitive(values: Any, type: Any, null: Any = None) -> Any:
    """An Arrow array over a numpy array's memory (nulls where ``null`` is True).

    Built from buffers rather than with ``pa.array``: that one imports pandas
    on first use to recognise pandas objects, half a second of CPU in a
    consumer that never needed pandas.
    """
    validity = None
    if null is not None and null.any():
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    data = np.ascontiguousarray(values)
    return pa.Array.from_buffers(type, len(data), [validity, pa.py_buffer(data)])


class _Repeated:
    """Arrays of one value repeated, built once and sliced (zero-copy) per poll:
    the topic, partition, timestamp type, a common delivery count, the empty
    headers and all-null keys are the same for every row of a piece. Any thread
    may use it (at worst two threads build the same array)."""

    #: rows in each cached array (a longer piece gets an array of its own), and
    #: how many arrays are kept: at most a few MB even for long topic names
    CAPACITY = 8192
    ENTRIES = 256

    def __init__(self) -> None:
        self._cache: dict[tuple[str, object], Any] = {}
        #: the slices of _FEW_ROWS rows or fewer, kept: a dict lookup instead of
        #: a slice call (pyarrow calls cost most of a one-record poll)
        self._few: dict[tuple[str, object, int], Any] = {}

    def get(self, kind: str, value: object, n: int) -> Any:
        if n <= _FEW_ROWS:
            key = (kind, value, n)
            few = self._few.get(key)
            if few is None:
                if len(self._few) >= self.ENTRIES * 4:
                    self._few.clear()
                few = self._few[key] = self._get(kind, value, n)
            return few
        return self._get(kind, value, n)

    def _get(self, kind: str, value: object, n: int) -> Any:
        if n > self.CAPACITY:
            return self._build(kind, value, n)
        array = self._cache.get((kind, value))
        if array is None:
            if len(self._cache) >= self.ENTRIES:
                self._cache.clear()  # many topics or partitions over time: start over
            array = self._cache[(kind, value)] = self._build(kind, value, self.CAPACITY)
        return array.slice(0, n)

    @staticmethod
    def _build(kind: str, value: object, n: int) -> Any:
        if kind == "topic":
            data = str(value).encode()
            offsets = np.arange(n + 1, dtype=np.int32) * len(data)
            return pa.Array.from_buffers(
                pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
            )
        if kind == "null_binary":
            return pa.nulls(n, pa.binary())
        if kind == "headers":
            return pa.ListArray.from_arrays(
                _primitive(np.zeros(n + 1, dtype=np.int32), pa.int32()),
                pa.nulls(0, HEADER_TYPE),
                type=ARROW_SCHEMA.field("headers").type,
            )
        field = ARROW_SCHEMA.field(kind)
        return _primitive(np.full(n, value, dtype=_NUMPY_TYPES[kind]), field.type)


_REPEATED = _Repeated()

#: the columns held as numpy arrays, with their dtypes
_NUMPY_TYPES = {
    "partition": np.int32, "offset": np.int64, "timestamp": np.int64,
    "timestamp_type": np.int8, "delivery_count": np.int32,
}
_BINARY_SCHEMA = ARROW_SCHEMA.set(5, pa.field("key", pa.binary())).set(
    6, pa.field("value", pa.binary())
)


def _piece_arrays(tip: TopicIdPartition, piece: Piece, binary: bool) -> list[Any]:
    """The :data:`ARROW_SCHEMA` columns of one piece; with ``binary``, keys and
    values as ``binary`` (for a few rows only), else ``binary_view``."""
    c = piece.columns
    n = piece.count
    repeated = _REPEATED.get
    counts = piece.delivery_counts
    first_count = int(counts[0]) if n else 1
    ts = c.timestamps
    if n <= _FEW_ROWS:
        # The same checks on Python lists: cheaper than numpy calls on a few rows.
        no_ts = min(ts.tolist(), default=0) < 0
        same_count = counts.tolist().count(first_count) == n
    else:
        no_ts = bool((ts < 0).any())
        same_count = bool((counts == first_count).all())
    return [
        repeated("topic", tip.topic, n),
        repeated("partition", tip.partition, n),
        _primitive(c.offsets, pa.int64()),
        # A timestamp of -1 (none) is a null.
        _primitive(ts, ARROW_SCHEMA.field("timestamp").type, ts < 0 if no_ts else None),
        repeated("timestamp_type", piece.timestamp_type, n),
        _binary_of(c, 0) if binary else c.keys,
        _binary_of(c, 1) if binary else c.values,
        c.headers if c.headers is not None else repeated("headers", None, n),
        repeated("delivery_count", first_count, n) if same_count
        else _primitive(counts, pa.int32()),
    ]


def _binary_of(columns: RecordColumns, which: int) -> Any:
    """The keys (``which`` 0) or values (1) of a few rows as a ``binary`` array,
    packed in Python: a fraction of the ``cast`` kernel's call at that size."""
    items = columns.items
    if items is not None:  # decoded from rows: their bytes are at hand
        binary = _binary(items[which])
    else:
        binary = _binary((columns.keys if which == 0 else columns.values).to_pylist())
    if binary is None:  # over 2 GiB: the kernel builds it (large_binary needed) or says why not
        return (columns.keys if which == 0 else columns.values).cast(pa.binary())
    return binary


def _binary(items: list[bytes | None]) -> Any:
    """A ``binary`` array of ``items`` (None is null), or None if they hold over
    2 GiB (then the ``cast`` kernel builds it, or says what is wrong)."""
    nulls = items.count(None)
    if nulls == len(items):  # null keys, the common case: one array per length
        return _REPEATED.get("null_binary", None, nulls)
    return binary_array(items)


def to_record_batch(records: ColumnarRecords, *, view_types: bool) -> Any:
    """One ``pyarrow.RecordBatch`` of ``records``, in partition order then offset
    order: schema :data:`ARROW_SCHEMA` with ``view_types``, else with keys and
    values copied into ``binary`` arrays (what most Arrow tools take)."""
    parts = [(tip, p) for tip, ps in records.items() for p in ps]
    # A few rows get their binary columns packed in Python, piece by piece; more
    # are concatenated as views and cast once.
    few = not view_types and sum(p.count for _, p in parts) <= _FEW_ROWS
    pieces = [_piece_arrays(tip, p, few) for tip, p in parts]
    if not pieces:
        arrays = [pa.nulls(0, f.type) for f in (ARROW_SCHEMA if view_types else _BINARY_SCHEMA)]
    elif len(pieces) == 1:
        arrays = pieces[0]
    else:
        arrays = [pa.concat_arrays(list(column)) for column in zip(*pieces, strict=True)]
    if view_types:
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if not few:
        arrays[5] = arrays[5].cast(pa.binary())
        arrays[6] = arrays[6].cast(pa.binary())
    return pa.RecordBatch.from_arrays(arrays, schema=_BINARY_SCHEMA)


_ROW_TYPES = frozenset(
    int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
)
_KEY_COLUMNS = ("topic", "partition", "offset", "delivery_count")


def _int64s(array: Any) -> Any:
    """An integer Arrow array (no nulls) as int64 numpy, read from its buffer
    (``to_numpy`` and ``np.asarray`` import pandas on first use)."""
    if array.null_count:
        raise ValueError(f"acknowledge_arrow() got a null in an integer column: {array.type}")
    array = array.cast(pa.int64())
    data = np.frombuffer(array.buffers()[1], dtype=np.int64)
    return data[array.offset : array.offset + len(array)]


def _column(batch: Any, name: str) -> Any:
    column = batch.column(name)
    # A table's columns are chunked; a record batch's are plain arrays.
    return column.combine_chunks() if hasattr(column, "combine_chunks") else column


def rows_to_acknowledge(batch: Any, type: Any) -> list[tuple[str, int, Any, Any, Any]]:
    """``acknowledge_arrow``'s arguments as ``(topic, partition, offsets,
    delivery_counts, types)`` per partition (numpy arrays; ``types`` one int for
    every row, or an array), for ``InFlightBatch.acknowledge_rows``.

    Raises:
        ValueError: ``batch`` lacks a column, a type is invalid or RENEW, or the
            number of types is not the number of rows.
    """
    names = getattr(getattr(batch, "schema", None), "names", None)
    missing = [c for c in _KEY_COLUMNS if names is None or c not in names]
    if missing:
        raise ValueError(
            "acknowledge_arrow() needs a record batch or table from poll_arrow() "
            f"(columns {', '.join(_KEY_COLUMNS)}); missing {missing}"
        )
    n = batch.num_rows
    types: Any
    if isinstance(type, AcknowledgeType | int) and not isinstance(type, bool):
        types = _row_type(type)
    else:
        values = type.to_pylist() if hasattr(type, "to_pylist") else list(type)
        if len(values) != n:
            raise ValueError(
                f"acknowledge_arrow() got {len(values)} acknowledge types for {n} rows"
            )
        distinct = set(values)
        checked = {v: _row_type(v) for v in distinct}  # each distinct value once
        types = np.array([checked[v] for v in values] if len(distinct) > 1 else
                         [checked[values[0]]] * n if n else [], dtype=np.int64)
    encoded = _column(batch, "topic").dictionary_encode()
    topics = [str(t) for t in encoded.dictionary]
    topic_index = _int64s(encoded.indices)
    partitions = _int64s(_column(batch, "partition"))
    offsets = _int64s(_column(batch, "offset"))
    counts = _int64s(_column(batch, "delivery_count"))
    keys = (topic_index << 32) | partitions
    out: list[tuple[str, int, Any, Any, Any]] = []
    for key in np.unique(keys).tolist():
        mask = keys == key
        out.append((
            topics[key >> 32], key & 0xFFFFFFFF, offsets[mask], counts[mask],
            types if isinstance(types, int) else types[mask],
        ))
    return out


def _row_type(value: object) -> int:
    try:
        ack_type = AcknowledgeType(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise ValueError(
            f"invalid acknowledge type {value!r}: use AcknowledgeType.ACCEPT, RELEASE or REJECT"
        ) from None
    if ack_type is AcknowledgeType.RENEW:
        raise ValueError(
            "RENEW is not available for poll_arrow() rows: set share.auto.renew=true "
            "to keep their locks while the application works on them"
        )
    assert int(ack_type) in _ROW_TYPES
    return int(ack_type)
