"""TEMPORARY reference decoder (replaced by the vectorized one on merge)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kafka_share.records.batch import RecordBatch

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


class RecordColumns:
    __slots__ = ("count", "headers", "key_sizes", "keys", "offsets", "timestamps",
                 "value_sizes", "values")

    def __init__(self, offsets: Any, timestamps: Any, keys: Any, values: Any,
                 key_sizes: Any, value_sizes: Any, headers: Any) -> None:
        self.count = len(offsets)
        self.offsets = offsets
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.key_sizes = key_sizes
        self.value_sizes = value_sizes
        self.headers = headers

    @classmethod
    def from_parts(cls, *, offsets: Any, timestamps: Any, keys: Any, values: Any,
                   key_sizes: Any, value_sizes: Any, headers: Any) -> RecordColumns:
        return cls(offsets, timestamps, keys, values, key_sizes, value_sizes, headers)

    def take(self, indices: Any) -> RecordColumns:
        idx = pa.array(indices, type=pa.int64())
        return RecordColumns(
            self.offsets[indices], self.timestamps[indices],
            self.keys.cast(pa.binary()).take(idx).cast(pa.binary_view()),
            self.values.cast(pa.binary()).take(idx).cast(pa.binary_view()),
            self.key_sizes[indices], self.value_sizes[indices],
            None if self.headers is None else self.headers.take(idx),
        )

    def slice(self, start: int, stop: int) -> RecordColumns:
        n = stop - start
        return RecordColumns(
            self.offsets[start:stop], self.timestamps[start:stop], self.keys.slice(start, n),
            self.values.slice(start, n), self.key_sizes[start:stop],
            self.value_sizes[start:stop],
            None if self.headers is None else self.headers.slice(start, n),
        )


def decode_columns(batch: RecordBatch) -> RecordColumns:
    records = batch.records()
    keys = [r[2] for r in records]
    values = [r[3] for r in records]
    has_headers = any(r[4] for r in records)
    return RecordColumns(
        np.array([r[0] for r in records], dtype=np.int64),
        np.array([r[1] for r in records], dtype=np.int64),
        pa.array(keys, type=pa.binary()).cast(pa.binary_view()),
        pa.array(values, type=pa.binary()).cast(pa.binary_view()),
        np.array([-1 if k is None else len(k) for k in keys], dtype=np.int32),
        np.array([-1 if v is None else len(v) for v in values], dtype=np.int32),
        pa.array([[{"key": k, "value": v} for k, v in r[4]] for r in records],
                 type=pa.list_(_HEADER)) if has_headers else None,
    )
