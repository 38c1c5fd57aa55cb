"""The argument checks of the public calls."""

from __future__ import annotations

import math
import re

import pytest

from kafka_share._app.checks import (
    _FOREVER_MS,
    _check_max_records,
    _check_pattern,
    _check_subscription,
    _check_topic_name,
    _check_topics,
    _poll_timeout_ms,
    _timeout_ms,
)
from kafka_share.errors import InvalidTopicError


def test_timeouts_are_seconds_turned_into_milliseconds() -> None:
    assert _timeout_ms(None, 30_000, "close") == 30_000
    assert _timeout_ms(1.5, 0, "close") == 1500
    assert _timeout_ms(math.inf, 0, "close") == _FOREVER_MS
    with pytest.raises(TypeError, match=r"close\(\) timeout must be a number"):
        _timeout_ms(True, 0, "close")
    with pytest.raises(ValueError, match="NaN"):
        _timeout_ms(math.nan, 0, "close")
    with pytest.raises(ValueError, match="negative"):
        _timeout_ms(-1, 0, "close")


def test_poll_without_a_timeout_and_with_an_infinite_one_are_the_same() -> None:
    assert _poll_timeout_ms(None) is None
    assert _poll_timeout_ms(math.inf) is None
    assert _poll_timeout_ms(0) == 0


def test_topic_names_follow_kafkas_rule() -> None:
    assert _check_topic_name("orders.v1_x-2") == "orders.v1_x-2"
    for bad in ("", ".", "..", "a b", "x" * 250):
        with pytest.raises(InvalidTopicError):
            _check_topic_name(bad)
    with pytest.raises(TypeError):
        _check_topic_name(b"orders")
    assert _check_topics(["a", "b", "a"]) == frozenset({"a", "b"})
    with pytest.raises(TypeError, match="single string"):
        _check_topics("orders")


def test_max_records_is_a_positive_int_or_none() -> None:
    assert _check_max_records(None) is None
    assert _check_max_records(3) == 3
    for bad in (0, -1, True, 2.0, "3"):
        with pytest.raises(ValueError, match="max_records"):
            _check_max_records(bad)


def test_a_pattern_is_a_string_or_a_compiled_str_pattern() -> None:
    assert _check_pattern("orders-.*").pattern == "orders-.*"
    compiled = re.compile("orders", re.IGNORECASE)
    assert _check_pattern(compiled) is compiled
    with pytest.raises(TypeError, match="bytes pattern"):
        _check_pattern(re.compile(b"orders"))
    with pytest.raises(TypeError, match=r"str or a compiled re\.Pattern"):
        _check_pattern(b"orders")
    with pytest.raises(TypeError, match=r"str or a compiled re\.Pattern"):
        _check_pattern(["orders"])


def test_a_bad_regular_expression_is_named_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"invalid topic pattern 'orders-\[': .*") as info:
        _check_pattern("orders-[")
    assert "unterminated character set" in str(info.value)
    with pytest.raises(ValueError, match="must not be empty"):
        _check_pattern("")


def test_subscribe_takes_topics_or_a_pattern_never_both_nor_neither() -> None:
    assert _check_subscription(["a", "b"], None) == {"a", "b"}
    assert _check_subscription([], None) == frozenset()  # unsubscribe
    pattern = _check_subscription(None, "a.*")
    assert isinstance(pattern, re.Pattern) and pattern.pattern == "a.*"
    with pytest.raises(TypeError, match="not both"):
        _check_subscription(["a"], "a.*")
    with pytest.raises(TypeError, match="not both"):
        _check_subscription([], "a.*")
    with pytest.raises(TypeError, match=r"needs topics .* or pattern="):
        _check_subscription(None, None)
