"""Option parsing of the kafka-share Spark source (pure logic, no Spark)."""

from __future__ import annotations

import pytest

from kafka_share.spark._options import (
    DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS,
    DEFAULT_MAX_POLL_RECORDS,
    MAX_PARTITION_BYTES,
    SourceOptions,
    SparkOptionError,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "a"}


def parse(**extra: str) -> SourceOptions:
    return parse_source_options({**BASE, **extra})


def test_defaults() -> None:
    opts = parse_source_options(BASE)
    assert opts.topics == ("a",)
    assert opts.consumer_config == {
        "bootstrap.servers": "localhost:9092",
        "group.id": "g",
        "max.poll.records": str(DEFAULT_MAX_POLL_RECORDS),
        "share.acquire.mode": "record_limit",
        "share.acknowledgement.mode": "explicit",
    }
    assert opts.max_records_per_trigger is None
    assert opts.include_headers is False
    assert opts.num_partitions is None
    assert (opts.poll_timeout_ms, opts.initial_poll_timeout_ms) == (1000, 10000)
    assert opts.max_partition_bytes == MAX_PARTITION_BYTES
    assert opts.available_now_idle_timeout_ms == 60_000
    assert parse(availablenowidletimeoutms="0").available_now_idle_timeout_ms == 0


def test_spark_lower_cases_keys_and_they_still_match() -> None:
    opts = parse_source_options(
        {**BASE, "maxrecordspertrigger": "7", "includeheaders": "TRUE", "numpartitions": "3",
         "subscribe": " a , b ,"}
    )
    assert opts.max_records_per_trigger == 7
    assert opts.include_headers is True
    assert opts.num_partitions == 3
    assert opts.topics == ("a", "b")


def test_max_records_per_trigger_caps_each_poll() -> None:
    assert parse(maxRecordsPerTrigger="100").max_poll_records == 100
    # The smaller of the two wins.
    opts = parse(maxRecordsPerTrigger="100", **{"kafka.max.poll.records": "30"})
    assert opts.max_poll_records == 30
    assert parse(**{"kafka.max.poll.records": "30"}).max_poll_records == 30


def test_kafka_options_reach_the_consumer() -> None:
    opts = parse(**{"kafka.client.id": "c1", "kafka.share.acquire.mode": "batch_optimized"})
    assert opts.consumer_config["client.id"] == "c1"
    assert opts.consumer_config["share.acquire.mode"] == "batch_optimized"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers is required"),
        ({"kafka.group.id": None}, r"kafka.group.id \(the share group\) is required"),
        ({"subscribe": " , "}, "option subscribe is required"),
        ({"maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger must be at least 1"),
        ({"maxRecordsPerTrigger": "ten"}, "maxRecordsPerTrigger must be an integer"),
        ({"numPartitions": "-1"}, "numPartitions must be at least 1"),
        ({"includeHeaders": "yes"}, "includeHeaders must be true or false"),
        ({"pollTimeoutMs": "x"}, "pollTimeoutMs must be an integer"),
        ({"availableNowIdleTimeoutMs": "-1"}, "availableNowIdleTimeoutMs must be at least 0"),
        ({"availableNowIdleTimeoutMs": "1m"}, "availableNowIdleTimeoutMs must be an integer"),
        ({"startingOffsets": "earliest"}, "startingoffsets .*share.auto.offset.reset"),
        ({"assign": "{}"}, "assign .*use subscribe"),
        ({"maxOffsetsPerTrigger": "5"}, "use maxRecordsPerTrigger"),
        ({"numPartiton": "2"}, "unknown option 'numpartiton'.*did you mean numPartitions"),
        ({"kafka.share.acknowledgement.mode": "implicit"},
         "kafka.share.acknowledgement.mode cannot be set"),
        ({"kafka.value.deserializer": "x"}, "kafka.value.deserializer cannot be set"),
        ({"kafka.max.poll.recordz": "5"}, r"max.poll.recordz.*options kafka\.\*"),
        ({"kafka.max.poll.records": "0"}, "kafka.max.poll.records must be at least 1"),
    ],
)
def test_bad_options_are_named(options: dict[str, str | None], message: str) -> None:
    merged = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    with pytest.raises(SparkOptionError, match=message):
        parse_source_options(merged)


def test_available_now_fetches_bigger_batches_ahead_unless_told_otherwise() -> None:
    drain = parse().for_available_now()
    assert drain.max_poll_records == DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS
    assert drain.consumer_config["share.acquire.mode"] == "batch_optimized"
    # What the user set stays, and then so does record_limit: a small cap would
    # leave most of a response fetched ahead waiting through many batches.
    drain = parse(maxRecordsPerTrigger="300").for_available_now()
    assert drain.max_poll_records == 300
    assert drain.consumer_config["share.acquire.mode"] == "record_limit"
    drain = parse(**{"kafka.max.poll.records": "400"}).for_available_now()
    assert drain.max_poll_records == 400
    assert drain.consumer_config["share.acquire.mode"] == "record_limit"
    drain = parse(**{"kafka.share.acquire.mode": "record_limit"}).for_available_now()
    assert drain.max_poll_records == DEFAULT_MAX_POLL_RECORDS
    assert drain.consumer_config["share.acquire.mode"] == "record_limit"
