"""Option parsing of the kafka-share Spark source (pure logic, no Spark)."""

from __future__ import annotations

import pytest

from kafka_share.spark._options import (
    DEFAULT_MAX_POLL_RECORDS,
    SourceOptions,
    SparkOptionError,
    parse_duration_ms,
    parse_source_options,
)
from tests.unit.spark.helpers import redacted

BASE = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "a",
        "stagingLocation": "/tmp/stage"}


def parse(**extra: str) -> SourceOptions:
    return parse_source_options({**BASE, **extra})


def test_defaults() -> None:
    opts = parse_source_options(BASE)
    assert opts.topics == ("a",)
    assert opts.staging_location == "/tmp/stage"
    assert opts.consumer_config == {
        "bootstrap.servers": "localhost:9092",
        "group.id": "g",
        "max.poll.records": str(DEFAULT_MAX_POLL_RECORDS),
        "share.acquire.mode": "batch_optimized",
        "share.acknowledgement.mode": "explicit",
        "fetch.ahead": "manual",
    }
    assert opts.max_records_per_trigger is None
    assert opts.min_records_per_trigger is None
    assert opts.max_trigger_delay_ms == 15 * 60_000
    assert opts.include_headers is False
    assert opts.num_partitions is None
    assert opts.fail_on_data_loss is True
    assert (opts.poll_timeout_ms, opts.initial_poll_timeout_ms) == (200, 10000)
    assert opts.available_now_idle_timeout_ms == 60_000
    assert parse(availablenowidletimeoutms="0").available_now_idle_timeout_ms == 0


def test_spark_lower_cases_keys_and_they_still_match() -> None:
    opts = parse_source_options(
        {**BASE, "maxrecordspertrigger": "7", "includeheaders": "TRUE", "numpartitions": "3",
         "subscribe": " a , b ,", "failondataloss": "false", "minrecordspertrigger": "2",
         "maxtriggerdelay": "30s"}
    )
    assert opts.max_records_per_trigger == 7
    assert opts.min_records_per_trigger == 2
    assert opts.max_trigger_delay_ms == 30_000
    assert opts.include_headers is True
    assert opts.num_partitions == 3
    assert opts.fail_on_data_loss is False
    assert opts.topics == ("a", "b")


def test_max_records_per_trigger_bounds_a_poll() -> None:
    # A batch is many polls; one poll never holds more than a batch may.
    assert parse(maxRecordsPerTrigger="100").max_poll_records == 100
    assert parse(maxRecordsPerTrigger="10000000").max_poll_records == DEFAULT_MAX_POLL_RECORDS
    assert parse(**{"kafka.max.poll.records": "30"}).max_poll_records == 30
    assert parse(maxRecordsPerTrigger="10", **{"kafka.max.poll.records": "30"}
                 ).max_poll_records == 30


def test_a_cap_per_trigger_makes_slots_acquire_exactly() -> None:
    # batch_optimized hands out whole producer batches (a slot may pass its
    # share); record_limit keeps a capped batch within maxRecordsPerTrigger.
    assert parse().consumer_config["share.acquire.mode"] == "batch_optimized"
    assert parse(maxRecordsPerTrigger="100").consumer_config["share.acquire.mode"] == (
        "record_limit")
    for opts in (parse(), parse(maxRecordsPerTrigger="100")):
        assert opts.consumer_config["fetch.ahead"] == "manual"


def test_kafka_options_reach_the_consumer() -> None:
    opts = parse(**{"kafka.client.id": "c1", "kafka.share.acquire.mode": "record_limit"})
    assert opts.consumer_config["client.id"] == "c1"
    assert opts.consumer_config["share.acquire.mode"] == "record_limit"
    with pytest.raises(SparkOptionError, match=r"kafka\.fetch\.ahead"):
        parse(**{"kafka.fetch.ahead": "auto"})


def test_each_run_stages_in_a_folder_of_its_own() -> None:
    assert parse().for_run("abc").staging_location == "/tmp/stage/abc"
    assert parse(stagingLocation="/x/").for_run("r").staging_location == "/x/r"


def test_secrets_never_show() -> None:
    opts = parse(**{
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
        'required username="u" password="hunter2";',
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
    })
    assert "hunter2" not in repr(opts)
    assert "hunter2" not in str(redacted(opts))
    assert redacted(opts)["sasl.mechanism"] == "PLAIN"


@pytest.mark.parametrize(
    ("raw", "ms"),
    [("500", 500), ("500ms", 500), ("30s", 30_000), ("15m", 900_000), ("1 h", 3_600_000),
     ("1.5s", 1500), ("2min", 120_000), ("1d", 86_400_000)],
)
def test_durations(raw: str, ms: int) -> None:
    assert parse_duration_ms("maxTriggerDelay", raw) == ms


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers is required"),
        ({"kafka.group.id": None}, r"kafka.group.id \(the share group\) is required"),
        ({"subscribe": " , "}, "option subscribe is required"),
        ({"subscribe": None}, "options subscribe .* and subscribePattern .* is required"),
        ({"subscribePattern": "a.*"}, "subscribe and subscribePattern cannot be used together"),
        ({"subscribe": None, "subscribePattern": "a("},
         r"option subscribePattern: invalid topic pattern 'a\(': missing \)"),
        ({"subscribe": None, "subscribePattern": " "},
         "option subscribePattern: .*must not be empty"),
        ({"stagingLocation": None}, "option stagingLocation is required"),
        ({"stagingLocation": "  "}, "option stagingLocation is required"),
        ({"maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger must be at least 1"),
        ({"maxRecordsPerTrigger": "ten"}, "maxRecordsPerTrigger must be an integer"),
        ({"minRecordsPerTrigger": "5", "maxRecordsPerTrigger": "4"},
         r"minRecordsPerTrigger \(5\) is above maxRecordsPerTrigger \(4\)"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"maxTriggerDelay": "5 weeks"}, "maxTriggerDelay must be a duration"),
        ({"numPartitions": "-1"}, "numPartitions must be at least 1"),
        ({"includeHeaders": "yes"}, "includeHeaders must be true or false"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({"pollTimeoutMs": "x"}, "pollTimeoutMs must be an integer"),
        ({"availableNowIdleTimeoutMs": "-1"}, "availableNowIdleTimeoutMs must be at least 0"),
        ({"availableNowIdleTimeoutMs": "1m"}, "availableNowIdleTimeoutMs must be an integer"),
        ({"startingOffsets": "earliest"}, "startingoffsets .*share.auto.offset.reset"),
        ({"assign": "{}"}, "assign .*use subscribe"),
        ({"maxOffsetsPerTrigger": "5"}, "use maxRecordsPerTrigger"),
        ({"minOffsetsPerTrigger": "5"}, "use minRecordsPerTrigger"),
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


def test_subscribe_pattern_instead_of_subscribe() -> None:
    opts = parse_source_options(
        {k: v for k, v in BASE.items() if k != "subscribe"} | {"subscribepattern": "orders-.*"}
    )
    assert opts.topics == ()
    assert opts.topic_pattern == "orders-.*"
    assert opts.subscription_text == "the topics matching 'orders-.*'"
    assert parse().topic_pattern is None
    assert parse().subscription_text == "a"
