"""``poll_arrow`` batches to the source's Arrow tables, and those to input-partition payloads.

The source ships each micro-batch's records to the executors inside its input
partitions, as Arrow IPC streams. Each payload travels inside a serialized
Spark task, so the batch is split until every payload is at most about
``max_bytes`` (a single record larger than that travels alone).

The Arrow schema matches, field for field, what Spark expects for the source's
Spark schema (``pyspark`` compares them with ``Schema.equals``): ``int`` is
``int32``, ``long`` is ``int64``, ``timestamp`` is ``timestamp[us, tz=UTC]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

__all__ = ["arrow_schema", "column_names", "poll_batch_to_table", "read_ipc", "split_ipc"]

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


def column_names(include_headers: bool) -> list[str]:
    """The source's columns: those of Spark's Kafka source, then ``deliveryCount``."""
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        names.append("headers")
    names.append("deliveryCount")
    return names


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema of the source's record batches."""
    types = {
        "key": pa.binary(),
        "value": pa.binary(),
        "topic": pa.string(),
        "partition": pa.int32(),
        "offset": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestampType": pa.int32(),
        "headers": pa.list_(pa.field("element", _HEADER)),
        "deliveryCount": pa.int32(),
    }
    return pa.schema([pa.field(n, types[n]) for n in column_names(include_headers)])


#: the source's column -> the ``poll_arrow`` column it comes from
_POLL_COLUMNS = {
    "key": "key", "value": "value", "topic": "topic", "partition": "partition",
    "offset": "offset", "timestamp": "timestamp", "timestampType": "timestamp_type",
    "headers": "headers", "deliveryCount": "delivery_count",
}


def poll_batch_to_table(batch: Any, include_headers: bool) -> Any:
    """The source's Arrow table for a ``poll_arrow`` record batch (keys and
    values as ``binary``): columns renamed and cast in Arrow, no Python object
    per record. Kafka's millisecond timestamps become Spark's microseconds (a
    record without one stays null)."""
    schema = arrow_schema(include_headers)
    arrays = [batch.column(_POLL_COLUMNS[f.name]).cast(f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _ipc(table: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def split_ipc(table: Any, *, min_parts: int, max_bytes: int) -> list[bytes]:
    """Serialize ``table`` as Arrow IPC payloads, each at most about ``max_bytes``.

    Rows are cut into at least ``min_parts`` contiguous slices of near-equal row
    count (never more slices than rows); a slice still above ``max_bytes`` is
    halved until it fits or holds a single row. An empty table gives no payload.
    """
    if min_parts < 1 or max_bytes < 1:
        raise ValueError(f"min_parts and max_bytes must be positive: {min_parts}, {max_bytes}")
    rows = table.num_rows
    if rows == 0:
        return []
    parts = min(rows, max(min_parts, math.ceil(table.nbytes / max_bytes)))
    out: list[bytes] = []
    bounds = [rows * i // parts for i in range(parts + 1)]
    pending = [(bounds[i], bounds[i + 1]) for i in range(parts)]
    pending.reverse()  # a stack, so the payloads come out in row order
    while pending:
        lo, hi = pending.pop()
        payload = _ipc(table.slice(lo, hi - lo))
        if len(payload) > max_bytes and hi - lo > 1:
            mid = (lo + hi) // 2
            pending.append((mid, hi))
            pending.append((lo, mid))
            continue
        out.append(payload)
    return out


def read_ipc(payload: bytes) -> Iterator[Any]:
    """The record batches of one payload made by :func:`split_ipc`."""
    reader = pa.ipc.open_stream(pa.py_buffer(payload))
    yield from reader
