"""Pure parts of the admin requests module."""

from __future__ import annotations

import uuid

import pytest

from kafka_share.admin import Admin, OffsetSpec
from kafka_share.admin import requests as rq
from kafka_share.cluster import PartitionLeader, TopicMetadata
from kafka_share.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from kafka_share.models import TopicPartition
from kafka_share.protocol.messages import ListGroupsResponse, OffsetFetchResponse

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


def _offset_fetch_response(
    group: str, partitions: dict[tuple[str, int], tuple[int, int]], group_error: int = 0
) -> OffsetFetchResponse:
    """``partitions``: (topic, partition) -> (committed offset, error code)."""
    res = OffsetFetchResponse
    by_topic: dict[str, list[OffsetFetchResponse.OffsetFetchResponsePartitions]] = {}
    for (topic, partition), (offset, error) in partitions.items():
        by_topic.setdefault(topic, []).append(res.OffsetFetchResponsePartitions(
            partition_index=partition, committed_offset=offset, error_code=error))
    return res(groups=[res.OffsetFetchResponseGroup(
        group_id=group, error_code=group_error,
        topics=[res.OffsetFetchResponseTopics(name=t, partitions=ps)
                for t, ps in by_topic.items()],
    )])


def test_offset_fetch_v8_request_bytes() -> None:
    # Kafka's v8 layout: groups (compact array) of {group_id, topics: null (every topic),
    # tags}, require_stable, tags.
    request = rq.consumer_group_offsets("g", ["t"]).build()
    assert request.encode(8) == bytes([0x02, 0x02, ord("g"), 0x00, 0x00, 0x01, 0x00])


def test_consumer_group_offsets_keeps_committed_partitions_of_the_asked_topics() -> None:
    response = _offset_fetch_response("g", {
        ("t", 1): (7, 0), ("t", 0): (42, 0), ("t", 2): (-1, 0), ("other", 0): (5, 0),
    })
    # Through the wire, so the schema is exercised too.
    decoded = OffsetFetchResponse.decode(response.encode(8), 8)
    assert rq.consumer_group_offsets("g", ["t"]).parse(decoded) == {
        TopicPartition("t", 0): 42, TopicPartition("t", 1): 7,
    }
    assert rq.consumer_group_offsets("g", None).parse(decoded) == {
        TopicPartition("other", 0): 5, TopicPartition("t", 0): 42, TopicPartition("t", 1): 7,
    }


def test_consumer_group_offsets_raises_the_group_error_naming_the_group() -> None:
    response = _offset_fetch_response("g", {}, group_error=30)
    with pytest.raises(GroupAuthorizationFailedError, match="consumer group 'g'"):
        rq.consumer_group_offsets("g", None).parse(response)


def test_consumer_group_offsets_raises_a_partition_error_naming_the_partition() -> None:
    response = _offset_fetch_response("g", {("t", 0): (3, 0), ("t", 1): (-1, 29)})
    with pytest.raises(TopicAuthorizationFailedError, match=r"consumer group 'g'.*t-1"):
        rq.consumer_group_offsets("g", ["t"]).parse(response)


def test_list_group_types_maps_every_group_to_its_type() -> None:
    lg = ListGroupsResponse
    response = lg(groups=[
        lg.ListedGroup(group_id="c", group_type="classic"),
        lg.ListedGroup(group_id="s", group_type="Share"),
    ])
    assert rq.list_group_types().parse(response) == {"c": "classic", "s": "share"}
