"""The argument checks of the public calls, and the millisecond clock they use."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Collection

from kafka_share.errors import IllegalStateError, InvalidTopicError
from kafka_share.models import AcknowledgeType

#: The errors' messages of the consumer's rules, one place for every consumer
#: (both facades, and ``kafka_share.testing``'s mock consumers, which must say
#: what the real ones say).
NOT_SUBSCRIBED = "Consumer is not subscribed to any topics."
CLOSED = "This consumer has already been closed."
WOKEN_UP = "the blocking call was interrupted by wakeup()"
TELEMETRY_OFF = "Telemetry is not enabled. Set config `enable.metrics.push` to `true`."
IMPLICIT_MODE = (
    "Implicit acknowledgement of delivery is being used: the record cannot be "
    "acknowledged, poll() accepts the previous batch itself. Set "
    "share.acknowledgement.mode=explicit to acknowledge records one by one."
)


def in_callback_message(facade: str) -> str:
    """The error of a call of ``facade`` made from the acknowledgement commit callback."""
    return (
        f"{facade} methods are not accessible from the acknowledgement "
        "commit callback (except wakeup())."
    )


def _check_ack_type(type: object, *, explicit: bool) -> AcknowledgeType:
    """``acknowledge``'s checks of the mode and of ``type`` (an AcknowledgeType
    or its int value); whether the broker supports it is the caller's business."""
    if not explicit:
        raise IllegalStateError(IMPLICIT_MODE)
    try:
        return AcknowledgeType(type)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise ValueError(
            f"invalid acknowledge type {type!r}: use AcknowledgeType.ACCEPT, RELEASE, "
            "REJECT or RENEW"
        ) from None


#: "no deadline" on the monotonic millisecond clock
_FOREVER_MS = 2**62
_MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(rf"[a-zA-Z0-9._-]{{1,{_MAX_TOPIC_LENGTH}}}")


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _timeout_ms(timeout: object, default_ms: int, what: str) -> int:
    """``timeout`` seconds as milliseconds (``default_ms`` for None, _FOREVER_MS for
    infinity); a bad value gets an error naming the call and the value."""
    if timeout is None:
        return default_ms
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what}() timeout must be a number of seconds, got {timeout!r}")
    if math.isnan(timeout):
        raise ValueError(f"{what}() timeout must be a number of seconds, got NaN")
    if timeout < 0:
        raise ValueError(f"{what}() timeout must not be negative, got {timeout!r}")
    if timeout == float("inf"):
        return _FOREVER_MS
    return min(int(timeout * 1000), _FOREVER_MS)


def _check_topic_name(name: object) -> str:
    """Kafka's rule for legal topic names (``Topic.validate`` in Java)."""
    if not isinstance(name, str):
        raise TypeError(f"topic names must be strings, got {name!r}")
    if (
        not _LEGAL_TOPIC.fullmatch(name)
        or name in (".", "..")
    ):
        raise InvalidTopicError(
            f"Invalid topic name {name!r}: a topic name is 1 to {_MAX_TOPIC_LENGTH} "
            "characters of ASCII letters, digits, '.', '_' and '-', and is not '.' or '..'"
        )
    return name


def _check_topics(topics: Collection[str]) -> frozenset[str]:
    """The legal topic names of a ``subscribe`` argument (empty: unsubscribe)."""
    if isinstance(topics, (str, bytes)):
        raise TypeError(
            f"subscribe() takes a collection of topic names, not a single string: "
            f"use subscribe([{topics!r}])"
        )
    return frozenset(_check_topic_name(t) for t in topics)


def _check_pattern(pattern: object) -> re.Pattern[str]:
    """A ``subscribe(pattern=)`` argument as a compiled pattern of ``str``."""
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise TypeError(
                f"subscribe() pattern must match str topic names, got a bytes pattern {pattern!r}"
            )
        compiled: re.Pattern[str] = pattern
    elif isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid topic pattern {pattern!r}: {exc}") from None
    else:
        raise TypeError(
            f"subscribe() pattern must be a str or a compiled re.Pattern, got {pattern!r}"
        )
    if not compiled.pattern:
        raise ValueError("subscribe() pattern must not be empty: it would match no topic")
    return compiled


def _check_subscription(
    topics: Collection[str] | None, pattern: object
) -> frozenset[str] | re.Pattern[str]:
    """``subscribe``'s arguments: the topic names (empty: unsubscribe) or the pattern;
    exactly one of the two."""
    if pattern is not None:
        if topics is not None:
            raise TypeError(
                "subscribe() takes topics or pattern=, not both: a pattern subscription "
                "replaces a subscription by names"
            )
        return _check_pattern(pattern)
    if topics is None:
        raise TypeError(
            "subscribe() needs topics (a collection of names) or pattern= (a regular "
            "expression); to leave the group, call unsubscribe()"
        )
    return _check_topics(topics)


def _poll_timeout_ms(timeout: float | None) -> int | None:
    """``poll``'s timeout in ms (None: no timeout)."""
    timeout_ms: int | None = None
    if timeout is not None:
        timeout_ms = _timeout_ms(timeout, 0, "poll")
        if timeout_ms >= _FOREVER_MS:
            timeout_ms = None  # poll(float("inf")) is poll()
    return timeout_ms


def _check_max_records(max_records: object) -> int | None:
    if max_records is None:
        return None
    if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
        raise ValueError(f"max_records must be a positive int or None, got {max_records!r}")
    return max_records
