"""``poll_arrow`` batches as the source's Arrow tables.

The Arrow schema matches, field for field, what Spark expects for the source's
Spark schema (``pyspark`` compares them with ``Schema.equals``): ``int`` is
``int32``, ``long`` is ``int64``, ``timestamp`` is ``timestamp[us, tz=UTC]``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["arrow_schema", "column_names", "poll_batch_to_table"]


def column_names(include_headers: bool) -> list[str]:
    """The source's columns: those of Spark's Kafka source, then ``deliveryCount``."""
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        names.append("headers")
    names.append("deliveryCount")
    return names


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema of the source's record batches."""
    # pyarrow is imported where a schema is built: the source's schema needs
    # column_names only, in processes that never touch Arrow data.
    import pyarrow as pa  # noqa: PLC0415

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    types = {
        "key": pa.binary(),
        "value": pa.binary(),
        "topic": pa.string(),
        "partition": pa.int32(),
        "offset": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestampType": pa.int32(),
        "headers": pa.list_(pa.field("element", header)),
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
    import pyarrow as pa  # noqa: PLC0415

    schema = arrow_schema(include_headers)
    arrays = [batch.column(_POLL_COLUMNS[f.name]).cast(f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
