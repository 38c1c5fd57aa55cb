"""Options of the ``kafka-share`` streaming source: parsing and validation.

Pure logic (no Spark, no Arrow, no network), so it runs the same in the
planner process, the driver's source runner and unit tests. Spark hands a
Python data source its options with the keys lower-cased, so every key is
compared lower-cased; error messages use the documented spelling.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Final

import attrs

from kafka_share.config import parse_config
from kafka_share.errors import ConfigError

__all__ = [
    "DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS",
    "DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS",
    "DEFAULT_MAX_POLL_RECORDS",
    "MAX_PARTITION_BYTES",
    "SOURCE_OPTIONS",
    "SourceOptions",
    "SparkOptionError",
    "parse_source_options",
]

#: Records acquired per micro-batch when neither ``maxRecordsPerTrigger`` nor
#: ``kafka.max.poll.records`` is given: the broker's default per-partition limit on
#: records in flight for a group (``group.share.partition.max.record.locks``).
DEFAULT_MAX_POLL_RECORDS: Final = 2000

#: Records one micro-batch of an ``availableNow`` query may hold when neither
#: ``maxRecordsPerTrigger`` nor ``kafka.max.poll.records`` is given. Its batches
#: run back to back, so Spark's fixed cost per micro-batch dominates small ones;
#: the consumer then fetches in ``batch_optimized`` mode (see
#: :meth:`SourceOptions.for_available_now`), where one poll may return that many.
#: ``batch_optimized`` acquires whole producer batches (a 1 MiB batch of 100 B
#: records holds ~9,500), so one response from two partitions often holds over
#: 10,000 records: at 10,000 each such response made two micro-batches, the
#: second of only its 800 to 1,900 left-over records (45 micro-batches for
#: 200,000 records, against 30 at 20,000). The response's bytes, not this
#: count, bound the memory: for larger records the byte limits of the fetch
#: bind first.
DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS: Final = 20_000

#: How long an ``availableNow`` query waits, without getting records, for records
#: that were there when it started but are held elsewhere: longer than the default
#: record lock (30 s), so records of a member that died come back in time.
DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS: Final = 60_000

#: Largest Arrow IPC payload per input partition. The payload travels inside the
#: serialized task, and Spark warns about tasks above 1000 KiB.
MAX_PARTITION_BYTES: Final = 1_000_000

#: The source's own options (documented spelling), with their meaning.
SOURCE_OPTIONS: Final[dict[str, str]] = {
    "subscribe": "comma-separated topic names (required)",
    "maxRecordsPerTrigger": "at most this many records per micro-batch",
    "includeHeaders": "true to add the headers column",
    "numPartitions": "input partitions (Spark tasks) per micro-batch",
    "pollTimeoutMs": "how long one poll waits for records (default 1000)",
    "initialPollTimeoutMs": "how long the first poll of a query waits, while the consumer "
    "joins the group (default 10000)",
    "maxPartitionBytes": "largest Arrow payload of one input partition (default 1000000)",
    "availableNowIdleTimeoutMs": "with trigger(availableNow=True): how long the query keeps "
    "polling without getting records while records that were in the topics when it started "
    "are not done yet (default 60000; 0 ends at the first empty poll)",
}

_LOWER: Final = {name.lower(): name for name in SOURCE_OPTIONS}

#: Options of Spark's own Kafka source that mean nothing for a share group.
_KAFKA_SOURCE_ONLY: Final[dict[str, str]] = {
    "assign": "a share group assigns partitions itself; use subscribe",
    "subscribepattern": "share groups subscribe to topic names; use subscribe",
    "startingoffsets": "the share group keeps its position on the broker; set the group "
    "config share.auto.offset.reset instead",
    "startingoffsetsbytimestamp": "set the group config share.auto.offset.reset instead",
    "startingtimestamp": "set the group config share.auto.offset.reset instead",
    "startingoffsetsbytimestampstrategy": "set the group config share.auto.offset.reset instead",
    "endingoffsets": "a share group is a queue and has no end offsets",
    "endingoffsetsbytimestamp": "a share group is a queue and has no end offsets",
    "endingtimestamp": "a share group is a queue and has no end offsets",
    "failondataloss": "the broker tracks delivery; nothing can be skipped silently",
    "minpartitions": "use numPartitions",
    "maxoffsetspertrigger": "use maxRecordsPerTrigger",
    "minoffsetspertrigger": "not supported; the source never waits to fill a batch",
    "maxtriggerdelay": "not supported; the source never waits to fill a batch",
    "groupidprefix": "set kafka.group.id to the share group",
    "kafkaconsumer.polltimeoutms": "use pollTimeoutMs",
    "fetchoffset.numretries": "not used by share groups",
    "fetchoffset.retryintervalms": "not used by share groups",
}

#: Consumer settings the source decides itself.
_FIXED_KAFKA: Final[dict[str, str]] = {
    "share.acknowledgement.mode": "the source acknowledges explicitly, after Spark made "
    "each batch durable",
    "key.deserializer": "keys are delivered as binary",
    "value.deserializer": "values are delivered as binary",
}


class SparkOptionError(ValueError):
    """An option of the ``kafka-share`` source or of ``process_queue`` is invalid.

    The message names the option.
    """


@attrs.frozen
class SourceOptions:
    """The validated options of one ``kafka-share`` source."""

    #: consumer configuration (Kafka's dotted keys, ``kafka.`` prefix removed)
    consumer_config: Mapping[str, str]
    topics: tuple[str, ...]
    max_records_per_trigger: int | None
    include_headers: bool
    num_partitions: int | None
    poll_timeout_ms: int
    initial_poll_timeout_ms: int
    max_partition_bytes: int
    available_now_idle_timeout_ms: int = DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS
    #: the user set the records per poll (maxRecordsPerTrigger, kafka.max.poll.records)
    poll_records_given: bool = False
    #: the user set kafka.share.acquire.mode
    acquire_mode_given: bool = False

    def for_available_now(self) -> SourceOptions:
        """The options of an ``availableNow`` query: unless the user chose the
        records per poll or the acquire mode, bigger batches, fetched ahead.

        Between the micro-batches of a processing-time query the trigger
        interval passes, and records fetched ahead would wait locked through it,
        hence ``record_limit`` and one poll's worth per batch there.
        ``availableNow`` runs its batches back to back, so a response fetched
        ahead (``batch_optimized``) waits at most one batch, and the
        records of one poll (``DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS``) spread
        Spark's fixed cost per micro-batch over more records.
        """
        if self.acquire_mode_given or self.poll_records_given:
            # A small maxRecordsPerTrigger would leave most of a response fetched
            # ahead waiting, locked, through many batches: keep what was asked.
            return self
        config = dict(self.consumer_config)
        config["share.acquire.mode"] = "batch_optimized"
        config["max.poll.records"] = str(DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS)
        return attrs.evolve(self, consumer_config=config)

    @property
    def group_id(self) -> str:
        """The share group."""
        return str(self.consumer_config["group.id"])

    @property
    def max_poll_records(self) -> int:
        """Records one poll (one micro-batch) may acquire."""
        return int(self.consumer_config["max.poll.records"])


def _positive_int(name: str, raw: str, *, minimum: int = 1) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise SparkOptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SparkOptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise SparkOptionError(f"option {name} must be true or false, got {raw!r}")


def parse_topics(name: str, raw: str | None) -> tuple[str, ...]:
    """Split a comma-separated topic list; an empty one is an error naming ``name``."""
    topics = tuple(t.strip() for t in (raw or "").split(",") if t.strip())
    if not topics:
        raise SparkOptionError(
            f"option {name} is required: the comma-separated topics to consume"
        )
    return topics


def check_consumer_config(config: Mapping[str, object], prefix: str) -> None:
    """Validate a consumer configuration without connecting anywhere.

    ``prefix`` is how the caller spells the keys (``"kafka."`` for source options),
    so that the error names the option the user actually wrote.
    """
    try:
        parse_config(dict(config)).validate_supported()
    except ConfigError as exc:
        note = f" (options {prefix}* are passed to the consumer without the prefix)"
        raise SparkOptionError(f"invalid consumer option: {exc}{note if prefix else ''}") from None


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options given to ``spark.readStream.format("kafka-share")``.

    Raises:
        SparkOptionError: an option is missing, unknown, not applicable to share
            groups, or has a bad value; the message names it.
    """
    lowered: dict[str, str] = {}
    for key, value in options.items():
        lowered[key.lower()] = "" if value is None else str(value)

    consumer: dict[str, str] = {}
    own: dict[str, str] = {}
    for key, value in lowered.items():
        if key.startswith("kafka."):
            kafka_key = key[len("kafka.") :]
            if kafka_key in _FIXED_KAFKA:
                raise SparkOptionError(
                    f"option kafka.{kafka_key} cannot be set: {_FIXED_KAFKA[kafka_key]}"
                )
            consumer[kafka_key] = value
        elif key in _KAFKA_SOURCE_ONLY:
            raise SparkOptionError(
                f"option {key} of Spark's Kafka source is not supported by kafka-share: "
                f"{_KAFKA_SOURCE_ONLY[key]}"
            )
        elif key in _LOWER:
            own[_LOWER[key]] = value
        else:
            close = difflib.get_close_matches(key, list(_LOWER), n=1)
            hint = f"; did you mean {_LOWER[close[0]]}?" if close else ""
            known = ", ".join(sorted(SOURCE_OPTIONS))
            raise SparkOptionError(
                f"unknown option {key!r} for the kafka-share source{hint} "
                f"(known: {known}, and kafka.* consumer settings)"
            )

    if "bootstrap.servers" not in consumer:
        raise SparkOptionError("option kafka.bootstrap.servers is required")
    if "group.id" not in consumer:
        raise SparkOptionError("option kafka.group.id (the share group) is required")
    topics = parse_topics("subscribe", own.get("subscribe"))

    max_per_trigger = (
        _positive_int("maxRecordsPerTrigger", own["maxRecordsPerTrigger"])
        if "maxRecordsPerTrigger" in own
        else None
    )
    if "max.poll.records" in consumer:
        poll_records = _positive_int("kafka.max.poll.records", consumer["max.poll.records"])
    else:
        poll_records = DEFAULT_MAX_POLL_RECORDS
    if max_per_trigger is not None:
        poll_records = min(poll_records, max_per_trigger)
    poll_records_given = "max.poll.records" in consumer or max_per_trigger is not None
    acquire_mode_given = "share.acquire.mode" in consumer
    consumer["max.poll.records"] = str(poll_records)
    # record_limit: the broker acquires at most max.poll.records per fetch and the
    # client fetches nothing ahead, so no record is locked while it waits in a
    # buffer for a later trigger (its lock would be ticking all that time).
    consumer.setdefault("share.acquire.mode", "record_limit")
    consumer["share.acknowledgement.mode"] = "explicit"
    check_consumer_config(consumer, "kafka.")

    return SourceOptions(
        consumer_config=consumer,
        topics=topics,
        max_records_per_trigger=max_per_trigger,
        include_headers=_bool("includeHeaders", own.get("includeHeaders", "false")),
        num_partitions=(
            _positive_int("numPartitions", own["numPartitions"])
            if "numPartitions" in own
            else None
        ),
        poll_timeout_ms=_positive_int(
            "pollTimeoutMs", own.get("pollTimeoutMs", "1000"), minimum=0
        ),
        initial_poll_timeout_ms=_positive_int(
            "initialPollTimeoutMs", own.get("initialPollTimeoutMs", "10000"), minimum=0
        ),
        max_partition_bytes=_positive_int(
            "maxPartitionBytes", own.get("maxPartitionBytes", str(MAX_PARTITION_BYTES))
        ),
        available_now_idle_timeout_ms=_positive_int(
            "availableNowIdleTimeoutMs",
            own.get("availableNowIdleTimeoutMs", str(DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS)),
            minimum=0,
        ),
        poll_records_given=poll_records_given,
        acquire_mode_given=acquire_mode_given,
    )
