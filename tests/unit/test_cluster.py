"""ClusterMetadata: bootstrap nodes, freshness, Metadata updates and leader hints."""

from __future__ import annotations

import uuid

import pytest

from kafka_share.cluster import BrokerInfo, ClusterMetadata, PartitionLeader, TopicMetadata

TID = uuid.UUID(int=0xABC)


def cluster(max_age_ms: int = 1000) -> ClusterMetadata:
    return ClusterMetadata([("a", 9092), ("b", 9093)], metadata_max_age_ms=max_age_ms)


def updated(c: ClusterMetadata, now_ms: int = 0) -> ClusterMetadata:
    c.update(
        now_ms,
        [BrokerInfo(1, "h1", 1), BrokerInfo(2, "h2", 2)],
        [
            TopicMetadata("t", TID, 0, {0: PartitionLeader(1, 5), 1: PartitionLeader(-1, -1)}),
            TopicMetadata("missing", uuid.UUID(int=0), 3, {}),
            TopicMetadata("noid", uuid.UUID(int=0), 0, {0: PartitionLeader(1, 1)}),
        ],
        controller_id=2,
    )
    return c


def test_bootstrap_is_required() -> None:
    with pytest.raises(ValueError, match="bootstrap"):
        ClusterMetadata([], metadata_max_age_ms=1)


def test_bootstrap_servers_get_negative_ids_until_metadata_arrives() -> None:
    c = cluster()
    assert c.address_of(-1) == ("a", 9092) and c.address_of(-2) == ("b", 9093)
    assert c.address_of(1) is None
    assert c.any_node() == -1
    c.rotate_node()
    assert c.any_node() == -2
    c.rotate_node()
    assert c.any_node() == -1
    updated(c)
    assert c.any_node() in (1, 2)
    assert c.address_of(1) == ("h1", 1)
    # Bootstrap addresses stay resolvable (a bootstrap connection may still be open).
    assert c.address_of(-1) == ("a", 9092)
    assert c.controller_id == 2


def test_freshness_follows_max_age_and_explicit_requests() -> None:
    c = cluster(max_age_ms=1000)
    assert c.needs_update(0) and c.time_to_next_update_ms(0) == 0
    updated(c, now_ms=100)
    assert not c.needs_update(500)
    assert c.time_to_next_update_ms(500) == 600
    assert c.needs_update(1100) and c.time_to_next_update_ms(1100) == 0
    updated(c, now_ms=1100)
    c.request_update()
    assert c.needs_update(1101)


def test_update_indexes_only_valid_topics() -> None:
    c = updated(cluster())
    assert c.topic_ids == {"t": TID} and c.topic_names == {TID: "t"}
    assert c.leader_of("t", 0) == 1
    assert c.leader_of("t", 1) is None  # leader unknown
    assert c.leader_of("t", 9) is None
    assert c.leader_of("noid", 0) is None  # no topic id: unusable for share fetches
    assert "missing" in c.topics and "missing" not in c.topic_ids


def test_update_replaces_everything_and_bumps_the_version() -> None:
    c = updated(cluster())
    v = c.version
    c.update(5, [BrokerInfo(3, "h3", 3)], [])
    assert c.version == v + 1
    assert c.brokers == {3: BrokerInfo(3, "h3", 3)}
    assert c.topic_ids == {} and c.leader_of("t", 0) is None


def test_leader_hint_with_a_newer_epoch_wins() -> None:
    c = updated(cluster())
    v = c.version
    assert c.update_leader("t", 0, PartitionLeader(2, 6), [])
    assert c.leader_of("t", 0) == 2 and c.version == v + 1
    assert not c.needs_update(1)  # broker 2 is known: no refresh needed


def test_leader_hint_with_an_older_or_equal_epoch_is_ignored() -> None:
    c = updated(cluster())
    v = c.version
    assert not c.update_leader("t", 0, PartitionLeader(2, 5), [])
    assert not c.update_leader("t", 0, PartitionLeader(2, 4), [])
    assert c.leader_of("t", 0) == 1 and c.version == v


def test_invalid_leader_hint_requests_metadata_instead() -> None:
    c = updated(cluster())
    assert not c.update_leader("t", 0, PartitionLeader(-1, 7), [])
    assert c.leader_of("t", 0) == 1
    assert c.needs_update(1)


def test_leader_hint_brings_its_endpoint() -> None:
    c = updated(cluster())
    assert c.update_leader("t", 0, PartitionLeader(7, 9), [BrokerInfo(7, "h7", 77)])
    assert c.address_of(7) == ("h7", 77)
    assert c.leader_of("t", 0) == 7
    assert not c.needs_update(1)


def test_leader_hint_for_an_unknown_broker_requests_metadata() -> None:
    c = updated(cluster())
    assert c.update_leader("t", 0, PartitionLeader(8, 9), [])
    assert c.leader_of("t", 0) == 8
    assert c.needs_update(1)


def test_forget_topic_id_drops_the_mapping_and_requests_metadata() -> None:
    c = updated(cluster())
    c.forget_topic_id(TID)
    assert "t" not in c.topic_ids and TID not in c.topic_names
    assert c.needs_update(1)
    c.forget_topic_id(uuid.UUID(int=99))  # unknown id: harmless
