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

from kafka_share._app.checks import _check_pattern
from kafka_share._net.security_checks import validate_supported
from kafka_share._reprs import attrs_repr
from kafka_share.config import parse_config
from kafka_share.errors import ConfigError

__all__ = [
    "DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS",
    "DEFAULT_MAX_POLL_RECORDS",
    "SOURCE_OPTIONS",
    "SourceOptions",
    "SparkOptionError",
    "parse_duration_ms",
    "parse_source_options",
]

#: Records one poll of a read slot may acquire unless ``kafka.max.poll.records``
#: says otherwise. A slot stages and accepts each poll's records at once, so
#: this bounds what one member holds for milliseconds, not a batch; larger polls
#: spread the cost of a staging write and a round trip over more records.
DEFAULT_MAX_POLL_RECORDS: Final = 20_000
#: How long a read slot waits for records before it ends. The driver plans a
#: batch only when the group has a backlog, so a slot that gets nothing this long
#: is on a member whose partitions have nothing available (the backlog is on
#: other members' partitions, or locked); the batch waits for its slowest slot,
#: and a round trip to the broker takes 10-90 ms on a busy 2-core machine.
DEFAULT_POLL_TIMEOUT_MS: Final = 200

#: How long an ``availableNow`` query waits, without getting records, for records
#: that were there when it started but are held elsewhere: longer than the default
#: record lock (30 s), so records of a member that died come back in time.
DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS: Final = 60_000

#: The source's own options (documented spelling), with their meaning.
SOURCE_OPTIONS: Final[dict[str, str]] = {
    "subscribe": "comma-separated topic names (this or subscribePattern)",
    "subscribePattern": "a regular expression: the topics whose whole name matches it "
    "(internal topics never), found again every kafka.metadata.max.age.ms (this or "
    "subscribe)",
    "stagingLocation": "directory where read slots stage the coordinates of what they "
    "acquired (required; a path every executor and the driver see)",
    "maxRecordsPerTrigger": "at most about this many records per micro-batch (default: "
    "the group's backlog when the batch is planned)",
    "minRecordsPerTrigger": "wait for at least this many records before a micro-batch, "
    "at most maxTriggerDelay",
    "maxTriggerDelay": "how long minRecordsPerTrigger may delay a micro-batch (default 15m)",
    "includeHeaders": "true to add the headers column",
    "numPartitions": "read slots (Spark tasks) per micro-batch (default: as many as ran at "
    "once in the last batch, at most the topics' partition count)",
    "failOnDataLoss": "true (default): fail a re-run batch whose records were deleted "
    "from the log; false: skip them with a warning",
    "pollTimeoutMs": "how long a read slot waits for records before it ends (default 200)",
    "initialPollTimeoutMs": "how long a new member's first poll waits while it joins the "
    "group (default 10000)",
    "availableNowIdleTimeoutMs": "with trigger(availableNow=True): how long the query keeps "
    "planning batches that get no records while records that were in the topics when it "
    "started are not done yet (default 60000; 0 ends at the first empty batch)",
}

_LOWER: Final = {name.lower(): name for name in SOURCE_OPTIONS}

#: Options of Spark's own Kafka source that mean nothing for a share group.
_KAFKA_SOURCE_ONLY: Final[dict[str, str]] = {
    "assign": "a share group assigns partitions itself; use subscribe",
    "startingoffsets": "the share group keeps its position on the broker; set the group "
    "config share.auto.offset.reset instead",
    "startingoffsetsbytimestamp": "set the group config share.auto.offset.reset instead",
    "startingtimestamp": "set the group config share.auto.offset.reset instead",
    "startingoffsetsbytimestampstrategy": "set the group config share.auto.offset.reset instead",
    "endingoffsets": "a share group is a queue and has no end offsets",
    "endingoffsetsbytimestamp": "a share group is a queue and has no end offsets",
    "endingtimestamp": "a share group is a queue and has no end offsets",
    "minpartitions": "use numPartitions",
    "maxoffsetspertrigger": "use maxRecordsPerTrigger",
    "minoffsetspertrigger": "use minRecordsPerTrigger",
    "groupidprefix": "set kafka.group.id to the share group",
    "kafkaconsumer.polltimeoutms": "use pollTimeoutMs",
    "fetchoffset.numretries": "not used by share groups",
    "fetchoffset.retryintervalms": "not used by share groups",
}

#: Consumer settings the source decides itself.
_FIXED_KAFKA: Final[dict[str, str]] = {
    "share.acknowledgement.mode": "the source acknowledges explicitly, after Spark made "
    "each batch durable",
    "fetch.ahead": "read slots fetch only what they still want (a record fetched past a "
    "slot's end would stay locked in its worker)",
    "key.deserializer": "keys are delivered as binary",
    "value.deserializer": "values are delivered as binary",
}


class SparkOptionError(ValueError):
    """An option of the ``kafka-share`` source or of ``process_queue`` is invalid.

    The message names the option.
    """


#: Parts of consumer keys whose values are secrets.
_SECRET_PARTS: Final = ("password", "secret", "jaas", ".key", "token", "credential")


def _secret(key: str) -> bool:
    k = key.lower()
    return any(part in k for part in _SECRET_PARTS) and not k.endswith((".type", ".location"))


def _redacted_repr(config: Mapping[str, str]) -> str:
    return repr({k: ("[hidden]" if _secret(k) else v) for k, v in config.items()})


@attrs_repr
@attrs.frozen(repr=False)
class SourceOptions:
    """The validated options of one ``kafka-share`` source."""

    #: consumer configuration (Kafka's dotted keys, ``kafka.`` prefix removed);
    #: shown with secrets hidden (the options travel in plans and tasks)
    consumer_config: Mapping[str, str] = attrs.field(repr=_redacted_repr)
    #: ``subscribe``'s names (empty with ``subscribePattern``)
    topics: tuple[str, ...]
    staging_location: str
    max_records_per_trigger: int | None
    include_headers: bool
    num_partitions: int | None
    poll_timeout_ms: int
    initial_poll_timeout_ms: int
    fail_on_data_loss: bool = True
    min_records_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    available_now_idle_timeout_ms: int = DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS
    #: ``subscribePattern`` (None: ``subscribe``); a string, so the options pickle
    #: the same everywhere
    topic_pattern: str | None = None

    @property
    def subscription_text(self) -> str:
        """The subscription, for messages."""
        if self.topic_pattern is not None:
            return f"the topics matching {self.topic_pattern!r}"
        return ", ".join(self.topics)

    @property
    def group_id(self) -> str:
        """The share group."""
        return str(self.consumer_config["group.id"])

    @property
    def max_poll_records(self) -> int:
        """Records one poll of a read slot may acquire."""
        return int(self.consumer_config["max.poll.records"])

    def for_run(self, run: str) -> SourceOptions:
        """These options with the staging location of query run ``run``."""
        return attrs.evolve(self, staging_location=f"{self.staging_location.rstrip('/')}/{run}")


_DURATION_UNITS: Final = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                          "d": 86_400_000}


def parse_duration_ms(name: str, raw: str) -> int:
    """A duration as Spark writes them (``500ms``, ``30s``, ``15m``, ``1h``; a bare
    number is milliseconds)."""
    text = raw.strip().lower().replace(" ", "")
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):] or "ms"
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _DURATION_UNITS or value < 0:
        raise SparkOptionError(
            f"option {name} must be a duration such as 500ms, 30s, 15m or 1h, got {raw!r}"
        )
    return int(value * _DURATION_UNITS[unit])


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
        validate_supported(parse_config(dict(config)))
    except ConfigError as exc:
        note = f" (options {prefix}* are passed to the consumer without the prefix)"
        raise SparkOptionError(f"invalid consumer option: {exc}{note if prefix else ''}") from None


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options given to ``spark.readStream.format("kafka-share")``.

    Raises:
        SparkOptionError: an option is missing, unknown, not applicable to share
            groups, or has a bad value; the message names it.
    """
    consumer, own = _split_options(options)

    if "bootstrap.servers" not in consumer:
        raise SparkOptionError("option kafka.bootstrap.servers is required")
    if "group.id" not in consumer:
        raise SparkOptionError("option kafka.group.id (the share group) is required")
    topics, pattern = _subscription(own)

    max_per_trigger, min_per_trigger = _trigger_limits(own)
    staging = own.get("stagingLocation", "").strip()
    if not staging:
        raise SparkOptionError(
            "option stagingLocation is required: a directory where read slots stage what "
            "they acquired, so that a re-run batch has the same rows (a local path for "
            "local[N], a shared mount every executor and the driver see for a cluster; one "
            "per query, like its checkpoint)"
        )
    _slot_consumer_settings(consumer, max_per_trigger)
    check_consumer_config(consumer, "kafka.")

    return SourceOptions(
        consumer_config=consumer,
        topics=topics,
        topic_pattern=pattern,
        staging_location=staging,
        max_records_per_trigger=max_per_trigger,
        min_records_per_trigger=min_per_trigger,
        max_trigger_delay_ms=parse_duration_ms(
            "maxTriggerDelay", own.get("maxTriggerDelay", "15m")
        ),
        include_headers=_bool("includeHeaders", own.get("includeHeaders", "false")),
        num_partitions=(
            _positive_int("numPartitions", own["numPartitions"])
            if "numPartitions" in own
            else None
        ),
        fail_on_data_loss=_bool("failOnDataLoss", own.get("failOnDataLoss", "true")),
        poll_timeout_ms=_positive_int(
            "pollTimeoutMs", own.get("pollTimeoutMs", str(DEFAULT_POLL_TIMEOUT_MS)), minimum=1
        ),
        initial_poll_timeout_ms=_positive_int(
            "initialPollTimeoutMs", own.get("initialPollTimeoutMs", "10000"), minimum=0
        ),
        available_now_idle_timeout_ms=_positive_int(
            "availableNowIdleTimeoutMs",
            own.get("availableNowIdleTimeoutMs", str(DEFAULT_AVAILABLE_NOW_IDLE_TIMEOUT_MS)),
            minimum=0,
        ),
    )


def _subscription(own: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """(``subscribe``'s topics, ``subscribePattern``): one of the two, as Spark's
    Kafka source takes one of ``subscribe`` and ``subscribePattern``."""
    if "subscribePattern" not in own:
        if "subscribe" not in own:
            raise SparkOptionError(
                "one of the options subscribe (comma-separated topic names) and "
                "subscribePattern (a regular expression) is required"
            )
        return parse_topics("subscribe", own.get("subscribe")), None
    if "subscribe" in own:
        raise SparkOptionError(
            "options subscribe and subscribePattern cannot be used together: give the "
            "topic names or a pattern matching them"
        )
    raw = own["subscribePattern"].strip()
    try:
        _check_pattern(raw)
    except ValueError as exc:
        raise SparkOptionError(f"option subscribePattern: {exc}") from None
    return (), raw


def _split_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(consumer settings without ``kafka.``, the source's own options by their
    canonical names); unknown or inapplicable options are refused by name."""
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

    return consumer, own


def _trigger_limits(own: Mapping[str, str]) -> tuple[int | None, int | None]:
    """(maxRecordsPerTrigger, minRecordsPerTrigger), checked against each other."""
    max_per_trigger = (
        _positive_int("maxRecordsPerTrigger", own["maxRecordsPerTrigger"])
        if "maxRecordsPerTrigger" in own
        else None
    )
    min_per_trigger = (
        _positive_int("minRecordsPerTrigger", own["minRecordsPerTrigger"])
        if "minRecordsPerTrigger" in own
        else None
    )
    if min_per_trigger is not None and max_per_trigger is not None and (
        min_per_trigger > max_per_trigger
    ):
        raise SparkOptionError(
            f"option minRecordsPerTrigger ({min_per_trigger}) is above maxRecordsPerTrigger "
            f"({max_per_trigger})"
        )
    return max_per_trigger, min_per_trigger


def _slot_consumer_settings(consumer: dict[str, str], max_per_trigger: int | None) -> None:
    """The settings every read slot's consumer runs with (set in ``consumer``)."""
    if "max.poll.records" in consumer:
        _positive_int("kafka.max.poll.records", consumer["max.poll.records"])
    else:
        consumer["max.poll.records"] = str(min(DEFAULT_MAX_POLL_RECORDS,
                                               max_per_trigger or DEFAULT_MAX_POLL_RECORDS))
    # A slot fetches only what it still wants (fetch.ahead=manual: for its polls,
    # and ahead while it wants more), so a worker's consumer holds no record
    # between tasks. A record fetched past the end of a slot would stay locked in
    # that worker until its next slot; if the next slots ran elsewhere, its lock
    # would run out and it would come back with a higher delivery count, again
    # and again (measured: delivery counts of 3 in one availableNow query),
    # towards the group's delivery limit, after which the broker archives it.
    #
    # batch_optimized by default: the broker hands out whole producer batches,
    # so a slot can pass its share by part of one (it takes those records too),
    # and answers a fetch 2-4x sooner than record_limit, which splits batches
    # and tracks every record's state (a read slot took 367,000-479,000 records/s
    # against 143,000-206,000). With maxRecordsPerTrigger, record_limit keeps
    # each batch within the cap exactly.
    consumer.setdefault(
        "share.acquire.mode", "record_limit" if max_per_trigger else "batch_optimized"
    )
    consumer["share.acknowledgement.mode"] = "explicit"
    consumer["fetch.ahead"] = "manual"
