"""Pure parts of the admin requests module."""

from __future__ import annotations

import uuid

import pytest

from kafka_share.admin import Admin, OffsetSpec
from kafka_share.admin import requests as rq
from kafka_share.cluster import PartitionLeader, TopicMetadata
from kafka_share.models import TopicPartition

TID = uuid.UUID(int=4)


def view(*topics: TopicMetadata) -> rq.MetadataView:
    return rq.MetadataView(
        cluster_id="c", controller_id=1, brokers=(), topics=topics, internal=frozenset(),
        replicas={},
    )


def test_a_created_topic_is_visible_once_every_partition_has_a_leader() -> None:
    ready = TopicMetadata("a", TID, 0, {0: PartitionLeader(1, 0), 1: PartitionLeader(2, 0)})
    assert rq.topics_visible(view(ready), ["a"])
    # Not known to this broker yet (the controller answered CreateTopics first).
    assert not rq.topics_visible(view(TopicMetadata("a", TID, 3, {})), ["a"])
    assert not rq.topics_visible(view(), ["a"])
    # Known, but a partition has no leader yet.
    leaderless = TopicMetadata("a", TID, 0, {0: PartitionLeader(1, 0), 1: PartitionLeader(-1, -1)})
    assert not rq.topics_visible(view(leaderless), ["a"])
    assert not rq.topics_visible(view(ready), ["a", "b"])


def test_list_offsets_asks_for_the_isolation_level() -> None:
    specs = {TopicPartition("a", 0): OffsetSpec.latest()}
    assert rq.list_offsets(specs).build().isolation_level == 0
    assert rq.list_offsets(specs, "read_committed").build().isolation_level == 1


def test_list_offsets_refuses_an_unknown_isolation_level() -> None:
    admin = Admin(bootstrap_servers="localhost:1")
    try:
        with pytest.raises(ValueError, match=r"isolation_level must be .* got 'committed'"):
            admin.list_offsets({TopicPartition("a", 0): OffsetSpec.latest()},
                               isolation_level="committed")
    finally:
        admin.close()
