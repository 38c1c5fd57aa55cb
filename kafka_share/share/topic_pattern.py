"""Pattern subscription: which topics of a Metadata answer a pattern matches. Pure.

Kafka's share consumer (``KafkaShareConsumer``, 4.x) subscribes by topic names
only; ``subscribe(pattern=...)`` is this client's extension, resolved on the
client as Java's classic ``KafkaConsumer.subscribe(Pattern)`` does: a Metadata
request for all topics every ``metadata.max.age.ms``, the pattern matched
against the names in the answer, and the member re-subscribed by name whenever
the matching set changes. The broker only ever sees topic names.

Matching is Java's ``Pattern.matcher(topic).matches()``: the whole name must
match (``re.fullmatch``), so ``orders`` matches the topic ``orders`` and not
``orders-eu``. Internal topics (those the broker flags ``is_internal``, and
every name starting with ``__``, such as ``__consumer_offsets`` and
``__share_group_state``) are never matched, as Java's
``exclude.internal.topics=true`` default leaves them out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.protocol.error_codes import ErrorCode

__all__ = ["TopicListing", "is_internal_topic", "match_topics"]

#: Topic errors of a Metadata answer that mean "this topic is not there for us":
#: such a topic is not matched. Others (LEADER_NOT_AVAILABLE while a new topic's
#: partitions get leaders, say) leave the topic matched, so that a passing error
#: does not make the member drop the topic and join it again a refresh later.
_ABSENT = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
})


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class TopicListing:
    """One topic of a Metadata answer, as far as matching cares."""

    name: str
    is_internal: bool = False
    error_code: int = 0


def is_internal_topic(name: str, flagged_internal: bool = False) -> bool:
    """True for a topic a pattern never matches: flagged internal by the broker,
    or named like one (``__`` prefix)."""
    return flagged_internal or name.startswith("__")


def match_topics(pattern: re.Pattern[str], topics: Iterable[TopicListing]) -> frozenset[str]:
    """The names of ``topics`` that ``pattern`` matches as a whole (``fullmatch``),
    leaving out internal topics and topics the answer says are absent."""
    return frozenset(
        t.name
        for t in topics
        if t.name
        and t.error_code not in _ABSENT
        and not is_internal_topic(t.name, t.is_internal)
        and pattern.fullmatch(t.name) is not None
    )
