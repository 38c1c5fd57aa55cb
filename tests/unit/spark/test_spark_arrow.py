"""Records to Arrow and the splitting of a batch into input-partition payloads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from kafka_share import ConsumerRecord, TimestampType
from kafka_share.spark._arrow import arrow_schema, read_ipc, records_to_table, split_ipc
from kafka_share.spark.source import source_schema


def record(offset: int, value: bytes | None = b"v", **kw: object) -> ConsumerRecord[bytes, bytes]:
    fields: dict[str, object] = {
        "topic": "t", "partition": 1, "offset": offset, "timestamp": 1_700_000_000_123,
        "timestamp_type": TimestampType.CREATE_TIME, "key": b"k", "value": value,
        "headers": (), "leader_epoch": 0, "delivery_count": 1,
    }
    fields.update(kw)
    return ConsumerRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_schema_is_what_spark_expects_for_the_spark_schema(headers: bool) -> None:
    # pyspark compares the two with Schema.equals before accepting a batch.
    assert arrow_schema(headers).equals(to_arrow_schema(source_schema(headers), timezone="UTC"))


def test_records_to_table_values() -> None:
    records = [
        record(5, headers=(("h", b"1"), ("n", None)), delivery_count=3),
        record(6, value=None, key=None, timestamp=-1,
               timestamp_type=TimestampType.NO_TIMESTAMP_TYPE),
    ]
    rows = records_to_table(records, include_headers=True).to_pylist()
    assert rows[0]["offset"] == 5 and rows[0]["partition"] == 1 and rows[0]["topic"] == "t"
    assert rows[0]["deliveryCount"] == 3
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000.123)
    assert rows[0]["timestampType"] == 0
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert rows[1]["value"] is None and rows[1]["key"] is None
    assert rows[1]["timestamp"] is None  # -1: the record has no timestamp
    assert rows[1]["timestampType"] == -1
    assert "headers" not in records_to_table(records, include_headers=False).column_names


def payload_rows(payloads: list[bytes]) -> list[int]:
    offsets: list[int] = []
    for p in payloads:
        for batch in read_ipc(p):
            offsets.extend(batch.column("offset").to_pylist())
    return offsets


def test_split_keeps_every_row_in_order_and_under_the_size() -> None:
    table = records_to_table([record(i, value=b"x" * 1000) for i in range(2000)], False)
    payloads = split_ipc(table, min_parts=1, max_bytes=100_000)
    assert all(len(p) <= 100_000 for p in payloads)
    assert len(payloads) >= table.nbytes // 100_000
    assert payload_rows(payloads) == list(range(2000))


def test_split_makes_at_least_min_parts_but_never_more_than_rows() -> None:
    table = records_to_table([record(i) for i in range(10)], False)
    assert len(split_ipc(table, min_parts=4, max_bytes=10**9)) == 4
    assert len(split_ipc(table, min_parts=50, max_bytes=10**9)) == 10
    assert payload_rows(split_ipc(table, min_parts=4, max_bytes=10**9)) == list(range(10))


def test_a_record_larger_than_the_limit_travels_alone() -> None:
    table = records_to_table(
        [record(0), record(1, value=b"x" * 50_000), record(2)], False
    )
    payloads = split_ipc(table, min_parts=1, max_bytes=10_000)
    assert payload_rows(payloads) == [0, 1, 2]
    big = [p for p in payloads if len(p) > 10_000]
    assert len(big) == 1 and payload_rows(big) == [1]


def test_split_edge_cases() -> None:
    empty = pa.Table.from_pylist([], schema=arrow_schema(False))
    assert split_ipc(empty, min_parts=3, max_bytes=10) == []
    with pytest.raises(ValueError, match="must be positive"):
        split_ipc(empty, min_parts=0, max_bytes=10)
