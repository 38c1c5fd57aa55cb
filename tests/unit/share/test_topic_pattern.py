"""match_topics: the topics of a Metadata answer a subscription pattern matches."""

from __future__ import annotations

import re

from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.topic_pattern import TopicListing, is_internal_topic, match_topics


def names(*topics: str) -> list[TopicListing]:
    return [TopicListing(t) for t in topics]


def test_the_whole_name_must_match_as_java_matches_does() -> None:
    pattern = re.compile("orders")
    assert match_topics(pattern, names("orders", "orders-eu", "old-orders")) == {"orders"}


def test_a_prefix_pattern_matches_every_topic_with_the_prefix() -> None:
    pattern = re.compile(r"orders-.*")
    got = match_topics(pattern, names("orders-eu", "orders-us", "orders", "payments"))
    assert got == {"orders-eu", "orders-us"}


def test_internal_topics_are_never_matched() -> None:
    pattern = re.compile(".*")
    topics = [
        TopicListing("__consumer_offsets", is_internal=True),
        TopicListing("__share_group_state", is_internal=True),
        TopicListing("__made_up_internal"),  # named like one, not flagged
        TopicListing("flagged", is_internal=True),
        TopicListing("a"),
    ]
    assert match_topics(pattern, topics) == {"a"}


def test_a_pattern_naming_an_internal_topic_still_does_not_match_it() -> None:
    pattern = re.compile("__consumer_offsets")
    assert match_topics(pattern, [TopicListing("__consumer_offsets", is_internal=True)]) == set()


def test_absent_topics_are_not_matched_but_passing_errors_keep_a_topic() -> None:
    pattern = re.compile("t.*")
    topics = [
        TopicListing("t-gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        TopicListing("t-denied", error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        TopicListing("t-new", error_code=ErrorCode.LEADER_NOT_AVAILABLE),
        TopicListing("t-ok"),
    ]
    assert match_topics(pattern, topics) == {"t-new", "t-ok"}


def test_flags_of_a_compiled_pattern_apply() -> None:
    pattern = re.compile("ORDERS-.*", re.IGNORECASE)
    assert match_topics(pattern, names("orders-eu", "Orders-US", "x")) == {"orders-eu", "Orders-US"}


def test_nothing_matching_is_an_empty_set() -> None:
    assert match_topics(re.compile("nope"), names("a", "b")) == frozenset()
    assert match_topics(re.compile(".*"), []) == frozenset()


def test_nameless_topics_are_ignored() -> None:
    assert match_topics(re.compile(".*"), names("")) == frozenset()


def test_is_internal_topic() -> None:
    assert is_internal_topic("__consumer_offsets")
    assert is_internal_topic("x", flagged_internal=True)
    assert not is_internal_topic("_single_underscore")
    assert not is_internal_topic("orders")
