"""spark/_slots.py: which queries share a worker's long-lived consumer."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_share.spark import _slots
from kafka_share.spark._options import parse_source_options

BASE = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g",
        "stagingLocation": "/tmp/staging"}


class FakeConsumer:
    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.subscribed: Any = None

    def subscribe(self, topics: Any = None, *, pattern: Any = None) -> None:
        self.subscribed = pattern if pattern is not None else topics

    def close(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture(autouse=True)
def fake_consumers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_slots, "ShareConsumer", FakeConsumer)
    monkeypatch.setattr(_slots, "_consumers", {})


def test_queries_with_one_group_but_other_topics_get_a_consumer_each() -> None:
    orders, _ = _slots._consumer(parse_source_options({**BASE, "subscribe": "orders"}))
    payments, new = _slots._consumer(parse_source_options({**BASE, "subscribe": "payments"}))
    assert new and payments is not orders
    assert orders.subscribed == ["orders"] and payments.subscribed == ["payments"]


def test_a_pattern_and_the_topics_it_names_are_different_subscriptions() -> None:
    named, _ = _slots._consumer(parse_source_options({**BASE, "subscribe": "orders"}))
    matched, new = _slots._consumer(parse_source_options({**BASE, "subscribePattern": "orders"}))
    assert new and matched is not named and matched.subscribed == "orders"


def test_the_same_query_reuses_its_worker_consumer() -> None:
    first, _ = _slots._consumer(parse_source_options({**BASE, "subscribe": "a,b"}))
    again, new = _slots._consumer(parse_source_options({**BASE, "subscribe": "a,b"}))
    assert again is first and not new
