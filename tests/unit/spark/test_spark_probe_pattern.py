"""The driver's probe with ``subscribePattern``: the partitions of the topics the
pattern matches now, as the read slots' consumers match them."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from kafka_share import TopicPartition
from kafka_share.admin.types import TopicListing
from kafka_share.spark._options import parse_source_options
from kafka_share.spark.source import _GroupProbe

BASE = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g",
        "stagingLocation": "/tmp/stage"}


@attrs.define
class _Partition:
    partition: int


@attrs.define
class _Topic:
    partitions: list[_Partition]


class StandInAdmin:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.offsets_asked = 0

    def list_topics(self, *, timeout: float | None = None) -> dict[str, TopicListing]:
        return {name: TopicListing(name, uuid.uuid4(), name.startswith("__"))
                for name in self.topics}

    def describe_topics(self, names: list[str], *, timeout: float | None = None) -> Any:
        return {n: _Topic([_Partition(p) for p in range(self.topics[n])]) for n in names}

    def list_offsets(self, *args: Any, **kwargs: Any) -> Any:
        self.offsets_asked += 1
        raise AssertionError("no partitions: nothing to ask")


def probe(admin: StandInAdmin, pattern: str, clock: list[float]) -> _GroupProbe:
    options = parse_source_options({**BASE, "subscribePattern": pattern})
    p = _GroupProbe(options, clock=lambda: clock[0])
    p._admin = admin  # type: ignore[assignment]
    return p


def test_the_partitions_are_those_of_the_matching_topics_found_again_later() -> None:
    admin = StandInAdmin({"orders-eu": 2, "orders": 1, "__orders-x": 1, "pay": 3})
    clock = [0.0]
    p = probe(admin, "orders-.*", clock)
    assert p.partitions() == [TopicPartition("orders-eu", 0), TopicPartition("orders-eu", 1)]
    admin.topics["orders-us"] = 1
    clock[0] += 3600  # past the cache's age: a topic created since joins the plan
    assert TopicPartition("orders-us", 0) in p.partitions()


def test_a_pattern_matching_nothing_has_no_backlog_and_asks_no_offsets() -> None:
    admin = StandInAdmin({"pay": 3})
    p = probe(admin, "orders-.*", [0.0])
    assert p.partitions() == []
    view = p.look()
    assert view.backlog == 0 and dict(view.bounds) == {}
    assert admin.offsets_asked == 0
