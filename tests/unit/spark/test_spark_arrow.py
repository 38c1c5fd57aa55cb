"""poll_arrow batches to the source's tables."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from kafka_share import TopicIdPartition
from kafka_share._app.columnar import ColumnarRecords, Piece, to_record_batch
from kafka_share.records.batch import Record
from kafka_share.records.columnar import columns_from_rows
from kafka_share.spark._arrow import arrow_schema, poll_batch_to_table
from kafka_share.spark.source import source_schema

TIP = TopicIdPartition(__import__("uuid").UUID(int=3), "t", 1)


def record(
    offset: int, value: bytes | None = b"v", *, key: bytes | None = b"k",
    timestamp: int = 1_700_000_000_123, headers: tuple[tuple[str, bytes | None], ...] = (),
) -> Record:
    return (offset, timestamp, key, value, headers)


def records_to_table(
    records: list[Record], include_headers: bool, *, delivery_count: int = 1,
    timestamp_type: int = 0,
) -> pa.Table:
    """The source's table for ``records``, through poll_arrow's own batch builder."""
    piece = Piece(
        columns_from_rows(records), np.full(len(records), delivery_count, np.int32),
        timestamp_type,
    )
    batch = to_record_batch(ColumnarRecords({TIP: [piece]}), view_types=False)
    return poll_batch_to_table(batch, include_headers)


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_is_what_spark_expects_for_the_spark_schema(headers: bool) -> None:
    # pyspark compares the two with Schema.equals before accepting a batch.
    assert arrow_schema(headers).equals(to_arrow_schema(source_schema(headers), timezone="UTC"))


def test_poll_batch_to_table_values() -> None:
    records = [
        record(5, headers=(("h", b"1"), ("n", None))),
        record(6, value=None, key=None, timestamp=-1),
    ]
    rows = records_to_table(records, True, delivery_count=3).to_pylist()
    assert rows[0]["offset"] == 5 and rows[0]["partition"] == 1 and rows[0]["topic"] == "t"
    assert rows[0]["deliveryCount"] == 3
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert rows[0]["timestampType"] == 0
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert rows[1]["value"] is None and rows[1]["key"] is None
    assert rows[1]["timestamp"] is None  # -1: the record has no timestamp
    assert rows[1]["headers"] == []
    assert "headers" not in records_to_table(records, False).column_names
    legacy = records_to_table([record(7, timestamp=-1)], False, timestamp_type=-1).to_pylist()
    assert legacy[0]["timestampType"] == -1  # a v0 message set has no timestamp type
